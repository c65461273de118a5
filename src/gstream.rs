//! XCache's own statistics: the pfc g-stream, one datagram at a time.
//!
//! XCache's disk cache (pfc) leaves the hit, miss and byte counters of the
//! summary record at 0 (see the catalog's `cache` entries); it reports
//! each closed file instead, in its g-stream, as a JSON `file_close`
//! record with the bytes served from the cache (`b_hit`), fetched from the
//! origin (`b_miss`) and passed through (`b_bypass`). xrootd sends it where
//! either directive says, here the gateway's port:
//!
//! * `xrootd.mongstream pfc use flush 60s send json insthdr HOST:PORT`: a
//!   JSON header line (`{"code":"g",...,"stod":N,...,"gs":{"type":"C",...}}`)
//!   then the records;
//! * `xrootd.monitor ... dest pfc HOST:PORT`: xrootd's binary monitoring
//!   header (code `g`, sequence, length, `stod`; then the g-stream's first
//!   and last record times and the provider id, whose top byte `C` is pfc),
//!   then the records. That route also sends `=` (server identification)
//!   packets, which carry nothing for Ganglia.
//!
//! Either way the records are separated by newlines, the last one ended
//! by a NUL, and `stod` is the xrootd's start time: the `tos` of its
//! summary records, by which the gateway finds the server they belong to.
//! Measured on xrootd 5.5.3 (`tests/data/gstream`). Pure: [`read`] only
//! classifies and adds up.

use std::fmt;

use serde::Deserialize;

/// What one datagram is, seen from the g-stream's side.
#[derive(Debug, PartialEq, Eq)]
pub enum Datagram {
    /// Not xrootd monitoring data: a summary record, or something to let
    /// the summary parser reject.
    NotMonitoring,
    /// pfc's g-stream: what its records add up to, and the instance name
    /// (`-n`) its JSON header gives (`insthdr`), if it does.
    Pfc(PfcTotals, Option<String>),
    /// Other xrootd monitoring data (another g-stream, the binary streams'
    /// `=`, `d`, `f`... packets): nothing the gateway sends to Ganglia.
    Other(Kind),
}

/// Other monitoring data, by what identifies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A binary monitoring packet with this code.
    Packet(u8),
    /// A g-stream of this provider (`C` is pfc).
    Gstream(u8),
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kind::Packet(c) => write!(f, "monitoring packet {:?}", char::from(*c)),
            Kind::Gstream(c) => write!(f, "g-stream of provider {:?}", char::from(*c)),
        }
    }
}

/// The `file_close` records of one pfc g-stream datagram, added up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PfcTotals {
    /// The xrootd's start time (its summary's `tos`).
    pub stod: u32,
    /// `file_close` records.
    pub files: u64,
    pub bytes_hit: u64,
    pub bytes_miss: u64,
    pub bytes_bypass: u64,
    /// Records that were not JSON objects with those numbers: left out.
    pub bad_records: u32,
}

impl PfcTotals {
    /// Adds `more` (of the same xrootd run) to these totals.
    pub fn add(&mut self, more: &PfcTotals) {
        self.files = self.files.saturating_add(more.files);
        self.bytes_hit = self.bytes_hit.saturating_add(more.bytes_hit);
        self.bytes_miss = self.bytes_miss.saturating_add(more.bytes_miss);
        self.bytes_bypass = self.bytes_bypass.saturating_add(more.bytes_bypass);
    }
}

/// A pfc g-stream datagram that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// Shorter than the binary g-stream header (24 bytes).
    Truncated(usize),
    /// The JSON header line is not `{"code":"g",...}` with a `stod` and a
    /// `gs.type`.
    BadHeader,
}

impl Error {
    /// For the rate limiter: one log line per reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Truncated(_) => "g-stream truncated",
            Error::BadHeader => "g-stream header",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated(n) => write!(
                f,
                "g-stream packet of {n} bytes, shorter than its 24-byte header"
            ),
            Error::BadHeader => f.write_str(
                "g-stream JSON header is not {\"code\":\"g\",...} with stod and gs.type",
            ),
        }
    }
}

/// The binary monitoring header's codes (XrdXrootdMonData.hh).
const PACKET_CODES: &[u8] = b"=dfgiprtux";
/// The binary g-stream header: monitoring header (8) + tBeg, tEnd (8) + sID (8).
const GSTREAM_HEADER: usize = 24;
/// The g-stream provider id of pfc (XROOTD_MON_GSPFC).
const PFC: u8 = b'C';

/// What `datagram` is; for pfc's g-stream, its records added up.
pub fn read(datagram: &[u8]) -> Result<Datagram, Error> {
    if let Some(body) = json_stream(datagram) {
        return read_json(body);
    }
    // Binary: a known code and the datagram's own length in `plen`.
    let Some(&code) = datagram.first() else {
        return Ok(Datagram::NotMonitoring);
    };
    if datagram.len() < 8
        || !PACKET_CODES.contains(&code)
        || usize::from(u16::from_be_bytes([datagram[2], datagram[3]])) != datagram.len()
    {
        return Ok(Datagram::NotMonitoring);
    }
    if code != b'g' {
        return Ok(Datagram::Other(Kind::Packet(code)));
    }
    if datagram.len() < GSTREAM_HEADER {
        return Err(Error::Truncated(datagram.len()));
    }
    if datagram[16] != PFC {
        return Ok(Datagram::Other(Kind::Gstream(datagram[16])));
    }
    let stod = u32::from_be_bytes([datagram[4], datagram[5], datagram[6], datagram[7]]);
    Ok(Datagram::Pfc(
        add_up(stod, &datagram[GSTREAM_HEADER..]),
        None,
    ))
}

/// The datagram from its first non-blank byte, if it starts like JSON
/// monitoring data (`send json`: `{"code":"g",...` for a g-stream, `{"code":"=",...`
/// for the server identification sent at start unless `noident`).
fn json_stream(datagram: &[u8]) -> Option<&[u8]> {
    let start = datagram.iter().position(|b| !b.is_ascii_whitespace())?;
    let body = &datagram[start..];
    body.starts_with(br#"{"code":""#).then_some(body)
}

#[derive(Deserialize)]
struct JsonHeader {
    code: String,
    stod: u32,
    gs: JsonGs,
    #[serde(default)]
    src: Option<JsonSrc>,
}

#[derive(Deserialize)]
struct JsonSrc {
    #[serde(default)]
    inst: Option<String>,
}

#[derive(Deserialize)]
struct JsonGs {
    #[serde(rename = "type")]
    kind: String,
}

fn read_json(body: &[u8]) -> Result<Datagram, Error> {
    let code = body[br#"{"code":""#.len()..].first().copied().unwrap_or(0);
    if code != b'g' {
        return Ok(Datagram::Other(Kind::Packet(code)));
    }
    let end = body.iter().position(|&b| b == b'\n').unwrap_or(body.len());
    let header: JsonHeader =
        serde_json::from_slice(trim(&body[..end])).map_err(|_| Error::BadHeader)?;
    let provider = match header.gs.kind.as_bytes() {
        [p] if header.code == "g" => *p,
        _ => return Err(Error::BadHeader),
    };
    if provider != PFC {
        return Ok(Datagram::Other(Kind::Gstream(provider)));
    }
    let inst = header.src.and_then(|s| s.inst);
    Ok(Datagram::Pfc(add_up(header.stod, &body[end..]), inst))
}

#[derive(Deserialize)]
struct Record {
    event: String,
    #[serde(default)]
    b_hit: u64,
    #[serde(default)]
    b_miss: u64,
    #[serde(default)]
    b_bypass: u64,
}

/// The `file_close` records of `records` (newline-separated, the last
/// ended by a NUL), added up. Other events are not counted.
fn add_up(stod: u32, records: &[u8]) -> PfcTotals {
    let mut closes = PfcTotals {
        stod,
        ..PfcTotals::default()
    };
    for line in records.split(|&b| b == b'\n') {
        let line = trim(line);
        if line.is_empty() {
            continue;
        }
        match serde_json::from_slice::<Record>(line) {
            Ok(r) if r.event == "file_close" => {
                closes.files += 1;
                closes.bytes_hit = closes.bytes_hit.saturating_add(r.b_hit);
                closes.bytes_miss = closes.bytes_miss.saturating_add(r.b_miss);
                closes.bytes_bypass = closes.bytes_bypass.saturating_add(r.b_bypass);
            }
            Ok(_) => {}
            Err(_) => closes.bad_records += 1,
        }
    }
    closes
}

/// Without surrounding blanks and the NUL that ends the last record.
fn trim(line: &[u8]) -> &[u8] {
    let end = line
        .iter()
        .rposition(|&b| b != 0 && !b.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    let start = line[..end]
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(end);
    &line[start..end]
}

#[cfg(test)]
mod tests;
