//! gmetad polls the gateway: gmond's XML on a TCP port (`xml_listen`).
//!
//! As gmond's `tcp_accept_channel` does: on each connection the whole
//! document is written and the connection closed; nothing is read. The
//! document comes from the [`HostTable`], which the receive tasks keep
//! updating meanwhile (a poll holds one host's shard at a time, never the
//! socket's time).
//!
//! Bounded: clients outside `xml_allow` are closed at once (counted, logged
//! once per `log_interval`, as every outcome, by [`Events`]); at most [`MAX_POLLS`] documents are written at
//! once (another client is closed, counted); a client that takes nothing
//! for [`STALL_TIMEOUT`], or is not done after [`POLL_DEADLINE`], is
//! dropped (counted). Each document is written by a blocking thread, in
//! 64 KiB pieces: memory does not grow with the cluster.
//!
//! After a start, the port listens only once it can answer ([`Warmup`]).

use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc, watch};

use crate::engine::saved::SavedState;
use crate::events::{Counters, Events};

use super::InForce;
use super::table::{ClusterInfo, HostTable, Written};

/// Documents written at once; another poll meanwhile is closed.
pub const MAX_POLLS: usize = 4;
/// A client that takes nothing for this long is dropped.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(10);
/// A document not written within this long is abandoned.
pub const POLL_DEADLINE: Duration = Duration::from_secs(120);

/// A source is claimed when its first record is handled, a moment before
/// that record's packets reach the table: the port listens this long after
/// the last claim.
const CLAIM_GRACE: Duration = Duration::from_millis(200);

/// When the port can answer, and so listens.
///
/// gmetad (`gmetad/data_thread.c`) keeps to an address that accepts a
/// connection, even one closed unanswered, and moves to the next address
/// of its `data_source` only when a connect fails. So the socket is bound
/// at the start (its errors stop the start) and listen()ed only once a
/// document would be whole; until then the kernel refuses connections
/// (a bound TCP socket that does not listen answers a SYN with a reset,
/// on Linux).
///
/// * With a `peer`: right after the start-up pull of its state and last
///   records (the table is then what the peer's is: no warm-up). If the
///   pull fails (the peer is down), or brings no record while the state
///   file names sources (the peer is starting too), as without one.
/// * Without: after a start with a state file the table is empty until
///   the servers report again. A document of a part of the cluster would
///   show gmetad its summed counters dropping: gmetad stores a cluster's
///   summary of a counter as a COUNTER and draws the drop as a wrap, a
///   spike of about 5e8/s. So the port listens once every source the
///   state file named has reported again, or after `warmup_max` (90 s by
///   default: less than the 120 s of gmetad's RRD heartbeat at its
///   default 15 s step, so a gmetad with no other address leaves no gap).
///   A server that never comes back makes every start wait all of it.
pub struct Warmup {
    saved: Arc<SavedState>,
    until: Instant,
    /// The start-up pull from the peer: None while under way, Some(true)
    /// when it brought the peer's state, Some(false) when it failed.
    peer: Option<watch::Receiver<Option<bool>>>,
}

impl Warmup {
    /// For a gateway started at `started` with `saved` (the state file's
    /// sources, claimed as they report), waiting at most `max`.
    pub fn new(saved: Arc<SavedState>, started: Instant, max: Duration) -> Warmup {
        let until = if saved.unclaimed() == 0 {
            started
        } else {
            started + max
        };
        Warmup {
            saved,
            until,
            peer: None,
        }
    }

    /// Waits for the start-up pull from the peer first.
    pub fn after_peer(mut self, pulled: watch::Receiver<Option<bool>>) -> Warmup {
        self.peer = Some(pulled);
        self
    }

    /// None once the port can listen; else the sources still awaited
    /// (0 while the peer is asked) and how long at most.
    pub(super) fn waiting(&mut self, now: Instant) -> Option<(usize, Duration)> {
        if let Some(peer) = &self.peer {
            match *peer.borrow() {
                None => return Some((0, Duration::from_millis(100))),
                Some(true) => return None,
                Some(false) => {}
            }
        }
        if now >= self.until {
            return None;
        }
        let left = self.saved.unclaimed();
        if left == 0 {
            // Counted from the last claim, not from now: the first poll
            // after every source reported is answered.
            let ready = self.saved.last_claim().map_or(now, |t| t + CLAIM_GRACE);
            if now >= ready {
                return None;
            }
            return Some((0, ready - now));
        }
        Some((left, self.until - now))
    }

    /// Waits until the port can listen (or `stop`); what it waited for.
    async fn wait(&mut self, stop: &mut watch::Receiver<bool>) -> Option<&'static str> {
        let mut waited = false;
        while let Some((_, within)) = self.waiting(Instant::now()) {
            waited = true;
            tokio::select! {
                _ = stop.changed() => return None,
                _ = tokio::time::sleep(within.min(Duration::from_millis(50))) => {}
            }
        }
        Some(
            if self
                .peer
                .as_ref()
                .is_some_and(|p| *p.borrow() == Some(true))
            {
                "the peer's state was pulled"
            } else if !waited {
                "nothing to wait for"
            } else if self.saved.unclaimed() > 0 {
                "warmup_max passed before every source the state file named reported"
            } else {
                "every source the state file named reported again"
            },
        )
    }
}

/// How one document went, as its writing thread tells the accept loop
/// (which counts and logs it).
type Outcome = (SocketAddr, io::Result<Written>);

/// Accepts polls on `listener` until `stop`.
pub(super) async fn serve(
    listener: std::net::TcpListener,
    table: Arc<HostTable>,
    in_force: watch::Receiver<Arc<InForce>>,
    counters: Arc<Counters>,
    mut warmup: Warmup,
    mut stop: watch::Receiver<bool>,
) {
    let local = listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let started = Instant::now();
    let Some(why) = warmup.wait(&mut stop).await else {
        return;
    };
    if let Err(e) = socket2::SockRef::from(&listener).listen(128) {
        tracing::error!("xml_listen {local}: listen: {e}");
        return;
    }
    Events::new(&counters, Duration::from_secs(60)).xml_listening(local, started.elapsed(), why);
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("xml_listen {local}: {e}");
            return;
        }
    };
    let slots = Arc::new(Semaphore::new(MAX_POLLS));
    let mut events = Events::new(&counters, in_force.borrow().settings.log_interval);
    let (done_tx, mut done) = mpsc::unbounded_channel::<Outcome>();
    loop {
        let accepted = tokio::select! {
            _ = stop.changed() => break,
            Some((peer, outcome)) = done.recv() => {
                match outcome {
                    Ok(w) => events.xml_polled(w.hosts, w.renamed),
                    Err(e) => events.xml_unfinished(local, peer, &e),
                }
                continue;
            }
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of descriptors, most likely: let some close.
                events.xml_accept_failed(local, &e);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // The settings only: a poll may take minutes, and the senders of
        // settings a reload replaced retire when nothing holds them.
        let settings = in_force.borrow().settings.clone();
        let ip = peer.ip().to_canonical();
        if !settings.xml_allow.iter().any(|n| n.contains(&ip)) {
            events.xml_denied(local, peer);
            continue;
        }
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            events.xml_busy(local, peer, MAX_POLLS);
            continue;
        };
        let Ok(stream) = stream.into_std() else {
            continue;
        };
        let (table, done) = (table.clone(), done_tx.clone());
        tokio::task::spawn_blocking(move || {
            let cluster = ClusterInfo {
                name: &settings.cluster_name,
                host_dmax: settings.dmax,
                grouping: &settings.grouping,
            };
            let outcome = write_document(stream, &table, &cluster, STALL_TIMEOUT, POLL_DEADLINE);
            let _ = done.send((peer, outcome));
            drop(slot);
        });
    }
    // Documents finished meanwhile still count.
    while let Ok((peer, outcome)) = done.try_recv() {
        match outcome {
            Ok(w) => events.xml_polled(w.hosts, w.renamed),
            Err(e) => events.xml_unfinished(local, peer, &e),
        }
    }
}

/// Writes the document to one client and closes.
fn write_document(
    stream: std::net::TcpStream,
    table: &HostTable,
    cluster: &ClusterInfo<'_>,
    stall: Duration,
    deadline: Duration,
) -> io::Result<Written> {
    stream.set_nonblocking(false)?;
    let started = Instant::now();
    let mut to = &stream;
    let written = table.write(cluster, Instant::now(), &mut |piece| {
        let mut rest = piece;
        while !rest.is_empty() {
            // Each write may wait for the client up to `stall`, and never
            // past the deadline.
            let left = deadline.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("not taken within {} s", deadline.as_secs_f64()),
                ));
            }
            let wait = stall.min(left).max(Duration::from_millis(1));
            stream.set_write_timeout(Some(wait))?;
            match to.write(rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    if wait == stall {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!("nothing taken for {} s", stall.as_secs_f64()),
                        ));
                    }
                    // The deadline came first: said at the loop's top.
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    })?;
    let _ = stream.shutdown(Shutdown::Write);
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tests::Harness;
    use std::sync::atomic::Ordering::Relaxed;

    /// A table whose document is far bigger than the socket buffers.
    fn big_table() -> HostTable {
        let (t, mut r) = (HostTable::new(100_000), Harness::new(""));
        let vars: String = (0..40).map(|v| format!("<v{v}>{v}</v{v}>")).collect();
        for i in 0..4000u32 {
            let rec = format!(
                r#"<statistics tod="1" ver="v5.5.3" src="h{i}:1094" tos="1700000000" pgm="xrootd" ins="anon" pid="7" site="X"><stats id="bench">{vars}</stats></statistics>"#
            );
            let from = SocketAddr::from(([10, 9, (i >> 8) as u8, i as u8], 1));
            let at = r.at(0);
            t.take(r.feed_at(rec, from, at).engine.batch(), from.ip(), at);
        }
        t
    }

    #[test]
    fn a_client_that_stops_reading_is_dropped() {
        let table = big_table();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let grouping = crate::config::clusters::Grouping::default();
        let cluster = ClusterInfo {
            name: "X",
            host_dmax: 0,
            grouping: &grouping,
        };
        let t = Instant::now();
        let r = write_document(
            server,
            &table,
            &cluster,
            Duration::from_millis(500),
            POLL_DEADLINE,
        );
        let e = r.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert_eq!(e.to_string(), "nothing taken for 0.5 s");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        drop(client);
    }

    #[test]
    fn a_client_too_slow_overall_is_dropped_and_a_reader_gets_it_all() {
        let table = big_table();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let grouping = crate::config::clusters::Grouping::default();
        let cluster = ClusterInfo {
            name: "X",
            host_dmax: 0,
            grouping: &grouping,
        };
        // A reader that takes a little every 100 ms: never stalled, too slow.
        let given_up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = given_up.clone();
        let slow = std::thread::spawn(move || {
            use std::io::Read;
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            let mut buf = [0u8; 4096];
            while let Ok(n) = c.read(&mut buf) {
                if n == 0 || stop.load(Relaxed) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let (server, _) = listener.accept().unwrap();
        let t = Instant::now();
        let e = write_document(
            server,
            &table,
            &cluster,
            STALL_TIMEOUT,
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "not taken within 1 s");
        // Near the 1 s deadline (slack for a loaded machine).
        assert!(t.elapsed() < Duration::from_secs(6), "{:?}", t.elapsed());
        given_up.store(true, Relaxed);
        slow.join().unwrap();
        // A client that reads gets the whole document.
        let reader = std::thread::spawn(move || {
            use std::io::Read;
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            let mut text = String::new();
            c.read_to_string(&mut text).unwrap();
            text
        });
        let (server, _) = listener.accept().unwrap();
        let w = write_document(server, &table, &cluster, STALL_TIMEOUT, POLL_DEADLINE).unwrap();
        let text = reader.join().unwrap();
        assert_eq!((w.hosts, text.len()), (4000, w.bytes));
        assert!(w.bytes > 20_000_000, "{}", w.bytes);
        assert!(text.ends_with("</GANGLIA_XML>\n"));
    }
}
