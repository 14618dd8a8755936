//! The page kinds a shared region can be backed by, and the policy that picks one: the vocabulary
//! that [`crate::Region`] creates memory with and that errors name, below both.

use std::fmt;

/// The kind of pages backing a [`Region`](crate::Region).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PageKind {
    /// 1 GiB hugetlb pages.
    Huge1G,
    /// 2 MiB hugetlb pages.
    Huge2M,
    /// Transparent huge pages (`MADV_HUGEPAGE` on shared memory).
    Transparent,
    /// Plain 4 KiB pages.
    Plain,
}

impl PageKind {
    /// All kinds, best first: the order `HugePagePolicy::Auto` tries them in.
    pub const ALL: [PageKind; 4] = [
        PageKind::Huge1G,
        PageKind::Huge2M,
        PageKind::Transparent,
        PageKind::Plain,
    ];

    /// The granularity a region of this kind is rounded up to.
    pub fn page_bytes(self) -> usize {
        match self {
            PageKind::Huge1G => 1 << 30,
            PageKind::Huge2M | PageKind::Transparent => 2 << 20,
            PageKind::Plain => 4096,
        }
    }

    /// Short machine-readable name: `1g`, `2m`, `thp`, `plain`.
    pub fn short_name(self) -> &'static str {
        match self {
            PageKind::Huge1G => "1g",
            PageKind::Huge2M => "2m",
            PageKind::Transparent => "thp",
            PageKind::Plain => "plain",
        }
    }

    pub(crate) fn code(self) -> u32 {
        match self {
            PageKind::Huge1G => 1,
            PageKind::Huge2M => 2,
            PageKind::Transparent => 3,
            PageKind::Plain => 4,
        }
    }
}

impl fmt::Display for PageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PageKind::Huge1G => "1 GiB huge pages",
            PageKind::Huge2M => "2 MiB huge pages",
            PageKind::Transparent => "transparent huge pages",
            PageKind::Plain => "plain 4 KiB pages",
        })
    }
}

/// Which page kinds [`Region::create`](crate::Region::create) may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HugePagePolicy {
    /// Best available, falling back down [`PageKind::ALL`]. A huge page kind is skipped when
    /// rounding the size up to its page would waste more than an eighth of the size.
    #[default]
    Auto,
    /// Exactly this kind, or an error.
    Require(PageKind),
    /// Plain pages only.
    Plain,
}
