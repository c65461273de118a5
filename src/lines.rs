//! Lines of at most a stated length, read from a file, a pipe or stdin:
//! what `dump` (a record a line) and `replay` (an entry a line) read,
//! bounded before anything is kept, so an endless line (`/dev/zero`, a
//! stream without newlines) stops the reading at the bound instead of
//! taking the host's memory.

use std::io::{self, BufRead};

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// A line (in the buffer, without its `\n`); the last one may lack it.
    Line,
    /// The end of the input: no more lines.
    End,
    /// A line longer than the bound: the buffer holds its first `max`
    /// bytes or fewer, and the input is left inside it.
    TooLong,
}

/// Reads the next line of `input` into `line` (cleared first), holding
/// at most `max` bytes of it.
pub fn read_line<R: BufRead + ?Sized>(
    input: &mut R,
    line: &mut Vec<u8>,
    max: usize,
) -> io::Result<Next> {
    line.clear();
    loop {
        let buf = match input.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok(if line.is_empty() {
                Next::End
            } else {
                Next::Line
            });
        }
        let (take, ends) = match buf.iter().position(|&b| b == b'\n') {
            Some(at) => (at, true),
            None => (buf.len(), false),
        };
        if line.len() + take > max {
            return Ok(Next::TooLong);
        }
        line.extend_from_slice(&buf[..take]);
        input.consume(if ends { take + 1 } else { take });
        if ends {
            return Ok(Next::Line);
        }
    }
}

/// `bytes` for a message: "65536 bytes (64 KiB)".
pub fn size(bytes: usize) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{bytes} bytes ({} KiB)", bytes / 1024)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &[u8], max: usize) -> Vec<(Next, Vec<u8>)> {
        // A small buffer: lines cross its refills.
        let mut input = io::BufReader::with_capacity(3, text);
        let mut line = Vec::new();
        let mut out = Vec::new();
        loop {
            let next = read_line(&mut input, &mut line, max).unwrap();
            let stop = next != Next::Line;
            out.push((next, line.clone()));
            if stop {
                return out;
            }
        }
    }

    #[test]
    fn lines_up_to_the_bound_are_read_and_a_longer_one_stops() {
        assert_eq!(
            all(b"abcd\n\nxy", 4),
            vec![
                (Next::Line, b"abcd".to_vec()),
                (Next::Line, vec![]),
                (Next::Line, b"xy".to_vec()),
                (Next::End, vec![])
            ]
        );
        let got = all(b"ab\nabcde\nab\n", 4);
        assert_eq!(got[0], (Next::Line, b"ab".to_vec()));
        assert_eq!(got[1].0, Next::TooLong);
        assert!(got[1].1.len() <= 4);
        assert_eq!(got.len(), 2);
    }

    /// An endless line stops at the bound, holding no more than it.
    #[test]
    fn an_endless_line_stops_at_the_bound() {
        let mut zeros = io::BufReader::new(io::repeat(0));
        let mut line = Vec::new();
        assert_eq!(
            read_line(&mut zeros, &mut line, 100_000).unwrap(),
            Next::TooLong
        );
        assert!(line.len() <= 100_000 && line.capacity() < 300_000);
    }
}
