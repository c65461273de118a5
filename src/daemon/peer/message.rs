//! The exchange's messages: what a peer sends, written and read
//! (the format is in [`super`]'s doc), and where one ends on the wire.

use std::fmt::Write as _;
use std::io;
use std::net::IpAddr;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

use crate::engine::merge;
use crate::engine::pairing::{Entry, LastRecord};
use crate::engine::saved;
use crate::gstream::PfcTotals;

/// The first field of every message's header.
pub(super) const HEADER: &str = "xrd2ganglia-peer 1";

/// A message, read.
#[derive(Debug, Default)]
pub struct Message {
    pub mode: String,
    pub claim: (bool, u64),
    pub entries: Vec<Entry>,
    pub records: Vec<LastRecord>,
    /// What the sender hears (its `H` line), if it sent one.
    pub heard: Option<Heard>,
    /// Lines and entries refused: how many, and what the first were.
    pub refused: Refused,
}

/// What a gateway hears and what gmond shows of it (the `H` line, right
/// after the header): how long ago it last took a server's summary record
/// (None: never since its start), and the name of its own host in gmond
/// (`xrd2ganglia@NAME`, whose TN a standby reads in gmond for evidence that
/// its packets arrive). One self-contained line: a reader that does not
/// know it refuses it as one bad line and takes the rest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heard {
    pub newest: Option<Duration>,
    pub own_host: String,
}

/// The longest own host name an `H` line may carry.
const MAX_OWN_HOST: usize = 255;

/// An `H` line (with its newline).
pub(super) fn heard_line(h: &Heard) -> String {
    let age = h
        .newest
        .map_or_else(|| "-".to_string(), |d| d.as_millis().to_string());
    format!("H\t{age}\t{}\n", h.own_host)
}

/// An `H` line's fields after the `H`; None if they cannot be true (an age
/// over a day, a host that is not a gateway's own host).
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
    /// Lines refused (each of a refused entry counted).
    pub lines: usize,
    /// The first few, with why.
    pub text: String,
}

/// Writes entries as the state file does, then their g-stream totals
/// (`P` lines, which the state file does not keep).
fn write_entries(out: &mut String, entries: &[Entry]) {
    for e in entries {
        saved::write_source(out, e.ip, &e.program, e.state.started);
        for &(key, raw, off) in &e.state.counters {
            saved::write_counter(out, key, raw, off);
        }
    }
    for e in entries {
        if let Some(p) = &e.pfc {
            let _ = writeln!(
                out,
                "P\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                e.ip, e.program, p.stod, p.files, p.bytes_hit, p.bytes_miss, p.bytes_bypass
            );
        }
    }
}

/// A `P` line's fields after the `P`: whose totals, and the totals; None
/// if they cannot be true (a start more than a day ahead, a sum of 2^63 or
/// more).
fn read_pfc<'a>(fields: &[&'a str], now_unix: u64) -> Option<(IpAddr, &'a str, PfcTotals)> {
    let [ip, program, stod, files, hit, miss, bypass] = fields else {
        return None;
    };
    let number = |t: &str| t.parse::<u64>().ok().filter(|&n| n < saved::MAX_COUNTER);
    let stod = stod
        .parse::<u32>()
        .ok()
        .filter(|&t| u64::from(t) <= now_unix.saturating_add(saved::START_SLACK))?;
    let totals = PfcTotals {
        stod,
        files: number(files)?,
        bytes_hit: number(hit)?,
        bytes_miss: number(miss)?,
        bytes_bypass: number(bypass)?,
        bad_records: 0,
    };
    Some((ip.parse().ok()?, program, totals))
}

/// A message's bytes: header, entries, records, end.
pub(super) fn message(header: &str, entries: &[Entry], records: &[LastRecord]) -> Vec<u8> {
    let mut text = String::from(header);
    write_entries(&mut text, entries);
    let mut bytes = text.into_bytes();
    for r in records {
        let mut line = String::new();
        let _ = writeln!(
            line,
            "R\t{}\t{}\t{}",
            r.ip,
            r.age.as_millis(),
            r.datagram.len()
        );
        bytes.extend_from_slice(line.as_bytes());
        bytes.extend_from_slice(&r.datagram);
        bytes.push(b'\n');
    }
    bytes.extend_from_slice(b".\n");
    bytes
}

/// Reads a message (complete: its `.` line seen). Its `S` and `C` lines
/// are read as the state file's are ([`saved::read_entries`]: every line
/// checked on its own, a bad one refused and named, the others kept), and
/// an entry with more counters than a source may have is refused whole;
/// a header, record or end that cannot be read fails the whole message.
pub fn parse(bytes: &[u8], max_counters: usize, now_unix: u64) -> Result<Message, String> {
    let (header, mut at) = line_at(bytes, 0).ok_or("no header line")?;
    let mut msg = read_header(header)?;
    if let Some((line, next)) = line_at(bytes, at).filter(|(l, _)| l.starts_with(b"H\t")) {
        at = next;
        let fields: Vec<&str> = std::str::from_utf8(line)
            .unwrap_or("")
            .split('\t')
            .collect();
        msg.heard = read_heard(&fields[1..]);
        if msg.heard.is_none() {
            msg.refused.lines += 1;
            msg.refused.text = format!(
                "an H line that cannot be true: {:?}",
                truncate(&String::from_utf8_lossy(line))
            );
        }
    }
    // The entries: every line up to the first totals, record or the end.
    let start = at;
    loop {
        let (line, next) = line_at(bytes, at).ok_or("cut off before its end")?;
        if line == b"." || line.starts_with(b"R\t") || line.starts_with(b"P\t") {
            break;
        }
        at = next;
    }
    let text = std::str::from_utf8(&bytes[start..at]).map_err(|_| "entries that are not text")?;
    take_entries(&mut msg, text, max_counters, now_unix);
    // The g-stream totals, each with its entry.
    while let Some((line, next)) = line_at(bytes, at).filter(|(l, _)| l.starts_with(b"P\t")) {
        at = next;
        let line = std::str::from_utf8(line).map_err(|_| "a totals line that is not text")?;
        take_totals(&mut msg, line, now_unix);
    }
    // The records, then the end.
    loop {
        let (line, next) = line_at(bytes, at).ok_or("cut off before its end")?;
        at = next;
        if line == b"." {
            return Ok(msg);
        }
        at = take_record(&mut msg, line, bytes, at)?;
    }
}

/// The line that starts at `at` (without its newline), and where the next
/// one starts; None if no newline ends it.
fn line_at(bytes: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let rest = bytes.get(at..)?;
    let end = rest.iter().position(|&b| b == b'\n')?;
    Some((&rest[..end], at + end + 1))
}

/// A message's header: the exchange's own, with a known mode.
fn read_header(header: &[u8]) -> Result<Message, String> {
    let header = std::str::from_utf8(header).map_err(|_| "a header that is not text")?;
    let fields: Vec<&str> = header.split('\t').collect();
    let [HEADER, mode, standby, drawn] = fields.as_slice() else {
        return Err(format!(
            "not the peer exchange (header {:?})",
            truncate(header)
        ));
    };
    if !matches!(*mode, "pull" | "push" | "full" | "answer") {
        return Err(format!("unknown mode {:?}", truncate(mode)));
    }
    let claim = (
        *standby == "1",
        drawn.parse().map_err(|_| "a header without its number")?,
    );
    Ok(Message {
        mode: (*mode).to_string(),
        claim,
        ..Message::default()
    })
}

/// The `S` and `C` lines: each entry checked as the state file's, and
/// against what a source may have.
fn take_entries(msg: &mut Message, text: &str, max_counters: usize, now_unix: u64) {
    let read = saved::read_entries(text, 2, saved::Limits { now_unix });
    msg.refused.lines += read.skipped.lines;
    if !read.skipped.is_empty() && msg.refused.text.is_empty() {
        msg.refused.text = read.skipped.to_string();
    }
    for e in read.entries {
        if let Err(why) = merge::check(&e.source, max_counters) {
            msg.refused.lines += 1 + e.source.counters.len();
            if msg.refused.text.is_empty() {
                msg.refused.text = format!("{} {}: {why}", e.ip, e.program);
            }
            continue;
        }
        msg.entries.push(Entry {
            ip: e.ip,
            program: e.program,
            state: e.source,
            pfc: None,
        });
    }
}

/// A `P` line: its totals go with their entry, or it is refused.
fn take_totals(msg: &mut Message, line: &str, now_unix: u64) {
    let fields: Vec<&str> = line.split('\t').collect();
    match read_pfc(&fields[1..], now_unix) {
        Some((ip, program, totals)) => {
            if let Some(e) = msg
                .entries
                .iter_mut()
                .find(|e| e.ip == ip && e.program == program)
            {
                e.pfc = Some(totals);
            }
        }
        None => {
            msg.refused.lines += 1;
            if msg.refused.text.is_empty() {
                msg.refused.text = "g-stream totals that cannot be true".into();
            }
        }
    }
}

/// An `R` line and the record's bytes that follow it (at `at`); returns
/// where the next line starts.
fn take_record(msg: &mut Message, line: &[u8], bytes: &[u8], at: usize) -> Result<usize, String> {
    let line = std::str::from_utf8(line).map_err(|_| "a record line that is not text")?;
    let fields: Vec<&str> = line.split('\t').collect();
    let ["R", ip, age, len] = fields.as_slice() else {
        return Err(format!("cannot read {:?}", truncate(line)));
    };
    let (Ok(ip), Ok(age), Ok(len)) = (
        ip.parse::<IpAddr>(),
        age.parse::<u64>(),
        len.parse::<usize>(),
    ) else {
        return Err(format!("cannot read {:?}", truncate(line)));
    };
    if len > 65536 || bytes.len() < at + len + 1 || bytes[at + len] != b'\n' {
        return Err("a record cut off or too long".into());
    }
    msg.records.push(LastRecord {
        ip,
        age: Duration::from_millis(age.min(86_400_000)),
        datagram: bytes[at..at + len].to_vec(),
    });
    Ok(at + len + 1)
}

fn truncate(line: &str) -> &str {
    let mut end = line.len().min(80);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    &line[..end]
}

/// Reads one message from `stream`: at most `max` bytes, until its `.`
/// line (the caller bounds the time).
pub(super) async fn read_message(stream: &mut TcpStream, max: usize) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "closed before the end of its message",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > max {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "more than {max} bytes (max_sources x {})",
                    super::BYTES_PER_SOURCE
                ),
            ));
        }
        if buf.ends_with(b"\n.\n") && complete(&buf) {
            return Ok(buf);
        }
    }
}

/// Whether `buf` is a whole message: its `.` line is the last line, not
/// the bytes of a record (which are skipped by their length).
fn complete(buf: &[u8]) -> bool {
    let mut at = 0;
    while let Some(end) = buf[at..].iter().position(|&b| b == b'\n') {
        let line = &buf[at..at + end];
        at += end + 1;
        if line == b"." {
            return at == buf.len();
        }
        if let Some(rest) = line.strip_prefix(b"R\t") {
            let len = rest
                .rsplit(|&b| b == b'\t')
                .next()
                .and_then(|l| std::str::from_utf8(l).ok()?.parse::<usize>().ok());
            match len {
                Some(len) if at + len < buf.len() => at += len + 1,
                _ => return false,
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_800_000_000;

    /// Each bad line is refused on its own, as in the state file; the good
    /// entries of the same message are taken; a record is read by its length.
    #[test]
    fn what_no_xrootd_sends_is_refused_line_by_line() {
        let text = format!(
            "{HEADER}\tpush\t1\t42\n\
             S\t10.0.0.1\txrootd\t{}\t1\n\
             C\t0000000000000001\t1\t5\n\
             S\t10.0.0.2\txrootd\t1700000000\t77\n\
             C\t0000000000000001\t18446744073709551615\t0\n\
             C\t0000000000000002\t9223372036854775808\t0\n\
             C\t0000000000000003\t7\t9\n\
             S\t10.0.0.3\txrootd\t1700000000\t77\n\
             C\t0000000000000001\t1\t1\n\
             C\t0000000000000002\t1\t1\n\
             C\t0000000000000003\t1\t1\n\
             R\t10.0.0.2\t1500\t4\n<a\n>\n\
             .\n",
            NOW + 86_400 + 1
        );
        let msg = parse(text.as_bytes(), 2, NOW).unwrap();
        assert_eq!((msg.mode.as_str(), msg.claim), ("push", (true, 42)));
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

    /// A record whose bytes end in a `.` line does not end the message.
    #[test]
    fn a_message_ends_at_its_own_end_line() {
        let whole = b"xrd2ganglia-peer 1\tanswer\t0\t1\nR\t10.0.0.1\t0\t3\na\n.\n.\n";
        assert!(complete(whole));
        assert!(!complete(&whole[..whole.len() - 2]));
        let msg = parse(whole, 10, NOW).unwrap();
        assert_eq!(msg.records[0].datagram, b"a\n.");
    }

    /// The `H` line: what the sender hears, read; one that cannot be true
    /// is refused alone (counted), the rest of the message taken.
    #[test]
    fn the_h_line_says_what_the_sender_hears() {
        let heard = Heard {
            newest: Some(Duration::from_millis(1234)),
            own_host: "xrd2ganglia@gw1".into(),
        };
        let mut text = format!("{HEADER}\tpush\t0\t7\n").into_bytes();
        text.extend_from_slice(heard_line(&heard).as_bytes());
        text.extend_from_slice(
            b"S\t10.0.0.1\txrootd\t1700000000\t1\nC\t0000000000000001\t1\t5\n.\n",
        );
        let msg = parse(&text, 10, NOW).unwrap();
        assert_eq!(msg.heard, Some(heard));
        assert_eq!((msg.entries.len(), msg.refused.lines), (1, 0));
        let none = parse(
            b"xrd2ganglia-peer 1\tpush\t0\t7\nH\t-\txrd2ganglia@b\n.\n",
            10,
            NOW,
        );
        assert_eq!(none.unwrap().heard.unwrap().newest, None);
        for bad in [
            "H\t12\t10.0.0.1",
            "H\t12\txrd2ganglia@",
            "H\t12\txrd2ganglia@a\"b",
            "H\tsoon\txrd2ganglia@a",
            "H\t86400001\txrd2ganglia@a",
        ] {
            let text = format!(
                "{HEADER}\tpush\t0\t7\n{bad}\nS\t10.0.0.1\txrootd\t1700000000\t1\nC\t0000000000000001\t1\t5\n.\n"
            );
            let msg = parse(text.as_bytes(), 10, NOW).unwrap();
            assert_eq!(msg.heard, None, "{bad}");
            assert_eq!((msg.entries.len(), msg.refused.lines), (1, 1), "{bad}");
        }
    }

    #[test]
    fn a_message_that_is_not_the_exchange_fails_whole() {
        for bad in [
            &b"GET / HTTP/1.0\r\n\r\n.\n"[..],
            b"xrd2ganglia-peer 1\tpush\t0\t1\nS\t10.0.0.1\txrootd\t1\t1\n",
            b"xrd2ganglia-peer 1\tpush\t0\t1\nR\t10.0.0.1\t0\t99\nshort\n.\n",
            b"xrd2ganglia-peer 1\tshout\t0\t1\n.\n",
            b"xrd2ganglia-peer 1\tpush\t0\t1\n.\nQ\n",
        ] {
            let r = parse(bad, 10, NOW);
            // The last one: its end comes first; what follows is not read.
            if bad.ends_with(b"Q\n") {
                assert!(r.is_ok());
                continue;
            }
            assert!(r.is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
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
        let header = "xrd2ganglia-peer 1\tfull\t0\t1\n";
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
                assert!(gw2.engine.merge_peer(e, now).is_some());
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
