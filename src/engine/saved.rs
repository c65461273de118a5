//! Counter state kept across gateway restarts: its text and the checks
//! each line passes, here; in memory, what the file held and no source has
//! claimed yet, what each receive task handed in last, and sources evicted
//! while still worth continuing ([`SavedState`], in `saved/state.rs`). The
//! file itself (reading, writing, its lock) is the daemon's
//! ([`crate::daemon::state_file`]).
//!
//! A counter is sent as `reading + offset` ([`super::series`]). Were the
//! offsets lost with the process, the first values after a gateway restart
//! would drop below what gmetad stored and draw the very spike the offsets
//! exist to prevent; and an xrootd that restarted while the gateway was
//! down could only be recognised with its old start time and readings at
//! hand.
//!
//! Text, one line each, tab-separated, every line ending in a newline:
//!
//! ```text
//! xrd2ganglia-state 1
//! S <ip> <program> <tos> <pid>
//! C <name key, 16 hex digits> <last reading> <offset>
//! ```
//!
//! `C` lines belong to the `S` line above them: an `S` line and its `C`
//! lines are one source's **entry** ([`SavedEntry`]). A source saved but not
//! heard from since the start is written again as it was read, so a
//! second restart loses nothing either.
//!
//! **Each line is checked on its own** ([`parse_line`], the one definition
//! of what a valid line is, for the state file and for anything else that
//! carries entries): a bad line loses only itself (a bad `S` line, its
//! source's `C` lines with it), is counted and named ([`Skipped`]); every
//! good entry is kept. What a line may hold:
//!
//! * a reading or an offset below 2^63 ([`MAX_COUNTER`]): 23 years of
//!   100 Gb/s without a pause, far beyond any xrootd's counters; and a
//!   reading plus an offset, both below it, can never overflow the u64
//!   that is sent. A u64::MAX (or a negative number written as unsigned)
//!   is refused, not sent for ever after;
//! * a `tos` (the program's start, Unix seconds) no later than a day
//!   after [`Limits::now_unix`] ([`START_SLACK`]: an xrootd's clock may be
//!   ahead, not by more; the state file takes now or when it was written,
//!   whichever is later), and a pid up to [`PID_MAX`], Linux's highest;
//! * a program as the gateway names them: `pgm` or `pgm ins`, each part of
//!   at most 64 name characters;
//! * a name key of exactly 16 hex digits; each key once per source, each
//!   source once;
//! * and a newline at its end: a line without one was cut off (a full
//!   disk, a crash mid-write), and its last number may be a shorter,
//!   smaller one that would pass every other check.

use std::collections::{HashMap, HashSet};
use std::fmt::{self, Write as _};
use std::net::IpAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::ganglia::sanitize;

const HEADER: &str = "xrd2ganglia-state 1";

/// Readings and offsets must be below this: 2^63 bytes are 23 years of
/// 100 Gb/s (12.5 GB/s), and two values below it add up to less than
/// u64::MAX.
pub const MAX_COUNTER: u64 = 1 << 63;

/// What one source may take as text in the state file: with
/// `max_sources`, the most of it that is read (a peer's message is framed
/// and bounded on its own: `crate::daemon::peer::message`). A real
/// source's entry is ~3 KB (a loaded data server has 82 counters); an
/// entry of 5,000 counters would be ~200 KB.
pub const BYTES_PER_SOURCE: usize = 16 << 10;

/// Linux's highest pid (`PID_MAX_LIMIT`, include/linux/threads.h: 4M on
/// 64-bit systems).
pub const PID_MAX: u32 = 4 * 1024 * 1024;

/// How far after now a saved `tos` may lie (an xrootd host's clock ahead
/// of the gateway's), in seconds.
pub const START_SLACK: u64 = 86_400;

/// Longest part of a program name (`pgm`, `ins`), as the mapper cuts them.
const MAX_PROGRAM_PART: usize = 64;

/// How many skipped lines a [`Skipped`] names (the rest are counted).
pub const NAMED: usize = 5;

/// One source as saved: defined beside the rule that merges two of them.
pub use super::merge::SavedSource;

/// One source's entry: who it is and its state (an `S` line and its `C`
/// lines).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedEntry {
    pub ip: IpAddr,
    /// `pgm` or `pgm ins`.
    pub program: String,
    pub source: SavedSource,
}

impl SavedEntry {
    /// Appends its `S` line and its `C` lines.
    pub fn write(&self, out: &mut String) {
        write_source(out, self.ip, &self.program, self.source.started);
        for &(key, raw, offset) in &self.source.counters {
            write_counter(out, key, raw, offset);
        }
    }
}

/// What the checks compare with: now, for a `tos` in the future.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Now, in Unix seconds.
    pub now_unix: u64,
}

impl Limits {
    /// The limits at `now`.
    pub fn at(now: SystemTime) -> Limits {
        Limits {
            now_unix: now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        }
    }
}

/// One line, checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// An `S` line: a source, with `started` None when both tos and pid
    /// are 0.
    Source {
        ip: IpAddr,
        program: &'a str,
        started: Option<(u32, u32)>,
    },
    /// A `C` line.
    Counter {
        key: u64,
        last_raw: u64,
        offset: u64,
    },
    /// An empty line (ignored).
    Blank,
}

/// Why a line was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bad {
    /// No newline at its end: cut off.
    CutOff,
    /// Neither `S` with 4 fields nor `C` with 3.
    Shape,
    /// The address field is not an IP address.
    Address(String),
    /// The program is not `pgm` or `pgm ins` as the gateway names them.
    Program(String),
    /// A number field that is not a number in range: which field, its
    /// text, and why (`negative`, `not a number`, `above ...`).
    Number {
        field: &'static str,
        text: String,
        why: &'static str,
    },
    /// A `C` line with no (valid) `S` line above it.
    Orphan,
    /// The source was already read at that line.
    DuplicateSource(usize),
    /// This counter's key was already read for this source.
    DuplicateCounter(u64),
    /// Not exactly one `S` line where one entry was expected
    /// ([`parse_entry`]).
    NotOneEntry,
    /// The first line is not the header, yet the lines below it are
    /// entries: a damaged header, which loses only itself.
    Header,
}

impl fmt::Display for Bad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bad::CutOff => write!(f, "cut off (no newline at its end)"),
            Bad::Shape => write!(
                f,
                "not an S line (S, ip, program, tos, pid) or a C line (C, key, reading, offset)"
            ),
            Bad::Address(t) => write!(f, "not an IP address: {t:?}"),
            Bad::Program(t) => write!(f, "not a program name (pgm or \"pgm ins\"): {t:?}"),
            Bad::Number { field, text, why } => write!(f, "{field} {text:?}: {why}"),
            Bad::Orphan => write!(f, "a C line under no valid S line"),
            Bad::DuplicateSource(at) => write!(f, "the same source as line {at}"),
            Bad::DuplicateCounter(key) => write!(f, "counter {key:016x} again"),
            Bad::NotOneEntry => write!(f, "not one S line and its C lines"),
            Bad::Header => write!(f, "not the header {HEADER:?}"),
        }
    }
}

/// Lines skipped while reading entries: how many, and the first few
/// ([`NAMED`]) with why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Every line skipped (a bad `S` line's `C` lines included).
    pub lines: usize,
    /// (line number, why, how many `C` lines went with it) of the first.
    pub first: Vec<(usize, Bad, usize)>,
    /// Bytes at the end of the file left unread: more than `max_sources`
    /// x [`BYTES_PER_SOURCE`] (whatever wrote them, no gateway did).
    pub unread: u64,
}

impl Skipped {
    pub fn is_empty(&self) -> bool {
        self.lines == 0 && self.unread == 0
    }

    /// Line 1, the header, was damaged: named first.
    fn header_damaged(&mut self) {
        self.lines += 1;
        self.first.insert(0, (1, Bad::Header, 0));
        self.first.truncate(NAMED);
    }

    fn note(&mut self, line: usize, why: Bad) -> Option<usize> {
        self.lines += 1;
        (self.first.len() < NAMED).then(|| {
            self.first.push((line, why, 0));
            self.first.len() - 1
        })
    }
}

impl fmt::Display for Skipped {
    /// `3 lines skipped: line 4: ...; line 9: ... (and 1 more)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.unread > 0 {
            write!(
                f,
                "its last {} bytes unread (more than max_sources x {} KiB)",
                self.unread,
                BYTES_PER_SOURCE >> 10
            )?;
            if self.lines == 0 {
                return Ok(());
            }
            write!(f, "; ")?;
        }
        let s = if self.lines == 1 { "" } else { "s" };
        write!(f, "{} line{s} skipped: ", self.lines)?;
        let mut named = 0;
        for (i, (line, why, with)) in self.first.iter().enumerate() {
            let sep = if i == 0 { "" } else { "; " };
            write!(f, "{sep}line {line}: {why}")?;
            if *with > 0 {
                let s = if *with == 1 { "" } else { "s" };
                write!(f, " (its {with} C line{s} skipped with it)")?;
            }
            named += 1 + with;
        }
        if self.lines > named {
            write!(f, " (and {} more)", self.lines - named)?;
        }
        Ok(())
    }
}

/// Checks one line (without its newline; `cut` when it had none).
pub fn parse_line(line: &str, cut: bool, limits: Limits) -> Result<Line<'_>, Bad> {
    if cut {
        return Err(Bad::CutOff);
    }
    if line.is_empty() {
        return Ok(Line::Blank);
    }
    let mut fields = line.split('\t');
    let kind = fields.next();
    let mut next = || fields.next();
    match kind {
        Some("S") => {
            let (Some(ip), Some(program), Some(tos), Some(pid), None) =
                (next(), next(), next(), next(), next())
            else {
                return Err(Bad::Shape);
            };
            let ip: IpAddr = ip.parse().map_err(|_| Bad::Address(cut_text(ip)))?;
            if !is_program(program) {
                return Err(Bad::Program(cut_text(program)));
            }
            let latest = limits.now_unix.saturating_add(START_SLACK);
            let tos = number("tos", tos, u64::from(u32::MAX).min(latest), "in the future")?;
            let pid = number("pid", pid, u64::from(PID_MAX), "above Linux's pid_max")?;
            let (tos, pid) = (tos as u32, pid as u32);
            let started = (tos != 0 || pid != 0).then_some((tos, pid));
            Ok(Line::Source {
                ip,
                program,
                started,
            })
        }
        Some("C") => {
            let (Some(key), Some(raw), Some(offset), None) = (next(), next(), next(), next())
            else {
                return Err(Bad::Shape);
            };
            let key = match u64::from_str_radix(key, 16) {
                Ok(k) if key.len() == 16 && key.bytes().all(|b| b.is_ascii_hexdigit()) => k,
                _ => {
                    return Err(Bad::Number {
                        field: "key",
                        text: cut_text(key),
                        why: "not 16 hex digits",
                    });
                }
            };
            let huge = "2^63 or more (decades of 100 Gb/s)";
            Ok(Line::Counter {
                key,
                last_raw: number("reading", raw, MAX_COUNTER - 1, huge)?,
                offset: number("offset", offset, MAX_COUNTER - 1, huge)?,
            })
        }
        _ => Err(Bad::Shape),
    }
}

/// A decimal number of at most `max`, else why not.
fn number(field: &'static str, text: &str, max: u64, above: &'static str) -> Result<u64, Bad> {
    let bad = |why| Bad::Number {
        field,
        text: cut_text(text),
        why,
    };
    if text.starts_with('-') {
        return Err(bad("negative"));
    }
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad("not a number"));
    }
    match text.parse::<u64>() {
        Ok(n) if n <= max => Ok(n),
        Ok(_) => Err(bad(above)),
        Err(_) => Err(bad("above u64")),
    }
}

/// `pgm` or `pgm ins`, each part as the mapper makes them (a record's
/// `pgm=""` makes an empty `pgm`; an `ins` is never empty).
fn is_program(text: &str) -> bool {
    let mut parts = text.split(' ');
    let (Some(pgm), ins, None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let part = |p: &str| p.len() <= MAX_PROGRAM_PART && sanitize::is_clean_name(p);
    part(pgm) && ins.is_none_or(|i| !i.is_empty() && part(i))
}

/// A field's text for a message: at most 40 bytes of it.
fn cut_text(text: &str) -> String {
    let mut end = text.len().min(40);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// What a text of entries held: its good entries in order, and what was
/// skipped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Entries {
    pub entries: Vec<SavedEntry>,
    pub skipped: Skipped,
}

/// Reads the entries of `text` (`S` lines and their `C` lines; no header),
/// each line checked by [`parse_line`]; `first_line` is the number of its
/// first line, for [`Skipped`]. A bad `S` line is skipped with its `C`
/// lines; a bad `C` line alone; a source read before keeps its first entry.
pub fn read_entries(text: &str, first_line: usize, limits: Limits) -> Entries {
    let mut out = Entries::default();
    let mut seen: HashMap<(IpAddr, &str), usize> = HashMap::new();
    // The entry being read, its keys; or where its refused S line is named.
    let mut current: Option<(SavedEntry, HashSet<u64>)> = None;
    let mut orphaned: Option<Option<usize>> = None;
    let mut rest = text;
    let mut n = first_line;
    while !rest.is_empty() {
        let (line, cut) = match rest.find('\n') {
            Some(i) => {
                let line = &rest[..i];
                rest = &rest[i + 1..];
                (line, false)
            }
            None => (std::mem::take(&mut rest), true),
        };
        match parse_line(line, cut, limits) {
            Ok(Line::Blank) => {}
            Ok(Line::Source {
                ip,
                program,
                started,
            }) => {
                if let Some((entry, _)) = current.take() {
                    out.entries.push(entry);
                }
                orphaned = None;
                if let Some(&at) = seen.get(&(ip, program)) {
                    orphaned = Some(out.skipped.note(n, Bad::DuplicateSource(at)));
                } else {
                    seen.insert((ip, program), n);
                    let source = SavedSource {
                        started,
                        counters: Vec::new(),
                    };
                    let entry = SavedEntry {
                        ip,
                        program: program.to_string(),
                        source,
                    };
                    current = Some((entry, HashSet::new()));
                }
            }
            Ok(Line::Counter {
                key,
                last_raw,
                offset,
            }) => match (&mut current, orphaned) {
                (Some((entry, keys)), _) => {
                    if keys.insert(key) {
                        entry.source.counters.push((key, last_raw, offset));
                    } else {
                        out.skipped.note(n, Bad::DuplicateCounter(key));
                    }
                }
                (None, Some(named)) => {
                    out.skipped.lines += 1;
                    if let Some(i) = named {
                        out.skipped.first[i].2 += 1;
                    }
                }
                (None, None) => {
                    out.skipped.note(n, Bad::Orphan);
                }
            },
            Err(why) => {
                let is_source = line.starts_with("S\t");
                let named = out.skipped.note(n, why);
                if is_source {
                    // Its C lines are not this file's previous source's.
                    if let Some((entry, _)) = current.take() {
                        out.entries.push(entry);
                    }
                    orphaned = Some(named);
                }
            }
        }
        n += 1;
    }
    if let Some((entry, _)) = current.take() {
        out.entries.push(entry);
    }
    out
}

/// Reads exactly one entry (an `S` line and its `C` lines, each ending in
/// a newline): the entry, or the first bad line's number (from 1) and why.
pub fn parse_entry(block: &str, limits: Limits) -> Result<SavedEntry, (usize, Bad)> {
    let read = read_entries(block, 1, limits);
    if let Some((line, why, _)) = read.skipped.first.into_iter().next() {
        return Err((line, why));
    }
    let mut entries = read.entries.into_iter();
    match (entries.next(), entries.next()) {
        (Some(entry), None) => Ok(entry),
        (Some(_), Some(_)) => {
            let second = block
                .split('\n')
                .enumerate()
                .filter(|(_, l)| l.starts_with("S\t"))
                .nth(1)
                .map_or(1, |(i, _)| i + 1);
            Err((second, Bad::NotOneEntry))
        }
        (None, _) => Err((1, Bad::NotOneEntry)),
    }
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

mod state;
#[cfg(test)]
mod tests;

pub use state::{FloorHost, Floors, SavedState, WatchNews};
