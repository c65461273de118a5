//! One receive task per listening socket: datagrams in, packets queued.
//!
//! Each task owns its [`Pipeline`] (parser, mapper, the state of the
//! sources that send to its socket), so the per-datagram path takes no
//! lock but the send queues' (once per record, [`Outbox::queue`](super::sender::Outbox::queue)), and
//! never waits for a send: the senders pace the queues out.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};

use crate::events::{Counters, Events};

use super::Active;
use super::pipeline::Pipeline;
use super::requests::Ask;

/// Largest datagram we accept: xrootd 5.9+ sends up to 64 KiB.
const MAX_DATAGRAM: usize = 65536;

/// One receive task: a socket and everything its datagrams need.
pub(super) struct Receiver {
    active: watch::Receiver<Arc<Active>>,
    counters: Arc<Counters>,
    pub(super) pipeline: Pipeline,
    /// gmond's metadata requests, when they are listened for.
    pub(super) requests: Option<mpsc::Receiver<Ask>>,
}

impl Receiver {
    pub(super) fn new(active: watch::Receiver<Arc<Active>>, counters: Arc<Counters>) -> Receiver {
        let pipeline = Pipeline::new(&active.borrow().settings);
        Receiver {
            active,
            counters,
            pipeline,
            requests: None,
        }
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
        let mut current = self.active.borrow_and_update().clone();
        let mut events = Events::new(&self.counters, current.settings.log_interval);
        let mut buf = vec![0u8; MAX_DATAGRAM];
        loop {
            tokio::select! {
                biased;
                _ = stop.changed() => break,
                _ = save_tick.tick() => self.pipeline.hand_in_state(),
                Some(request) = next_request(&mut self.requests) => {
                    self.pipeline.handle_request(&request, Instant::now(), &current.settings, &current.outbox, &mut events);
                }
                Ok(()) = self.active.changed() => {
                    current = self.active.borrow_and_update().clone();
                    self.pipeline.reconfigure(&current.settings);
                    events = Events::new(&self.counters, current.settings.log_interval);
                }
                r = socket.recv_from(&mut buf) => match r {
                    Ok((n, from)) => self.pipeline.handle(&buf[..n], from, Instant::now(), &current, &mut events),
                    Err(e) => events.receive_failed(local, &e),
                },
            }
        }
        // Finish what the kernel has already queued for us.
        while let Ok((n, from)) = socket.try_recv_from(&mut buf) {
            self.pipeline
                .handle(&buf[..n], from, Instant::now(), &current, &mut events);
        }
        self.pipeline.hand_in_state();
    }
}

/// The next request, or never when requests are not listened for.
async fn next_request(queue: &mut Option<mpsc::Receiver<Ask>>) -> Option<Ask> {
    match queue {
        Some(q) => q.recv().await,
        None => std::future::pending().await,
    }
}
