//! The pollers: gmond's document and the gateway's, read on one schedule
//! as gmetad reads them, each reduced to what the judge needs (per host,
//! the report its values come from).

use std::collections::HashMap;
use std::io::Read;
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

use crate::Records;
use crate::e2e::sleep_until;

/// When the pollers poll: at t0 + k * every, for k >= 1, before `until`.
#[derive(Clone, Copy)]
pub(super) struct Schedule {
    pub(super) t0: Instant,
    pub(super) every: Duration,
    pub(super) until: Instant,
}

/// What one poll showed, per host IP.
pub(super) struct Shown {
    pub(super) hosts: HashMap<String, HostShown>,
    pub(super) bytes: usize,
}

/// One host of a document.
#[derive(Default)]
pub(super) struct HostShown {
    /// The values of the metrics that name a report ([`naming`]).
    pub(super) named: HashMap<String, String>,
    /// Every metric, hash of NAME -> hash of VAL (a site's document holds
    /// 96,000 of them; a poll's pair is compared after the run).
    pub(super) values: HashMap<u64, u64>,
}

pub(super) struct Poll {
    pub(super) at: Instant,
    pub(super) took: Duration,
    pub(super) drops: Option<u64>,
    pub(super) doc: Result<Shown, String>,
}

/// Polls `port` on `schedule`; with `gmond` (its pid and UDP port), reads
/// the drops at its socket just before the connect and after the last byte.
/// The document is reduced to what the judge needs once it is read (a
/// site's gmond writes 37 MB): the poll's time does not include that.
pub(super) fn poller(
    port: u16,
    schedule: Schedule,
    gmond: Option<(u32, u16)>,
    naming: Vec<String>,
) -> thread::JoinHandle<Vec<Poll>> {
    thread::spawn(move || {
        let drops = || gmond.map(|(pid, port)| crate::drops_of(&crate::udp_rows(Some(pid), port)));
        let mut polls = Vec::new();
        let mut k = 1u32;
        loop {
            let due = schedule.t0 + schedule.every * k;
            if due >= schedule.until {
                return polls;
            }
            k += 1;
            sleep_until(due);
            let before = drops();
            let at = Instant::now();
            let raw = read_all(port);
            let took = at.elapsed();
            let after = drops();
            polls.push(Poll {
                at,
                took,
                drops: before.zip(after).map(|(b, a)| a.saturating_sub(b)),
                doc: raw.and_then(|raw| scan(&raw, &naming)),
            });
        }
    })
}

pub(super) fn read_all(port: u16) -> Result<Vec<u8>, String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).map_err(|e| format!("read: {e}"))?;
    Ok(buf)
}

/// The metric whose value names a report of server `s`: its fixture's last
/// value packet, uptime (tod - tos) ([`Records::last_name`]).
pub(super) fn naming(records: &Records, s: usize) -> &str {
    &records.last_name[records.fixture_of(s)]
}

pub(super) fn hash(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// Reads the HOST elements' IP and their METRICs' NAME and VAL from
/// gmond's document (the gateway's has the same form), without building a
/// tree: a full parse of a site's document costs a core most of a second,
/// taken from gmond and the gateway on a small machine. A document that
/// does not end with its root's end tag was cut short: an error.
pub(super) fn scan(doc: &[u8], naming: &[String]) -> Result<Shown, String> {
    if !doc.trim_ascii_end().ends_with(b"</GANGLIA_XML>") {
        return Err(format!("document cut short ({} bytes)", doc.len()));
    }
    let mut hosts: HashMap<String, HostShown> = HashMap::new();
    let mut host: Option<&mut HostShown> = None;
    let mut i = 0;
    while let Some(p) = doc[i..].iter().position(|&b| b == b'<') {
        i += p + 1;
        let rest = &doc[i..];
        if let Some(attrs) = rest.strip_prefix(b"HOST ") {
            let ip = attr(attrs, b"IP").ok_or("a HOST without IP")?;
            host = Some(
                hosts
                    .entry(String::from_utf8_lossy(ip).into_owned())
                    .or_default(),
            );
        } else if let Some(attrs) = rest.strip_prefix(b"METRIC ")
            && let Some(h) = host.as_mut()
            && let (Some(name), Some(val)) = (attr(attrs, b"NAME"), attr(attrs, b"VAL"))
        {
            h.values.insert(hash(name), hash(val));
            if naming.iter().any(|n| n.as_bytes() == name) {
                h.named.insert(
                    String::from_utf8_lossy(name).into_owned(),
                    String::from_utf8_lossy(val).into_owned(),
                );
            }
        } else if rest.starts_with(b"/HOST>") {
            host = None;
        }
    }
    Ok(Shown {
        hosts,
        bytes: doc.len(),
    })
}

/// Attribute `name` of the tag whose attributes begin `tag` (up to its `>`).
pub(super) fn attr<'a>(tag: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let mut t = tag;
    loop {
        t = t.trim_ascii_start();
        if t.first().is_none_or(|&b| b == b'>' || b == b'/') {
            return None;
        }
        let eq = t.iter().position(|&b| b == b'=')?;
        let key = t[..eq].trim_ascii();
        t = t[eq + 1..].trim_ascii_start().strip_prefix(b"\"")?;
        let close = t.iter().position(|&b| b == b'"')?;
        if key == name {
            return Some(&t[..close]);
        }
        t = &t[close + 1..];
    }
}
