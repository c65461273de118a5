//! Counter state kept across gateway restarts: its format and the checks
//! each entry passes, here; in memory, what the file held and no source has
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
//! The file is JSON lines (the typed schema, [`schema`]: one definition
//! for the state file and the peer exchange): a header line naming the
//! format and its version, then one source's **entry** a line
//! ([`SavedEntry`]: its address, program, run and counters), every line
//! ending in a newline:
//!
//! ```text
//! {"format":"xrd2ganglia-state","version":2}
//! {"ip":"10.0.0.1","program":"xrootd","start":[1700000000,77],"counters":[["00000000deadbeef",5000,120]]}
//! ```
//!
//! A source saved but not heard from since the start is written again as
//! it was read, so a second restart loses nothing either. A file of
//! version 1 (text, every release before) is read once at the upgrade
//! ([`upgrade_v1`]) and written as version 2 from the first save on.
//!
//! **Each line is parsed on its own, then each field checked**
//! ([`check_entry`], the one definition of what a valid entry is, for the
//! state file and the peer's entries): a line that is not an entry, or
//! whose address, program or run fails, loses only that entry; a counter
//! that fails loses only itself; each is counted and named ([`Skipped`]);
//! every good entry is kept. What an entry may hold:
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
//!   disk, a crash mid-write).
//!
//! JSON lines rather than a binary serde format (bincode, CBOR): a line
//! is the unit a bad byte spoils, so a bad entry loses only itself without
//! framing of its own; an admin reads it with `jq`; and it costs what the
//! text did (docs/benchmarks.md, the state file at 10,000 sources).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::net::IpAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::ganglia::sanitize;
use crate::gstream::PfcTotals;

pub mod schema;
pub mod upgrade_v1;

/// Readings and offsets must be below this: 2^63 bytes are 23 years of
/// 100 Gb/s (12.5 GB/s), and two values below it add up to less than
/// u64::MAX.
pub const MAX_COUNTER: u64 = 1 << 63;

/// What one source may take in the state file: with
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

/// One source's entry: who it is and its state (one line of the file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedEntry {
    pub ip: IpAddr,
    /// `pgm` or `pgm ins`.
    pub program: String,
    pub source: SavedSource,
}

impl SavedEntry {
    /// Appends its line.
    pub fn write(&self, out: &mut Vec<u8>) {
        write_entry(
            out,
            self.ip,
            &self.program,
            self.source.started,
            self.source.counters.iter().copied(),
            None,
        );
    }
}

/// Appends one entry's line ([`schema::Entry`], then a newline): a
/// source's address, program, run, counters (key, last reading, offset)
/// and, for the exchange, its g-stream totals.
pub fn write_entry(
    out: &mut Vec<u8>,
    ip: IpAddr,
    program: &str,
    started: Option<(u32, u32)>,
    counters: impl Iterator<Item = (u64, u64, u64)>,
    pfc: Option<&PfcTotals>,
) {
    let entry = schema::Entry {
        ip,
        program: program.into(),
        start: started,
        counters: schema::Counters {
            valid: counters.collect(),
            ..schema::Counters::default()
        },
        pfc: pfc.map(|p| schema::Totals {
            stod: p.stod,
            files: p.files,
            hit: p.bytes_hit,
            miss: p.bytes_miss,
            bypass: p.bytes_bypass,
        }),
    };
    // Into memory, of types that always serialize: it cannot fail.
    let _ = serde_json::to_writer(&mut *out, &entry);
    out.push(b'\n');
}

/// The file's first line (with its newline).
pub fn write_header(out: &mut Vec<u8>) {
    let _ = serde_json::to_writer(&mut *out, &schema::Header::current());
    out.push(b'\n');
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

/// Why a line (or a counter) was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bad {
    /// No newline at its end: cut off.
    CutOff,
    /// Version 1: neither `S` with 4 fields nor `C` with 3.
    Shape,
    /// Not an entry of the schema (JSON's own message).
    Json(String),
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
    /// Version 1: a `C` line with no (valid) `S` line above it.
    Orphan,
    /// The source was already read at that line.
    DuplicateSource(usize),
    /// This counter's key was already read for this source.
    DuplicateCounter(u64),
    /// The entry's counter at this place (from 1) failed; the entry keeps
    /// its others.
    Counter(usize, Box<Bad>),
    /// The first line is not this header, yet the lines below it are
    /// entries: a damaged header, which loses only itself.
    Header(&'static str),
}

impl fmt::Display for Bad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Bad::CutOff => write!(f, "cut off (no newline at its end)"),
            Bad::Shape => write!(
                f,
                "not an S line (S, ip, program, tos, pid) or a C line (C, key, reading, offset)"
            ),
            Bad::Json(why) => write!(f, "not an entry ({why})"),
            Bad::Address(t) => write!(f, "not an IP address: {t:?}"),
            Bad::Program(t) => write!(f, "not a program name (pgm or \"pgm ins\"): {t:?}"),
            Bad::Number { field, text, why } => write!(f, "{field} {text:?}: {why}"),
            Bad::Orphan => write!(f, "a C line under no valid S line"),
            Bad::DuplicateSource(at) => write!(f, "the same source as line {at}"),
            Bad::DuplicateCounter(key) => write!(f, "counter {key:016x} again"),
            Bad::Counter(at, why) => write!(f, "counter {at}: {why}"),
            Bad::Header(header) => write!(f, "not the header {header:?}"),
        }
    }
}

/// Lines and counters skipped while reading entries: how many, and the
/// first few ([`NAMED`]) with why.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Every line skipped (version 1: a bad `S` line's `C` lines included;
    /// version 2: each a whole entry, or the header).
    pub lines: usize,
    /// Counters skipped from entries otherwise kept (version 2).
    pub counters: usize,
    /// (line number, why, how many `C` lines went with it) of the first.
    pub first: Vec<(usize, Bad, usize)>,
    /// Bytes at the end of the file left unread: more than `max_sources`
    /// x [`BYTES_PER_SOURCE`] (whatever wrote them, no gateway did).
    pub unread: u64,
}

impl Skipped {
    pub fn is_empty(&self) -> bool {
        self.lines == 0 && self.counters == 0 && self.unread == 0
    }

    /// Lines and counters skipped, together (what `state_lines_skipped`
    /// and `peer_refused_entries` count: a counter was a line of version 1).
    pub fn total(&self) -> usize {
        self.lines + self.counters
    }

    /// Line 1, the header, was damaged: named first.
    fn header_damaged(&mut self, why: Bad) {
        self.lines += 1;
        self.first.insert(0, (1, why, 0));
        self.first.truncate(NAMED);
    }

    fn name(&mut self, line: usize, why: Bad) -> Option<usize> {
        (self.first.len() < NAMED).then(|| {
            self.first.push((line, why, 0));
            self.first.len() - 1
        })
    }

    fn note(&mut self, line: usize, why: Bad) -> Option<usize> {
        self.lines += 1;
        self.name(line, why)
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
            if self.total() == 0 {
                return Ok(());
            }
            write!(f, "; ")?;
        }
        let s = |n: usize| if n == 1 { "" } else { "s" };
        match (self.lines, self.counters) {
            (l, 0) => write!(f, "{l} line{} skipped: ", s(l))?,
            (0, c) => write!(f, "{c} counter{} skipped: ", s(c))?,
            (l, c) => write!(f, "{l} line{} and {c} counter{} skipped: ", s(l), s(c))?,
        }
        let mut named = 0;
        for (i, (line, why, with)) in self.first.iter().enumerate() {
            let sep = if i == 0 { "" } else { "; " };
            write!(f, "{sep}line {line}: {why}")?;
            if *with > 0 {
                write!(f, " (its {with} C line{} skipped with it)", s(*with))?;
            }
            named += 1 + with;
        }
        if self.total() > named {
            write!(f, " (and {} more)", self.total() - named)?;
        }
        Ok(())
    }
}

/// `pgm` or `pgm ins`, each part as the mapper makes them (a record's
/// `pgm=""` makes an empty `pgm`; an `ins` is never empty).
pub(super) fn is_program(text: &str) -> bool {
    let mut parts = text.split(' ');
    let (Some(pgm), ins, None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let part = |p: &str| p.len() <= MAX_PROGRAM_PART && sanitize::is_clean_name(p);
    part(pgm) && ins.is_none_or(|i| !i.is_empty() && part(i))
}

/// A field's text for a message: at most 40 bytes of it.
pub(super) fn cut_text(text: &str) -> String {
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

/// An entry parsed and checked ([`check_entry`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    pub entry: SavedEntry,
    /// Its g-stream totals (the exchange's): None if it had none, an
    /// error if they cannot be true (refused alone).
    pub pfc: Option<Result<PfcTotals, Bad>>,
    /// How many of its counters failed (left out) ...
    pub counters_failed: usize,
    /// ... and why, the first [`NAMED`] of them.
    pub counters_skipped: Vec<Bad>,
}

/// Checks every field of an entry as parsed: its program and run (the
/// entry fails with them), each counter (one that fails is left out, and
/// named), its totals (refused alone).
pub fn check_entry(raw: schema::Entry<'_>, limits: Limits) -> Result<Checked, Bad> {
    if !is_program(&raw.program) {
        return Err(Bad::Program(cut_text(&raw.program)));
    }
    let latest = limits.now_unix.saturating_add(START_SLACK);
    let started = match raw.start {
        Some((0, 0)) | None => None,
        Some((tos, _)) if u64::from(tos) > latest => {
            return Err(Bad::Number {
                field: "tos",
                text: tos.to_string(),
                why: "in the future",
            });
        }
        Some((_, pid)) if pid > PID_MAX => {
            return Err(Bad::Number {
                field: "pid",
                text: pid.to_string(),
                why: "above Linux's pid_max",
            });
        }
        Some(run) => Some(run),
    };
    // Each counter was checked as it was read (schema::Counters); here,
    // each key once.
    let mut counters = raw.counters.valid;
    let mut counters_skipped: Vec<Bad> = raw
        .counters
        .named
        .into_iter()
        .map(|(place, why)| Bad::Counter(place, Box::new(why)))
        .collect();
    let mut skipped = raw.counters.failed;
    let mut keys = HashSet::with_capacity(counters.len());
    counters.retain(|&(key, _, _)| {
        let first = keys.insert(key);
        if !first {
            skipped += 1;
            if counters_skipped.len() < NAMED {
                counters_skipped.push(Bad::DuplicateCounter(key));
            }
        }
        first
    });
    let pfc = raw.pfc.map(|p| check_totals(&p, latest));
    Ok(Checked {
        entry: SavedEntry {
            ip: raw.ip,
            program: raw.program.into_owned(),
            source: SavedSource { started, counters },
        },
        pfc,
        counters_failed: skipped,
        counters_skipped,
    })
}

const HUGE: &str = "2^63 or more (decades of 100 Gb/s)";

/// A reading or offset: a whole number below [`MAX_COUNTER`].
fn counter_value(field: &'static str, n: &schema::Number) -> Result<u64, Bad> {
    use schema::Number;
    let bad = |why| Bad::Number {
        field,
        text: n.to_string(),
        why,
    };
    match n {
        Number::Whole(v) if *v < MAX_COUNTER => Ok(*v),
        Number::Whole(_) => Err(bad(HUGE)),
        Number::Negative(_) => Err(bad("negative")),
        Number::Fraction(x) if *x >= 18_446_744_073_709_551_616.0 => Err(bad("above u64")),
        Number::Fraction(_) | Number::Not(_) => Err(bad("not a number")),
    }
}

/// A counter's fields, checked as it is read ([`schema::Counters`]).
fn check_counter(c: &schema::Counter) -> Result<(u64, u64, u64), Bad> {
    let key = match &c.key {
        schema::KeyText::Hex(k) => *k,
        schema::KeyText::Not(text) => {
            return Err(Bad::Number {
                field: "key",
                text: text.clone(),
                why: "not 16 hex digits",
            });
        }
    };
    Ok((
        key,
        counter_value("reading", &c.reading)?,
        counter_value("offset", &c.offset)?,
    ))
}

/// g-stream totals that can be true: a start no more than a day ahead,
/// sums below 2^63.
fn check_totals(p: &schema::Totals, latest: u64) -> Result<PfcTotals, Bad> {
    if u64::from(p.stod) > latest {
        return Err(Bad::Number {
            field: "stod",
            text: p.stod.to_string(),
            why: "in the future",
        });
    }
    for (field, n) in [
        ("files", p.files),
        ("hit", p.hit),
        ("miss", p.miss),
        ("bypass", p.bypass),
    ] {
        if n >= MAX_COUNTER {
            return Err(Bad::Number {
                field,
                text: n.to_string(),
                why: HUGE,
            });
        }
    }
    Ok(PfcTotals {
        stod: p.stod,
        files: p.files,
        bytes_hit: p.hit,
        bytes_miss: p.miss,
        bytes_bypass: p.bypass,
        bad_records: 0,
    })
}

/// Parses one entry (a line's bytes, or an exchange's entry frames) and
/// checks it ([`check_entry`]).
pub fn read_entry(bytes: &[u8], limits: Limits) -> Result<Checked, Bad> {
    let raw: schema::Entry<'_> =
        serde_json::from_slice(bytes).map_err(|e| Bad::Json(cut_json_error(&e)))?;
    check_entry(raw, limits)
}

/// serde_json's message, bounded (it quotes what it did not expect).
fn cut_json_error(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let mut end = text.len().min(120);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

/// The lines of `text`, each with whether it was cut short: the last,
/// when no newline ends it (a write that stopped there).
pub(crate) fn lines_cut(text: &str) -> impl Iterator<Item = (&str, bool)> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        Some(match rest.find('\n') {
            Some(i) => {
                let line = &rest[..i];
                rest = &rest[i + 1..];
                (line, false)
            }
            None => (std::mem::take(&mut rest), true),
        })
    })
}

/// Reads the entries of `text` (version 2's lines below the header), each
/// line parsed on its own ([`read_entry`]); `first_line` is the number of
/// its first line, for [`Skipped`]. A bad line loses its entry, a bad
/// counter itself; a source read before keeps its first entry.
pub fn read_entries(text: &str, first_line: usize, limits: Limits) -> Entries {
    let mut out = Entries::default();
    let mut seen: HashMap<(IpAddr, String), usize> = HashMap::new();
    for (at, (line, cut)) in (first_line..).zip(lines_cut(text)) {
        if cut {
            out.skipped.note(at, Bad::CutOff);
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        let checked = match read_entry(line.as_bytes(), limits) {
            Ok(c) => c,
            Err(why) => {
                out.skipped.note(at, why);
                continue;
            }
        };
        let e = checked.entry;
        match seen.entry((e.ip, e.program.clone())) {
            std::collections::hash_map::Entry::Occupied(first) => {
                out.skipped.note(at, Bad::DuplicateSource(*first.get()));
                continue;
            }
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(at);
            }
        }
        out.skipped.counters += checked.counters_failed;
        for why in checked.counters_skipped {
            out.skipped.name(at, why);
        }
        out.entries.push(e);
    }
    out
}

/// The state file's text read: version 2 (its header, then entries), or
/// version 1 (the upgrade, [`upgrade_v1`]). An error only for a text that
/// is not a state file at all (another format or version, or a damaged
/// header with no entry below it); a damaged header loses only itself.
pub fn read_file(text: &str, limits: Limits) -> Result<Entries, String> {
    if text.is_empty() {
        return Ok(Entries::default());
    }
    if upgrade_v1::is_v1(text) {
        return upgrade_v1::read(text, limits);
    }
    let (first, body) = text.split_once('\n').unwrap_or((text, ""));
    let header = serde_json::from_str::<schema::Header>(first).ok();
    match &header {
        Some(h) if h.format == schema::FORMAT && h.version != schema::VERSION => {
            return Err(format!(
                "a state file of version {} (this gateway reads versions 1 and {}: written by a newer gateway?)",
                h.version,
                schema::VERSION
            ));
        }
        Some(h) if h.format != schema::FORMAT => {
            return Err(format!(
                "not an xrd2ganglia state file (its header names {:?})",
                cut_text(&h.format)
            ));
        }
        _ => {}
    }
    let mut read = read_entries(body, 2, limits);
    if header.is_none() {
        if read.entries.is_empty() {
            return Err(format!(
                "not an xrd2ganglia state file (first line is not its header {HEADER_TEXT:?})"
            ));
        }
        read.skipped.header_damaged(Bad::Header(HEADER_TEXT));
    }
    Ok(read)
}

/// Version 2's header as it is written.
const HEADER_TEXT: &str = "{\"format\":\"xrd2ganglia-state\",\"version\":2}";

mod state;
#[cfg(test)]
mod tests;

pub use state::{FloorHost, Floors, SavedState, WatchNews};
