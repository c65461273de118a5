//! The XML record's tokenizers: [`Token`]s as byte offsets into the
//! datagram text, for the flattener in `xml.rs` to read.
//!
//! Two of them: a byte scanner for the plain XML that xrootd writes
//! (the `parse` and `parse-reference` benches in `benches/pipeline.rs`
//! compare them on real records), and quick-xml for everything else. The scanner
//! gives up on the first construct it does not read, and the datagram is read
//! again from the start by quick-xml, so quick-xml remains the authority on
//! what a record means and what is wrong with it.

use quick_xml::Reader;
use quick_xml::events::Event;

use crate::summary::ParseError;

/// One piece of markup or text, as byte offsets into the datagram text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::summary) enum Token {
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
pub(in crate::summary) enum Stop {
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

/// A source of [`Token`]s over one datagram text.
pub(in crate::summary) trait Tokens {
    fn next(&mut self) -> Result<Token, Stop>;
}

/// quick-xml's reader, configured to tolerate what real senders emit.
pub(in crate::summary) struct QuickXmlTokens<'t> {
    reader: Reader<&'t [u8]>,
}

impl<'t> QuickXmlTokens<'t> {
    pub(in crate::summary) fn new(text: &'t str) -> Self {
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
pub(in crate::summary) struct FastTokens<'t> {
    bytes: &'t [u8],
    pos: usize,
}

impl<'t> FastTokens<'t> {
    pub(in crate::summary) fn new(text: &'t str) -> Self {
        FastTokens {
            bytes: text.as_bytes(),
            pos: 0,
        }
    }

    /// The end (after `>`) of the tag whose rest starts at `from`,
    /// quote-aware. A byte loop: tags are a few bytes long, too short for
    /// memchr to pay.
    #[inline]
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
    // Per token of every datagram, and in another module from its caller.
    #[inline]
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
pub(super) static NAME_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':');
        c += 1;
    }
    t
};
