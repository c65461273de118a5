//! The connections an XML port serves: each client address's count and
//! turn to write, the caps, and which connection a new one closes over
//! them (the least progress first, [`Progress::order`]).

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio::task::AbortHandle;

use crate::events::Events;

use super::{MAX_CONNECTIONS, MAX_PER_ADDRESS, Outcome, READS, is_out_of_descriptors};

/// A connection's progress: when its socket last took a write
/// (milliseconds since the accept loop began), how many bytes it took, and
/// whether it waits for its client (its socket is full) or for us (a
/// connection the runtime has not run for a while is not the client's
/// fault).
pub(super) struct Progress {
    pub(super) at_ms: AtomicU64,
    pub(super) bytes: AtomicU64,
    pub(super) waiting: AtomicBool,
}

impl Progress {
    /// The eviction order, least progress first. A connection that has
    /// not shown it reads (taken [`READS`] bytes: a client that reads
    /// nothing takes what the socket buffers hold, less than that) goes
    /// before one that has; within each, one waiting for its client (its
    /// socket full) goes first, the longest waiting first, then one that
    /// waits for us (not run yet, or rendering), the fewest bytes taken
    /// and the newest first. A poll being read is rarely waiting, and has
    /// shown it reads within milliseconds; clients that never read, or
    /// read a byte a second, are waiting all the time; a burst of new
    /// connections closes its own members first.
    pub(super) fn order(&self, id: u64) -> (bool, bool, u64, u64) {
        let (at, bytes) = (self.at_ms.load(Relaxed), self.bytes.load(Relaxed));
        let (reads, waiting) = (bytes >= READS, self.waiting.load(Relaxed));
        if waiting {
            (reads, false, at, u64::MAX - id)
        } else {
            (reads, true, bytes, u64::MAX - id)
        }
    }
}

/// A connection being served.
pub(super) struct Connection {
    pub(super) peer: SocketAddr,
    pub(super) progress: Arc<Progress>,
    pub(super) task: AbortHandle,
}

/// The connections being served, by number, and each client address's
/// count and turn.
#[derive(Default)]
pub(super) struct Connections {
    pub(super) by_id: HashMap<u64, Connection>,
    pub(super) next: u64,
    pub(super) by_address: HashMap<IpAddr, Address>,
}

/// A client address's connections: how many, and its turn to write.
pub(super) struct Address {
    pub(super) count: usize,
    /// One piece of one of the address's documents is rendered and
    /// written at a time: the writing is shared between addresses, not
    /// between connections ([`super::write_document`]).
    pub(super) turn: Arc<Semaphore>,
}

impl Connections {
    pub(super) fn per_address(&self, ip: IpAddr) -> usize {
        self.by_address.get(&ip).map_or(0, |a| a.count)
    }

    /// The turn of `ip`'s connections ([`Address::turn`]).
    pub(super) fn turn(&mut self, ip: IpAddr) -> Arc<Semaphore> {
        let a = self.by_address.entry(ip).or_insert_with(|| Address {
            count: 0,
            turn: Arc::new(Semaphore::new(1)),
        });
        a.turn.clone()
    }

    /// A connection taken in (its address's turn taken first).
    pub(super) fn add(&mut self, id: u64, c: Connection) {
        self.by_address
            .entry(c.peer.ip())
            .or_insert_with(|| Address {
                count: 0,
                turn: Arc::new(Semaphore::new(1)),
            })
            .count += 1;
        self.by_id.insert(id, c);
    }

    /// A connection gone (finished or evicted), if it was still here.
    pub(super) fn remove(&mut self, id: u64) -> Option<Connection> {
        let c = self.by_id.remove(&id)?;
        let ip = c.peer.ip();
        if let Some(a) = self.by_address.get_mut(&ip) {
            a.count -= 1;
            if a.count == 0 {
                self.by_address.remove(&ip);
            }
        }
        Some(c)
    }

    /// The address holding the most connections (the one to give one
    /// up when all are taken).
    pub(super) fn busiest(&self) -> Option<IpAddr> {
        self.by_address
            .iter()
            .max_by_key(|(_, a)| a.count)
            .map(|(ip, _)| *ip)
    }

    /// Room for a new connection from `ip`: a slot of its address, then
    /// one of all (given up by the address holding the most), each taken
    /// from the one with the least progress ([`Progress::order`]).
    pub(super) fn make_room(&mut self, ip: IpAddr, local: SocketAddr, events: &mut Events<'_>) {
        if self.per_address(ip) >= MAX_PER_ADDRESS
            && let Some(old) = self.evict_least_progress(Some(ip))
        {
            events
                .at(Instant::now())
                .xml_evicted(local, old, "a new connection from its address");
        }
        // All taken: the address holding the most gives one up, so that
        // addresses that open connection after connection close their
        // own, not an address's one poll (fairness between addresses).
        if self.by_id.len() >= MAX_CONNECTIONS
            && let Some(old) = self.evict_least_progress(self.busiest())
        {
            events
                .at(Instant::now())
                .xml_evicted(local, old, "a new connection");
        }
    }

    /// An accept that failed: out of descriptors, one is freed (of the
    /// address holding the most; its task
    /// drops its socket when the runtime next runs it) to try again at once.
    pub(super) async fn accept_failed(
        &mut self,
        e: &io::Error,
        local: SocketAddr,
        events: &mut Events<'_>,
    ) {
        events.at(Instant::now()).xml_accept_failed(local, e);
        if is_out_of_descriptors(e) {
            match self.evict_least_progress(self.busiest()) {
                Some(old) => {
                    events
                        .at(Instant::now())
                        .xml_evicted(local, old, "no file descriptor left");
                    tokio::task::yield_now().await;
                }
                // Held by others: nothing of ours to give back.
                None => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    }

    /// A writer's outcome, counted unless its connection was evicted
    /// meanwhile (counted as that).
    pub(super) fn finished(
        &mut self,
        (id, peer, outcome): Outcome,
        local: SocketAddr,
        events: &mut Events<'_>,
    ) {
        if self.remove(id).is_some() {
            match outcome {
                Ok(w) => events.xml_polled(w.hosts, w.renamed),
                Err(e) => events.at(Instant::now()).xml_unfinished(local, peer, &e),
            }
        }
    }

    pub(super) fn evict_least_progress(&mut self, ip: Option<IpAddr>) -> Option<SocketAddr> {
        let (&id, _) = self
            .by_id
            .iter()
            .filter(|(_, c)| ip.is_none_or(|ip| c.peer.ip() == ip))
            .min_by_key(|(id, c)| c.progress.order(**id))?;
        let c = self.remove(id)?;
        c.task.abort();
        Some(c.peer)
    }
}
