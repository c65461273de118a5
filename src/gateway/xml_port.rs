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
            match write_document(stream, &table, &cluster) {
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
) -> io::Result<super::table::Written> {
    stream.set_nonblocking(false)?;
    stream.set_write_timeout(Some(STALL_TIMEOUT))?;
    let started = Instant::now();
    let mut to = &stream;
    let written = table.write(cluster, Instant::now(), &mut |piece| {
        if started.elapsed() > POLL_DEADLINE {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("not taken within {} s", POLL_DEADLINE.as_secs()),
            ));
        }
        to.write_all(piece).map_err(|e| {
            if e.kind() == io::ErrorKind::WouldBlock {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("nothing taken for {} s", STALL_TIMEOUT.as_secs()),
                )
            } else {
                e
            }
        })
    })?;
    let _ = stream.shutdown(Shutdown::Write);
    Ok(written)
}
