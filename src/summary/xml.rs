//! The XML form of xrd.report records, read into [`Scratch`].
//!
//! A tokenizer (`tokens.rs`: a byte scanner for what xrootd writes,
//! quick-xml for the rest) supplies [`Token`]s; element names, attributes
//! and values are taken as byte ranges of the datagram text (no unescaping,
//! no allocation per variable). End tags are matched by hand because real
//! senders emit `</statistics toe="...">` and `</mdb</rsp>`.

mod tokens;

pub(super) use tokens::{FastTokens, QuickXmlTokens, Token, Tokens};
use tokens::{NAME_BYTE, Stop};

use super::{Entry, MAX_DEPTH, NO_ENTRY, ParseError, Scratch, Slot, Span};

/// One open element.
#[derive(Clone, Copy, Debug)]
pub(super) struct Frame {
    /// Tag name, into the text.
    tag: Span,
    /// Length of `Scratch::path` before this element added its component.
    path_len: u32,
    /// Raw text seen directly inside this element (first to last piece).
    text: Option<Span>,
    /// A child element has started.
    has_children: bool,
    /// Innermost list entry this element is in (`NO_ENTRY` if none).
    entry: u32,
}

/// Flattens `text` into `s`. Records as xrootd writes them (tags, attributes
/// and plain text only) are read by [`FastTokens`]; anything else is read
/// again from the start by quick-xml, which decides what it means and
/// reports what is wrong. Both give the same tokens wherever the fast one
/// accepts the input (checked by a differential property test and fuzzing).
pub(super) fn flatten(text: &str, s: &mut Scratch) -> Result<(), ParseError> {
    match flatten_with(text, s, FastTokens::new(text)) {
        Err(Stop::Unsupported) => flatten_reference(text, s),
        Err(Stop::Error(e)) => Err(e),
        Ok(()) => Ok(()),
    }
}

/// Flattens with quick-xml only (the reference the fast path must equal).
pub(super) fn flatten_reference(text: &str, s: &mut Scratch) -> Result<(), ParseError> {
    match flatten_with(text, s, QuickXmlTokens::new(text)) {
        Err(Stop::Unsupported) => unreachable!("quick-xml reads everything"),
        Err(Stop::Error(e)) => Err(e),
        Ok(()) => Ok(()),
    }
}

/// Reads `tokens` into `s` until the record's end tag (or an error).
fn flatten_with(text: &str, s: &mut Scratch, mut tokens: impl Tokens) -> Result<(), Stop> {
    s.clear();
    let mut seen_root = false;
    loop {
        let record_ended = match tokens.next()? {
            Token::Open { start, end, empty } => {
                let tag = tag_span(text, start, end);
                if !seen_root {
                    if tag.of(text) != "statistics" {
                        return Err(ParseError::not_statistics(text, start).into());
                    }
                    seen_root = true;
                    open_root(text, s, end, tag);
                    empty
                } else if s.frames.is_empty() {
                    // One record per datagram: anything after it is ignored.
                    true
                } else {
                    open(text, s, start, end, tag)?;
                    if empty {
                        close_top(text, s);
                    }
                    false
                }
            }
            Token::Text { start, end } => {
                add_text(text, s, seen_root, Span::new(start, end))?;
                false
            }
            Token::Close { start, end } => close(text, s, start, end),
            Token::Eof => return Err(ended_early(text, s, seen_root).into()),
        };
        if record_ended {
            return Ok(());
        }
    }
}

/// Text goes to the innermost open element (pieces of it joined); before
/// the root element only white space is allowed.
#[inline]
fn add_text(text: &str, s: &mut Scratch, seen_root: bool, span: Span) -> Result<(), ParseError> {
    match s.frames.last_mut() {
        Some(frame) => {
            frame.text = Some(match frame.text {
                Some(t) => Span {
                    start: t.start,
                    end: span.end,
                },
                None => span,
            });
        }
        None if !seen_root && !span.of(text).trim().is_empty() => {
            return Err(ParseError::not_statistics(text, span.start as usize));
        }
        None => {}
    }
    Ok(())
}

/// The end tag `text[start..end]`; true when it ends the record.
#[inline]
fn close(text: &str, s: &mut Scratch, start: usize, end: usize) -> bool {
    // Nearly always `</name>` closing the innermost element.
    let bytes = text.as_bytes();
    if let Some(top) = s.frames.last()
        && s.frames.len() > 1
        && bytes.get(start + 2..end - 1) == bytes.get(top.tag.start as usize..top.tag.end as usize)
    {
        close_top(text, s);
        return false;
    }
    // `</a>`, `</statistics toe="1">`, `</mdb</rsp>`
    let inner = text.get(start + 2..end.saturating_sub(1)).unwrap_or("");
    let mut offset = start + 2;
    // Only a fused tag (`mdb</rsp`) needs splitting; skip the
    // substring searcher for the ordinary end tag.
    let (mut split, mut single);
    let pieces: &mut dyn Iterator<Item = &str> = if inner.as_bytes().contains(&b'<') {
        split = inner.split("</");
        &mut split
    } else {
        single = std::iter::once(inner);
        &mut single
    };
    for piece in pieces {
        let name_len = piece
            .bytes()
            .position(|c| c.is_ascii_whitespace())
            .unwrap_or(piece.len());
        let tag = Span::new(offset, offset + name_len);
        if close_named(text, s, tag) && s.frames.is_empty() {
            // Legacy `toe` attribute on the end tag.
            let attrs_at = offset + name_len;
            add_attributes(text, s, attrs_at, offset + piece.len());
            return true;
        }
        offset += piece.len() + 2;
    }
    false
}

/// Why the text ended before the record did.
fn ended_early(text: &str, s: &Scratch, seen_root: bool) -> ParseError {
    if !seen_root && text.trim().is_empty() {
        ParseError::Empty
    } else if !seen_root {
        ParseError::not_statistics(text, text.len() - text.trim_start().len())
    } else {
        ParseError::Truncated {
            depth: s.frames.len(),
        }
    }
}

/// The name of the tag in `<name ...>` / `<name/>` spanning `start..end`.
fn tag_span(text: &str, start: usize, end: usize) -> Span {
    let bytes = text.as_bytes();
    let mut i = start + 1;
    while i < end && NAME_BYTE[bytes[i] as usize] {
        i += 1;
    }
    while i < end && !matches!(bytes[i], b' ' | b'\t' | b'\r' | b'\n' | b'/' | b'>') {
        i += 1;
    }
    Span::new(start + 1, i)
}

/// The first element, `<statistics ...>`: its attributes are the header.
fn open_root(text: &str, s: &mut Scratch, end: usize, tag: Span) {
    s.frames.push(Frame {
        tag,
        path_len: 0,
        text: None,
        has_children: false,
        entry: NO_ENTRY,
    });
    add_attributes(text, s, tag.end as usize, end.min(text.len()));
    s.header_len = s.slots.len();
}

/// Every header attribute becomes a top-level variable.
fn add_attributes(text: &str, s: &mut Scratch, from: usize, to: usize) {
    for (key, value) in Attributes::new(text, from, to) {
        let name_start = s.names.len();
        s.names.push_str(key.of(text));
        s.slots.push(Slot {
            name: Span::new(name_start, s.names.len()),
            value: unquote(text, value),
            entry: NO_ENTRY,
        });
    }
}

/// A section of the record (`<stats id=...>` under `<statistics>`): kept,
/// for telling a 5.9+ set's JSON copy apart; and for `<stats id="cache"
/// type="pfc|rmc">`, which proxy cache (XCache's disk cache or the memory
/// cache), for the mapping's names.
#[inline(always)]
fn note_section(text: &str, s: &mut Scratch, section: Span, tag: Span, end: usize) {
    s.sections.push(section);
    if section.of(text) == "cache"
        && let Some((_, v)) =
            Attributes::new(text, tag.end as usize, end).find(|(k, _)| k.of(text) == "type")
    {
        s.cache_type = unquote(text, v);
    }
}

fn open(
    text: &str,
    s: &mut Scratch,
    start: usize,
    end: usize,
    tag: Span,
) -> Result<(), ParseError> {
    if s.frames.len() > MAX_DEPTH {
        return Err(ParseError::TooDeep { offset: start });
    }
    let depth = s.frames.len();
    let Some(parent) = s.frames.last_mut() else {
        return Ok(());
    };
    let first_child = !parent.has_children;
    parent.has_children = true;
    let parent = *parent;
    // Text before the first child is the parent's own value (`<paths>2<stats..`).
    if first_child
        && depth > 1
        && let Some(t) = parent.text
    {
        let value = unquote(text, t);
        if value.start != value.end {
            s.emit(value, parent.entry);
        }
    }

    let is_stats = tag.of(text) == "stats";
    let component = if is_stats {
        Attributes::new(text, tag.end as usize, end)
            .find(|(k, _)| k.of(text) == "id")
            .map(|(_, v)| unquote(text, v))
            .unwrap_or(tag)
    } else {
        tag
    };
    if is_stats && depth == 1 {
        note_section(text, s, component, tag, end);
    }
    let path_len = s.path.len();
    // A <stats> below a section (not directly under <statistics>) is a list entry.
    let is_entry = is_stats && depth >= 2;
    let list_start = s.names.len();
    if is_entry {
        s.names.push_str(&s.path);
    }
    if !s.path.is_empty() {
        s.path.push('.');
    }
    s.path.push_str(component.of(text));
    let entry = if is_entry {
        s.entries.push(Entry {
            list: Span::new(list_start, list_start + path_len),
            id: component,
            field_at: s.path.len() as u32 + 1,
        });
        (s.entries.len() - 1) as u32
    } else {
        parent.entry
    };
    s.frames.push(Frame {
        tag,
        path_len: path_len as u32,
        text: None,
        has_children: false,
        entry,
    });
    Ok(())
}

/// Closes the innermost open element named `tag`, and any still open inside
/// it. Returns false (and closes nothing) for an end tag matching nothing.
fn close_named(text: &str, s: &mut Scratch, tag: Span) -> bool {
    let bytes = text.as_bytes();
    let name = bytes
        .get(tag.start as usize..tag.end as usize)
        .unwrap_or(b"");
    let Some(at) = s
        .frames
        .iter()
        .rposition(|f| bytes.get(f.tag.start as usize..f.tag.end as usize) == Some(name))
    else {
        return false;
    };
    while s.frames.len() > at {
        close_top(text, s);
    }
    true
}

fn close_top(text: &str, s: &mut Scratch) {
    let Some(frame) = s.frames.pop() else {
        return;
    };
    if s.frames.is_empty() {
        return; // </statistics>
    }
    if !frame.has_children && s.frames.len() > 1 {
        let value = frame.text.map(|t| unquote(text, t)).unwrap_or_default();
        s.emit(value, frame.entry);
    } else if !frame.has_children && s.frames.len() == 1 {
        // A section with no children (`<stats id="x">5</stats>`) still has a value.
        if let Some(t) = frame.text {
            let value = unquote(text, t);
            if value.start != value.end {
                s.emit(value, frame.entry);
            }
        }
    }
    s.path.truncate(frame.path_len as usize);
}

/// Trims white space and stray trailing `>` (the cache section of every
/// xrootd 5.0.0-5.6.9 proxy cache, pfc or rmc, sends `<rd><hits>0></hits>`,
/// fixed in 5.7.0; mpxstats prints `0`), then one pair of surrounding
/// double quotes.
fn unquote(text: &str, span: Span) -> Span {
    let raw = span.of(text);
    // Nearly every value: plain ASCII at both ends, nothing to trim.
    if let (Some(&first), Some(&last)) = (raw.as_bytes().first(), raw.as_bytes().last())
        && first.is_ascii_graphic()
        && last.is_ascii_graphic()
        && first != b'"'
        && last != b'"'
        && last != b'>'
    {
        return span;
    }
    let trimmed_start = raw.len() - raw.trim_start().len();
    let trimmed = raw.trim().trim_end_matches('>').trim_end();
    let mut start = span.start as usize + trimmed_start;
    let mut end = start + trimmed.len();
    if trimmed.len() >= 2 && trimmed.starts_with('"') && trimmed.ends_with('"') {
        start += 1;
        end -= 1;
    }
    Span::new(start, end)
}

/// Lenient attribute scanner over `text[from..to]`: `key="v"`, `key='v'`,
/// `key=v`; stops at `>` or `/>`. Yields (key, raw value) spans.
struct Attributes<'t> {
    bytes: &'t [u8],
    pos: usize,
    to: usize,
}

impl<'t> Attributes<'t> {
    fn new(text: &'t str, from: usize, to: usize) -> Self {
        Attributes {
            bytes: text.as_bytes(),
            pos: from,
            to: to.min(text.len()),
        }
    }
}

impl Iterator for Attributes<'_> {
    type Item = (Span, Span);

    fn next(&mut self) -> Option<(Span, Span)> {
        let b = self.bytes;
        let skip_ws = |mut i: usize| {
            while i < self.to && b[i].is_ascii_whitespace() {
                i += 1;
            }
            i
        };
        loop {
            let mut i = skip_ws(self.pos);
            if i >= self.to || matches!(b[i], b'>' | b'/') {
                self.pos = self.to;
                return None;
            }
            let key_start = i;
            while i < self.to && !matches!(b[i], b'=' | b'>' | b'/') && !b[i].is_ascii_whitespace()
            {
                i += 1;
            }
            let key = Span::new(key_start, i);
            i = skip_ws(i);
            if i >= self.to || b[i] != b'=' {
                // A bare word: not an attribute we can use; skip it.
                self.pos = i.max(key_start + 1);
                continue;
            }
            i = skip_ws(i + 1);
            let value = if i < self.to && (b[i] == b'"' || b[i] == b'\'') {
                let quote = b[i];
                let v_start = i + 1;
                let mut j = v_start;
                while j < self.to && b[j] != quote {
                    j += 1;
                }
                self.pos = (j + 1).min(self.to);
                Span::new(v_start, j)
            } else {
                let v_start = i;
                while i < self.to && !matches!(b[i], b'>') && !b[i].is_ascii_whitespace() {
                    i += 1;
                }
                self.pos = i;
                Span::new(v_start, i)
            };
            return Some((key, value));
        }
    }
}
