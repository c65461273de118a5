//! **The upgrade path** from version 1 of the state file (text, the
//! format of every release before the typed schema): read once, at the
//! first start of a gateway that writes version 2 ([`super::schema`]), so
//! that counters stay continuous across the upgrade; the first save
//! writes version 2. Nothing else reads or writes version 1 (its writer is
//! kept for the tests only: a file of the old release, read by this one).
//!
//! Version 1, one line each, tab-separated, every line ending in a newline:
//!
//! ```text
//! xrd2ganglia-state 1
//! S <ip> <program> <tos> <pid>
//! C <name key, 16 hex digits> <last reading> <offset>
//! ```
//!
//! `C` lines belong to the `S` line above them (one source's entry). Each
//! line is checked on its own ([`parse_line`]) with the same checks as
//! version 2's fields (bounds, [`MAX_COUNTER`], the program's name rule):
//! a bad line loses only itself (a bad `S` line, its source's `C` lines
//! with it), is counted and named ([`super::Skipped`]).

use std::collections::{HashMap, HashSet};
#[cfg(test)]
use std::fmt::Write as _;
use std::net::IpAddr;

use super::{
    Bad, Entries, Limits, MAX_COUNTER, PID_MAX, START_SLACK, SavedEntry, SavedSource, cut_text,
    is_program,
};

/// Version 1's first line.
pub const HEADER: &str = "xrd2ganglia-state 1";

/// Whether `text` is a version 1 file: its header, or (the header damaged)
/// an `S` line first below it.
pub fn is_v1(text: &str) -> bool {
    let (first, body) = text.split_once('\n').unwrap_or((text, ""));
    first == HEADER
        || first.starts_with("xrd2ganglia-state ")
        || body
            .split('\n')
            .find(|l| !l.is_empty())
            .is_some_and(|l| l.starts_with("S\t"))
}

/// A version 1 file's entries and what was skipped; an error only for a
/// text that is not a state file at all (its first line).
pub fn read(text: &str, limits: Limits) -> Result<Entries, String> {
    let (first, body) = text.split_once('\n').unwrap_or((text, ""));
    let mut read = read_entries(body, 2, limits);
    // A damaged first line (a flipped byte) loses only itself when
    // entries follow it; a file of another format or version, or one
    // with no entry at all, is not taken for a state file.
    let foreign =
        first != HEADER && (read.entries.is_empty() || first.starts_with("xrd2ganglia-state"));
    if foreign {
        return Err(format!(
            "not an xrd2ganglia state file (first line is not {HEADER:?})"
        ));
    }
    if first != HEADER {
        read.skipped.header_damaged(Bad::Header(HEADER));
    }
    Ok(read)
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
    for (n, (line, cut)) in (first_line..).zip(super::lines_cut(text)) {
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
    }
    if let Some((entry, _)) = current.take() {
        out.entries.push(entry);
    }
    out
}

/// Appends an `S` line (the old writer: tests and the measurement only).
#[cfg(test)]
pub fn write_source(out: &mut String, ip: IpAddr, program: &str, started: Option<(u32, u32)>) {
    let (tos, pid) = started.unwrap_or((0, 0));
    let _ = writeln!(out, "S\t{ip}\t{program}\t{tos}\t{pid}");
}

/// Appends a `C` line (the old writer: tests and the measurement only).
#[cfg(test)]
pub fn write_counter(out: &mut String, key: u64, last_raw: u64, offset: u64) {
    let _ = writeln!(out, "C\t{key:016x}\t{last_raw}\t{offset}");
}
