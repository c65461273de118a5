//! The JSON form of xrd.report records (xrootd 5.9+), read into [`Scratch`]
//! under the names the XML form gives, so the rest of the pipeline cannot
//! tell them apart.
//!
//! # What xrootd sends
//!
//! As read in xrootd's source (`src/Xrd/XrdStats.cc`, `src/Xrd/XrdMonitor.cc`):
//!
//! * A datagram is `{"statistics":{HEADER,"stats_SET":{...}}}`, one line
//!   (the query path adds a newline). The header holds the XML attributes in the same order: `tod`, `tos`
//!   and `pid` as numbers; `ver`, `src` (`host:port`), `pgm`, `ins` and
//!   `site` as strings.
//! * A set is `"stats_SET":{...}` where XML has `<stats id="SET">...</stats>`.
//!   Inside: `"name":value`, nested objects `"name":{...}` (XML: nested
//!   elements) and arrays `"name":[...]` whose elements have no keys.
//!   Numbers are unquoted (`std::to_string`: integers, `%f`-style doubles,
//!   and so `nan`/`inf` too); text is put between quotes as it is: xrootd
//!   escapes nothing.
//! * xrootd writes in JSON only the sets that add-ons and plug-ins register
//!   (`xrd.report ... json`), one set per datagram with the header; the
//!   built-in sections still come in the XML record. A JSON datagram has
//!   no `toe` and no `sgen` section.
//!
//! # How it is flattened
//!
//! As XML flattens, with two conventions of this reader for what only XML
//! has (xrootd sends the sections that have them in XML only): a `""`
//! member, and arrays as lists.
//!
//! * A member of `statistics` that is an object or array, or whose key
//!   starts with `stats_`, is a section named by its key without `stats_`.
//!   Scalars before the first section are the header
//!   ([`header_len`](super::SummaryRecord::header_len)); a scalar after it
//!   is a top-level variable, like the 2009 `toe` on the XML end tag (so a
//!   trailing `"toe":N` is the header's end time).
//! * In a section, `"name":value` is the variable `SECTION.name`; objects
//!   nest (`xrootd.ops.rd`).
//! * `"":value` in an object is the object's own value, like the text
//!   before an XML element's first child: `"open":{"":3,"errs":0}` gives
//!   `pss.open` 3 and `pss.open.errs` 0.
//! * An array is a list (`oss.paths`, `oss.space`, `cmsm.node`). Its own
//!   value is its length, as the XML count (`"paths":[{..},{..}]` gives
//!   `oss.paths` 2); element `i` is the list entry with id `i`, as xrootd
//!   numbers `<stats id="i">` (`oss.paths.0.free`, with its
//!   [`ListEntry`](super::ListEntry)); an element that is not an object is
//!   the entry's own value (`LIST.i`).
//! * An empty object below a section is a variable with an empty value (an
//!   empty XML element); an empty section gives nothing.
//!
//! # Values, and what is tolerated
//!
//! * A string without escapes is borrowed from the datagram. One with
//!   escapes (`\"`, `\\`, `\n`, `\uXXXX`, surrogate pairs) is unescaped into
//!   a side buffer; an unpaired surrogate becomes U+FFFD and an unknown
//!   escape is kept as written (xrootd does not escape, so `C:\d` arrives as
//!   is). Raw control characters in strings are kept. Keys are unescaped the
//!   same way into the name.
//! * Numbers, `true` and `false` are taken as written, however large: the
//!   mapping judges them as it judges XML text. So are `nan`, `inf`,
//!   `infinity` with any case and sign, and numbers with leading zeros.
//!   `null` is an empty value (an empty element). Other bare words are
//!   malformed.
//! * A key that occurs twice gives two variables, in order, as a repeated
//!   XML element does (the header reads the first).
//! * Containers nested deeper than [`MAX_DEPTH`] are refused; what follows
//!   the `statistics` object is ignored, as what follows `</statistics>`.
//! * Errors: not an object whose first member is `"statistics"` holding an
//!   object: [`ParseError::NotStatistics`]; the datagram ends inside:
//!   [`ParseError::Truncated`]; a syntax error: [`ParseError::MalformedJson`]
//!   (counted as malformed XML is).
//!
//! One pass over the bytes with an explicit stack: no recursion, and no
//! allocation per variable (names, values made and the stack live in the
//! reused [`Scratch`]).

use std::fmt::Write as _;

use super::{Entry, MAX_DEPTH, NO_ENTRY, ParseError, Scratch, Slot, Span};

/// One open object or array below the record's wrapper.
#[derive(Clone, Copy, Debug)]
pub(super) struct Frame {
    /// Length of `Scratch::path` before this container added its component.
    path_len: u32,
    /// Innermost list entry this container is in (`NO_ENTRY` if none).
    entry: u32,
    array: bool,
    /// Members (object) or elements (array) begun so far.
    count: u32,
    /// Arrays: the list's name, into `Scratch::names`.
    list: Span,
    /// Arrays: the slot of the list's own value, its length (set at `]`).
    count_slot: u32,
}

/// Flattens the JSON record `text` into `s`.
pub(super) fn flatten(text: &str, s: &mut Scratch) -> Result<(), ParseError> {
    s.clear();
    let mut r = Reader {
        b: text.as_bytes(),
        pos: 0,
    };
    open_record(&mut r, text)?;
    s.json.push(Frame {
        path_len: 0,
        entry: NO_ENTRY,
        array: false,
        count: 0,
        list: Span::default(),
        count_slot: 0,
    });
    let mut in_header = true;
    loop {
        r.skip_ws();
        let Some(top) = s.json.last().copied() else {
            return Ok(());
        };
        let Some(c) = r.peek() else {
            return Err(truncated(s));
        };
        if c == if top.array { b']' } else { b'}' } {
            r.pos += 1;
            close_top(s);
            if s.json.is_empty() {
                if in_header {
                    s.header_len = s.slots.len();
                }
                // One record per datagram: anything after it is ignored.
                return Ok(());
            }
            continue;
        }
        if top.count > 0 {
            comma(&mut r, c, top.array)?;
        }
        if let Some(f) = s.json.last_mut() {
            f.count += 1;
        }
        // 1: a member of `statistics`; 2: of a section; ...
        let level = s.json.len();
        let path_len = s.path.len();
        let (entry, section) = if top.array {
            (element_entry(s, top), false)
        } else {
            (top.entry, member_key(&mut r, text, s, level)?)
        };
        let Some(c) = r.peek() else {
            return Err(truncated(s));
        };
        let container = c == b'{' || c == b'[';
        if level == 1 && in_header && (container || section) {
            in_header = false;
            s.header_len = s.slots.len();
        }
        if container {
            open_container(&mut r, s, c == b'[', path_len, entry)?;
            continue;
        }
        let value = match scalar(&mut r, text, &mut s.owned) {
            Ok(v) => v,
            Err(Stop::Eof) => return Err(truncated(s)),
            Err(Stop::Malformed(offset, reason)) => return Err(malformed(offset, reason)),
        };
        // A `""` member of `statistics` names nothing: dropped.
        if level >= 2 || !s.path.is_empty() {
            s.emit(value, entry);
        }
        s.path.truncate(path_len);
    }
}

/// At `c`, after a member or element: the `,` before the next one.
#[inline]
fn comma(r: &mut Reader<'_>, c: u8, array: bool) -> Result<(), ParseError> {
    if c != b',' {
        return Err(malformed(
            r.pos,
            if array {
                "expected ',' or ']'"
            } else {
                "expected ',' or '}'"
            },
        ));
    }
    r.pos += 1;
    r.skip_ws();
    Ok(())
}

fn truncated(s: &Scratch) -> ParseError {
    ParseError::Truncated {
        depth: s.json.len(),
    }
}

/// Element `top.count` of the array `top`: its list entry (id: its
/// position) and its path component; returns the entry.
#[inline]
fn element_entry(s: &mut Scratch, top: Frame) -> u32 {
    if !s.path.is_empty() {
        s.path.push('.');
    }
    let _ = write!(s.path, "{}", top.count);
    let id_start = s.owned.len();
    let _ = write!(s.owned, "{}", top.count);
    s.entries.push(Entry {
        list: top.list,
        id: Span::owned(id_start, s.owned.len()),
        field_at: s.path.len() as u32 + 1,
    });
    (s.entries.len() - 1) as u32
}

/// Reads an object member's `"key":` and adds the key to the path; true
/// if the member is a section (a `stats_` member of `statistics`).
#[inline]
fn member_key(
    r: &mut Reader<'_>,
    text: &str,
    s: &mut Scratch,
    level: usize,
) -> Result<bool, ParseError> {
    let Some(c) = r.peek() else {
        return Err(truncated(s));
    };
    if c != b'"' {
        return Err(malformed(r.pos, "expected a key"));
    }
    let Some(key) = r.string() else {
        return Err(truncated(s));
    };
    r.skip_ws();
    match r.peek() {
        Some(b':') => r.pos += 1,
        Some(_) => return Err(malformed(r.pos, "expected ':'")),
        None => return Err(truncated(s)),
    }
    r.skip_ws();
    // `"":value` below `statistics`, value not a container, is the
    // container's own value: no component of its own.
    let own_value = key.start == key.end && level >= 2 && !matches!(r.peek(), Some(b'{' | b'['));
    if own_value {
        return Ok(false);
    }
    if !s.path.is_empty() {
        s.path.push('.');
    }
    let raw = text.get(key.start..key.end).unwrap_or("");
    if key.escaped {
        unescape(raw, &mut s.path);
    } else {
        s.path.push_str(raw);
    }
    if level == 1 && s.path.starts_with("stats_") {
        s.path.replace_range(..6, "");
        return Ok(true);
    }
    Ok(false)
}

/// At `{` or `[`: opens the container for a member whose path is the
/// current one.
#[inline]
fn open_container(
    r: &mut Reader<'_>,
    s: &mut Scratch,
    array: bool,
    path_len: usize,
    entry: u32,
) -> Result<(), ParseError> {
    if s.json.len() > MAX_DEPTH {
        return Err(ParseError::TooDeep { offset: r.pos });
    }
    r.pos += 1;
    let (mut list, mut count_slot) = (Span::default(), 0);
    if array {
        // The list's own value, its length, comes first (as the
        // XML count before the entries); it is known at `]`.
        let start = s.names.len();
        s.names.push_str(&s.path);
        list = Span::new(start, s.names.len());
        s.slots.push(Slot {
            name: list,
            value: Span::default(),
            entry,
        });
        count_slot = (s.slots.len() - 1) as u32;
    }
    s.json.push(Frame {
        path_len: path_len as u32,
        entry,
        array,
        count: 0,
        list,
        count_slot,
    });
    Ok(())
}

/// Reads `{"statistics":{` (after blanks).
fn open_record(r: &mut Reader<'_>, text: &str) -> Result<(), ParseError> {
    r.skip_ws();
    let start = r.pos;
    let not_statistics = || ParseError::not_statistics(text, start);
    let truncated = ParseError::Truncated { depth: 0 };
    if r.peek() != Some(b'{') {
        return Err(not_statistics());
    }
    r.pos += 1;
    r.skip_ws();
    match r.peek() {
        Some(b'"') => {}
        Some(_) => return Err(not_statistics()),
        None => return Err(truncated),
    }
    let Some(key) = r.string() else {
        return Err(truncated);
    };
    if r.b.get(key.start..key.end) != Some(b"statistics") {
        return Err(not_statistics());
    }
    r.skip_ws();
    match r.peek() {
        Some(b':') => r.pos += 1,
        Some(_) => return Err(malformed(r.pos, "expected ':'")),
        None => return Err(truncated),
    }
    r.skip_ws();
    match r.peek() {
        Some(b'{') => {
            r.pos += 1;
            Ok(())
        }
        Some(_) => Err(not_statistics()),
        None => Err(truncated),
    }
}

/// Closes the innermost container: a list gets its length, an empty object
/// below a section its empty value.
fn close_top(s: &mut Scratch) {
    let Some(f) = s.json.pop() else {
        return;
    };
    if f.array {
        let start = s.owned.len();
        let _ = write!(s.owned, "{}", f.count);
        let value = Span::owned(start, s.owned.len());
        if let Some(slot) = s.slots.get_mut(f.count_slot as usize) {
            slot.value = value;
        }
    } else if f.count == 0 && s.json.len() >= 2 {
        s.emit(Span::default(), f.entry);
    }
    s.path.truncate(f.path_len as usize);
}

fn malformed(offset: usize, reason: &'static str) -> ParseError {
    ParseError::MalformedJson { offset, reason }
}

/// Why a scalar could not be read.
enum Stop {
    Eof,
    Malformed(usize, &'static str),
}

/// A string's content (between the quotes) as byte offsets.
#[derive(Clone, Copy)]
struct Str {
    start: usize,
    end: usize,
    escaped: bool,
}

struct Reader<'t> {
    b: &'t [u8],
    pos: usize,
}

impl Reader<'_> {
    fn skip_ws(&mut self) {
        while matches!(self.b.get(self.pos), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    /// At `"`: the string, and the position after its closing quote; None
    /// if the datagram ends first. Quotes and backslashes are ASCII, so
    /// stepping over bytes never splits what it looks for.
    fn string(&mut self) -> Option<Str> {
        let start = self.pos + 1;
        let mut i = start;
        let mut escaped = false;
        loop {
            match *self.b.get(i)? {
                b'"' => {
                    self.pos = i + 1;
                    return Some(Str {
                        start,
                        end: i,
                        escaped,
                    });
                }
                b'\\' => {
                    escaped = true;
                    i += 2;
                }
                _ => i += 1,
            }
        }
    }
}

/// A value that is not a container: a string, or a bare word.
fn scalar(r: &mut Reader<'_>, text: &str, owned: &mut String) -> Result<Span, Stop> {
    if r.peek() == Some(b'"') {
        let s = r.string().ok_or(Stop::Eof)?;
        if !s.escaped {
            return Ok(Span::new(s.start, s.end));
        }
        let start = owned.len();
        unescape(text.get(s.start..s.end).unwrap_or(""), owned);
        return Ok(Span::owned(start, owned.len()));
    }
    let start = r.pos;
    while r
        .peek()
        .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'))
    {
        r.pos += 1;
    }
    let word = &r.b[start..r.pos];
    if r.pos >= r.b.len() {
        // Cut off here: `tr` may have been `true`.
        return Err(Stop::Eof);
    }
    if word.is_empty() {
        return Err(Stop::Malformed(start, "expected a value"));
    }
    if word == b"null" {
        return Ok(Span::new(start, start));
    }
    if is_number(word) || is_word(word) {
        Ok(Span::new(start, r.pos))
    } else {
        Err(Stop::Malformed(start, "not a JSON value"))
    }
}

/// `-?digits(.digits)?([eE][+-]?digits)?`, leading zeros allowed.
fn is_number(w: &[u8]) -> bool {
    let digits = |w: &[u8]| w.iter().take_while(|c| c.is_ascii_digit()).count();
    let mut w = w.strip_prefix(b"-").unwrap_or(w);
    let n = digits(w);
    if n == 0 {
        return false;
    }
    w = &w[n..];
    if let Some(rest) = w.strip_prefix(b".") {
        let n = digits(rest);
        if n == 0 {
            return false;
        }
        w = &rest[n..];
    }
    if let Some(rest) = w.strip_prefix(b"e").or_else(|| w.strip_prefix(b"E")) {
        let rest = rest
            .strip_prefix(b"+")
            .or_else(|| rest.strip_prefix(b"-"))
            .unwrap_or(rest);
        let n = digits(rest);
        if n == 0 {
            return false;
        }
        w = &rest[n..];
    }
    w.is_empty()
}

/// `true`, `false`, and what `std::to_string` writes for odd doubles.
fn is_word(w: &[u8]) -> bool {
    if w == b"true" || w == b"false" {
        return true;
    }
    let w = w
        .strip_prefix(b"-")
        .or_else(|| w.strip_prefix(b"+"))
        .unwrap_or(w);
    [&b"nan"[..], b"inf", b"infinity"]
        .iter()
        .any(|k| w.eq_ignore_ascii_case(k))
}

/// Appends `raw` (a string's content) to `out` with its escapes undone.
fn unescape(raw: &str, out: &mut String) {
    let mut rest = raw;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let Some(c) = after.chars().next() else {
            out.push('\\');
            return;
        };
        let mut used = c.len_utf8();
        match c {
            '"' => out.push('"'),
            '\\' => out.push('\\'),
            '/' => out.push('/'),
            'b' => out.push('\u{8}'),
            'f' => out.push('\u{c}'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'u' => match hex4(after.get(1..5)) {
                Some(hi @ 0xD800..0xDC00) => {
                    let lo = after
                        .get(5..7)
                        .filter(|p| *p == "\\u")
                        .and_then(|_| hex4(after.get(7..11)))
                        .filter(|lo| (0xDC00..0xE000).contains(lo));
                    match lo {
                        Some(lo) => {
                            let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                            out.push(char::from_u32(c).unwrap_or('\u{fffd}'));
                            used = 11;
                        }
                        None => {
                            out.push('\u{fffd}');
                            used = 5;
                        }
                    }
                }
                Some(c) => {
                    // A lone low surrogate is no char: U+FFFD.
                    out.push(char::from_u32(c).unwrap_or('\u{fffd}'));
                    used = 5;
                }
                None => out.push_str("\\u"),
            },
            other => {
                out.push('\\');
                out.push(other);
            }
        }
        rest = after.get(used..).unwrap_or("");
    }
    out.push_str(rest);
}

fn hex4(s: Option<&str>) -> Option<u32> {
    let s = s?;
    if s.len() == 4 && s.bytes().all(|c| c.is_ascii_hexdigit()) {
        u32::from_str_radix(s, 16).ok()
    } else {
        None
    }
}
