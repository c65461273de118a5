//! Recordings: files of timestamped datagrams, as `dump --listen --record`
//! writes them and `replay` sends them again at their pace.
//!
//! One entry per line, a JSON object (JSON Lines), so a file can be read,
//! cut and joined with ordinary tools, and a damaged line loses only
//! itself:
//!
//! ```text
//! {"time":1795303741.071,"from":"127.0.0.1:54480","text":"<statistics ..."}
//! {"time":1795303742.102,"from":"127.0.0.1:35311","hex":"0a1b..."}
//! ```
//!
//! * `time`: when the datagram arrived, Unix seconds (fractions kept to the
//!   millisecond); only the differences matter to `replay`.
//! * `from`: the sender's address and port. `replay` sends each sender's
//!   datagrams from a socket of its own, so the receiver tells them apart
//!   as it told the originals.
//! * `text`: the datagram, when it is UTF-8 (xrootd's XML and JSON
//!   records); else `hex`: its bytes in lowercase hex (an XCache's
//!   g-stream header is binary).

use std::io::{self, BufRead, Write};
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

/// The longest datagram an entry may hold (the largest UDP payload).
pub const MAX_DATAGRAM: usize = 65_507;

/// The longest line a recording may have: an entry of the longest
/// datagram, every byte of it escaped as JSON escapes it at worst (six
/// bytes, `\u0001`), fits. A longer line stops the reading (no entry is
/// that long: the file is not a recording).
pub const MAX_LINE: usize = 512 << 10;
const _: () = assert!(6 * MAX_DATAGRAM + 1024 <= MAX_LINE);

/// One recorded datagram.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Arrival time, Unix seconds.
    pub time: f64,
    /// Who sent it.
    pub from: SocketAddr,
    pub datagram: Vec<u8>,
}

/// An entry as written: `text` or `hex`, never both.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Line<'a> {
    time: f64,
    from: SocketAddr,
    #[serde(default, skip_serializing_if = "Option::is_none", borrow)]
    text: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hex: Option<String>,
}

/// Writes one entry as one line, flushed: a recording stopped at any
/// moment (Ctrl-C) ends with a whole entry.
pub fn write_entry(
    out: &mut dyn Write,
    time: f64,
    from: SocketAddr,
    datagram: &[u8],
) -> io::Result<()> {
    // Milliseconds: what a report interval and a replay's pace need.
    let time = (time * 1000.0).round() / 1000.0;
    let line = match std::str::from_utf8(datagram) {
        Ok(text) => Line {
            time,
            from,
            text: Some(text.into()),
            hex: None,
        },
        Err(_) => Line {
            time,
            from,
            text: None,
            hex: Some(to_hex(datagram)),
        },
    };
    serde_json::to_writer(&mut *out, &line)?;
    out.write_all(b"\n")?;
    out.flush()
}

/// Reads one line as an entry, or says why it is not one.
pub fn parse_entry(line: &str) -> Result<Entry, String> {
    let l: Line<'_> = serde_json::from_str(line).map_err(|e| format!("not an entry: {e}"))?;
    if !l.time.is_finite() || l.time < 0.0 {
        return Err(format!("time {} is not a time", l.time));
    }
    let datagram = match (l.text, l.hex) {
        (Some(text), None) => text.into_owned().into_bytes(),
        (None, Some(hex)) => from_hex(&hex)?,
        (Some(_), Some(_)) => return Err("has both \"text\" and \"hex\"".into()),
        (None, None) => return Err("has neither \"text\" nor \"hex\"".into()),
    };
    if datagram.is_empty() {
        return Err("the datagram is empty".into());
    }
    if datagram.len() > MAX_DATAGRAM {
        return Err(format!(
            "the datagram is {} bytes, more than UDP carries ({MAX_DATAGRAM})",
            datagram.len()
        ));
    }
    Ok(Entry {
        time: l.time,
        from: l.from,
        datagram,
    })
}

/// Every entry of `input` in file order, each with its line number (from
/// 1): an entry or why that line is not one. Blank lines are skipped; a
/// line that is not UTF-8 is a bad entry; a read error ends the reading,
/// and so does a line longer than [`MAX_LINE`] (an error that names the
/// line and the bound): at most that much of a line is ever held.
pub fn entries(
    mut input: impl BufRead,
) -> impl Iterator<Item = io::Result<(usize, Result<Entry, String>)>> {
    let mut line = Vec::new();
    let mut n = 0;
    let mut done = false;
    std::iter::from_fn(move || {
        loop {
            if done {
                return None;
            }
            n += 1;
            match crate::lines::read_line(&mut input, &mut line, MAX_LINE) {
                Ok(crate::lines::Next::Line) => {}
                Ok(crate::lines::Next::End) => return None,
                Ok(crate::lines::Next::TooLong) => {
                    done = true;
                    return Some(Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "line {n}: longer than {}, the longest line a recording has \
                             (an entry of a {MAX_DATAGRAM}-byte datagram): not a recording",
                            crate::lines::size(MAX_LINE)
                        ),
                    )));
                }
                Err(e) => {
                    done = true;
                    return Some(Err(e));
                }
            }
            let entry = match std::str::from_utf8(&line) {
                Ok(text) if text.trim().is_empty() => continue,
                Ok(text) => parse_entry(text.trim_end_matches('\r')),
                Err(_) => Err("the line is not UTF-8".into()),
            };
            return Some(Ok((n, entry)));
        }
    })
}

fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

fn from_hex(hex: &str) -> Result<Vec<u8>, String> {
    if !hex.len().is_multiple_of(2) {
        return Err("\"hex\" has an odd number of digits".into());
    }
    let digit = |c: u8| match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        b'A'..=b'F' => Ok(c - b'A' + 10),
        _ => Err(format!("\"hex\" has {:?}, not a hex digit", c as char)),
    };
    hex.as_bytes()
        .chunks(2)
        .map(|pair| Ok(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_binary_datagrams_come_back_as_written() {
        let from: SocketAddr = "127.0.0.1:54480".parse().unwrap();
        let mut out = Vec::new();
        write_entry(&mut out, 1795303741.0714, from, b"<statistics/>").unwrap();
        write_entry(&mut out, 1795303742.5, from, &[0, 0xff, b'{']).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "{\"time\":1795303741.071,\"from\":\"127.0.0.1:54480\",\"text\":\"<statistics/>\"}\n\
             {\"time\":1795303742.5,\"from\":\"127.0.0.1:54480\",\"hex\":\"00ff7b\"}\n"
        );
        let read: Vec<_> = entries(text.as_bytes())
            .map(|r| r.unwrap().1.unwrap().datagram)
            .collect();
        assert_eq!(read, vec![b"<statistics/>".to_vec(), vec![0, 0xff, b'{']]);
    }

    #[test]
    fn a_bad_line_loses_only_itself() {
        let file = "{\"time\":1,\"from\":\"127.0.0.1:1\",\"text\":\"a\"}\n\
                    not json\n\
                    \n\
                    {\"time\":2,\"from\":\"127.0.0.1:1\",\"hex\":\"0g\"}\n\
                    {\"time\":-1,\"from\":\"127.0.0.1:1\",\"text\":\"b\"}\n\
                    {\"time\":3,\"from\":\"nowhere\",\"text\":\"c\"}\n\
                    {\"time\":4,\"from\":\"127.0.0.1:1\"}\n\
                    {\"time\":5,\"from\":\"127.0.0.1:1\",\"text\":\"d\"}";
        let got: Vec<(usize, bool)> = entries(file.as_bytes())
            .map(|r| r.unwrap())
            .map(|(n, e)| (n, e.is_ok()))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, true),
                (2, false),
                (4, false),
                (5, false),
                (6, false),
                (7, false),
                (8, true)
            ]
        );
    }
}
