//! Counter state kept across gateway restarts, in memory: what the state
//! file held and no source has claimed yet, and what each receive task
//! handed in last. The file itself (reading, writing, its lock) is the
//! daemon's ([`crate::daemon::state_file`]).
//!
//! A counter is sent as `reading + offset` ([`super::series`]). Were the
//! offsets lost with the process, the first values after a gateway restart
//! would drop below what gmetad stored and draw the very spike the offsets
//! exist to prevent; and an xrootd that restarted while the gateway was
//! down could only be recognised with its old start time and readings at
//! hand.
//!
//! Text, one line each, tab-separated:
//!
//! ```text
//! xrd2ganglia-state 1
//! S <ip> <program> <tos> <pid>
//! C <name key, 16 hex digits> <last reading> <offset>
//! ```
//!
//! `C` lines belong to the `S` line above them. A source saved but not
//! heard from since the start is written again as it was read, so a
//! second restart loses nothing either.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Instant;

const HEADER: &str = "xrd2ganglia-state 1";

/// A source's key: its address and program.
pub type SourceKey = (IpAddr, String);

/// One source as saved.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SavedSource {
    /// (tos, pid) of the program when saved.
    pub started: Option<(u32, u32)>,
    /// (name key, last reading, offset) of each counter.
    pub counters: Vec<(u64, u64, u64)>,
}

/// What was read and not claimed yet, and what the engines handed in last.
#[derive(Default)]
pub struct SavedState {
    unclaimed: Mutex<HashMap<(IpAddr, String), SavedSource>>,
    parts: Mutex<Vec<String>>,
    /// When the last source was claimed (the XML port's warm-up).
    last_claim: Mutex<Option<Instant>>,
}

impl SavedState {
    /// The state a file's text holds (an empty text is an empty state).
    pub fn from_text(text: &str) -> Result<SavedState, String> {
        let sources = if text.is_empty() {
            HashMap::new()
        } else {
            parse(text)?
        };
        Ok(SavedState {
            unclaimed: Mutex::new(sources),
            ..SavedState::default()
        })
    }

    /// Sources read and not claimed yet.
    pub fn unclaimed(&self) -> usize {
        lock(&self.unclaimed).len()
    }

    /// The saved state of a source now heard from for the first time, at `now`.
    pub fn claim(&self, ip: IpAddr, program: &str, now: Instant) -> Option<SavedSource> {
        let mut map = lock(&self.unclaimed);
        if map.is_empty() {
            return None;
        }
        let claimed = map.remove(&(ip, program.to_string()));
        if claimed.is_some() {
            *lock(&self.last_claim) = Some(now);
        }
        claimed
    }

    /// When a source was last claimed.
    pub fn last_claim(&self) -> Option<Instant> {
        *lock(&self.last_claim)
    }

    /// Merges a peer's entry of a source no engine has claimed
    /// ([`super::merge`]); returns the merged entry.
    pub fn merge_unclaimed(&self, ip: IpAddr, program: &str, peer: &SavedSource) -> SavedSource {
        let mut map = lock(&self.unclaimed);
        let mine = map.entry((ip, program.to_string())).or_default();
        super::merge::merge(mine, peer);
        mine.clone()
    }

    /// Every unclaimed entry (for a peer).
    pub fn unclaimed_entries(&self) -> Vec<((IpAddr, String), SavedSource)> {
        lock(&self.unclaimed)
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Engine `part` hands in its sources' state (text of `S`/`C` lines,
    /// [`super::Engine::saved_text`]).
    pub fn hand_in(&self, part: usize, text: String) {
        let mut parts = lock(&self.parts);
        if part >= parts.len() {
            parts.resize(part + 1, String::new());
        }
        parts[part] = text;
    }

    /// The file's text: what was handed in, then what is still unclaimed.
    pub fn to_text(&self) -> String {
        let mut text = String::from(HEADER);
        text.push('\n');
        for part in lock(&self.parts).iter() {
            text.push_str(part);
        }
        for ((ip, program), saved) in lock(&self.unclaimed).iter() {
            write_source(&mut text, *ip, program, saved.started);
            for &(key, raw, offset) in &saved.counters {
                write_counter(&mut text, key, raw, offset);
            }
        }
        text
    }
}

/// A panic elsewhere while holding it leaves consistent data.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Appends an `S` line.
pub fn write_source(out: &mut String, ip: IpAddr, program: &str, started: Option<(u32, u32)>) {
    let (tos, pid) = started.unwrap_or((0, 0));
    let _ = writeln!(out, "S\t{ip}\t{program}\t{tos}\t{pid}");
}

/// Appends a `C` line.
pub fn write_counter(out: &mut String, key: u64, last_raw: u64, offset: u64) {
    let _ = writeln!(out, "C\t{key:016x}\t{last_raw}\t{offset}");
}

/// An `S` line's fields after the `S`: the source's (ip, program) and
/// its (tos, pid) (None when both are 0). The state file and the peer
/// exchange ([`super::merge`]) read an entry with this and
/// [`read_counter`], so an entry has one definition.
pub fn read_source(fields: &[&str]) -> Option<(SourceKey, Option<(u32, u32)>)> {
    let [ip, program, tos, pid] = fields else {
        return None;
    };
    let ip: IpAddr = ip.parse().ok()?;
    let tos: u32 = tos.parse().ok()?;
    let pid: u32 = pid.parse().ok()?;
    let started = (tos != 0 || pid != 0).then_some((tos, pid));
    Some(((ip, (*program).to_string()), started))
}

/// A `C` line's fields after the `C`: (name key, last reading, offset).
pub fn read_counter(fields: &[&str]) -> Option<(u64, u64, u64)> {
    let [key, raw, offset] = fields else {
        return None;
    };
    Some((
        u64::from_str_radix(key, 16).ok()?,
        raw.parse().ok()?,
        offset.parse().ok()?,
    ))
}

fn parse(text: &str) -> Result<HashMap<(IpAddr, String), SavedSource>, String> {
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, HEADER)) => {}
        _ => {
            return Err(format!(
                "not an xrd2ganglia state file (first line is not {HEADER:?})"
            ));
        }
    }
    let mut out = HashMap::new();
    let mut current: Option<((IpAddr, String), SavedSource)> = None;
    for (n, line) in lines {
        let bad = || format!("line {}: cannot read {line:?}", n + 1);
        let fields: Vec<&str> = line.split('\t').collect();
        match fields.split_first() {
            Some((&"S", rest)) => {
                if let Some((k, v)) = current.take() {
                    out.insert(k, v);
                }
                let (key, started) = read_source(rest).ok_or_else(bad)?;
                current = Some((
                    key,
                    SavedSource {
                        started,
                        counters: Vec::new(),
                    },
                ));
            }
            Some((&"C", rest)) => {
                let Some((_, saved)) = current.as_mut() else {
                    return Err(bad());
                };
                saved.counters.push(read_counter(rest).ok_or_else(bad)?);
            }
            Some((&"", [])) => {}
            _ => return Err(bad()),
        }
    }
    if let Some((k, v)) = current.take() {
        out.insert(k, v);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_foreign_or_damaged_file_is_reported_not_trusted() {
        assert!(
            parse("hello\n")
                .unwrap_err()
                .contains("not an xrd2ganglia state file")
        );
        assert_eq!(
            parse("xrd2ganglia-state 1\nC\t01\t1\t2\n").unwrap_err(),
            "line 2: cannot read \"C\\t01\\t1\\t2\""
        );
        assert!(parse("xrd2ganglia-state 1\nS\tnope\txrootd\t1\t2\n").is_err());
        assert_eq!(parse("xrd2ganglia-state 1\n").unwrap().len(), 0);
    }
}
