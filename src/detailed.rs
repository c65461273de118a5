//! XRootD's detailed monitoring stream (`xrootd.monitor`), one datagram at
//! a time: the binary packets of section 3 of the monitoring reference,
//! read as they lie in the datagram (no copy, no allocation).
//!
//! Every packet starts with the common header (network byte order):
//!
//! ```text
//!  0      1      2             4                           8
//! +------+------+-------------+---------------------------+
//! | code | pseq |    plen     |           stod            |
//! +------+------+-------------+---------------------------+
//!  code  '=' server, 'u' user login, 'd' user+path, 'f' file events,
//!        'i' 'p' 'r' 't' 'x' 'U' 'T' (read and ignored), 'g' (src/gstream.rs)
//!  pseq  packet sequence, wrapping at 256: one counter for the f-stream,
//!        another for everything else sent to one destination
//!        (XrdXrootdMonFile.cc, XrdXrootdMonitor::Send)
//!  plen  the packet's length: must equal the datagram's
//!  stod  the server's start time: with its address, the server instance
//! ```
//!
//! A map message (`=`, `u`, `d`, `i`, ...) is the header, a dictid and
//! text: `userid` then, after a newline, the rest (`u`: the auth info
//! `&p=PROT&n=NAME&h=HOST&o=ORG&r=ROLE&g=GROUPS&m=INFO...`; `d`: the path):
//!
//! ```text
//!  8                  12
//! +-------------------+----------------------------------------------+
//! |      dictid       | prot/user.pid:sid@host [\n info]             |
//! +-------------------+----------------------------------------------+
//! ```
//!
//! An `f` packet is the header then records, each starting with an
//! 8-byte record header whose `size` covers the whole record (the next
//! record starts there, whatever its type: newer fields are skipped):
//!
//! ```text
//! record header:  type(1) flag(1) size(2) id(4)
//!   time   type 2  [hdr: id = nRecs xfr(2), total(2)] tBeg(4) tEnd(4) [sID(8) if flag&1]
//!   open   type 1  [hdr: id = file dictid] fsz(8) [user dictid(4) lfn NUL.. if flag&1]
//!                  flag&2: opened read/write
//!   close  type 0  [hdr: id = file dictid] read(8) readv(8) write(8) [ops(48) if flag&2]
//!                  [ssq(32) if flag&4]; flag&1: forced (the client disconnected)
//!   xfr    type 3  [hdr: id = file dictid] read(8) readv(8) write(8): so far
//!   disc   type 4  [hdr: id = user dictid]
//! ```
//!
//! The first record of an `f` packet is a time record. Facts per release
//! come from XrdXrootdMonData.hh (5.x and 6.x share this layout); the
//! traffic of xrootd 5.5.3 is in `tests/data/detailed`. Pure: [`decode`]
//! checks every length and borrows the datagram.

use std::fmt;

/// The common header's length.
pub const HEADER_LEN: usize = 8;
/// A map message's fixed part: the header and the dictid.
const MAP_LEN: usize = HEADER_LEN + 4;
/// An `f` record's header.
const RECORD_HEADER: usize = 8;

/// The codes of the binary packets this module reads (everything but the
/// g-stream, which [`crate::gstream`] reads).
const CODES: &[u8] = b"=dfiprtuxUT";

/// Whether `datagram` is a detailed-stream packet by its first byte (a
/// summary record starts with `<` or `{`, a g-stream with `g` or `{`).
#[inline]
pub fn is_detailed(datagram: &[u8]) -> bool {
    datagram.first().is_some_and(|c| CODES.contains(c))
}

/// The common header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub code: u8,
    pub pseq: u8,
    pub plen: u16,
    pub stod: u32,
}

impl Header {
    /// Whether its `pseq` counts in the f-stream's sequence (else in the
    /// sequence of everything else sent to this destination).
    pub fn f_sequence(&self) -> bool {
        self.code == b'f'
    }
}

/// One decoded datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet<'d> {
    pub header: Header,
    pub body: Body<'d>,
}

/// What a packet carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body<'d> {
    /// `u`: a user logged in (or authenticated): its dictid, its
    /// `prot/user.pid:sid@host`, and the auth info if sent.
    User {
        dictid: u32,
        userid: &'d [u8],
        auth: Option<&'d [u8]>,
    },
    /// `d`: a user opened a path: the dictid given to the pair.
    Path {
        dictid: u32,
        userid: &'d [u8],
        path: &'d [u8],
    },
    /// `f`: the records after the time record.
    Files(Records<'d>),
    /// `=`: the server's identification, `userid` then (after a newline)
    /// `&site=..&port=..&inst=..&pgm=..&ver=..`.
    Ident { info: &'d [u8] },
    /// The codes nothing is made of (`i`, `r`, `t`, ...): read for the
    /// sequence only.
    Other,
}

/// A datagram that is not a readable detailed-stream packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Shorter than the header it needs (8 bytes; 12 for a map message).
    Truncated { len: usize, need: usize },
    /// `plen` is not the datagram's length.
    Length { plen: u16, len: usize },
    /// An `f` packet whose first record is not a time record.
    NoTime,
    /// An `f` record whose size is below its type's, or past the packet's
    /// end, at this offset.
    Record { at: usize, size: usize },
}

impl Error {
    /// For the rate limiter: one log line per reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Truncated { .. } => "detailed truncated",
            Error::Length { .. } => "detailed plen",
            Error::NoTime => "detailed no time record",
            Error::Record { .. } => "detailed record",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Truncated { len, need } => write!(
                f,
                "detailed monitoring packet of {len} bytes, shorter than its {need}-byte header"
            ),
            Error::Length { plen, len } => write!(
                f,
                "detailed monitoring packet says plen {plen} but is {len} bytes long"
            ),
            Error::NoTime => f.write_str("f-stream packet does not start with a time record"),
            Error::Record { at, size } => write!(
                f,
                "f-stream record at byte {at} of size {size} is shorter than its type or runs past the packet"
            ),
        }
    }
}

/// Decodes one datagram ([`is_detailed`] said it is one).
pub fn decode(datagram: &[u8]) -> Result<Packet<'_>, Error> {
    let len = datagram.len();
    let Some(h) = datagram.first_chunk::<HEADER_LEN>() else {
        return Err(Error::Truncated {
            len,
            need: HEADER_LEN,
        });
    };
    let header = Header {
        code: h[0],
        pseq: h[1],
        plen: u16::from_be_bytes([h[2], h[3]]),
        stod: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
    };
    if usize::from(header.plen) != len {
        return Err(Error::Length {
            plen: header.plen,
            len,
        });
    }
    let body = match header.code {
        b'u' | b'd' => {
            let Some(m) = datagram.first_chunk::<MAP_LEN>() else {
                return Err(Error::Truncated { len, need: MAP_LEN });
            };
            let dictid = u32::from_be_bytes([m[8], m[9], m[10], m[11]]);
            let text = until_nul(&datagram[MAP_LEN..]);
            let (userid, rest) = match text.iter().position(|&b| b == b'\n') {
                Some(i) => (&text[..i], Some(&text[i + 1..])),
                None => (text, None),
            };
            if header.code == b'u' {
                Body::User {
                    dictid,
                    userid,
                    auth: rest,
                }
            } else {
                Body::Path {
                    dictid,
                    userid,
                    path: rest.unwrap_or_default(),
                }
            }
        }
        b'f' => Body::Files(Records::new(&datagram[HEADER_LEN..])?),
        b'=' => {
            if len < MAP_LEN {
                return Err(Error::Truncated { len, need: MAP_LEN });
            }
            Body::Ident {
                info: until_nul(&datagram[MAP_LEN..]),
            }
        }
        _ => Body::Other,
    };
    Ok(Packet { header, body })
}

/// Text up to its first NUL (map messages may be padded).
fn until_nul(text: &[u8]) -> &[u8] {
    let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
    &text[..end]
}

/// Bytes moved through a file, as a close or transfer record says them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bytes {
    pub read: u64,
    pub readv: u64,
    pub write: u64,
}

impl Bytes {
    /// read + readv.
    pub fn read_total(&self) -> u64 {
        self.read.saturating_add(self.readv)
    }
}

/// One record of an `f` packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record<'d> {
    /// A file opened: its dictid, its size then, read/write, and the user
    /// and path when the server sends them (`fstat lfn`).
    Open {
        file: u32,
        size: u64,
        rw: bool,
        user: Option<u32>,
        lfn: Option<&'d [u8]>,
    },
    /// A file closed, with everything moved through it; `forced` when its
    /// client went away without closing it.
    Close {
        file: u32,
        bytes: Bytes,
        forced: bool,
    },
    /// What moved through an open file so far.
    Xfr { file: u32, bytes: Bytes },
    /// A user disconnected.
    Disc { user: u32 },
    /// A record type this reader does not know (skipped by its size).
    Unknown(u8),
}

/// The records of an `f` packet after its time record. Yields each record,
/// or once an [`Error::Record`] for the first that does not fit, then ends:
/// the records before it stand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Records<'d> {
    rest: &'d [u8],
    /// The offset of `rest` in the datagram (for errors).
    at: usize,
    /// The time record's window: the first record's and the send time.
    pub t_beg: u32,
    pub t_end: u32,
}

/// A record's type, flag, id and bytes (its header included).
type RawRecord<'d> = (u8, u8, u32, &'d [u8]);

const IS_CLOSE: u8 = 0;
const IS_OPEN: u8 = 1;
const IS_TIME: u8 = 2;
const IS_XFR: u8 = 3;
const IS_DISC: u8 = 4;

impl<'d> Records<'d> {
    fn new(body: &'d [u8]) -> Result<Records<'d>, Error> {
        let mut r = Records {
            rest: body,
            at: HEADER_LEN,
            t_beg: 0,
            t_end: 0,
        };
        let (kind, _, _, rec) = r.next_raw().ok_or(Error::NoTime)??;
        if kind != IS_TIME {
            return Err(Error::NoTime);
        }
        if rec.len() < RECORD_HEADER + 8 {
            return Err(Error::Record {
                at: HEADER_LEN,
                size: rec.len(),
            });
        }
        r.t_beg = be32(&rec[8..]);
        r.t_end = be32(&rec[12..]);
        Ok(r)
    }

    /// The next record's type, flag, id and bytes (header included).
    #[inline]
    fn next_raw(&mut self) -> Option<Result<RawRecord<'d>, Error>> {
        if self.rest.is_empty() {
            return None;
        }
        let at = self.at;
        let Some(h) = self.rest.first_chunk::<RECORD_HEADER>() else {
            let size = self.rest.len();
            self.rest = &[];
            return Some(Err(Error::Record { at, size }));
        };
        let size = usize::from(u16::from_be_bytes([h[2], h[3]]));
        if size < RECORD_HEADER || size > self.rest.len() {
            self.rest = &[];
            return Some(Err(Error::Record { at, size }));
        }
        let (rec, rest) = self.rest.split_at(size);
        self.rest = rest;
        self.at += size;
        Some(Ok((h[0], h[1], be32(&h[4..]), rec)))
    }
}

impl<'d> Iterator for Records<'d> {
    type Item = Result<Record<'d>, Error>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let at = self.at;
        let (kind, flag, id, rec) = match self.next_raw()? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        let short = |need: usize| {
            (rec.len() < need).then_some(Error::Record {
                at,
                size: rec.len(),
            })
        };
        let record = match kind {
            IS_CLOSE | IS_XFR => {
                if let Some(e) = short(RECORD_HEADER + 24) {
                    self.rest = &[];
                    return Some(Err(e));
                }
                let bytes = Bytes {
                    read: be64(&rec[8..]),
                    readv: be64(&rec[16..]),
                    write: be64(&rec[24..]),
                };
                if kind == IS_CLOSE {
                    Record::Close {
                        file: id,
                        bytes,
                        forced: flag & 0x01 != 0,
                    }
                } else {
                    Record::Xfr { file: id, bytes }
                }
            }
            IS_OPEN => {
                let has_lfn = flag & 0x01 != 0;
                let need = RECORD_HEADER + 8 + if has_lfn { 4 } else { 0 };
                if let Some(e) = short(need) {
                    self.rest = &[];
                    return Some(Err(e));
                }
                let (user, lfn) = if has_lfn {
                    (Some(be32(&rec[16..])), Some(until_nul(&rec[20..])))
                } else {
                    (None, None)
                };
                Record::Open {
                    file: id,
                    size: be64(&rec[8..]),
                    rw: flag & 0x02 != 0,
                    user,
                    lfn,
                }
            }
            IS_DISC => Record::Disc { user: id },
            other => Record::Unknown(other),
        };
        Some(Ok(record))
    }
}

#[inline]
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// A byte count: a negative one (C `long long`) is taken as 0.
#[inline]
fn be64(b: &[u8]) -> u64 {
    let v = i64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
    v.max(0) as u64
}

/// The parts of a `u` record's auth info this gateway uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Auth<'d> {
    /// `p=`: the authentication protocol (sss, unix, gsi, ztn, ...).
    pub protocol: &'d [u8],
    /// `n=`: the user's name as the protocol reports it.
    pub name: &'d [u8],
    /// `o=`: the organisation (the VO, from VOMS proxies and tokens).
    pub org: &'d [u8],
    /// `g=`: the groups, space-separated.
    pub groups: &'d [u8],
}

impl<'d> Auth<'d> {
    /// Reads `&p=..&n=..&h=..&o=..&r=..&g=..&m=..` (any order; unknown
    /// keys, such as 5.x's `&R=`, `&x=`, `&y=`, `&I=`, skipped).
    pub fn parse(info: &'d [u8]) -> Auth<'d> {
        let mut a = Auth::default();
        for field in info.split(|&b| b == b'&') {
            let Some((key, value)) = field.split_first_chunk::<2>() else {
                continue;
            };
            match key {
                b"p=" => a.protocol = value,
                b"n=" => a.name = value,
                b"o=" => a.org = value,
                b"g=" => a.groups = value,
                _ => {}
            }
        }
        a
    }

    /// The first of the groups.
    pub fn first_group(&self) -> &'d [u8] {
        self.groups
            .split(|&b| b == b' ')
            .find(|g| !g.is_empty())
            .unwrap_or_default()
    }
}

/// What tells a server apart from others of its address across its
/// restarts: a hash of the `port` and `inst` of its `=` packet's text.
pub fn server_ident(info: &[u8]) -> u64 {
    let srvinfo = match info.iter().position(|&b| b == b'\n') {
        Some(i) => &info[i + 1..],
        None => info,
    };
    let field = |key: &[u8]| {
        srvinfo
            .split(|&b| b == b'&')
            .find_map(|f| f.strip_prefix(key))
            .unwrap_or_default()
    };
    let mut text = Vec::with_capacity(64);
    text.extend_from_slice(field(b"port="));
    text.push(b'&');
    text.extend_from_slice(field(b"inst="));
    crate::fnv::hash(&text)
}

/// The parts of a `userid` (`prot/user.pid:sid@host`) this gateway uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UserId<'d> {
    /// The transfer protocol: `xroot`, `http`, ... (empty when the userid
    /// has no `/`).
    pub protocol: &'d [u8],
    /// The name the client gave (unverified).
    pub user: &'d [u8],
    /// The client's host name or address.
    pub host: &'d [u8],
}

impl<'d> UserId<'d> {
    pub fn parse(userid: &'d [u8]) -> UserId<'d> {
        let (protocol, rest) = match userid.iter().position(|&b| b == b'/') {
            Some(i) => (&userid[..i], &userid[i + 1..]),
            None => (&userid[..0], userid),
        };
        let (who, host) = match rest.iter().rposition(|&b| b == b'@') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, &rest[..0]),
        };
        // user.pid:sid: the user name ends at the last '.' before ':'.
        let who = match who.iter().rposition(|&b| b == b':') {
            Some(i) => &who[..i],
            None => who,
        };
        let user = match who.iter().rposition(|&b| b == b'.') {
            Some(i) => &who[..i],
            None => who,
        };
        UserId {
            protocol,
            user,
            host,
        }
    }

    /// The client's domain: its host name without the first label (an
    /// address, or a name of one label, is its own domain); `[::1]` stays.
    pub fn domain(&self) -> &'d [u8] {
        domain_of(self.host)
    }
}

/// A host name's domain: without its first label; an IPv4 or bracketed
/// IPv6 address, or a one-label name, as it is (an IPv4-mapped address,
/// `[::ffff:10.1.2.3]` as xrootd writes IPv4 clients, as its IPv4 one).
pub fn domain_of(host: &[u8]) -> &[u8] {
    if let Some(v4) = host
        .strip_prefix(b"[::ffff:")
        .and_then(|h| h.strip_suffix(b"]"))
    {
        return v4;
    }
    if host.first() == Some(&b'[') || host.iter().all(|b| b.is_ascii_digit() || *b == b'.') {
        return host;
    }
    match host.iter().position(|&b| b == b'.') {
        Some(i) if i + 1 < host.len() => &host[i + 1..],
        _ => host,
    }
}

#[cfg(test)]
pub(crate) mod tests;
