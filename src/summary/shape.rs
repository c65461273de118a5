//! A record's shape: its text with the digits of some values cut out.
//!
//! Servers send the same record every interval with new numbers. A shape
//! remembers one record as literal text and holes; a later datagram
//! matches when it has the same literal text with digits in every hole.
//! Callers keep, next to the shape, whatever they made of the record, and
//! on a match only redo the part that depends on the holes' digits (the
//! gateway's packet template, mpxstats' output).

use std::ops::Range;

/// What a hole accepts: 1 to `max` ASCII digits; with `plain`, no leading
/// zero unless the number is 0 (text that parsing and printing give back).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hole {
    pub max: u8,
    pub plain: bool,
}

impl Hole {
    pub fn accepts(self, digits: &[u8]) -> bool {
        !digits.is_empty()
            && digits.len() <= self.max as usize
            && (!self.plain || digits[0] != b'0' || digits.len() == 1)
            && digits.iter().all(u8::is_ascii_digit)
    }
}

#[derive(Clone, Debug, Default)]
pub struct Shape {
    literal: Vec<u8>,
    /// End of each literal segment: segment i precedes hole i, the last one
    /// follows the last hole.
    cuts: Vec<u32>,
    holes: Vec<Hole>,
}

impl Shape {
    /// Starts a shape of `datagram`; cut holes in increasing order, then
    /// [`finish`](ShapeBuilder::finish).
    pub fn builder(datagram: &[u8]) -> ShapeBuilder<'_> {
        ShapeBuilder {
            datagram,
            copied: 0,
            shape: Shape {
                literal: Vec::with_capacity(datagram.len()),
                cuts: Vec::new(),
                holes: Vec::new(),
            },
        }
    }

    pub fn holes(&self) -> usize {
        self.holes.len()
    }

    /// Matches `datagram`; on success `found` holds each hole's digits as a
    /// byte range of the datagram.
    pub fn matches(&self, datagram: &[u8], found: &mut Vec<Range<u32>>) -> bool {
        found.clear();
        let mut pos = 0usize;
        let mut seg_start = 0usize;
        for (i, hole) in self.holes.iter().enumerate() {
            let seg_end = self.cuts[i] as usize;
            let seg = &self.literal[seg_start..seg_end];
            seg_start = seg_end;
            if datagram.get(pos..pos + seg.len()) != Some(seg) {
                return false;
            }
            pos += seg.len();
            let start = pos;
            while pos < datagram.len() && datagram[pos].is_ascii_digit() {
                pos += 1;
            }
            // Only digits were taken: check their count and leading zero.
            let n = pos - start;
            if n == 0 || n > hole.max as usize || (hole.plain && n > 1 && datagram[start] == b'0') {
                return false;
            }
            found.push(start as u32..pos as u32);
        }
        datagram.get(pos..) == self.literal.get(seg_start..)
    }
}

pub struct ShapeBuilder<'d> {
    datagram: &'d [u8],
    copied: usize,
    shape: Shape,
}

impl ShapeBuilder<'_> {
    /// True if `span` can be a hole of this kind: after the last hole, the
    /// digits `hole` accepts, with no digit right before or after it (so a
    /// later datagram's digits are found exactly there).
    pub fn can_cut(&self, span: &Range<usize>, hole: Hole) -> bool {
        let d = self.datagram;
        span.start >= self.copied
            && span.end <= d.len()
            && hole.accepts(&d[span.clone()])
            && !d[..span.start].last().is_some_and(u8::is_ascii_digit)
            && !d.get(span.end).is_some_and(u8::is_ascii_digit)
    }

    /// Cuts `span` out as the next hole (check [`can_cut`](Self::can_cut)
    /// first); returns its index.
    pub fn cut(&mut self, span: Range<usize>, hole: Hole) -> u32 {
        let s = &mut self.shape;
        s.literal
            .extend_from_slice(&self.datagram[self.copied..span.start]);
        s.cuts.push(s.literal.len() as u32);
        s.holes.push(hole);
        self.copied = span.end;
        (s.holes.len() - 1) as u32
    }

    pub fn finish(mut self) -> Shape {
        let s = &mut self.shape;
        s.literal.extend_from_slice(&self.datagram[self.copied..]);
        s.cuts.push(s.literal.len() as u32);
        // Kept for as long as its source reports: no room to grow.
        s.literal.shrink_to_fit();
        s.cuts.shrink_to_fit();
        s.holes.shrink_to_fit();
        self.shape
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOLE: Hole = Hole {
        max: 9,
        plain: true,
    };

    fn shape_of(text: &str, spans: &[Range<usize>]) -> Shape {
        let mut b = Shape::builder(text.as_bytes());
        for s in spans {
            assert!(b.can_cut(s, HOLE), "{s:?}");
            b.cut(s.clone(), HOLE);
        }
        b.finish()
    }

    #[test]
    fn matches_the_same_text_with_other_digits() {
        let text = "<a>12</a><b>x</b><c>7</c>";
        let shape = shape_of(text, &[3..5, 20..21]);
        let mut found = Vec::new();
        assert!(shape.matches(text.as_bytes(), &mut found));
        assert_eq!(found, vec![3..5, 20..21]);
        assert!(shape.matches(b"<a>123456</a><b>x</b><c>0</c>", &mut found));
        assert_eq!(found, vec![3..9, 24..25]);
        for other in [
            "<a></a><b>x</b><c>7</c>",           // empty hole
            "<a>012</a><b>x</b><c>7</c>",        // leading zero
            "<a>-12</a><b>x</b><c>7</c>",        // sign
            "<a>1234567890</a><b>x</b><c>7</c>", // too long
            "<a>12</a><b>y</b><c>7</c>",         // literal changed
            "<a>12</a><b>x</b><c>7</c>\n",       // trailing byte
            "<a>12</a><b>x</b><c>7</c",          // truncated
        ] {
            assert!(!shape.matches(other.as_bytes(), &mut found), "{other}");
        }
    }

    #[test]
    fn refuses_holes_that_would_not_be_found_again() {
        let text = "<a>12 34</a><b>5</b>";
        let b = Shape::builder(text.as_bytes());
        assert!(b.can_cut(&(3..5), HOLE), "a space follows: fine");
        let b = Shape::builder(text.as_bytes());
        assert!(!b.can_cut(&(4..5), HOLE), "a digit precedes");
        assert!(!b.can_cut(&(3..4), HOLE), "a digit follows");
        let mut b = Shape::builder(text.as_bytes());
        b.cut(15..16, HOLE);
        assert!(!b.can_cut(&(3..5), HOLE), "before the last hole");
    }
}
