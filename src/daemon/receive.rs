//! One receive task per listening socket: datagrams in, packets delivered.
//!
//! Each task owns its [`Engine`] (parser, mapper, the state of the sources
//! that send to its socket), so the per-datagram path takes no lock but
//! the send queues' (once per record, [`Outbox::queue`](super::sender::Outbox::queue)) and the XML
//! table's shard, and never waits for a send: the senders pace the queues
//! out.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};

use super::control::Ask;

use crate::engine::packets::PacketBatch;
use crate::engine::{Engine, Request, Shared};
use crate::events::{Counters, Events};

use super::InForce;

/// Largest datagram we accept: xrootd 5.9+ sends up to 64 KiB.
const MAX_DATAGRAM: usize = 65536;

/// One receive task: a socket and everything its datagrams need.
pub(super) struct Receiver {
    in_force: watch::Receiver<Arc<InForce>>,
    counters: Arc<Counters>,
    engine: Engine,
    /// gmond's metadata requests, when they are listened for.
    requests: Option<mpsc::Receiver<Request>>,
    /// `xrd2ganglia status` asking for this engine's part, when the
    /// control socket is open: answered between two datagrams.
    asks: Option<mpsc::Receiver<Ask>>,
    /// The peer exchange's asks (entries, merges), with a `peer`.
    peer: Option<mpsc::Receiver<super::peer::Ask>>,
}

impl Receiver {
    /// A task whose engine shares `shared` with the other receive tasks'
    /// (the cluster names, and its part of the saved state).
    pub(super) fn new(
        in_force: watch::Receiver<Arc<InForce>>,
        counters: Arc<Counters>,
        shared: Shared,
        requests: Option<mpsc::Receiver<Request>>,
        asks: Option<mpsc::Receiver<Ask>>,
    ) -> Receiver {
        let settings = in_force.borrow().settings.clone();
        let engine = Engine::with_shared(settings, Instant::now(), shared);
        Receiver {
            in_force,
            counters,
            engine,
            requests,
            asks,
            peer: None,
        }
    }

    /// Answers the peer exchange's asks between two datagrams.
    pub(super) fn hear_peer(&mut self, asks: mpsc::Receiver<super::peer::Ask>) {
        self.peer = Some(asks);
    }

    /// Receives until `stop`, then handles what the kernel has already
    /// queued on the socket and hands in the sources' state.
    pub(super) async fn run(
        mut self,
        socket: UdpSocket,
        mut stop: watch::Receiver<bool>,
        save_every: Duration,
    ) {
        let mut save_tick = tokio::time::interval(save_every);
        save_tick.tick().await;
        let local = socket
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let mut now = self.in_force.borrow_and_update().clone();
        let mut events = Events::new(&self.counters, now.settings.log_interval);
        let mut buf = vec![0u8; MAX_DATAGRAM];
        loop {
            tokio::select! {
                biased;
                _ = stop.changed() => break,
                _ = save_tick.tick() => self.engine.hand_in_state(),
                Some(request) = next_request(&mut self.requests) => {
                    answer(&mut self.engine, &request, Instant::now(), &now, &mut events);
                }
                Some(ask) = next_request(&mut self.asks) => {
                    let _ = ask.send(status(&self.engine, &now));
                }
                Some(ask) = next_request(&mut self.peer) => {
                    super::peer::answer(&mut self.engine, ask);
                }
                Ok(()) = self.in_force.changed() => {
                    now = self.in_force.borrow_and_update().clone();
                    self.engine.reconfigure(now.settings.clone());
                    events = Events::new(&self.counters, now.settings.log_interval);
                }
                r = socket.recv_from(&mut buf) => match r {
                    Ok((n, from)) => {
                        let at = Instant::now();
                        self.engine.datagram(&buf[..n], from, at, &mut events);
                        // The hosts of sources it forgot leave the table first: room for
                        // this record's.
                        now.forget(self.engine.forgotten(), &events);
                        now.deliver(self.engine.batch(), from.ip(), at, &events);
                    }
                    Err(e) => events.at(Instant::now()).receive_failed(local, &e),
                },
            }
        }
        // Finish what the kernel has already queued for us.
        while let Ok((n, from)) = socket.try_recv_from(&mut buf) {
            let at = Instant::now();
            self.engine.datagram(&buf[..n], from, at, &mut events);
            // The hosts of sources it forgot leave the table first: room for
            // this record's.
            now.forget(self.engine.forgotten(), &events);
            now.deliver(self.engine.batch(), from.ip(), at, &events);
        }
        self.engine.hand_in_state();
    }
}

/// Answers what gmond asked for through the send queues: one host, or
/// after a quiet spell every host; counts it. The standby of a pair whose
/// peer is up answers nothing (the active one does).
pub(super) fn answer(
    engine: &mut Engine,
    request: &Request,
    at: Instant,
    now: &InForce,
    events: &mut Events<'_>,
) {
    if now.paused.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    match request {
        Request::Metric(request) => {
            let answered = engine.answer(request, at);
            events.metadata_request(&request.host, &request.name, answered);
            if answered {
                now.outbox.queue(engine.batch(), at, events);
            }
        }
        Request::Everything => {
            let hosts = engine.answer_everything(at, |batch: &PacketBatch| {
                now.outbox.queue(batch, at, events);
            });
            events.everything_asked(hosts);
        }
    }
}

/// This engine's part of the gateway's status, now.
fn status(engine: &Engine, now: &InForce) -> crate::status::Status {
    let s = &now.settings;
    // The gateway names the cluster only in the XML it serves.
    let cluster = (!s.xml_listen.is_empty()).then_some(s.cluster_name.as_str());
    engine.status(Instant::now(), std::time::SystemTime::now(), cluster)
}

/// The next request (or ask), or never when none are listened for.
async fn next_request<T>(queue: &mut Option<mpsc::Receiver<T>>) -> Option<T> {
    match queue {
        Some(q) => q.recv().await,
        None => std::future::pending().await,
    }
}
