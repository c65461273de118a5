//! The XML form of xrd.report records, read with quick-xml into [`Scratch`].
//!
//! A tokenizer supplies [`Token`]s; element names, attributes and values are
//! taken as byte ranges of the datagram text (no unescaping, no allocation per
//! variable). End tags are matched by hand because real senders emit
//! `</statistics toe="...">` and `</mdb</rsp>`.
//!
//! Two tokenizers: a byte scanner for the plain XML that xrootd writes
//! (the `parse` and `parse-reference` benches in `benches/pipeline.rs`
//! compare them on real records), and quick-xml for everything else. The scanner
//! gives up on the first construct it does not read, and the datagram is read
//! again from the start by quick-xml, so quick-xml remains the authority on
//! what a record means and what is wrong with it.

use quick_xml::Reader;
use quick_xml::events::Event;

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

/// One piece of markup or text, as byte offsets into the datagram text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Token {
    /// `<name ...>` (`empty`: `<name .../>`), `start` at `<`, `end` after `>`.
    Open {
        start: usize,
        end: usize,
        empty: bool,
    },
    /// Raw text between tags (or a CDATA section's content).
    Text {
        start: usize,
        end: usize,
    },
    /// `</name ...>`, `start` at `<`, `end` after `>`.
    Close {
        start: usize,
        end: usize,
    },
    Eof,
}

/// Why a tokenizer stopped.
pub(super) enum Stop {
    /// The fast scanner met something only quick-xml reads (`<!`, `<?`, `&`,
    /// a byte-order mark, an unclosed tag): start again with quick-xml.
    Unsupported,
    Error(ParseError),
}

impl From<ParseError> for Stop {
    fn from(e: ParseError) -> Stop {
        Stop::Error(e)
    }
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

/// A source of [`Token`]s over one datagram text.
pub(super) trait Tokens {
    fn next(&mut self) -> Result<Token, Stop>;
}

/// quick-xml's reader, configured to tolerate what real senders emit.
pub(super) struct QuickXmlTokens<'t> {
    reader: Reader<&'t [u8]>,
}

impl<'t> QuickXmlTokens<'t> {
    pub(super) fn new(text: &'t str) -> Self {
        let mut reader = Reader::from_str(text);
        let config = reader.config_mut();
        config.check_end_names = false;
        config.allow_unmatched_ends = true;
        config.allow_dangling_amp = true;
        config.check_comments = false;
        config.expand_empty_elements = false;
        config.trim_text(false);
        QuickXmlTokens { reader }
    }
}

impl Tokens for QuickXmlTokens<'_> {
    fn next(&mut self) -> Result<Token, Stop> {
        loop {
            let start = self.reader.buffer_position() as usize;
            let event = self
                .reader
                .read_event()
                .map_err(|e| ParseError::Malformed {
                    offset: self.reader.error_position() as usize,
                    reason: e.to_string(),
                })?;
            let end = self.reader.buffer_position() as usize;
            return Ok(match event {
                Event::Start(_) => Token::Open {
                    start,
                    end,
                    empty: false,
                },
                Event::Empty(_) => Token::Open {
                    start,
                    end,
                    empty: true,
                },
                Event::Text(_) | Event::GeneralRef(_) => Token::Text { start, end },
                // `<![CDATA[` .. `]]>`
                Event::CData(_) => Token::Text {
                    start: start + 9,
                    end: end.saturating_sub(3).max(start + 9),
                },
                Event::End(_) => Token::Close { start, end },
                Event::Eof => Token::Eof,
                Event::Decl(_) | Event::Comment(_) | Event::PI(_) | Event::DocType(_) => continue,
            });
        }
    }
}

/// The hot path's scanner: `<name ...>`, `<name .../>`, `</name ...>` and
/// text without `&`. It ends tags exactly where quick-xml
/// does (the first `>` outside single or double quotes) and gives up with
/// [`Stop::Unsupported`] on anything else.
pub(super) struct FastTokens<'t> {
    bytes: &'t [u8],
    pos: usize,
}

impl<'t> FastTokens<'t> {
    pub(super) fn new(text: &'t str) -> Self {
        FastTokens {
            bytes: text.as_bytes(),
            pos: 0,
        }
    }

    /// The end (after `>`) of the tag whose rest starts at `from`,
    /// quote-aware. A byte loop: tags are a few bytes long, too short for
    /// memchr to pay.
    fn tag_end(&self, from: usize) -> Result<usize, Stop> {
        let b = self.bytes;
        if b.get(from) == Some(&b'>') {
            return Ok(from + 1);
        }
        let mut quote = 0u8;
        for (i, &c) in b.iter().enumerate().skip(from) {
            match (quote, c) {
                (0, b'>') => return Ok(i + 1),
                (0, b'"' | b'\'') => quote = c,
                (q, c) if q == c => quote = 0,
                _ => {}
            }
        }
        Err(Stop::Unsupported)
    }
}

impl Tokens for FastTokens<'_> {
    fn next(&mut self) -> Result<Token, Stop> {
        let b = self.bytes;
        let start = self.pos;
        if start == 0 && b.starts_with("\u{feff}".as_bytes()) {
            return Err(Stop::Unsupported);
        }
        if start >= b.len() {
            return Ok(Token::Eof);
        }
        if b[start] != b'<' {
            let mut end = start;
            while end < b.len() && b[end] != b'<' {
                if b[end] == b'&' {
                    return Err(Stop::Unsupported);
                }
                end += 1;
            }
            self.pos = end;
            return Ok(Token::Text { start, end });
        }
        let is_name_start =
            |c: Option<&u8>| c.is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_');
        // Most tags are a bare name: step over it, then the quote-aware
        // search only has what follows (attributes) left to read.
        let after_name = |from: usize| {
            let mut i = from;
            while i < b.len() && NAME_BYTE[b[i] as usize] {
                i += 1;
            }
            i
        };
        let token = match b.get(start + 1) {
            Some(b'/') if is_name_start(b.get(start + 2)) => {
                let end = self.tag_end(after_name(start + 2))?;
                Token::Close { start, end }
            }
            c if is_name_start(c) => {
                let end = self.tag_end(after_name(start + 1))?;
                Token::Open {
                    start,
                    end,
                    empty: end - start >= 3 && b[end - 2] == b'/',
                }
            }
            _ => return Err(Stop::Unsupported),
        };
        let (Token::Open { end, .. } | Token::Close { end, .. }) = token else {
            unreachable!()
        };
        self.pos = end;
        Ok(token)
    }
}

/// Bytes of a tag name as xrootd writes them (none of them is a quote, `>`,
/// `/` or white space, so skipping them never skips the end of a tag).
static NAME_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':');
        c += 1;
    }
    t
};

fn flatten_with(text: &str, s: &mut Scratch, mut tokens: impl Tokens) -> Result<(), Stop> {
    s.names.clear();
    s.slots.clear();
    s.entries.clear();
    s.path.clear();
    s.frames.clear();
    s.header_len = 0;

    let mut seen_root = false;
    loop {
        match tokens.next()? {
            Token::Open { start, end, empty } => {
                let tag = tag_span(text, start, end);
                if !seen_root {
                    if tag.of(text) != "statistics" {
                        return Err(ParseError::NotStatistics {
                            found: preview(text, start),
                        }
                        .into());
                    }
                    seen_root = true;
                    open_root(text, s, end, tag);
                    if empty {
                        return Ok(());
                    }
                } else if s.frames.is_empty() {
                    // One record per datagram: anything after it is ignored.
                    return Ok(());
                } else {
                    open(text, s, start, end, tag)?;
                    if empty {
                        close_top(text, s);
                    }
                }
            }
            Token::Text { start, end } => {
                let span = Span::new(start, end);
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
                        return Err(ParseError::NotStatistics {
                            found: preview(text, start),
                        }
                        .into());
                    }
                    None => {}
                }
            }
            Token::Close { start, end } => {
                // Nearly always `</name>` closing the innermost element.
                let bytes = text.as_bytes();
                if let Some(top) = s.frames.last()
                    && s.frames.len() > 1
                    && bytes.get(start + 2..end - 1)
                        == bytes.get(top.tag.start as usize..top.tag.end as usize)
                {
                    close_top(text, s);
                    continue;
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
                        return Ok(());
                    }
                    offset += piece.len() + 2;
                }
            }
            Token::Eof => {
                return Err(if !seen_root && text.trim().is_empty() {
                    ParseError::Empty
                } else if !seen_root {
                    ParseError::NotStatistics {
                        found: preview(text, text.len() - text.trim_start().len()),
                    }
                } else {
                    ParseError::Truncated {
                        depth: s.frames.len(),
                    }
                }
                .into());
            }
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

pub(super) fn preview(text: &str, start: usize) -> String {
    text.get(start..).unwrap_or("").chars().take(24).collect()
}

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

/// Trims white space and stray trailing `>` (xrootd 5.5-5.7 XCache sends
/// `<hits>0></hits>`; mpxstats prints `0`), then one pair of surrounding
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
