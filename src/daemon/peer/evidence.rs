//! Whether the peer's packets reach gmond: the evidence a standby needs
//! before it stands by ([`watch`]), read in gmond's own XML.
//!
//! **What is read.** gmond's XML on its `tcp_accept_channel`
//! (`peer_gmond_xml`; by default the first send channel's address, where
//! gmond's stock config has it): the `<HOST NAME="xrd2ganglia@PEER" ...>`
//! element of the peer's own host, the name it gave in its heard frame
//! (`message::Kind::Heard`), and
//! its `TN`: the seconds since gmond last heard a packet of that host
//! (`print_host_start`, gmond.c: `now - last_heard_from`, which any packet
//! of the host resets). A gateway that sends to gmond sends its own host's
//! heartbeat every second while paired ([`super::ALIVE_EVERY`]), so a TN of
//! at most [`EVIDENCE_TN`] means the peer's packets arrive now; a larger
//! one, or no such host, means they do not, whatever the peer says. The
//! name must be a gateway's own (`xrd2ganglia@`, which no server's host
//! can be) and not this one's.
//!
//! **What it costs gmond.** gmond writes its whole document to every
//! connection, holding its host table's lock, and reads no UDP meanwhile
//! (docs/ganglia-facts.md). The read stops at the peer's host element:
//! gmond's next write fails and it lets go. So one check costs gmond the
//! part of a poll before that host (its place in gmond's hash, half the
//! document on average), and a check is made only while this one would
//! stand by, at most every [`EVIDENCE_EVERY`] (and at once when the peer
//! comes back): less than a gmetad polling every 15 s. Bounded here by
//! [`EVIDENCE_DEADLINE`] and [`EVIDENCE_MAX_BYTES`], with a window of one
//! chunk and the tag being read in memory.
//!
//! **When it cannot be read** (no tcp_accept_channel there, an ACL, a
//! multicast channel and no `peer_gmond_xml`, a document past the cap),
//! the peer's word is taken, as before, and the log and `status` say so:
//! what a peer sends cannot make gmond's XML unreadable, so a lying peer
//! gains nothing by it.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::{Link, lock};
use crate::config::Settings;

/// A check while standing by, this often at most.
pub const EVIDENCE_EVERY: Duration = Duration::from_secs(10);
/// The peer's own host counts as fresh in gmond up to this TN (seconds).
pub const EVIDENCE_TN: u64 = 5;
/// A whole check (connect and read) takes at most this.
pub const EVIDENCE_DEADLINE: Duration = Duration::from_secs(2);
/// A check reads at most this much of gmond's document.
pub const EVIDENCE_MAX_BYTES: usize = 64 << 20;

/// What gmond showed of the peer's own host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Evidence {
    /// In gmond, heard from within [`EVIDENCE_TN`]: its TN.
    Fresh { host: String, tn: u64 },
    /// Older (its TN), or not in gmond's document (None).
    Stale { host: String, tn: Option<u64> },
    /// The peer named no own host of its own (an older gateway, or one
    /// that claims this one's name).
    NoHost,
    /// gmond's XML could not be read: why. The peer's word is taken.
    Unreadable(String),
}

impl Evidence {
    /// Whether this one may stand by on it.
    pub fn allows(&self) -> bool {
        matches!(self, Evidence::Fresh { .. } | Evidence::Unreadable(_))
    }
}

impl fmt::Display for Evidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Evidence::Fresh { host, tn } => write!(f, "{host} heard {tn} s ago"),
            Evidence::Stale { host, tn: Some(tn) } => write!(f, "{host} heard {tn} s ago"),
            Evidence::Stale { host, tn: None } => write!(f, "no host {host} in gmond"),
            Evidence::NoHost => write!(f, "the peer names no own host"),
            Evidence::Unreadable(why) => {
                write!(f, "gmond's XML unreadable ({why}): on the peer's word")
            }
        }
    }
}

/// Where gmond's XML is read: `peer_gmond_xml`, else the first send
/// channel's unicast address; None when nothing is sent to gmond.
fn gmond_xml(settings: &Settings) -> Result<String, String> {
    if let Some(a) = &settings.peer_gmond_xml {
        return Ok(a.clone());
    }
    let Some(c) = settings.channels.first() else {
        return Err("no send channel".into());
    };
    let multicast = c
        .host
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_multicast());
    if multicast {
        return Err("a multicast channel: set peer_gmond_xml".into());
    }
    Ok(if c.host.contains(':') {
        format!("[{}]:{}", c.host, c.port)
    } else {
        format!("{}:{}", c.host, c.port)
    })
}

/// Reads gmond's document at `addr` up to `host`'s element: its TN, or
/// None if the document ends without it.
pub async fn read_tn(addr: &str, host: &str, max: usize) -> Result<Option<u64>, String> {
    let mut s = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("{addr}: {e}"))?;
    let needle = format!("<HOST NAME=\"{host}\"");
    let mut window: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    let mut total = 0usize;
    loop {
        let n = s
            .read(&mut chunk)
            .await
            .map_err(|e| format!("{addr}: {e}"))?;
        if n == 0 {
            return Ok(None);
        }
        total += n;
        window.extend_from_slice(&chunk[..n]);
        if let Some(at) = find(&window, needle.as_bytes()) {
            let tag = &window[at..];
            if let Some(end) = tag.iter().position(|&b| b == b'>') {
                return Ok(tn_of(&tag[..end]));
            }
            if tag.len() > 4096 {
                return Err(format!("{addr}: a HOST tag of more than 4096 bytes"));
            }
        } else {
            // Keep what could be the start of the needle.
            let keep = needle.len().min(window.len());
            window.drain(..window.len() - keep);
        }
        if total > max {
            return Err(format!("{addr}: more than {max} bytes before {host}"));
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The `TN="..."` of a HOST tag.
fn tn_of(tag: &[u8]) -> Option<u64> {
    let at = find(tag, b" TN=\"")? + 5;
    let digits: Vec<u8> = tag[at..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .copied()
        .collect();
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

/// Reads the evidence while this one would stand by: at once when it
/// starts to (or the peer names another host), then every
/// [`EVIDENCE_EVERY`]; until `stop`.
pub async fn watch(link: Arc<Link>, settings: Arc<Settings>, mut stop: watch::Receiver<bool>) {
    let addr = if settings.send {
        gmond_xml(&settings)
    } else {
        Err("nothing is sent to gmond".into())
    };
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut wanted = false;
    let mut read_for: Option<String> = None;
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = tick.tick() => {}
        }
        let now = Instant::now();
        let was = std::mem::replace(&mut wanted, link.would_stand_by(now));
        if !wanted {
            continue;
        }
        let host = link.peer_host();
        let last = lock(&link.evidence).as_ref().map(|(at, _)| *at);
        let due = !was
            || host != read_for
            || last.is_none_or(|at| now.saturating_duration_since(at) >= EVIDENCE_EVERY);
        if !due {
            continue;
        }
        read_for = host.clone();
        let evidence = match (&addr, host) {
            (Err(why), _) => Evidence::Unreadable(why.clone()),
            (Ok(_), None) => Evidence::NoHost,
            (Ok(addr), Some(host)) => {
                let read = read_tn(addr, &host, EVIDENCE_MAX_BYTES);
                match tokio::time::timeout(EVIDENCE_DEADLINE, read).await {
                    Ok(Ok(Some(tn))) if tn <= EVIDENCE_TN => Evidence::Fresh { host, tn },
                    Ok(Ok(tn)) => Evidence::Stale { host, tn },
                    Ok(Err(e)) => Evidence::Unreadable(e),
                    Err(_) => Evidence::Unreadable(format!(
                        "{addr}: not read within {} s",
                        EVIDENCE_DEADLINE.as_secs()
                    )),
                }
            }
        };
        let before = lock(&link.evidence).as_ref().map(|(_, e)| e.allows());
        match &evidence {
            // Sending nothing, standing by changes nothing: no word of it.
            _ if !settings.send => {}
            Evidence::Unreadable(why) if before != Some(true) => tracing::warn!(
                "peer_gmond_xml: cannot read gmond's XML ({why}): standing by on the peer's word alone"
            ),
            e if !e.allows() && before != Some(false) => tracing::warn!(
                "peer says it sends, but gmond does not show it ({e}): sending to gmond"
            ),
            _ => {}
        }
        *lock(&link.evidence) = Some((Instant::now(), evidence));
        link.decide(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hosts_tn_is_read_from_its_tag() {
        let tag = br#"<HOST NAME="xrd2ganglia@gw1" IP="xrd2ganglia@gw1" TAGS="" REPORTED="1" TN="3" TMAX="20""#;
        assert_eq!(tn_of(tag), Some(3));
        assert_eq!(tn_of(br#"<HOST NAME="a""#), None);
    }

    /// The read stops at the host's tag, across chunk boundaries, and a
    /// document without it is None.
    #[tokio::test]
    async fn gmonds_document_is_read_up_to_the_host() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let filler = "<HOST NAME=\"10.0.0.1\" TN=\"0\">".repeat(20_000);
        let doc = format!(
            "{filler}<HOST NAME=\"xrd2ganglia@gw1\" IP=\"x\" TN=\"7\" TMAX=\"20\">{filler}"
        );
        let serve = tokio::spawn(async move {
            for _ in 0..3 {
                let (mut s, _) = l.accept().await.unwrap();
                let _ = tokio::io::AsyncWriteExt::write_all(&mut s, doc.as_bytes()).await;
            }
        });
        assert_eq!(
            read_tn(&addr, "xrd2ganglia@gw1", 1 << 30).await,
            Ok(Some(7))
        );
        assert_eq!(read_tn(&addr, "xrd2ganglia@gw2", 1 << 30).await, Ok(None));
        assert!(read_tn(&addr, "xrd2ganglia@gw2", 100_000).await.is_err());
        serve.abort();
    }
}
