//! The exchange's messages: one definition of what a message holds
//! ([`Kind`]), written ([`Writer`]) and read a frame at a time
//! ([`Incoming`], [`Assembler`]); the format is in [`super`]'s doc.
//!
//! **Framed, bounded before parsing.** A message is a run of frames, each
//! a kind byte, a 4-byte big-endian length and at most [`MAX_FRAME`] bytes
//! of payload; a longer length ends the exchange before a byte of it is
//! read. Entries are assembled from their frames, checked and handed on
//! in batches of at most [`BATCH_BYTES`] of frames (merged as they come),
//! so what one exchange holds is a frame, the entry being assembled (at
//! most `max_metrics_per_source` counters) and one batch, whatever the
//! message's length; a message of more entries than `max_sources` is
//! cut there.
//!
//! **Entries are the state file's** ([`saved::schema::Entry`], JSON, one
//! typed definition): an entry's bytes are cut into an `E` frame and `+`
//! frames, assembled, then parsed and checked as one line of the state
//! file is ([`saved::read_entry`]): a bad entry loses only itself, a bad
//! counter or g-stream total only itself.
//!
//! **Adding a kind of information**: to an entry, an optional field of
//! [`saved::schema::Entry`] (an older peer ignores it); otherwise a new
//! frame kind: a variant of [`Kind`] with its byte, a method of [`Writer`]
//! that writes it, and an arm of [`Assembler::frame`] that checks it and
//! yields an [`Item`]. A gateway that does not know a kind skips its
//! frames, counted with the refused lines (a newer peer), and takes the
//! rest. A change an older peer would misread takes a new [`HEADER`]
//! version.

use std::io;
use std::net::IpAddr;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::engine::merge;
use crate::engine::pairing::{Entry, LastRecord};
use crate::engine::saved;

/// The first field of every message's header: the exchange and its version.
pub const HEADER: &str = "xrd2ganglia-peer 3";

/// What every version's header starts with.
const HEADER_NAME: &str = "xrd2ganglia-peer ";

/// The most bytes a frame's payload may have (a record of 64 KiB and its
/// line fit; an entry longer than this goes in several frames).
pub const MAX_FRAME: usize = 128 << 10;

/// Entries are handed on for merging once their frames reach this.
pub const BATCH_BYTES: usize = 512 << 10;

/// Longest datagram a record frame carries (a UDP datagram's most).
const MAX_RECORD: usize = 65_536;

/// The most bytes of one counter as written (`["` 16 hex digits `",`, two
/// numbers below 2^63, `,`, `],`): with `max_metrics_per_source`, an
/// entry's most.
const COUNTER_MAX: usize = 2 + 16 + 2 + 19 + 1 + 19 + 2;

/// What an entry holds besides its counters, at most (its address,
/// program, run and g-stream totals, as written).
const ENTRY_REST_MAX: usize = 1024;

/// A frame's kind: its first byte on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The message's first frame: `HEADER`, mode, standby claim, number
    /// (tab-separated text).
    Header,
    /// A source's entry, as the state file writes it (one
    /// [`saved::schema::Entry`], JSON, its g-stream totals in it): its
    /// first [`MAX_FRAME`] bytes.
    Entry,
    /// The next bytes of the entry just before.
    More,
    /// A source's last record (answers to a pull): `ip`, tab, age in ms,
    /// newline, then the datagram's bytes.
    Record,
    /// What the sender hears (right after the header, both ways, every
    /// exchange): ms since its newest server record (or `-`), tab, its
    /// own host in gmond ([`Heard`]).
    Heard,
    /// The message's end (no payload).
    End,
}

impl Kind {
    const ALL: [Kind; 6] = [
        Kind::Header,
        Kind::Heard,
        Kind::Entry,
        Kind::More,
        Kind::Record,
        Kind::End,
    ];

    pub fn byte(self) -> u8 {
        match self {
            Kind::Header => b'H',
            Kind::Heard => b'L',
            Kind::Entry => b'E',
            Kind::More => b'+',
            Kind::Record => b'R',
            Kind::End => b'.',
        }
    }

    fn of(byte: u8) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.byte() == byte)
    }
}

/// A message's mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Everything, and the last records (a starting gateway).
    Pull,
    /// Changed entries (or none: the asker is up).
    Push,
    /// Every entry.
    Full,
    /// What the answering side sends back.
    Answer,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Pull => "pull",
            Mode::Push => "push",
            Mode::Full => "full",
            Mode::Answer => "answer",
        }
    }

    fn parse(text: &str) -> Option<Mode> {
        [Mode::Pull, Mode::Push, Mode::Full, Mode::Answer]
            .into_iter()
            .find(|m| m.as_str() == text)
    }
}

/// A message's header, read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub mode: Mode,
    /// The sender's standby claim and the number it drew at its start.
    pub claim: (bool, u64),
}

/// A message, read whole (tests, measurements and the fuzz target; the
/// exchange reads a frame at a time, [`Incoming`]).
#[derive(Debug)]
pub struct Message {
    pub mode: Mode,
    pub claim: (bool, u64),
    pub entries: Vec<Entry>,
    pub records: Vec<LastRecord>,
    /// What the sender hears (its [`Kind::Heard`] frame), if it sent one.
    pub heard: Option<Heard>,
    pub refused: Refused,
}

/// What a gateway hears and what gmond shows of it (the [`Kind::Heard`]
/// frame, right after the header): how long ago it last took a server's
/// summary record (None: never since its start), and the name of its own
/// host in gmond (`xrd2ganglia@NAME`, whose TN a standby reads in gmond
/// for evidence that its packets arrive). One self-contained frame: one
/// that cannot be true is refused alone (counted with the refused lines)
/// and the rest of the message taken.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heard {
    pub newest: Option<Duration>,
    pub own_host: String,
}

/// The longest own host name a heard frame may carry.
const MAX_OWN_HOST: usize = 255;

/// A heard frame's two fields (age in ms or `-`, own host); None if they
/// cannot be true (an age over a day, a host that is not a gateway's own
/// host).
fn read_heard(fields: &[&str]) -> Option<Heard> {
    let [age, host] = fields else {
        return None;
    };
    let newest = match *age {
        "-" => None,
        ms => Some(Duration::from_millis(
            ms.parse::<u64>().ok().filter(|&ms| ms <= 86_400_000)?,
        )),
    };
    let name = host.strip_prefix(crate::daemon::self_metrics::OWN_HOST_PREFIX)?;
    let safe = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
    if name.is_empty() || host.len() > MAX_OWN_HOST || !name.chars().all(safe) {
        return None;
    }
    Some(Heard {
        newest,
        own_host: (*host).to_string(),
    })
}

/// What of a message was refused.
#[derive(Debug, Default)]
pub struct Refused {
    /// Lines refused (each of a refused entry counted), and frames of a
    /// kind this gateway does not know.
    pub lines: usize,
    /// The first few, with why.
    pub text: String,
}

impl Refused {
    fn note(&mut self, lines: usize, why: impl FnOnce() -> String) {
        self.lines += lines;
        if self.text.is_empty() {
            self.text = why();
        }
    }
}

/// Writes a message's frames.
pub struct Writer {
    out: Vec<u8>,
}

impl Writer {
    /// A message with this header (`header_text`: [`HEADER`], mode,
    /// standby, number, tab-separated; a newline at its end is dropped).
    pub fn new(header_text: &str) -> Writer {
        let mut w = Writer { out: Vec::new() };
        w.frame(Kind::Header, header_text.trim_end_matches('\n').as_bytes());
        w
    }

    fn frame(&mut self, kind: Kind, payload: &[u8]) {
        debug_assert!(payload.len() <= MAX_FRAME);
        self.out.push(kind.byte());
        self.out
            .extend_from_slice(&(payload.len() as u32).to_be_bytes());
        self.out.extend_from_slice(payload);
    }

    /// What this gateway hears ([`Kind::Heard`]: right after the header).
    pub fn heard(&mut self, h: &Heard) {
        let age = h
            .newest
            .map_or_else(|| "-".to_string(), |d| d.as_millis().to_string());
        let payload = format!("{age}\t{}", h.own_host);
        // An own host is a checked local name: a frame holds it whole.
        if payload.len() <= MAX_FRAME {
            self.frame(Kind::Heard, payload.as_bytes());
        }
    }

    /// A source's entry ([`saved::write_entry`], its g-stream totals in
    /// it) in as many frames as it needs.
    pub fn entry(&mut self, e: &Entry) {
        let mut json = Vec::new();
        saved::write_entry(
            &mut json,
            e.ip,
            &e.program,
            e.state.started,
            e.state.counters.iter().copied(),
            e.pfc.as_ref(),
        );
        json.pop();
        let mut chunks = json.chunks(MAX_FRAME);
        self.frame(Kind::Entry, chunks.next().unwrap_or_default());
        for more in chunks {
            self.frame(Kind::More, more);
        }
    }

    /// A source's last record (one longer than a datagram is left out).
    pub fn record(&mut self, r: &LastRecord) {
        if r.datagram.len() > MAX_RECORD {
            return;
        }
        let mut payload = format!("{}\t{}\n", r.ip, r.age.as_millis()).into_bytes();
        payload.extend_from_slice(&r.datagram);
        self.frame(Kind::Record, &payload);
    }

    /// The message's bytes, its end frame written.
    pub fn end(mut self) -> Vec<u8> {
        self.frame(Kind::End, &[]);
        self.out
    }
}

/// A message's bytes: header, entries, records (the oldest first: a
/// starting peer feeds them in that order), end (tests, measurements and
/// the fuzz target).
pub fn message(header: &str, entries: &[Entry], records: &[LastRecord]) -> Vec<u8> {
    finish(Writer::new(header), entries, records)
}

/// A message's bytes from `w` (its header, and what it hears, written):
/// entries, records (the oldest first), end.
pub(super) fn finish(mut w: Writer, entries: &[Entry], records: &[LastRecord]) -> Vec<u8> {
    for e in entries {
        w.entry(e);
    }
    let mut ordered: Vec<&LastRecord> = records.iter().collect();
    ordered.sort_by_key(|r| std::cmp::Reverse(r.age));
    for r in ordered {
        w.record(r);
    }
    w.end()
}

/// What a message's frames yield, in order.
#[derive(Debug)]
pub enum Item {
    /// Checked entries, to merge ([`BATCH_BYTES`] of frames at most).
    Entries(Vec<Entry>),
    /// What the sender hears.
    Heard(Heard),
    /// A source's last record.
    Record(LastRecord),
    /// The message's end.
    End,
}

/// Turns a message's frames (after its header) into checked entries and
/// records: every entry checked on its own, as the state file's
/// ([`saved::read_entry`], then [`merge::check`]); a bad one is refused,
/// counted and named, the others are taken. A frame that cannot be read
/// as its kind ends the message.
pub struct Assembler {
    max_counters: usize,
    max_entries: usize,
    limits: saved::Limits,
    /// The entry being assembled: its bytes, or None when refused
    /// already for its length (its further frames are skipped).
    pending: Option<Option<Vec<u8>>>,
    batch: Vec<Entry>,
    batch_bytes: usize,
    entries: usize,
    pub refused: Refused,
}

impl Assembler {
    /// At most `max_counters` counters an entry, `max_entries` entries a
    /// message; a start checked against `now_unix`.
    pub fn new(max_counters: usize, max_entries: usize, now_unix: u64) -> Assembler {
        Assembler {
            max_counters,
            max_entries,
            limits: saved::Limits { now_unix },
            pending: None,
            batch: Vec::new(),
            batch_bytes: 0,
            entries: 0,
            refused: Refused::default(),
        }
    }

    /// The most bytes an entry may take.
    fn entry_max(&self) -> usize {
        self.max_counters
            .saturating_mul(COUNTER_MAX)
            .saturating_add(ENTRY_REST_MAX)
    }

    /// Takes one frame (after the header); what it completes goes to `out`.
    pub fn frame(&mut self, kind: u8, payload: &[u8], out: &mut Vec<Item>) -> Result<(), String> {
        match Kind::of(kind) {
            Some(Kind::Entry) => {
                self.finish()?;
                self.entries += 1;
                if self.entries > self.max_entries {
                    return Err(format!(
                        "more than {} entries (max_sources)",
                        self.max_entries
                    ));
                }
                self.pending = Some(Some(payload.to_vec()));
                self.batch_bytes += payload.len();
            }
            Some(Kind::More) => {
                let max = self.entry_max();
                let Some(bytes) = &mut self.pending else {
                    return Err("counters under no entry".into());
                };
                if let Some(b) = bytes {
                    if b.len() + payload.len() > max {
                        let counted = counted(b) + brackets(payload);
                        self.refused.note(counted, || {
                            "an entry with more counters than max_metrics_per_source".into()
                        });
                        *bytes = None;
                    } else {
                        b.extend_from_slice(payload);
                        self.batch_bytes += payload.len();
                    }
                } else {
                    self.refused.lines += brackets(payload);
                }
            }
            Some(Kind::Record) => {
                self.finish()?;
                self.flush(out);
                out.push(Item::Record(read_record(payload)?));
            }
            Some(Kind::End) => {
                self.finish()?;
                self.flush(out);
                out.push(Item::End);
            }
            Some(Kind::Heard) => {
                let text = String::from_utf8_lossy(payload);
                let fields: Vec<&str> = text.split('\t').collect();
                match read_heard(&fields) {
                    Some(h) => out.push(Item::Heard(h)),
                    None => self.refused.note(1, || {
                        format!("a heard frame that cannot be true: {:?}", truncate(&text))
                    }),
                }
            }
            Some(Kind::Header) => return Err("a second header".into()),
            None => self.refused.note(1, || {
                format!("a frame of a kind this version does not know ({kind:#04x}), skipped")
            }),
        }
        if self.batch_bytes >= BATCH_BYTES {
            self.flush(out);
        }
        Ok(())
    }

    fn flush(&mut self, out: &mut Vec<Item>) {
        if !self.batch.is_empty() {
            out.push(Item::Entries(std::mem::take(&mut self.batch)));
        }
        self.batch_bytes = 0;
    }

    /// The entry assembled so far, parsed and checked as the state
    /// file's ([`saved::read_entry`], then [`merge::check`]): into the
    /// batch, or refused (a counter or its totals that fail, alone).
    fn finish(&mut self) -> Result<(), String> {
        let Some(Some(bytes)) = self.pending.take() else {
            return Ok(());
        };
        let checked = match saved::read_entry(&bytes, self.limits) {
            Ok(c) => c,
            Err(why) => {
                self.refused.note(counted(&bytes), || why.to_string());
                return Ok(());
            }
        };
        let e = checked.entry;
        if let Some(why) = checked.counters_skipped.first() {
            self.refused.note(checked.counters_failed, || {
                format!("{} {}: {why}", e.ip, e.program)
            });
        }
        let pfc = match checked.pfc {
            Some(Err(why)) => {
                self.refused.note(1, || {
                    format!(
                        "{} {}: g-stream totals that cannot be true: {why}",
                        e.ip, e.program
                    )
                });
                None
            }
            Some(Ok(p)) => Some(p),
            None => None,
        };
        if let Err(why) = merge::check(&e.source, self.max_counters) {
            self.refused.note(1 + e.source.counters.len(), || {
                format!("{} {}: {why}", e.ip, e.program)
            });
            return Ok(());
        }
        self.batch.push(Entry {
            ip: e.ip,
            program: e.program,
            state: e.source,
            pfc,
        });
        Ok(())
    }
}

/// What a refused entry's bytes count for (`peer_refused_entries`, as
/// version 1 counted its lines): the entry and each counter in them (a
/// counter opens a bracket; the run and the counters' list open one
/// each), without parsing them.
fn counted(bytes: &[u8]) -> usize {
    1 + brackets(bytes).saturating_sub(2)
}

/// The brackets opened in `bytes`: the counters in the next bytes of an
/// entry.
fn brackets(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'[').count()
}

/// A record frame's payload.
fn read_record(payload: &[u8]) -> Result<LastRecord, String> {
    let bad = || "a record frame that cannot be read".to_string();
    let end = payload.iter().position(|&b| b == b'\n').ok_or_else(bad)?;
    let line = std::str::from_utf8(&payload[..end]).map_err(|_| bad())?;
    let (ip, age) = line.split_once('\t').ok_or_else(bad)?;
    let (Ok(ip), Ok(age)) = (ip.parse::<IpAddr>(), age.parse::<u64>()) else {
        return Err(bad());
    };
    let datagram = payload[end + 1..].to_vec();
    if datagram.len() > MAX_RECORD {
        return Err(bad());
    }
    Ok(LastRecord {
        ip,
        age: Duration::from_millis(age.min(86_400_000)),
        datagram,
    })
}

/// A message's header frame.
fn read_header(kind: u8, payload: &[u8]) -> Result<Header, String> {
    if kind != Kind::Header.byte() {
        return Err("not the peer exchange (no header frame)".into());
    }
    let header = std::str::from_utf8(payload).map_err(|_| "a header that is not text")?;
    let fields: Vec<&str> = header.split('\t').collect();
    if let Some(version) = fields[0].strip_prefix(HEADER_NAME)
        && fields[0] != HEADER
    {
        return Err(other_version(version));
    }
    let [HEADER, mode, standby, drawn] = fields.as_slice() else {
        return Err(format!(
            "not this version of the peer exchange (header {:?}, this is {HEADER:?})",
            truncate(header)
        ));
    };
    let mode = Mode::parse(mode).ok_or_else(|| format!("unknown mode {:?}", truncate(mode)))?;
    let claim = (
        *standby == "1",
        drawn.parse().map_err(|_| "a header without its number")?,
    );
    Ok(Header { mode, claim })
}

/// What starts the error of a peer speaking another version
/// ([`is_other_version`]).
const OTHER_VERSION: &str = "a peer speaking version ";

/// Why a peer of another version is refused.
fn other_version(version: &str) -> String {
    format!(
        "{OTHER_VERSION}{} of the exchange: this is {HEADER:?} (entries in the typed schema); run one version on both (while a rolling upgrade has them differ, the link is cut)",
        truncate(version)
    )
}

/// Whether an exchange failed for a peer of another version (the
/// answering side then answers with its own header, so that the peer's
/// log names this one's version).
pub fn is_other_version(error: &str) -> bool {
    error.starts_with(OTHER_VERSION)
}

fn truncate(line: &str) -> &str {
    let mut end = line.len().min(80);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

/// A frame's kind and length, checked against [`MAX_FRAME`] before its
/// payload is read.
fn frame_head(head: [u8; 5]) -> Result<(u8, usize), String> {
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if &head == b"xrd2g" {
        return Err(other_version("1 (text)"));
    }
    if len > MAX_FRAME {
        return Err(format!(
            "a frame of {len} bytes, more than the {MAX_FRAME} a frame may have"
        ));
    }
    Ok((head[0], len))
}

/// A message read from a stream a frame at a time: at most [`MAX_FRAME`]
/// bytes of it held, and what its entries make ([`Assembler`]).
pub struct Incoming<R> {
    stream: R,
    frame: Vec<u8>,
    pub assembler: Assembler,
    items: std::collections::VecDeque<Item>,
    ended: bool,
}

impl<R: AsyncRead + Unpin> Incoming<R> {
    pub fn new(stream: R, assembler: Assembler) -> Incoming<R> {
        Incoming {
            stream,
            frame: Vec::new(),
            assembler,
            items: Default::default(),
            ended: false,
        }
    }

    async fn next_frame(&mut self) -> Result<u8, String> {
        let mut head = [0u8; 5];
        self.stream
            .read_exact(&mut head)
            .await
            .map_err(|e| closed(&e))?;
        let (kind, len) = frame_head(head)?;
        self.frame.resize(len, 0);
        self.stream
            .read_exact(&mut self.frame)
            .await
            .map_err(|e| closed(&e))?;
        Ok(kind)
    }

    /// The message's header (its first frame).
    pub async fn header(&mut self) -> Result<Header, String> {
        let kind = self.next_frame().await.map_err(|e| {
            if e == CLOSED {
                // What a gateway of another version does with this one's
                // header: its own log says which.
                "closed before its header (a peer of another version of the exchange closes so; its log says which)".to_string()
            } else {
                e
            }
        })?;
        read_header(kind, &self.frame)
    }

    /// What comes next; [`Item::End`] once, at the message's end.
    pub async fn next(&mut self) -> Result<Item, String> {
        loop {
            if let Some(item) = self.items.pop_front() {
                if matches!(item, Item::End) {
                    self.ended = true;
                }
                return Ok(item);
            }
            if self.ended {
                return Ok(Item::End);
            }
            let kind = self.next_frame().await?;
            let mut out = Vec::new();
            self.assembler.frame(kind, &self.frame, &mut out)?;
            self.items.extend(out);
            // A frame's room is not kept past the most it needs.
            self.frame.shrink_to(MAX_FRAME);
        }
    }
}

const CLOSED: &str = "closed before the end of its message";

fn closed(e: &io::Error) -> String {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        CLOSED.into()
    } else {
        e.to_string()
    }
}

/// Reads a whole message from its bytes, a frame at a time as
/// [`Incoming`] does (tests, measurements and the fuzz target).
pub fn parse(bytes: &[u8], max_counters: usize, now_unix: u64) -> Result<Message, String> {
    let mut at = 0;
    let mut next = || -> Result<(u8, &[u8]), String> {
        let head: [u8; 5] = bytes
            .get(at..at + 5)
            .and_then(|h| h.try_into().ok())
            .ok_or("closed before the end of its message")?;
        let (kind, len) = frame_head(head)?;
        let payload = bytes
            .get(at + 5..at + 5 + len)
            .ok_or("closed before the end of its message")?;
        at += 5 + len;
        Ok((kind, payload))
    };
    let (kind, payload) = next()?;
    let header = read_header(kind, payload)?;
    let mut asm = Assembler::new(max_counters, usize::MAX, now_unix);
    let (mut entries, mut records, mut heard) = (Vec::new(), Vec::new(), None);
    loop {
        let (kind, payload) = next()?;
        let mut out = Vec::new();
        asm.frame(kind, payload, &mut out)?;
        for item in out {
            match item {
                Item::Entries(e) => entries.extend(e),
                Item::Record(r) => records.push(r),
                Item::Heard(h) => heard = Some(h),
                Item::End => {
                    return Ok(Message {
                        mode: header.mode,
                        claim: header.claim,
                        entries,
                        records,
                        heard,
                        refused: asm.refused,
                    });
                }
            }
        }
    }
}

/// A message of the exchange as a peer frames it, written by hand as a
/// hostile peer would (for tests): a header frame, then `frames` (kind,
/// payload).
#[cfg(test)]
pub(crate) fn framed(header: &str, frames: &[(u8, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut put = |kind: u8, payload: &[u8]| {
        out.push(kind);
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        out.extend_from_slice(payload);
    };
    put(b'H', header.as_bytes());
    for (kind, payload) in frames {
        put(*kind, payload);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000;

    use super::framed as frames;

    /// An entry as the schema writes it: `start` and `counters` as JSON.
    fn json(ip: &str, start: &str, counters: &str) -> String {
        format!(r#"{{"ip":"{ip}","program":"xrootd","start":{start},"counters":[{counters}]}}"#)
    }

    /// Each bad line is refused on its own, as in the state file; the good
    /// entries of the same message are taken; a record is read whole.
    #[test]
    fn what_no_xrootd_sends_is_refused_line_by_line() {
        let future = json(
            "10.0.0.1",
            &format!("[{},1]", NOW + 86_400 + 1),
            r#"["0000000000000001",1,5]"#,
        );
        let second = json(
            "10.0.0.2",
            "[1700000000,77]",
            r#"["0000000000000001",18446744073709551615,0],["0000000000000002",9223372036854775808,0],["0000000000000003",7,9]"#,
        );
        // The second entry cut in two frames (an entry and its more).
        let (first_part, more) = second.split_at(60);
        let third = json(
            "10.0.0.3",
            "[1700000000,77]",
            r#"["0000000000000001",1,1],["0000000000000002",1,1],["0000000000000003",1,1]"#,
        );
        let text = frames(
            &format!("{HEADER}\tpush\t1\t42"),
            &[
                (b'E', future.as_bytes()),
                (b'E', first_part.as_bytes()),
                (b'+', more.as_bytes()),
                (b'E', third.as_bytes()),
                (b'R', b"10.0.0.2\t1500\n<a\n>"),
                (b'.', b""),
            ],
        );
        let msg = parse(&text, 2, NOW).unwrap();
        assert_eq!((msg.mode, msg.claim), (Mode::Push, (true, 42)));
        // 10.0.0.1: a start more than a day ahead (its C line with it);
        // 10.0.0.2: two readings of 2^63 or more, its third counter kept;
        // 10.0.0.3: three counters where two may be.
        assert_eq!(msg.entries.len(), 1);
        let e = &msg.entries[0];
        assert_eq!(e.ip.to_string(), "10.0.0.2");
        assert_eq!(e.state.started, Some((1_700_000_000, 77)));
        assert_eq!(e.state.counters, [(3, 7, 9)]);
        assert_eq!(msg.refused.lines, 2 + 2 + 4, "{}", msg.refused.text);
        assert!(
            msg.refused.text.contains("in the future"),
            "{}",
            msg.refused.text
        );
        assert_eq!(msg.records.len(), 1);
        assert_eq!(msg.records[0].datagram, b"<a\n>");
        assert_eq!(msg.records[0].age, Duration::from_millis(1500));
    }

    /// A record whose bytes hold an end frame's bytes does not end the
    /// message: it is read by its length.
    #[test]
    fn a_message_ends_at_its_own_end_frame() {
        let whole = frames(
            "xrd2ganglia-peer 3\tanswer\t0\t1",
            &[(b'R', b"10.0.0.1\t0\na\n.\x00\x00\x00\x00"), (b'.', b"")],
        );
        assert!(parse(&whole[..whole.len() - 5], 10, NOW).is_err());
        let msg = parse(&whole, 10, NOW).unwrap();
        assert_eq!(msg.records[0].datagram, b"a\n.\x00\x00\x00\x00");
    }

    /// The heard frame: what the sender hears, read; one that cannot be
    /// true is refused alone (counted), the rest of the message taken.
    #[test]
    fn the_heard_frame_says_what_the_sender_hears() {
        let heard = Heard {
            newest: Some(Duration::from_millis(1234)),
            own_host: "xrd2ganglia@gw1".into(),
        };
        let entry = Entry {
            ip: "10.0.0.1".parse().unwrap(),
            program: "xrootd".into(),
            state: saved::SavedSource {
                started: Some((1_700_000_000, 1)),
                counters: vec![(1, 1, 5)],
            },
            pfc: None,
        };
        let mut w = Writer::new(&format!("{HEADER}\tpush\t0\t7"));
        w.heard(&heard);
        let bytes = finish(w, std::slice::from_ref(&entry), &[]);
        // Right after the header: kind 'L', 4-byte length, the two fields.
        let header_len = 5 + format!("{HEADER}\tpush\t0\t7").len();
        assert_eq!(
            &bytes[header_len..header_len + 5 + 20],
            b"L\x00\x00\x00\x141234\txrd2ganglia@gw1"
        );
        let msg = parse(&bytes, 10, NOW).unwrap();
        assert_eq!(msg.heard, Some(heard));
        assert_eq!((msg.entries.len(), msg.refused.lines), (1, 0));
        let none = parse(
            &frames(
                "xrd2ganglia-peer 3\tpush\t0\t7",
                &[(b'L', b"-\txrd2ganglia@b"), (b'.', b"")],
            ),
            10,
            NOW,
        );
        assert_eq!(none.unwrap().heard.unwrap().newest, None);
        for bad in [
            "12\t10.0.0.1",
            "12\txrd2ganglia@",
            "12\txrd2ganglia@a\"b",
            "soon\txrd2ganglia@a",
            "86400001\txrd2ganglia@a",
            "12",
            "12\txrd2ganglia@a\tmore",
        ] {
            let entry = json("10.0.0.1", "[1700000000,1]", r#"["0000000000000001",1,5]"#);
            let text = frames(
                &format!("{HEADER}\tpush\t0\t7"),
                &[
                    (b'L', bad.as_bytes()),
                    (b'E', entry.as_bytes()),
                    (b'.', b""),
                ],
            );
            let msg = parse(&text, 10, NOW).unwrap();
            assert_eq!(msg.heard, None, "{bad}");
            assert_eq!((msg.entries.len(), msg.refused.lines), (1, 1), "{bad}");
            assert!(msg.refused.text.contains("heard"), "{}", msg.refused.text);
        }
    }

    #[test]
    fn a_message_that_is_not_the_exchange_fails_whole() {
        let header = "xrd2ganglia-peer 3\tpush\t0\t1";
        let entry = json("10.0.0.1", "[1,1]", "");
        for bad in [
            b"GET / HTTP/1.0\r\n\r\n".to_vec(),
            // Version 1 (text).
            b"xrd2ganglia-peer 1\tpush\t0\t1\n.\n".to_vec(),
            // Version 2 (frames of S and C lines).
            frames("xrd2ganglia-peer 2\tpush\t0\t1", &[(b'.', b"")]),
            // No end.
            frames(header, &[(b'E', entry.as_bytes())]),
            // A record frame that is no record.
            frames(header, &[(b'R', b"short"), (b'.', b"")]),
            frames("xrd2ganglia-peer 3\tshout\t0\t1", &[(b'.', b"")]),
            // Counters under no entry.
            frames(
                header,
                &[(b'+', br#"["0000000000000001",1,1]"#), (b'.', b"")],
            ),
        ] {
            assert!(
                parse(&bad, 10, NOW).is_err(),
                "{:?}",
                String::from_utf8_lossy(&bad)
            );
        }
        // A peer of another version: refused with why, and which.
        for (old, version) in [
            (b"xrd2ganglia-peer 1\tpush\t0\t1\n.\n".to_vec(), "1 (text)"),
            (
                frames("xrd2ganglia-peer 2\tpush\t0\t1", &[(b'.', b"")]),
                "2",
            ),
        ] {
            let e = parse(&old, 10, NOW).unwrap_err();
            assert!(is_other_version(&e), "{e}");
            assert_eq!(
                e,
                format!(
                    "a peer speaking version {version} of the exchange: this is \"xrd2ganglia-peer 3\" (entries in the typed schema); run one version on both (while a rolling upgrade has them differ, the link is cut)"
                )
            );
        }
        // Its end comes first; what follows is not read.
        let mut after = frames(header, &[(b'.', b"")]);
        after.extend_from_slice(b"Q");
        assert!(parse(&after, 10, NOW).is_ok());
    }

    /// A frame longer than [`MAX_FRAME`] ends the message at its 5 bytes,
    /// before any of it is read; a frame of a kind this version does not
    /// know loses only itself.
    #[test]
    fn a_frame_is_bounded_before_it_is_read_and_an_unknown_kind_skipped() {
        let mut huge = frames("xrd2ganglia-peer 3\tpush\t0\t1", &[]);
        huge.push(b'E');
        huge.extend_from_slice(&(MAX_FRAME as u32 + 1).to_be_bytes());
        let err = parse(&huge, 10, NOW).unwrap_err();
        assert!(err.contains("more than the 131072"), "{err}");
        let msg = parse(
            &frames(
                "xrd2ganglia-peer 3\tpush\t0\t1",
                &[
                    (b'F', b"10.0.0.1\t3"),
                    (b'E', json("10.0.0.1", "[1700000000,7]", "").as_bytes()),
                    (b'.', b""),
                ],
            ),
            10,
            NOW,
        )
        .unwrap();
        assert_eq!(msg.entries.len(), 1);
        assert_eq!(msg.refused.lines, 1);
        assert!(msg.refused.text.contains("0x46"), "{}", msg.refused.text);
    }

    /// An entry of more counters than fit a frame goes in several, and is
    /// read back whole; one with more than a source may have is refused
    /// whole however it is cut.
    #[test]
    fn an_entry_longer_than_a_frame_is_written_in_several() {
        let counters: Vec<(u64, u64, u64)> = (1..=5000).map(|k| (k, k * 7, k * 11)).collect();
        let e = Entry {
            ip: "10.0.0.9".parse().unwrap(),
            program: "xrootd".into(),
            state: saved::SavedSource {
                started: Some((1_700_000_000, 42)),
                counters,
            },
            pfc: None,
        };
        let bytes = message(
            "xrd2ganglia-peer 3\tfull\t0\t1",
            std::slice::from_ref(&e),
            &[],
        );
        // Its frames: an entry, then more (5 bytes each and at most
        // MAX_FRAME of the entry), then the end.
        let kinds: Vec<u8> = {
            let mut at = 5 + u32::from_be_bytes(bytes[1..5].try_into().unwrap()) as usize;
            let mut kinds = Vec::new();
            while at < bytes.len() {
                let len = u32::from_be_bytes(bytes[at + 1..at + 5].try_into().unwrap()) as usize;
                assert!(len <= MAX_FRAME);
                kinds.push(bytes[at]);
                at += 5 + len;
            }
            kinds
        };
        assert_eq!(kinds, b"E+.");
        let msg = parse(&bytes, 5000, NOW).unwrap();
        assert_eq!(msg.entries, [e]);
        let msg = parse(&bytes, 4999, NOW).unwrap();
        assert!(msg.entries.is_empty());
        assert_eq!(msg.refused.lines, 5001, "{}", msg.refused.text);
    }
}

/// What the exchange costs at 1,000 servers (`cargo test --release --lib
/// -- --ignored the_exchange_at_1000_servers --nocapture`): bytes and CPU
/// of a full exchange, a start-up pull and a push, with real records.
#[cfg(test)]
mod cost {
    use super::*;
    use std::net::SocketAddr;
    use std::time::{Instant, SystemTime, UNIX_EPOCH};

    fn unix_now() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }
    use crate::engine::tests::Harness;

    const SERVERS: u32 = 1000;

    /// An engine that has heard `SERVERS` data servers (a real record,
    /// `tests/data/records/ds_loaded.xml`), each through a restart, so
    /// that every counter has a reading and an offset.
    fn heard() -> Harness {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/records/ds_loaded.xml");
        let rec = std::fs::read_to_string(path).unwrap();
        let restarted = rec.replacen(" pid=\"", " pid=\"9", 1);
        let mut r = Harness::new("max_sources = 2000\nmetadata_requests = [\"127.0.0.1:9\"]\n");
        for (secs, text) in [(0, &rec), (15, &restarted)] {
            for i in 0..SERVERS {
                let from = SocketAddr::from(([10, 1, (i >> 8) as u8, i as u8], 1094));
                let at = r.at(secs);
                r.feed_at(text.as_bytes(), from, at);
            }
        }
        r
    }

    #[test]
    #[ignore = "a measurement: run it on purpose, in release"]
    fn the_exchange_at_1000_servers() {
        let mut gw1 = heard();
        let mut gw2 = heard();
        let now = gw1.at(20);
        let mut entries = Vec::new();
        gw1.engine.peer_entries(false, &mut entries);
        let mut records = Vec::new();
        gw1.engine.last_records(now, &mut records);
        let counters: usize = entries.iter().map(|e| e.state.counters.len()).sum();
        let header = "xrd2ganglia-peer 3\tfull\t0\t1";
        let rounds = 20;
        let t = Instant::now();
        let mut full = Vec::new();
        for _ in 0..rounds {
            full = message(header, &entries, &[]);
        }
        let build = t.elapsed() / rounds;
        let t = Instant::now();
        for _ in 0..rounds {
            let msg = parse(&full, 5000, unix_now()).unwrap();
            assert_eq!(msg.entries.len(), entries.len());
            for e in &msg.entries {
                assert!(gw2.engine.merge_peer(e, now, unix_now()).is_some());
            }
        }
        let take = t.elapsed() / rounds;
        let pull = message(header, &entries, &records);
        let t = Instant::now();
        let msg = parse(&pull, 5000, unix_now()).unwrap();
        let read_pull = t.elapsed();
        assert_eq!(msg.records.len(), SERVERS as usize);
        let one = message(header, &entries[..1], &[]);
        println!(
            "{SERVERS} servers ({} sources, {counters} counters): full exchange {} bytes each way, \
             built in {:.1} ms, read and merged in {:.1} ms; start-up pull (with last records) \
             {} bytes, read in {:.1} ms; a push of one changed source {} bytes",
            entries.len(),
            full.len(),
            build.as_secs_f64() * 1e3,
            take.as_secs_f64() * 1e3,
            pull.len(),
            read_pull.as_secs_f64() * 1e3,
            one.len()
        );
    }
}
