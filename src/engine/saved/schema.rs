//! The one typed definition of a source's saved entry, for the state file
//! and the peer exchange alike ([`Entry`]), and the state file's header
//! ([`Header`]): JSON (serde), one entry a line in the file, one entry a
//! run of frames in the exchange. What each field may hold is checked in
//! [`super`]: a counter as it is parsed ([`Counters`]), the rest right
//! after ([`super::check_entry`]).
//!
//! ```text
//! {"format":"xrd2ganglia-state","version":2}
//! {"ip":"10.0.0.1","program":"xrootd anon","start":[1700000000,77],"counters":[["00000000deadbeef",5000,120]]}
//! ```
//!
//! * `start`: the program's (tos, pid); left out when neither is known.
//! * `counters`: (name key as 16 hex digits, last reading, offset) each.
//!   A key is a hash: hex keeps it whole in tools that read numbers as
//!   doubles (jq); readings and offsets stay numbers.
//! * `pfc`: an XCache's g-stream totals, in the exchange only (the state
//!   file has never kept them).
//!
//! **Versions.** [`VERSION`] is the state file's; the exchange names its
//! own in its header (`crate::daemon::peer::message`). A field added as
//! optional (`#[serde(default)]`) is a compatible change: an older reader
//! ignores it. A change an older reader would misread (a field renamed,
//! retyped or made required) takes a new version. Version 1 was text
//! (`S`/`C` lines): read once at the upgrade by [`super::upgrade_v1`].
//!
//! A counter's fields are read leniently ([`Number`], [`KeyText`]) and
//! checked as they are read ([`Counters`]): a negative, fractional,
//! textual or out-of-range value loses only its counter (as a bad `C`
//! line of version 1 did), not the entry; a line that is not an entry of
//! this shape loses the entry. What parsing holds is the valid counters'
//! (key, reading, offset), 24 bytes each where writing one takes 25 or
//! more: about the entry's own bytes (the exchange's memory bound,
//! `crate::daemon::peer`), whatever the entry holds.

use std::borrow::Cow;
use std::fmt;
use std::net::IpAddr;

use serde::de::{self, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

/// The state file's first line names this format ...
pub const FORMAT: &str = "xrd2ganglia-state";
/// ... and this version of it.
pub const VERSION: u32 = 2;

/// The state file's first line.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    pub format: String,
    pub version: u32,
}

impl Header {
    /// This version's header.
    pub fn current() -> Header {
        Header {
            format: FORMAT.to_string(),
            version: VERSION,
        }
    }
}

/// One source's entry: who it is, its run, its counters (and, in the
/// exchange, its g-stream totals).
#[derive(Debug, Serialize, Deserialize)]
pub struct Entry<'a> {
    pub ip: IpAddr,
    #[serde(borrow)]
    pub program: Cow<'a, str>,
    /// (tos, pid); None when both are 0 (not known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<(u32, u32)>,
    pub counters: Counters,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pfc: Option<Totals>,
}

/// An XCache's g-stream totals ([`crate::gstream::PfcTotals`] but for
/// what is not exchanged).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub stod: u32,
    pub files: u64,
    pub hit: u64,
    pub miss: u64,
    pub bypass: u64,
}

/// A source's counters: (key, reading, offset) each, as written; as read,
/// the ones that passed [`super::check_counter`], and the others counted
/// (the first [`super::NAMED`] named with their place, from 1).
#[derive(Debug, Default)]
pub struct Counters {
    pub valid: Vec<(u64, u64, u64)>,
    pub failed: usize,
    pub named: Vec<(usize, super::Bad)>,
}

/// One counter as read: `[key, reading, offset]` (held one at a time).
#[derive(Clone, Debug, PartialEq)]
pub struct Counter {
    pub key: KeyText,
    pub reading: Number,
    pub offset: Number,
}

/// A key's field as read: 16 hex digits, or the text that was not.
#[derive(Clone, Debug, PartialEq)]
pub enum KeyText {
    Hex(u64),
    Not(String),
}

/// A number field as read: a whole number of u64, or what it was instead
/// (for the message that names it).
#[derive(Clone, Debug, PartialEq)]
pub enum Number {
    Whole(u64),
    Negative(i64),
    /// A fraction, or a number beyond u64 (JSON reads it as a double).
    Fraction(f64),
    /// Not a number at all (a string, true, null).
    Not(String),
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Number::Whole(n) => write!(f, "{n}"),
            Number::Negative(n) => write!(f, "{n}"),
            Number::Fraction(x) => write!(f, "{x}"),
            Number::Not(t) => write!(f, "{t:?}"),
        }
    }
}

impl Serialize for Counters {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.valid.iter().map(|&(k, r, o)| (HexKey(k), r, o)))
    }
}

impl<'de> Deserialize<'de> for Counters {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Counters;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a list of counters")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Counters, A::Error> {
                let mut out = Counters::default();
                let mut place = 0;
                while let Some(c) = seq.next_element::<Counter>()? {
                    place += 1;
                    match super::check_counter(&c) {
                        Ok(valid) => out.valid.push(valid),
                        Err(why) => {
                            out.failed += 1;
                            if out.named.len() < super::NAMED {
                                out.named.push((place, why));
                            }
                        }
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_seq(V)
    }
}

/// A key written as 16 hex digits, without an allocation.
struct HexKey(u64);

impl Serialize for HexKey {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; 16];
        for (i, b) in buf.iter_mut().enumerate() {
            let nibble = (self.0 >> (60 - 4 * i)) & 0xf;
            *b = b"0123456789abcdef"[nibble as usize];
        }
        // 16 ASCII hex digits.
        s.serialize_str(std::str::from_utf8(&buf).unwrap_or_default())
    }
}

impl<'de> Deserialize<'de> for Counter {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Counter;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a counter [key, reading, offset]")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Counter, A::Error> {
                let missing = || de::Error::custom("a counter is [key, reading, offset]");
                let key = seq.next_element()?.ok_or_else(missing)?;
                let reading = seq.next_element()?.ok_or_else(missing)?;
                let offset = seq.next_element()?.ok_or_else(missing)?;
                if seq.next_element::<IgnoredAny>()?.is_some() {
                    return Err(missing());
                }
                Ok(Counter {
                    key,
                    reading,
                    offset,
                })
            }
        }
        d.deserialize_seq(V)
    }
}

/// At most this much of a field's text is kept for a message.
const KEPT_TEXT: usize = 40;

fn kept(text: &str) -> String {
    let mut end = text.len().min(KEPT_TEXT);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = KeyText;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key of 16 hex digits")
            }
            fn visit_str<E: de::Error>(self, t: &str) -> Result<KeyText, E> {
                if t.len() == 16
                    && t.bytes().all(|b| b.is_ascii_hexdigit())
                    && let Ok(k) = u64::from_str_radix(t, 16)
                {
                    return Ok(KeyText::Hex(k));
                }
                Ok(KeyText::Not(kept(t)))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<KeyText, E> {
                Ok(KeyText::Not(n.to_string()))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<KeyText, E> {
                Ok(KeyText::Not(n.to_string()))
            }
            fn visit_f64<E: de::Error>(self, x: f64) -> Result<KeyText, E> {
                Ok(KeyText::Not(x.to_string()))
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<KeyText, E> {
                Ok(KeyText::Not(b.to_string()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<KeyText, E> {
                Ok(KeyText::Not("null".into()))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Number;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a whole number")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Number, E> {
                Ok(Number::Whole(n))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Number, E> {
                Ok(u64::try_from(n).map_or(Number::Negative(n), Number::Whole))
            }
            fn visit_f64<E: de::Error>(self, x: f64) -> Result<Number, E> {
                Ok(Number::Fraction(x))
            }
            fn visit_str<E: de::Error>(self, t: &str) -> Result<Number, E> {
                Ok(Number::Not(kept(t)))
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<Number, E> {
                Ok(Number::Not(b.to_string()))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Number, E> {
                Ok(Number::Not("null".into()))
            }
        }
        d.deserialize_any(V)
    }
}
