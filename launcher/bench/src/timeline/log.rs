//! The `TIMELINE` log: one text line per event ([`Timeline::write_log`]), read back by
//! [`Timeline::parse_log`].

use std::collections::HashMap;
use std::io::{self, Write};

use shm_protocol::control::{EventKind, TimelineEvent};

use super::{Timeline, ALL_KINDS, NO_SLOT};

/// Parses a kind from its `TIMELINE` log name (`SYNTH_START`, ...).
pub fn kind_from_str(name: &str) -> Option<EventKind> {
    ALL_KINDS.into_iter().find(|k| k.as_str() == name)
}

/// A `TIMELINE` log line that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("timeline log line {line}: {kind}")]
pub struct ParseError {
    /// 1-based line number in the log.
    pub line: usize,
    /// What was wrong with it.
    pub kind: ParseErrorKind,
}

/// What was wrong with a `TIMELINE` log line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// The word after `TIMELINE` is not an event kind.
    #[error("unknown event kind `{0}`")]
    UnknownKind(String),
    /// A `key=value` field is missing.
    #[error("missing field `{0}`")]
    MissingField(&'static str),
    /// A field's value is not a number (or `-` for `slot`).
    #[error("bad value `{value}` for field `{field}`")]
    BadValue {
        /// Field name.
        field: &'static str,
        /// The text found.
        value: String,
    },
}

impl Timeline {
    /// Writes one line per event:
    /// `TIMELINE SYNTH_START job=1 part=0 slot=3 pid=4242 tid=4250 t_ns=123456789` (`slot=-` where
    /// no slot, no `tid` where none was recorded).
    pub fn write_log<W: Write>(&self, mut w: W) -> io::Result<()> {
        for e in &self.events {
            writeln!(w, "{}", log_line(e))?;
        }
        Ok(())
    }

    /// Reads a log written by [`Timeline::write_log`]. Lines that do not start with `TIMELINE`
    /// (other log output interleaved with it) are skipped; a `TIMELINE` line that cannot be read
    /// is an error naming the line.
    pub fn parse_log(text: &str) -> Result<Timeline, ParseError> {
        let mut events = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let mut words = line.split_whitespace();
            if words.next() != Some("TIMELINE") {
                continue;
            }
            let e = parse_fields(words).map_err(|kind| ParseError { line: i + 1, kind })?;
            events.push(e);
        }
        Ok(Timeline::from_events(events))
    }
}

fn log_line(e: &TimelineEvent) -> String {
    let slot = if e.slot == NO_SLOT {
        "-".to_string()
    } else {
        e.slot.to_string()
    };
    let tid = match e.tid {
        0 => String::new(),
        t => format!(" tid={t}"),
    };
    format!(
        "TIMELINE {} job={} part={} slot={} pid={}{tid} t_ns={}",
        e.kind.as_str(),
        e.job_id,
        e.partition,
        slot,
        e.pid,
        e.t_ns
    )
}

fn parse_fields<'a>(
    mut words: impl Iterator<Item = &'a str>,
) -> Result<TimelineEvent, ParseErrorKind> {
    let name = words.next().ok_or(ParseErrorKind::MissingField("kind"))?;
    let kind = kind_from_str(name).ok_or_else(|| ParseErrorKind::UnknownKind(name.to_string()))?;
    let fields: HashMap<&str, &str> = words.filter_map(|w| w.split_once('=')).collect();
    fn num<T: std::str::FromStr>(
        fields: &HashMap<&str, &str>,
        field: &'static str,
    ) -> Result<T, ParseErrorKind> {
        let v = fields
            .get(field)
            .ok_or(ParseErrorKind::MissingField(field))?;
        v.parse().map_err(|_| ParseErrorKind::BadValue {
            field,
            value: v.to_string(),
        })
    }
    let slot = match fields.get("slot") {
        Some(&"-") => NO_SLOT,
        _ => num(&fields, "slot")?,
    };
    Ok(TimelineEvent {
        kind,
        job_id: num(&fields, "job")?,
        partition: num(&fields, "part")?,
        slot,
        pid: num(&fields, "pid")?,
        // Logs written before threads were recorded have none.
        tid: match fields.get("tid") {
            None => 0,
            Some(_) => num(&fields, "tid")?,
        },
        t_ns: num(&fields, "t_ns")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::tests::{ev, sample};

    #[test]
    fn the_thread_id_round_trips_and_old_logs_without_it_read_as_zero() {
        let e = TimelineEvent {
            tid: 4250,
            ..ev(EventKind::SynthTaken, 2, 1, 4242, 5)
        };
        let line = log_line(&e);
        assert_eq!(
            line,
            "TIMELINE SYNTH_TAKEN job=2 part=1 slot=1 pid=4242 tid=4250 t_ns=5000000"
        );
        let back = Timeline::parse_log(&line).unwrap();
        assert_eq!(back.events(), &[e]);
        let old = Timeline::parse_log("TIMELINE SYNTH_START job=2 part=1 slot=1 pid=4242 t_ns=5")
            .unwrap();
        assert_eq!(old.events()[0].tid, 0);
        let bad =
            Timeline::parse_log("TIMELINE SYNTH_START job=2 part=1 slot=1 pid=1 tid=x t_ns=5");
        assert!(
            bad.unwrap_err().to_string().contains("`x` for field `tid`"),
            "a bad thread id is named"
        );
    }

    #[test]
    fn log_round_trips_and_skips_other_lines() {
        let mut t = sample();
        t.push(TimelineEvent {
            slot: NO_SLOT,
            ..ev(EventKind::ProofDone, 9, 3, 1, 300)
        });
        let mut buf = Vec::new();
        t.write_log(&mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert!(text.lines().all(|l| l.starts_with("TIMELINE ")));
        assert!(
            text.contains("TIMELINE PROOF_DONE job=9 part=3 slot=- pid=1 t_ns=300000000"),
            "{text}"
        );
        let mixed = format!("INFO something else\n{text}\n\n");
        assert_eq!(Timeline::parse_log(&mixed).unwrap(), t);
    }

    #[test]
    fn bad_log_lines_name_the_problem() {
        let err = Timeline::parse_log("x\nTIMELINE NOPE job=1").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(matches!(err.kind, ParseErrorKind::UnknownKind(ref k) if k == "NOPE"));
        let err = Timeline::parse_log("TIMELINE GPU_END job=1 part=0 slot=2 pid=3").unwrap_err();
        assert!(err.to_string().contains("missing field `t_ns`"), "{err}");
        let err =
            Timeline::parse_log("TIMELINE GPU_END job=x part=0 slot=2 pid=3 t_ns=1").unwrap_err();
        assert!(
            matches!(err.kind, ParseErrorKind::BadValue { field: "job", .. }),
            "{err}"
        );
    }
}
