//! gmetad polls the gateway: gmond's XML on a TCP port (`xml_listen`).
//!
//! As gmond's `tcp_accept_channel` does: on each connection the whole
//! document is written and the connection closed; nothing is read. The
//! document comes from the [`HostTable`], which the receive tasks keep
//! updating meanwhile (a poll holds one host's shard at a time, never the
//! socket's time).
//!
//! Bounded: clients outside `xml_allow` are closed at once (counted, logged
//! once per `log_interval`); at most [`MAX_POLLS`] documents are written at
//! once (another client is closed, counted); a client that takes nothing
//! for [`STALL_TIMEOUT`], or is not done after [`POLL_DEADLINE`], is
//! dropped (counted). Each document is written by a blocking thread, in
//! 64 KiB pieces: memory does not grow with the cluster.

use std::io::{self, Write};
use std::net::{IpAddr, Shutdown, SocketAddr};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use crate::events::{Counters, LogLimiter};

use super::Active;
use super::table::{ClusterInfo, HostTable};

/// Documents written at once; another poll meanwhile is closed.
pub const MAX_POLLS: usize = 4;
/// A client that takes nothing for this long is dropped.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(10);
/// A document not written within this long is abandoned.
pub const POLL_DEADLINE: Duration = Duration::from_secs(120);

/// Binds a listening TCP socket (IPv6 sockets v6-only, as for the UDP ones).
pub fn bind(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let socket = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(128)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Log lines about clients, one per (reason, client) per interval; shared
/// by the accept loop and the writing threads.
type Limiter = Arc<Mutex<LogLimiter>>;

/// Accepts polls on `listener` until `stop`.
pub(super) async fn serve(
    listener: std::net::TcpListener,
    table: Arc<HostTable>,
    active: watch::Receiver<Arc<Active>>,
    counters: Arc<Counters>,
    mut stop: watch::Receiver<bool>,
) {
    let local = listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("xml_listen {local}: {e}");
            return;
        }
    };
    let slots = Arc::new(Semaphore::new(MAX_POLLS));
    let limiter: Limiter = Arc::new(Mutex::new(LogLimiter::new(
        active.borrow().settings.log_interval,
    )));
    loop {
        let accepted = tokio::select! {
            _ = stop.changed() => break,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of descriptors, most likely: let some close.
                if log_allowed(&limiter, "xml_accept", local.ip()) {
                    tracing::warn!("xml_listen {local}: cannot accept: {e}");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let a = active.borrow().clone();
        let ip = peer.ip().to_canonical();
        if !a.settings.xml_allow.iter().any(|n| n.contains(&ip)) {
            counters.xml_denied.fetch_add(1, Relaxed);
            if log_allowed(&limiter, "xml_denied", ip) {
                tracing::warn!(
                    "xml_listen {local}: {peer} is not in xml_allow; closed (counted as xml_denied, logged once per log_interval)"
                );
            }
            continue;
        }
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            counters.xml_dropped.fetch_add(1, Relaxed);
            if log_allowed(&limiter, "xml_busy", ip) {
                tracing::warn!(
                    "xml_listen {local}: {peer} closed: {MAX_POLLS} documents are being written already (counted as xml_dropped)"
                );
            }
            continue;
        };
        let stream = match stream.into_std() {
            Ok(s) => s,
            Err(_) => continue,
        };
        let (table, counters, limiter) = (table.clone(), counters.clone(), limiter.clone());
        tokio::task::spawn_blocking(move || {
            let cluster = ClusterInfo {
                name: &a.settings.cluster_name,
                host_dmax: a.settings.dmax,
            };
            match write_document(stream, &table, &cluster, STALL_TIMEOUT, POLL_DEADLINE) {
                Ok(w) => {
                    counters.xml_polls.fetch_add(1, Relaxed);
                    counters.xml_hosts.store(w.hosts as u64, Relaxed);
                    counters.xml_renamed.store(w.renamed as u64, Relaxed);
                }
                Err(e) => {
                    counters.xml_dropped.fetch_add(1, Relaxed);
                    if log_allowed(&limiter, "xml_write", ip) {
                        tracing::warn!(
                            "xml_listen {local}: document to {peer} not finished: {e} (counted as xml_dropped)"
                        );
                    }
                }
            }
            drop(slot);
        });
    }
}

fn log_allowed(limiter: &Limiter, reason: &'static str, ip: IpAddr) -> bool {
    let mut l = limiter.lock().unwrap_or_else(|e| e.into_inner());
    l.allow(reason, ip, Instant::now()).is_some()
}

/// Writes the document to one client and closes.
fn write_document(
    stream: std::net::TcpStream,
    table: &HostTable,
    cluster: &ClusterInfo<'_>,
    stall: Duration,
    deadline: Duration,
) -> io::Result<super::table::Written> {
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
    use crate::gateway::tests::Rig;

    /// A table whose document is far bigger than the socket buffers.
    fn big_table() -> HostTable {
        let (t, mut r) = (HostTable::new(100_000), Rig::new(""));
        let vars: String = (0..40).map(|v| format!("<v{v}>{v}</v{v}>")).collect();
        for i in 0..4000u32 {
            let rec = format!(
                r#"<statistics tod="1" ver="v5.5.3" src="h{i}:1094" tos="1700000000" pgm="xrootd" ins="anon" pid="7" site="X"><stats id="bench">{vars}</stats></statistics>"#
            );
            let from = SocketAddr::from(([10, 9, (i >> 8) as u8, i as u8], 1));
            let at = r.at(0);
            t.take(r.feed_at(rec, from, at).p.batch(), from.ip(), at);
        }
        t
    }

    #[test]
    fn a_client_that_stops_reading_is_dropped() {
        let table = big_table();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let cluster = ClusterInfo {
            name: "X",
            host_dmax: 0,
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
        let cluster = ClusterInfo {
            name: "X",
            host_dmax: 0,
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
