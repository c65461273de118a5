//! Hearing gmond's metadata requests (136) where they go
//! (`metadata_requests`); what they are and how they are answered:
//! [`crate::engine::answer`].
//!
//! Everything else arriving there (other gmonds' metric packets on a
//! multicast channel, garbage) is ignored; only a well-formed 136 counts.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};

use crate::engine::answer::{QUIET, Request, parse, spoof_ip};
use crate::events::{Counters, Events};

/// Requests waiting for a receive task; past this, new ones are dropped
/// (one answer covers a whole host, so nothing is lost that matters).
pub const QUEUE: usize = 1024;

/// Reads requests from `socket` and hands each to every receive task (each
/// owns some sources; the one that knows the host answers).
pub async fn listen(
    socket: std::net::UdpSocket,
    tasks: Vec<mpsc::Sender<Request>>,
    counters: Arc<Counters>,
    log_interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let Ok(socket) = UdpSocket::from_std(socket) else {
        return;
    };
    let mut events = Events::new(&counters, log_interval);
    let mut buf = vec![0u8; 2048];
    let mut last_request: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            r = socket.recv_from(&mut buf) => match r {
                Ok((n, from)) => match parse(&buf[..n]) {
                    Some(request) => {
                        // Only a spoofed host can be one of ours.
                        let ours = spoof_ip(&request.host).is_some();
                        let now = Instant::now();
                        let quiet = ours && last_request.is_none_or(|t| now.duration_since(t) >= QUIET);
                        if ours {
                            last_request = Some(now);
                        }
                        for t in &tasks {
                            if quiet {
                                let _ = t.try_send(Request::Everything);
                            }
                            let _ = t.try_send(Request::Metric(request.clone()));
                        }
                    }
                    None => events.at(Instant::now()).not_a_request(from, n),
                },
                Err(e) => events.at(Instant::now()).receive_failed(socket.local_addr().unwrap_or(from_unknown()), &e),
            },
        }
    }
}

fn from_unknown() -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], 0))
}
