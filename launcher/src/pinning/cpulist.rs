//! [`CpuList`], a set of cpu ids in the kernel's list syntax, and the system calls that read
//! cpus: the online cpus, this process's affinity (`sched_getaffinity`) and another process's
//! `Cpus_allowed_list`.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use super::error::{io_err, read_text, Error, ErrorKind, Result};

/// The number of cpu ids a [`CpuList`] can hold: ids `0..MAX_CPUS` (the kernel's largest
/// `NR_CPUS`). Bounds the memory a hostile list such as `0-4294967295` could ask for.
pub const MAX_CPUS: u32 = 8192;

/// A set of cpu ids, parsed from and printed as the kernel's list syntax (`0-3,8,10-11`).
///
/// Always sorted and free of duplicates; ids are below [`MAX_CPUS`]. The empty list prints as
/// the empty string, as the kernel prints an empty cpuset.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuList {
    pub(super) cpus: Vec<u32>,
}

impl CpuList {
    /// The empty list.
    pub fn new() -> CpuList {
        CpuList::default()
    }

    /// A list of the given ids (any order, duplicates allowed); fails on an id `>= MAX_CPUS`.
    pub fn from_cpus<I: IntoIterator<Item = u32>>(cpus: I) -> Result<CpuList> {
        let mut v: Vec<u32> = cpus.into_iter().collect();
        if let Some(&bad) = v.iter().find(|&&c| c >= MAX_CPUS) {
            return Err(ErrorKind::Parse {
                input: bad.to_string(),
                reason: format!(
                    "cpu {bad} is above the highest supported cpu {}",
                    MAX_CPUS - 1
                ),
            }
            .into());
        }
        v.sort_unstable();
        v.dedup();
        Ok(CpuList { cpus: v })
    }

    /// The cpus that are online (`/sys/devices/system/cpu/online`).
    pub fn online() -> Result<CpuList> {
        let path = Path::new("/sys/devices/system/cpu/online");
        read_text(path)?.parse()
    }

    /// The cpus the calling thread may run on (`sched_getaffinity`): what the launcher can hand
    /// out, which under systemd reflects `AllowedCPUs=`.
    pub fn allowed() -> Result<CpuList> {
        // Start at the glibc default of 1024 bits and grow while the kernel says the mask is too
        // small for its nr_cpu_ids.
        let mut words = 1024 / ulong_bits();
        loop {
            let mut mask = vec![0 as libc::c_ulong; words];
            // SAFETY: `mask` is a live, writable buffer of exactly `words * size_of::<c_ulong>()`
            // bytes, the size passed; the kernel writes at most that many bytes. `cpu_set_t` is
            // only the pointer type the binding asks for; the kernel reads an untyped bitmask.
            let rc = unsafe {
                libc::sched_getaffinity(
                    0,
                    words * std::mem::size_of::<libc::c_ulong>(),
                    mask.as_mut_ptr().cast::<libc::cpu_set_t>(),
                )
            };
            if rc == 0 {
                return Ok(CpuList::from_mask(&mask));
            }
            let err = io::Error::last_os_error();
            let limit = MAX_CPUS as usize / ulong_bits();
            if err.raw_os_error() == Some(libc::EINVAL) && words < limit {
                words *= 2;
                continue;
            }
            return Err(ErrorKind::Affinity { source: err }.into());
        }
    }

    fn from_mask(mask: &[libc::c_ulong]) -> CpuList {
        let bits = ulong_bits();
        let mut cpus = Vec::new();
        for (w, &word) in mask.iter().enumerate() {
            for b in 0..bits {
                if word & (1 << b) != 0 {
                    let cpu = (w * bits + b) as u32;
                    if cpu < MAX_CPUS {
                        cpus.push(cpu);
                    }
                }
            }
        }
        CpuList { cpus }
    }

    /// The list as a bitmask of `c_ulong` words, as `sched_setaffinity` takes it.
    pub(super) fn to_mask(&self) -> Vec<libc::c_ulong> {
        let bits = ulong_bits();
        let words = self.cpus.last().map_or(1, |&c| c as usize / bits + 1);
        let mut mask = vec![0 as libc::c_ulong; words];
        for &c in &self.cpus {
            mask[c as usize / bits] |= 1 << (c as usize % bits);
        }
        mask
    }

    /// Number of cpus in the list.
    pub fn len(&self) -> usize {
        self.cpus.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.cpus.is_empty()
    }

    /// The ids in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.cpus.iter().copied()
    }

    /// The ids in increasing order, as a slice.
    pub fn as_slice(&self) -> &[u32] {
        &self.cpus
    }

    /// Whether `cpu` is in the list.
    pub fn contains(&self, cpu: u32) -> bool {
        self.cpus.binary_search(&cpu).is_ok()
    }

    /// Whether every cpu of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuList) -> bool {
        self.cpus.iter().all(|&c| other.contains(c))
    }

    /// The cpus in both lists.
    pub fn intersect(&self, other: &CpuList) -> CpuList {
        CpuList {
            cpus: self
                .cpus
                .iter()
                .copied()
                .filter(|&c| other.contains(c))
                .collect(),
        }
    }

    /// The cpus of `self` that are not in `other`.
    pub fn difference(&self, other: &CpuList) -> CpuList {
        CpuList {
            cpus: self
                .cpus
                .iter()
                .copied()
                .filter(|&c| !other.contains(c))
                .collect(),
        }
    }

    /// The cpus in either list.
    pub fn union(&self, other: &CpuList) -> CpuList {
        let mut cpus: Vec<u32> = self.cpus.iter().chain(&other.cpus).copied().collect();
        cpus.sort_unstable();
        cpus.dedup();
        CpuList { cpus }
    }
}

fn ulong_bits() -> usize {
    8 * std::mem::size_of::<libc::c_ulong>()
}

impl FromStr for CpuList {
    type Err = Error;

    /// Parses the kernel's list syntax: comma-separated ids and inclusive ranges `a-b`,
    /// surrounding whitespace (a trailing newline from sysfs) ignored; the empty string is the
    /// empty list. The stride form `a-b:n/m` is refused.
    fn from_str(s: &str) -> Result<CpuList> {
        let text = s.trim();
        let bad = |reason: String| -> Error {
            ErrorKind::Parse {
                input: text.to_owned(),
                reason,
            }
            .into()
        };
        if text.is_empty() {
            return Ok(CpuList::new());
        }
        // A fixed bitmap, so overlapping or repeated ranges cannot make the parse allocate
        // more than MAX_CPUS bits.
        let mut seen = vec![false; MAX_CPUS as usize];
        for part in text.split(',') {
            let part = part.trim();
            if part.is_empty() {
                return Err(bad("empty element between commas".to_owned()));
            }
            if part.contains(':') {
                return Err(bad(format!("the stride form `{part}` is not supported")));
            }
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (
                    parse_cpu(a, part).map_err(bad)?,
                    parse_cpu(b, part).map_err(bad)?,
                ),
                None => {
                    let c = parse_cpu(part, part).map_err(bad)?;
                    (c, c)
                }
            };
            if lo > hi {
                return Err(bad(format!("range `{part}` runs backwards")));
            }
            for c in lo..=hi {
                seen[c as usize] = true;
            }
        }
        let cpus = seen
            .iter()
            .enumerate()
            .filter(|(_, &on)| on)
            .map(|(c, _)| c as u32)
            .collect();
        Ok(CpuList { cpus })
    }
}

fn parse_cpu(text: &str, element: &str) -> std::result::Result<u32, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err(format!("missing cpu number in `{element}`"));
    }
    if !t.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("`{t}` is not a cpu number"));
    }
    match t.parse::<u32>() {
        Ok(c) if c < MAX_CPUS => Ok(c),
        _ => Err(format!(
            "cpu {t} is above the highest supported cpu {}",
            MAX_CPUS - 1
        )),
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut i = 0;
        let mut first = true;
        while i < self.cpus.len() {
            let start = self.cpus[i];
            let mut end = start;
            while i + 1 < self.cpus.len() && self.cpus[i + 1] == end + 1 {
                i += 1;
                end = self.cpus[i];
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

impl fmt::Debug for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuList(\"{self}\")")
    }
}

/// The cpus process `pid` may run on: `Cpus_allowed_list` of `/proc/PID/status`.
pub fn verify(pid: u32) -> Result<CpuList> {
    let path = PathBuf::from(format!("/proc/{pid}/status"));
    let status = read_text(&path)?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .ok_or_else(|| {
            io_err(
                "parse",
                &path,
                io::Error::new(io::ErrorKind::InvalidData, "no `Cpus_allowed_list` line"),
            )
        })?;
    line.parse()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &str) -> CpuList {
        s.parse().unwrap()
    }

    #[test]
    fn parses_and_formats_kernel_lists() {
        for (input, cpus, shown) in [
            ("0-3,8,10-11", vec![0, 1, 2, 3, 8, 10, 11], "0-3,8,10-11"),
            ("0", vec![0], "0"),
            ("  5,1,3-4\n", vec![1, 3, 4, 5], "1,3-5"),
            ("2-2", vec![2], "2"),
            ("0-1,1-2", vec![0, 1, 2], "0-2"),
            ("", vec![], ""),
            ("\n", vec![], ""),
            ("8191", vec![8191], "8191"),
        ] {
            let l = list(input);
            assert_eq!(l.as_slice(), &cpus[..], "{input:?}");
            assert_eq!(l.to_string(), shown, "{input:?}");
            assert_eq!(list(&l.to_string()), l, "round trip of {input:?}");
            assert_eq!(l.len(), cpus.len());
        }
    }

    #[test]
    fn refuses_bad_lists_with_reasons() {
        for (input, reason) in [
            ("a", "`a` is not a cpu number"),
            ("0,,1", "empty element"),
            ("1,", "empty element"),
            ("3-1", "runs backwards"),
            ("-3", "missing cpu number in `-3`"),
            ("1-", "missing cpu number"),
            ("0-7:2/4", "stride form"),
            ("8192", "above the highest supported cpu 8191"),
            ("0-4294967295", "above the highest"),
            ("99999999999999999999", "above the highest"),
            ("+1", "not a cpu number"),
            ("1 2", "not a cpu number"),
        ] {
            let err = input.parse::<CpuList>().unwrap_err();
            assert!(
                matches!(err.kind(), ErrorKind::Parse { .. }),
                "{input:?}: {err}"
            );
            let msg = err.to_string();
            assert!(msg.contains(reason), "{input:?}: {msg}");
            assert!(msg.starts_with("invalid cpu list `"), "{msg}");
        }
    }

    #[test]
    fn set_operations() {
        let a = list("0-7");
        let b = list("4-11");
        assert_eq!(a.intersect(&b), list("4-7"));
        assert_eq!(a.difference(&b), list("0-3"));
        assert_eq!(b.difference(&a), list("8-11"));
        assert_eq!(a.union(&b), list("0-11"));
        assert!(list("2,5").is_subset(&a));
        assert!(!b.is_subset(&a));
        assert!(CpuList::new().is_subset(&a));
        assert!(a.contains(7) && !a.contains(8));
        assert_eq!(CpuList::from_cpus([3, 1, 3, 2]).unwrap(), list("1-3"));
        assert!(CpuList::from_cpus([MAX_CPUS]).is_err());
    }

    #[test]
    fn masks_round_trip() {
        for s in ["0", "1", "0-1", "63,64", "5,127,128,1000", "8191"] {
            let l = list(s);
            assert_eq!(CpuList::from_mask(&l.to_mask()), l, "{s}");
        }
    }

    #[test]
    fn this_process_has_online_allowed_cpus() {
        let online = CpuList::online().unwrap();
        let allowed = CpuList::allowed().unwrap();
        assert!(!allowed.is_empty());
        assert!(
            allowed.is_subset(&online),
            "allowed {allowed} online {online}"
        );
        assert_eq!(verify(std::process::id()).unwrap(), allowed);
    }
}
