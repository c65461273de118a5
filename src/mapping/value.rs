//! A variable's value text as sent: checked and converted for its kind.
//! `int` counters that wrapped negative are sent unsigned (a `char` counter
//! past 127 as its byte, 128..255), 64-bit values as
//! integer text, positive-slope values only as integers; unknown numeric
//! variables as double, unknown text as string.

use std::fmt::Write as _;

use crate::catalog::Kind;
use crate::ganglia::sanitize::{self, MAX_VALUE};

/// Why a variable's value was not sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadValue {
    NotANumber,
    NotAnInteger,
    OutOfRange,
    NegativeCounter,
    /// `nan`, `inf`, `-nan`, `infinity`: what `std::to_string` of a
    /// plug-in's double can give (5.9+ sets); never sent.
    NotFinite,
}

impl BadValue {
    pub fn as_str(self) -> &'static str {
        match self {
            BadValue::NotANumber => "not a number",
            BadValue::NotAnInteger => "not an integer",
            BadValue::OutOfRange => "out of range",
            BadValue::NegativeCounter => "negative counter",
            BadValue::NotFinite => "not finite",
        }
    }
}

/// Converts value text for a metric of `kind` (None: unknown variable) and
/// appends the text to send. Returns the kind it is sent as.
pub(super) fn convert(out: &mut String, kind: Option<Kind>, text: &str) -> Result<Kind, BadValue> {
    // Nearly every value: a plain non-negative integer that fits the kind,
    // sent as it came (exactly what formatting the parsed number gives).
    if let Some(kind) = kind
        && kind != Kind::Text
        && kind != Kind::SizeKiB
        && is_plain_integer(
            text,
            if matches!(kind, Kind::Counter8 | Kind::Counter32 | Kind::Gauge32) {
                9
            } else {
                18
            },
        )
    {
        out.push_str(text);
        return Ok(kind);
    }
    convert_general(out, kind, text)
}

/// [`convert`] for a count known as a number (XCache's totals): what the
/// same digits in a record would become, without reading them back.
pub(super) fn convert_count(
    out: &mut String,
    kind: Option<Kind>,
    n: u64,
) -> Result<Kind, BadValue> {
    let fits_i64 = i64::try_from(n).is_ok();
    match kind {
        Some(k @ (Kind::Counter64 | Kind::Gauge64 | Kind::Timestamp | Kind::Text)) if fits_i64 => {
            let _ = write!(out, "{n}");
            Ok(k)
        }
        Some(k @ (Kind::Counter32 | Kind::Gauge32 | Kind::Counter8))
            if n <= u64::from(u32::MAX) =>
        {
            let _ = write!(out, "{n}");
            Ok(k)
        }
        Some(Kind::SizeKiB) if fits_i64 => {
            let _ = write!(out, "{}", kib_to_bytes(n));
            Ok(Kind::SizeKiB)
        }
        // Past i64 or unknown to the catalog: as its digits would be read.
        _ => convert_general(out, kind, &n.to_string()),
    }
}

/// A variable the catalog does not know: a finite number goes as
/// double/both, nan and inf are refused, anything else goes as text.
fn convert_unknown(out: &mut String, text: &str) -> Result<Kind, BadValue> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => {
            push_number(out, text.trim(), v);
            Ok(Kind::Gauge64)
        }
        Ok(_) => Err(BadValue::NotFinite),
        Err(_) => {
            sanitize::push_text(out, text, MAX_VALUE);
            Ok(Kind::Text)
        }
    }
}

/// A 32-bit unsigned value (`kind` a Counter32 or Gauge32) as xrootd
/// prints it.
fn unsigned_32(kind: Kind, text: &str) -> Result<i64, BadValue> {
    let v = parse_integer(text)?;
    // `%d` of an unsigned quantity past 2^31 prints negative: undo it.
    let v = if (i32::MIN as i64..0).contains(&v) {
        v as i32 as u32 as i64
    } else {
        v
    };
    if !(0..=u32::MAX as i64).contains(&v) {
        return Err(if v < 0 && kind == Kind::Counter32 {
            BadValue::NegativeCounter
        } else {
            BadValue::OutOfRange
        });
    }
    Ok(v)
}

/// [`convert`] for any text: parse, check, format.
pub(super) fn convert_general(
    out: &mut String,
    kind: Option<Kind>,
    text: &str,
) -> Result<Kind, BadValue> {
    let Some(kind) = kind else {
        return convert_unknown(out, text);
    };
    match kind {
        Kind::Text => {
            sanitize::push_text(out, text, MAX_VALUE);
        }
        Kind::Counter32 | Kind::Gauge32 => {
            let v = unsigned_32(kind, text)?;
            let _ = write!(out, "{v}");
        }
        Kind::Counter8 => {
            let v = parse_integer(text)?;
            // `%d` of a signed `char` past 127 prints -128..-1: the byte is
            // 128..255 (an unsigned `char` prints it so).
            let v = if (-128..0).contains(&v) { v + 256 } else { v };
            if v < 0 {
                return Err(BadValue::NegativeCounter);
            }
            if v > i64::from(u32::MAX) {
                return Err(BadValue::OutOfRange);
            }
            let _ = write!(out, "{v}");
        }
        Kind::Counter64 => {
            let v = match parse_integer(text) {
                // A plug-in's counter written with `std::to_string` of a
                // double (`12.000000`, 5.9+ sets declared by `[[metric]]`):
                // its whole value.
                Err(BadValue::NotAnInteger) => whole(text)?,
                v => v?,
            };
            if v < 0 {
                return Err(BadValue::NegativeCounter);
            }
            let _ = write!(out, "{v}");
        }
        Kind::SizeKiB => match parse_integer(text) {
            Ok(v) if v >= 0 => {
                let _ = write!(out, "{}", kib_to_bytes(v as u64));
            }
            Ok(_) => return Err(BadValue::OutOfRange),
            Err(_) => match text.trim().parse::<f64>() {
                Ok(v) if v.is_finite() && v >= 0.0 => {
                    let _ = write!(out, "{}", v * 1024.0);
                }
                Ok(v) if !v.is_finite() => return Err(BadValue::NotFinite),
                _ => return Err(BadValue::NotANumber),
            },
        },
        Kind::Gauge64 | Kind::Timestamp => match parse_integer(text) {
            Ok(v) => {
                let _ = write!(out, "{v}");
            }
            Err(_) => match text.trim().parse::<f64>() {
                Ok(v) if v.is_finite() => push_number(out, text.trim(), v),
                Ok(_) => return Err(BadValue::NotFinite),
                _ => return Err(BadValue::NotANumber),
            },
        },
    }
    Ok(kind)
}

/// A finite, whole double's value (`12.000000`), below 2^53.
fn whole(text: &str) -> Result<i64, BadValue> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.fract() == 0.0 && v.abs() < 9_007_199_254_740_992.0 => Ok(v as i64),
        _ => Err(BadValue::NotAnInteger),
    }
}

/// Decimal digits, at most `max_digits`, without a leading zero (`0` itself
/// allowed): text that parses and prints back unchanged.
fn is_plain_integer(text: &str, max_digits: usize) -> bool {
    let b = text.as_bytes();
    !b.is_empty()
        && b.len() <= max_digits
        && (b[0] != b'0' || b.len() == 1)
        && b.iter().all(u8::is_ascii_digit)
}

/// Integer text (surrounding white space allowed).
pub(super) fn parse_integer(text: &str) -> Result<i64, BadValue> {
    let t = text.trim();
    if t.is_empty() {
        return Err(BadValue::NotANumber);
    }
    match t.parse::<i64>() {
        Ok(v) => Ok(v),
        Err(e) => Err(match e.kind() {
            std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                BadValue::OutOfRange
            }
            _ => match t.parse::<f64>() {
                Ok(v) if v.is_finite() => BadValue::NotAnInteger,
                Ok(_) => BadValue::NotFinite,
                Err(_) => BadValue::NotANumber,
            },
        }),
    }
}

/// A finite double: the sender's text when it is plain, else Rust's shortest form.
fn push_number(out: &mut String, text: &str, v: f64) {
    if text.len() <= 32
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'e' | b'E' | b'+'))
    {
        out.push_str(text);
    } else {
        let _ = write!(out, "{v}");
    }
}

/// A size xrootd reports in KiB, in bytes (saturating: 2^54 KiB and more
/// do not occur).
pub(crate) fn kib_to_bytes(kib: u64) -> u64 {
    kib.saturating_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// XCache's totals, taken as numbers, become what their digits in a
    /// record would: the kinds' ranges as xrootd prints them (a 32-bit
    /// counter wraps past 2^32 - 1, sizes in KiB are sent in bytes, a
    /// 64-bit counter ends at 2^63 - 1), each value read once.
    #[test]
    fn counts_become_what_their_digits_would() {
        let cases: [(Option<Kind>, u64, Result<&str, BadValue>); 9] = [
            (Some(Kind::Counter64), 0, Ok("0")),
            (
                Some(Kind::Counter64),
                1_234_567_890_123,
                Ok("1234567890123"),
            ),
            (Some(Kind::Counter64), 1 << 63, Err(BadValue::OutOfRange)),
            (Some(Kind::Counter32), 4_294_967_295, Ok("4294967295")),
            (
                Some(Kind::Counter32),
                4_294_967_296,
                Err(BadValue::OutOfRange),
            ),
            (Some(Kind::SizeKiB), 3, Ok("3072")),
            (Some(Kind::Gauge64), 42, Ok("42")),
            (Some(Kind::Text), 7, Ok("7")),
            (None, 5, Ok("5")),
        ];
        for (kind, n, want) in cases {
            let mut out = String::new();
            let got = convert_count(&mut out, kind, n).map(|_| out.as_str());
            assert_eq!(got, want, "{kind:?} {n}");
            // The digits in a record give the same.
            let mut text = String::new();
            let read = convert(&mut text, kind, &n.to_string()).map(|_| text.as_str());
            assert_eq!(read, want, "{kind:?} {n} as digits");
        }
    }
}
