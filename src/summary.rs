//! xrd.report summary records -> flat variables (pure: bytes in, variables out).
//!
//! One `<statistics>` record per datagram (XRootD System Monitoring Reference,
//! section 2.2). Variables are named exactly as `mpxstats -f flat` names them:
//!
//! * header attributes are top-level names (`tod`, `pgm`, `site`, ...);
//! * `<stats id="X">` contributes `X`, every other tag its own name;
//!   components are dot-joined (`xrootd.ops.rd`, `oss.paths.0.free`);
//! * text before an element's first child is the element's own value
//!   (`<paths>2<stats id="0">..` gives `oss.paths` = `2`);
//! * values are trimmed and a pair of surrounding double quotes is removed
//!   (`<lp>"/data/"</lp>`); inner spaces are kept (`meta manager`).
//!
//! A `<stats>` that is not a direct child of `<statistics>` is a list entry
//! (`oss.paths`, `oss.space`, `cmsm.node`); each variable inside one carries a
//! [`ListEntry`] so the mapping can name it by its natural key instead of the
//! positional index.
//!
//! What real senders get wrong is tolerated here, not in callers: a legacy
//! `toe` attribute on the end tag (`</statistics toe="..">`, pre-2010), stray
//! `>` in text (`<rd><hits>0></hits>` in the cache section of every xrootd
//! 5.0.0-5.6.9 proxy cache, pfc or rmc; fixed in 5.7.0), fused end tags
//! (`<mdb>0</mdb</rsp>`, SSI), numeric tag names (`<200>`, 6.0 http plugin),
//! other attribute orders and extra attributes (dCache). Entities are never
//! expanded and nothing is fetched: text is taken as the raw bytes between
//! tags. A datagram that is not UTF-8 is read lossily (bad bytes become
//! U+FFFD), so one bad byte does not lose the rest of the record.
//!
//! A datagram whose first non-blank byte is `{` is the JSON form (xrootd
//! 5.9+, `xrd.report ... json`), flattened to the same names by `json.rs`'s
//! rules; see that module for what xrootd writes and what is accepted.

mod json;
pub mod shape;
mod xml;

use std::fmt;

/// Deepest element nesting accepted; real records nest at most 5 deep.
pub const MAX_DEPTH: usize = 16;

/// Reusable parser: its buffers are kept between datagrams, so parsing a
/// record allocates nothing once they have grown to the largest record seen.
#[derive(Default)]
pub struct SummaryParser {
    /// Holds the text of a non-UTF-8 datagram after lossy conversion.
    lossy: String,
    scratch: Scratch,
}

/// Buffers the flattener fills; a [`SummaryRecord`] is a view over them.
#[derive(Default)]
struct Scratch {
    /// Every variable name, back to back; slots point into it.
    names: String,
    slots: Vec<Slot>,
    entries: Vec<Entry>,
    /// How many leading slots are `<statistics>` attributes.
    header_len: usize,
    /// The cache section's `type` attribute (`pfc`, `rmc`), into the
    /// datagram text; empty if none.
    cache_type: Span,
    /// The XML record's sections (`<stats id>` directly under
    /// `<statistics>`), into the datagram text.
    sections: Vec<Span>,
    /// Values a JSON record had to make (unescaped strings, list lengths
    /// and positions); spans into it are [`Span::owned`].
    owned: String,
    /// Dotted path of the element being read.
    path: String,
    frames: Vec<xml::Frame>,
    json: Vec<json::Frame>,
}

impl Scratch {
    /// Empties every buffer for the next record (both readers).
    fn clear(&mut self) {
        self.names.clear();
        self.slots.clear();
        self.entries.clear();
        self.header_len = 0;
        self.cache_type = Span::default();
        self.sections.clear();
        self.owned.clear();
        self.path.clear();
        self.frames.clear();
        self.json.clear();
    }

    /// Records the current path as a variable with `value` (both readers).
    fn emit(&mut self, value: Span, entry: u32) {
        let start = self.names.len();
        self.names.push_str(&self.path);
        self.slots.push(Slot {
            name: Span::new(start, self.names.len()),
            value,
            entry,
        });
    }
}

/// Half-open byte range `start..end` into a string held elsewhere: the
/// crate's one way of keeping text without owning it (the parser's names
/// and values, the mapping's cached names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) start: u32,
    pub(crate) end: u32,
}

impl Span {
    pub(crate) fn new(start: usize, end: usize) -> Self {
        // Datagrams are at most 64 KiB, names a bounded multiple of that.
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    #[inline]
    pub(crate) fn of(self, s: &str) -> &str {
        s.get(self.start as usize..self.end as usize).unwrap_or("")
    }

    /// Marks a span of `Scratch::owned` rather than of the datagram text.
    const OWNED: u32 = 1 << 31;

    /// A span of `Scratch::owned`.
    fn owned(start: usize, end: usize) -> Self {
        Span {
            start: start as u32 | Self::OWNED,
            end: end as u32,
        }
    }

    /// A value or entry id: in the datagram text, or made by the JSON reader.
    fn value<'a>(self, text: &'a str, owned: &'a str) -> &'a str {
        if self.start & Self::OWNED == 0 {
            self.of(text)
        } else {
            Span {
                start: self.start & !Self::OWNED,
                end: self.end,
            }
            .of(owned)
        }
    }
}

/// Where `part` lies in `whole`, if it is a slice of it. A record's values
/// are slices of its [`text`](SummaryRecord::text), except those a JSON
/// record had to make (unescaped strings, list lengths).
pub fn offset_in(whole: &[u8], part: &str) -> Option<std::ops::Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let end = start.checked_add(part.len())?;
    (end <= whole.len()).then_some(start..end)
}

const NO_ENTRY: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Slot {
    /// Into `Scratch::names`.
    name: Span,
    /// Into the datagram text.
    value: Span,
    /// Index into `Scratch::entries`, or `NO_ENTRY`.
    entry: u32,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    /// The list's own name (`oss.paths`), into `Scratch::names`.
    list: Span,
    /// The entry's `id` as sent (`0`), into the datagram text; for a JSON
    /// array element its position, into `Scratch::owned`.
    id: Span,
    /// Offset in a variable name where the part inside the entry begins.
    field_at: u32,
}

/// Why a datagram is not a summary record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// Nothing but white space (or nothing at all).
    Empty,
    /// The first element is not `<statistics>` (or text precedes it), or
    /// a JSON datagram is not `{"statistics":{...}}`.
    NotStatistics { found: String },
    /// The datagram ended before `</statistics>`.
    Truncated { depth: usize },
    /// Elements nested deeper than [`MAX_DEPTH`].
    TooDeep { offset: usize },
    /// The XML reader gave up at this offset.
    Malformed { offset: usize, reason: String },
    /// The JSON reader gave up at this offset (same counter label as
    /// [`Malformed`](Self::Malformed)).
    MalformedJson { offset: usize, reason: &'static str },
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Empty => write!(f, "empty datagram"),
            ParseError::NotStatistics { found } => {
                write!(
                    f,
                    "not a summary record: starts with {found:?}, expected <statistics> or {{\"statistics\":{{"
                )
            }
            ParseError::Truncated { depth } => {
                write!(
                    f,
                    "truncated record: ended with {depth} element(s) still open"
                )
            }
            ParseError::TooDeep { offset } => {
                write!(
                    f,
                    "elements nested deeper than {MAX_DEPTH} at byte {offset}"
                )
            }
            ParseError::Malformed { offset, reason } => {
                write!(f, "malformed XML at byte {offset}: {reason}")
            }
            ParseError::MalformedJson { offset, reason } => {
                write!(f, "malformed JSON at byte {offset}: {reason}")
            }
        }
    }
}

impl std::error::Error for ParseError {}

impl ParseError {
    /// [`NotStatistics`](Self::NotStatistics), showing what `text` has from byte `at`.
    fn not_statistics(text: &str, at: usize) -> ParseError {
        ParseError::NotStatistics {
            found: text.get(at..).unwrap_or("").chars().take(24).collect(),
        }
    }

    /// Short fixed label, for counters and rate-limit keys.
    pub fn reason(&self) -> &'static str {
        match self {
            ParseError::Empty => "empty",
            ParseError::NotStatistics { .. } => "not_statistics",
            ParseError::Truncated { .. } => "truncated",
            ParseError::TooDeep { .. } => "too_deep",
            ParseError::Malformed { .. } | ParseError::MalformedJson { .. } => "malformed",
        }
    }
}

impl SummaryParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses one datagram, XML or JSON (by its first non-blank byte). The
    /// record borrows the datagram and the parser.
    pub fn parse<'r>(&'r mut self, datagram: &'r [u8]) -> Result<SummaryRecord<'r>, ParseError> {
        let flatten = if is_json(datagram) {
            json::flatten
        } else {
            xml::flatten
        };
        self.parse_with(datagram, flatten)
    }

    /// Parses XML with quick-xml alone, never the fast scanner: the
    /// reference [`parse`](Self::parse) must equal (for benchmarks and
    /// fuzzing). JSON has one reader, used by both.
    #[doc(hidden)]
    pub fn parse_reference<'r>(
        &'r mut self,
        datagram: &'r [u8],
    ) -> Result<SummaryRecord<'r>, ParseError> {
        let flatten = if is_json(datagram) {
            json::flatten
        } else {
            xml::flatten_reference
        };
        self.parse_with(datagram, flatten)
    }

    fn parse_with<'r>(
        &'r mut self,
        datagram: &'r [u8],
        flatten: fn(&str, &mut Scratch) -> Result<(), ParseError>,
    ) -> Result<SummaryRecord<'r>, ParseError> {
        let Self { lossy, scratch } = self;
        let text: &'r str = match std::str::from_utf8(datagram) {
            Ok(s) => s,
            Err(_) => {
                *lossy = String::from_utf8_lossy(datagram).into_owned();
                lossy.as_str()
            }
        };
        scratch.owned.clear();
        flatten(text, scratch)?;
        Ok(SummaryRecord {
            text,
            owned: &scratch.owned,
            names: &scratch.names,
            slots: &scratch.slots,
            entries: &scratch.entries,
            header_len: scratch.header_len,
            cache_type: scratch.cache_type.of(text),
            sections: &scratch.sections,
        })
    }
}

/// The JSON form starts with `{` (after blanks); XML never does.
fn is_json(datagram: &[u8]) -> bool {
    datagram.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// One parsed record: its variables in document order, header first.
#[derive(Clone, Copy)]
pub struct SummaryRecord<'r> {
    text: &'r str,
    owned: &'r str,
    names: &'r str,
    slots: &'r [Slot],
    entries: &'r [Entry],
    header_len: usize,
    cache_type: &'r str,
    sections: &'r [Span],
}

/// One flat variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variable<'r> {
    /// Dotted name as mpxstats prints it (`oss.paths.0.free`).
    pub name: &'r str,
    /// XML: the trimmed, unquoted text. JSON: the string's content or the
    /// number as written. Empty for an empty element or a JSON `null`.
    pub value: &'r str,
    /// Set when the variable lies inside a list entry.
    pub entry: Option<ListEntry<'r>>,
}

/// Where a variable sits in a list (`oss.paths.0.free`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListEntry<'r> {
    /// Position of the entry among all entries of the record.
    pub index: usize,
    /// The list's name: `oss.paths`.
    pub list: &'r str,
    /// The entry's id as sent: `0` (a JSON array element's position).
    pub id: &'r str,
    /// The variable's name inside the entry: `free` (empty for the entry's own text).
    pub field: &'r str,
}

/// A record's header numbers, read once: the program's start (`tos`) and
/// pid, which tell a restart, and the record's time (`tod`); 0 where one
/// is absent or not a number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    pub tos: u32,
    pub pid: u32,
    pub tod: u64,
}

impl Stamp {
    /// From the three fields' text, however they were found (a parsed
    /// header, or the holes of a template's match).
    pub fn read(tos: Option<&str>, pid: Option<&str>, tod: Option<&str>) -> Stamp {
        fn number<T: std::str::FromStr + Default>(text: Option<&str>) -> T {
            text.and_then(|t| t.trim().parse().ok()).unwrap_or_default()
        }
        Stamp {
            tos: number(tos),
            pid: number(pid),
            tod: number(tod),
        }
    }

    /// The program's run: (tos, pid).
    pub fn run(&self) -> (u32, u32) {
        (self.tos, self.pid)
    }
}

/// The `<statistics>` header attributes (reference 2.2), with `toe` from
/// either the legacy end-tag attribute or `sgen.toe`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header<'r> {
    pub tod: Option<&'r str>,
    pub ver: Option<&'r str>,
    pub src: Option<&'r str>,
    pub tos: Option<&'r str>,
    pub pgm: Option<&'r str>,
    pub ins: Option<&'r str>,
    pub pid: Option<&'r str>,
    pub site: Option<&'r str>,
    pub toe: Option<&'r str>,
}

impl Header<'_> {
    /// Its numbers, read once ([`Stamp`]).
    pub fn stamp(&self) -> Stamp {
        Stamp::read(self.tos, self.pid, self.tod)
    }
}

/// The variables of a record, in order ([`SummaryRecord::vars`]). A type
/// of its own rather than a closure so that `next` is always inlined: each
/// caller reads only part of a [`Variable`] (the entry-key pass only list
/// entries, `get` only names), and inlined, the rest is never computed. As
/// an out-of-line closure it cost 11% of the full path per record
/// (docs/benchmarks.md).
pub struct Vars<'r> {
    record: SummaryRecord<'r>,
    slots: std::slice::Iter<'r, Slot>,
}

impl<'r> Vars<'r> {
    #[inline(always)]
    fn variable(&self, slot: &Slot) -> Variable<'r> {
        let r = &self.record;
        let name = slot.name.of(r.names);
        let entry = r.entries.get(slot.entry as usize).map(|e| ListEntry {
            index: slot.entry as usize,
            list: e.list.of(r.names),
            id: e.id.value(r.text, r.owned),
            field: name.get(e.field_at as usize..).unwrap_or(""),
        });
        Variable {
            name,
            value: slot.value.value(r.text, r.owned),
            entry,
        }
    }
}

impl<'r> Iterator for Vars<'r> {
    type Item = Variable<'r>;

    #[inline(always)]
    fn next(&mut self) -> Option<Variable<'r>> {
        let slot = self.slots.next()?;
        Some(self.variable(slot))
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.slots.size_hint()
    }
}

impl DoubleEndedIterator for Vars<'_> {
    #[inline(always)]
    fn next_back(&mut self) -> Option<Self::Item> {
        let slot = self.slots.next_back()?;
        Some(self.variable(slot))
    }
}

impl ExactSizeIterator for Vars<'_> {}

impl<'r> SummaryRecord<'r> {
    /// The cache section's `type` (`<stats id="cache" type="pfc">`):
    /// `pfc` (XCache's disk cache) or `rmc` (the memory cache); None
    /// without a cache section or attribute (the JSON form never has
    /// built-in sections).
    pub fn cache_type(&self) -> Option<&'r str> {
        (!self.cache_type.is_empty()).then_some(self.cache_type)
    }

    /// The sections of an XML record, in order (`info`, ..., a 5.9+
    /// registered set such as `http_plugin`); none for the JSON form,
    /// whose sets are its variables' first components.
    pub fn sections(&self) -> impl Iterator<Item = &'r str> + '_ {
        self.sections.iter().map(|s| s.of(self.text))
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// How many of the first [`vars`](Self::vars) are `<statistics>`
    /// attributes (tod, ver, src, ...); the legacy end-tag `toe` comes last.
    pub fn header_len(&self) -> usize {
        self.header_len
    }

    /// The text the record was read from: the datagram itself when it was
    /// UTF-8. Every value and entry id lies inside it except, in a JSON
    /// record, strings with escapes (unescaped), list lengths and entry
    /// positions: those are made from the text around them (see
    /// [`offset_in`]).
    pub fn text(&self) -> &'r str {
        self.text
    }

    /// Number of list entries in the record.
    pub fn entry_count(&self) -> usize {
        self.entries.len()
    }

    pub fn vars(&self) -> Vars<'r> {
        Vars {
            record: *self,
            slots: self.slots.iter(),
        }
    }

    /// First value of a variable by flat name.
    pub fn get(&self, name: &str) -> Option<&'r str> {
        self.vars().find(|v| v.name == name).map(|v| v.value)
    }

    pub fn header(&self) -> Header<'r> {
        let mut h = Header::default();
        for v in self.vars().take(self.header_len) {
            let field = match v.name {
                "tod" => &mut h.tod,
                "ver" => &mut h.ver,
                "src" => &mut h.src,
                "tos" => &mut h.tos,
                "pgm" => &mut h.pgm,
                "ins" => &mut h.ins,
                "pid" => &mut h.pid,
                "site" => &mut h.site,
                "toe" => &mut h.toe,
                _ => continue,
            };
            field.get_or_insert(v.value);
        }
        // The end time: the legacy end-tag attribute (the last variable) or
        // sgen.toe (sgen is the last section): look from the end.
        h.toe = h.toe.or_else(|| {
            self.vars()
                .skip(self.header_len)
                .rev()
                .find(|v| v.name == "toe" || v.name == "sgen.toe")
                .map(|v| v.value)
        });
        h
    }
}

impl fmt::Debug for SummaryRecord<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.vars().map(|v| (v.name, v.value)))
            .finish()
    }
}

#[cfg(test)]
pub(crate) mod tests;
