//! The conflating send queue: what waits for one send channel's pacer.
//!
//! gmond shows the last value of each metric; a value that waits behind a
//! newer one of the same metric is worth nothing. So the queue holds at
//! most one pending metadata and one pending value per (host, metric): a
//! newer packet replaces the queued one in place (it keeps its place in
//! line, and the count of replaced packets is kept). Its length is bounded
//! by the number of metrics the gateway knows, whatever the load, and what
//! leaves is always the latest.
//!
//! Order: pending (host, metric) slots leave in the order they were first
//! queued; a slot's metadata leaves right before its value (gmond keeps a
//! value that comes before its metadata unshown). A record queues its
//! host's heartbeat before its metrics, so a new host's heartbeat is ahead
//! of them.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Instant;

use crate::engine::clock::Clock;
use crate::engine::packets::{ForgottenHost, PacketBatch, PacketKind, SlotKey, heartbeat_key};

/// What a drained queue keeps for the next burst; more is freed (and given
/// back to the system).
const KEEP_SLOTS: usize = 4096;
const KEEP_BYTES: usize = 1 << 20;

/// What a metadata packet costs in the sender's budget, in tokens (a value
/// costs one): the sender sets it per pacing mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prices {
    /// A metric's metadata (128).
    pub metadata: usize,
    /// A host's heartbeat metadata: the first packet of a new host, the
    /// one that creates it in gmond.
    pub host: usize,
}

/// Where a pending packet's bytes lie in the queue's arena (`len` 0: none).
#[derive(Clone, Copy, Default)]
struct ArenaSpan {
    start: u32,
    len: u32,
}

/// One (host, metric) with something to send.
struct Slot {
    key: SlotKey,
    metadata: ArenaSpan,
    value: ArenaSpan,
    /// When it was first queued, in ms from the queue's epoch (its age is
    /// the queue's latency).
    /// (u64: a queue that never drains is still right after 49 days; the
    /// slot is 40 bytes either way.)
    since_ms: u64,
}

const _: () = assert!(std::mem::size_of::<Slot>() == 40);

/// Pending packets of one send channel, conflated per (host, metric).
///
/// Packets are stored back to back in one arena: a pending packet costs
/// its bytes plus about 70 bytes of bookkeeping, and a drained queue gives
/// the memory of a burst back at once. A replaced or sent packet's bytes
/// stay in the arena as garbage until the queue drains, or until garbage
/// outgrows what is live (then the live packets are moved together).
pub struct SendQueue {
    clock: Clock,
    arena: Vec<u8>,
    garbage: usize,
    slots: Vec<Slot>,
    free: Vec<u32>,
    line: VecDeque<u32>,
    index: HashMap<SlotKey, u32, foldhash::fast::RandomState>,
    packets: usize,
    /// What the last drain took out for the caller to free once it has
    /// let go of the lock the queue is behind ([`take_freed`](Self::take_freed)).
    freed: Option<Box<Freed>>,
}

/// A drained queue's burst-sized buffers, taken out under the lane lock
/// and freed (and the heap trimmed) after it is released: freeing them and
/// `malloc_trim` are slow calls (munmap, madvise over the whole heap), and
/// a receive task that queues to the lane meanwhile must not wait on them.
#[derive(Default)]
pub struct Freed {
    arena: Vec<u8>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    line: VecDeque<u32>,
    index: HashMap<SlotKey, u32, foldhash::fast::RandomState>,
}

impl Freed {
    /// Frees the buffers, then hands the freed memory back to the system
    /// with `trim` ([`give_back_memory`] in the daemon). Call with no lock
    /// held.
    pub fn give_back(self: Box<Self>, trim: impl FnOnce()) {
        drop(self);
        trim();
    }
}

impl Default for SendQueue {
    fn default() -> SendQueue {
        SendQueue::starting_at(Instant::now())
    }
}

impl SendQueue {
    /// An empty queue whose clock starts at `epoch` (its times are kept
    /// in milliseconds from there: tests choose it).
    pub fn starting_at(epoch: Instant) -> SendQueue {
        SendQueue {
            clock: Clock::new(epoch),
            arena: Vec::new(),
            garbage: 0,
            slots: Vec::new(),
            free: Vec::new(),
            line: VecDeque::new(),
            index: HashMap::default(),
            packets: 0,
            freed: None,
        }
    }

    /// Queues one packet; true if it replaced a pending one (conflated).
    pub fn push(&mut self, key: SlotKey, kind: PacketKind, bytes: &[u8], now: Instant) -> bool {
        let at = match self.index.get(&key) {
            Some(&at) => at,
            None => {
                let slot = Slot {
                    key,
                    metadata: ArenaSpan::default(),
                    value: ArenaSpan::default(),
                    since_ms: self.clock.millis(now),
                };
                let at = match self.free.pop() {
                    Some(at) => {
                        self.slots[at as usize] = slot;
                        at
                    }
                    None => {
                        self.slots.push(slot);
                        (self.slots.len() - 1) as u32
                    }
                };
                self.index.insert(key, at);
                self.line.push_back(at);
                at
            }
        };
        if self.arena.len() + bytes.len() > u32::MAX as usize {
            self.compact();
        }
        let span = ArenaSpan {
            start: self.arena.len() as u32,
            len: bytes.len() as u32,
        };
        self.arena.extend_from_slice(bytes);
        let slot = &mut self.slots[at as usize];
        let place = match kind {
            PacketKind::Metadata => &mut slot.metadata,
            PacketKind::Value => &mut slot.value,
        };
        let conflated = place.len > 0;
        self.garbage += place.len as usize;
        *place = span;
        if !conflated {
            self.packets += 1;
        }
        if self.garbage > KEEP_BYTES && self.garbage > self.arena.len() / 2 {
            self.compact();
        }
        conflated
    }

    /// Queues every packet of a batch; returns how many replaced pending ones.
    pub fn push_batch(&mut self, batch: &PacketBatch, now: Instant) -> u64 {
        let mut conflated = 0;
        for (key, kind, bytes) in batch.entries() {
            conflated += u64::from(self.push(key, kind, bytes, now));
        }
        conflated
    }

    /// Moves packets to `out`, oldest slot first (metadata before value),
    /// while fewer than `budget` tokens are spent: a value costs one, a
    /// metadata packet what `prices` says (the last one taken may overdraw
    /// the budget by less than that). Returns the tokens spent.
    pub fn pop(&mut self, budget: usize, prices: Prices, out: &mut Outgoing) -> usize {
        self.pop_while(budget, prices, out, None, |_| false)
    }

    /// As [`pop`](Self::pop), but only the slots first queued at or before
    /// `cutoff`; a slot for which `skip` says true is dropped unsent.
    pub fn pop_queued_by(
        &mut self,
        cutoff: Instant,
        budget: usize,
        prices: Prices,
        out: &mut Outgoing,
        skip: impl Fn(SlotKey) -> bool,
    ) -> usize {
        self.pop_while(budget, prices, out, Some(cutoff), skip)
    }

    fn pop_while(
        &mut self,
        budget: usize,
        prices: Prices,
        out: &mut Outgoing,
        cutoff: Option<Instant>,
        skip: impl Fn(SlotKey) -> bool,
    ) -> usize {
        let cutoff_ms = match cutoff.map(|c| c.checked_duration_since(self.clock.epoch())) {
            // Nothing was queued before the queue's epoch.
            Some(None) => return 0,
            Some(Some(since_epoch)) => Some(since_epoch.as_millis()),
            None => None,
        };
        let heartbeat = heartbeat_key();
        let mut spent = 0;
        let mut packets = 0;
        while spent < budget {
            let Some(&at) = self.line.front() else {
                break;
            };
            let slot = &mut self.slots[at as usize];
            if cutoff_ms.is_some_and(|c| u128::from(slot.since_ms) > c) {
                break;
            }
            let (key, send) = (slot.key, !skip(slot.key));
            // A part of the slot (its metadata or its value) out, unless
            // skipped; its bytes are garbage in the arena from now.
            let (arena, garbage) = (&self.arena, &mut self.garbage);
            let mut hand_out = |part: &mut ArenaSpan, kind| {
                if send {
                    out.push(key, kind, span_bytes(arena, *part));
                }
                *garbage += part.len as usize;
                *part = ArenaSpan::default();
            };
            if slot.metadata.len > 0 {
                hand_out(&mut slot.metadata, PacketKind::Metadata);
                packets += 1;
                if send {
                    spent += if key.metric == heartbeat {
                        prices.host
                    } else {
                        prices.metadata
                    };
                }
                if spent >= budget && slot.value.len > 0 {
                    break;
                }
            }
            if slot.value.len > 0 {
                hand_out(&mut slot.value, PacketKind::Value);
                packets += 1;
                spent += usize::from(send);
            }
            self.line.pop_front();
            self.index.remove(&key);
            self.free.push(at);
        }
        self.packets -= packets;
        if self.line.is_empty() {
            self.drained();
        }
        spent
    }

    /// Drops every pending packet of these hosts (their sources were
    /// forgotten); returns how many packets that was.
    pub fn forget_hosts(&mut self, hosts: &[ForgottenHost]) -> usize {
        if hosts.is_empty() || self.packets == 0 {
            return 0;
        }
        let gone: HashSet<u64, foldhash::fast::RandomState> =
            hosts.iter().map(|h| h.host).collect();
        let (slots, index, free, garbage) = (
            &mut self.slots,
            &mut self.index,
            &mut self.free,
            &mut self.garbage,
        );
        let mut packets = 0;
        self.line.retain(|&at| {
            let slot = &mut slots[at as usize];
            if !gone.contains(&slot.key.host) {
                return true;
            }
            for part in [&mut slot.metadata, &mut slot.value] {
                if part.len > 0 {
                    packets += 1;
                    *garbage += part.len as usize;
                    *part = ArenaSpan::default();
                }
            }
            index.remove(&slot.key);
            free.push(at);
            false
        });
        self.packets -= packets;
        if self.line.is_empty() {
            self.drained();
        }
        packets
    }

    /// Whether a packet of this (host, metric) is pending.
    pub fn contains(&self, key: SlotKey) -> bool {
        self.index.contains_key(&key)
    }

    /// Drops everything pending; returns how many packets that was.
    pub fn clear(&mut self) -> usize {
        let n = self.packets;
        self.line.clear();
        self.index.clear();
        self.packets = 0;
        self.drained();
        n
    }

    /// Packets pending.
    pub fn len(&self) -> usize {
        self.packets
    }

    pub fn is_empty(&self) -> bool {
        self.packets == 0
    }

    /// When the oldest pending slot was queued (to the millisecond).
    pub fn oldest(&self) -> Option<Instant> {
        self.line
            .front()
            .map(|&at| self.clock.at_millis(self.slots[at as usize].since_ms))
    }

    /// Bytes the queue holds now (arena and bookkeeping).
    #[cfg(test)]
    fn footprint(&self) -> usize {
        self.arena.capacity()
            + self.slots.capacity() * std::mem::size_of::<Slot>()
            + self.index.capacity() * (std::mem::size_of::<(SlotKey, u32)>() + 1)
            + self.line.capacity() * 4
    }

    /// Moves the live packets together, in line order.
    fn compact(&mut self) {
        let live = self.arena.len() - self.garbage;
        let mut arena = Vec::with_capacity(live.max(KEEP_BYTES));
        for &at in &self.line {
            let slot = &mut self.slots[at as usize];
            for span in [&mut slot.metadata, &mut slot.value] {
                if span.len > 0 {
                    let start = arena.len() as u32;
                    arena.extend_from_slice(span_bytes(&self.arena, *span));
                    span.start = start;
                }
            }
        }
        self.arena = arena;
        self.garbage = 0;
    }

    /// Nothing is pending: the arena starts over, and what only a burst
    /// needed is set aside to be freed ([`take_freed`](Self::take_freed)).
    /// Swapped for buffers of the kept size, not shrunk in place: a
    /// realloc of a large block is a syscall (mremap), and the caller
    /// holds the lane lock.
    fn drained(&mut self) {
        self.arena.clear();
        self.garbage = 0;
        if self.arena.capacity() > KEEP_BYTES {
            let arena = std::mem::replace(&mut self.arena, Vec::with_capacity(KEEP_BYTES));
            self.freed.get_or_insert_default().arena = arena;
        }
        if self.slots.len() > KEEP_SLOTS {
            self.slots.clear();
            self.free.clear();
            let freed = self.freed.get_or_insert_default();
            freed.slots = std::mem::replace(&mut self.slots, Vec::with_capacity(KEEP_SLOTS));
            freed.free = std::mem::replace(&mut self.free, Vec::with_capacity(KEEP_SLOTS));
            freed.line = std::mem::replace(&mut self.line, VecDeque::with_capacity(KEEP_SLOTS));
            freed.index = std::mem::replace(
                &mut self.index,
                HashMap::with_capacity_and_hasher(KEEP_SLOTS, Default::default()),
            );
        }
    }

    /// The buffers the last drain set aside, if any: to be freed with
    /// [`Freed::give_back`] once the lock the queue is behind is released.
    pub fn take_freed(&mut self) -> Option<Box<Freed>> {
        self.freed.take()
    }
}

fn span_bytes(arena: &[u8], span: ArenaSpan) -> &[u8] {
    &arena[span.start as usize..(span.start + span.len) as usize]
}

/// Returns freed heap memory to the system: glibc keeps what a burst freed
/// (its mmap threshold grows with the blocks it frees), so a gateway that
/// once queued a site's first reports would keep that memory for good.
/// Walks the whole heap: called with no lane lock held ([`Freed`]).
pub fn give_back_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Packets taken from the queue for one send, back to back.
#[derive(Default)]
pub struct Outgoing {
    data: Vec<u8>,
    /// Per packet: where it ends in `data`, and what it is.
    ends: Vec<(usize, SlotKey, PacketKind)>,
}

impl Outgoing {
    fn push(&mut self, key: SlotKey, kind: PacketKind, packet: &[u8]) {
        self.data.extend_from_slice(packet);
        self.ends.push((self.data.len(), key, kind));
    }

    pub fn clear(&mut self) {
        self.data.clear();
        self.ends.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Each packet with its (host, metric) and kind, in order.
    pub fn entries(&self) -> impl Iterator<Item = (SlotKey, PacketKind, &[u8])> {
        let mut start = 0;
        self.ends.iter().map(move |&(end, key, kind)| {
            let p = &self.data[start..end];
            start = end;
            (key, kind, p)
        })
    }

    pub fn packets(&self) -> Vec<&[u8]> {
        self.entries().map(|(_, _, p)| p).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn key(host: u64, metric: u64) -> SlotKey {
        SlotKey { host, metric }
    }

    const ONE: Prices = Prices {
        metadata: 1,
        host: 1,
    };

    fn drain(q: &mut SendQueue, budget: usize) -> Vec<Vec<u8>> {
        let mut out = Outgoing::default();
        q.pop(budget, ONE, &mut out);
        out.packets().into_iter().map(<[u8]>::to_vec).collect()
    }

    #[test]
    fn a_newer_value_replaces_the_queued_one_in_place() {
        let mut q = SendQueue::default();
        let t = Instant::now();
        assert!(!q.push(key(1, 1), PacketKind::Value, b"a1", t));
        assert!(!q.push(key(1, 2), PacketKind::Value, b"b1", t));
        assert!(q.push(key(1, 1), PacketKind::Value, b"a2", t));
        assert_eq!(q.len(), 2);
        assert_eq!(drain(&mut q, 10), [b"a2".to_vec(), b"b1".to_vec()]);
        assert!(q.is_empty());
        assert_eq!(q.oldest(), None);
    }

    #[test]
    fn metadata_leaves_before_its_value_even_when_queued_after_it() {
        let mut q = SendQueue::default();
        let t = Instant::now();
        q.push(key(1, 0), PacketKind::Value, b"hb", t);
        q.push(key(1, 1), PacketKind::Value, b"v1", t);
        q.push(key(1, 1), PacketKind::Metadata, b"m1", t);
        assert_eq!(q.len(), 3);
        // A budget that ends between metadata and value leaves the value first in line.
        assert_eq!(drain(&mut q, 2), [b"hb".to_vec(), b"m1".to_vec()]);
        assert_eq!(q.len(), 1);
        q.push(key(1, 1), PacketKind::Value, b"v2", t);
        assert_eq!(drain(&mut q, 5), [b"v2".to_vec()]);
    }

    #[test]
    fn metadata_costs_more_tokens_and_a_heartbeat_metadata_its_own() {
        let mut q = SendQueue::default();
        let t = Instant::now();
        q.push(key(1, heartbeat_key()), PacketKind::Metadata, b"h", t);
        for m in 0..4 {
            q.push(key(1, m), PacketKind::Metadata, b"m", t);
            q.push(key(1, m), PacketKind::Value, b"v", t);
        }
        let prices = Prices {
            metadata: 3,
            host: 5,
        };
        let mut out = Outgoing::default();
        // 11 tokens: the host (5), metadata (3) + value (1), then
        // metadata (3): overdrawn by 1.
        assert_eq!(q.pop(11, prices, &mut out), 12);
        assert_eq!(out.packets(), [b"h", b"m", b"v", b"m"]);
        assert_eq!(q.len(), 5);
    }

    #[test]
    fn bounded_by_metrics_not_by_load_and_ages_by_first_queued() {
        let mut q = SendQueue::default();
        let t0 = Instant::now();
        for round in 0..1000u64 {
            let t = t0 + Duration::from_millis(round);
            for m in 0..50 {
                q.push(key(7, m), PacketKind::Value, &round.to_be_bytes(), t);
            }
        }
        assert_eq!(q.len(), 50);
        let oldest = q.oldest().unwrap();
        assert!(oldest <= t0 && t0 - oldest < Duration::from_millis(1));
        let out = drain(&mut q, 100);
        assert!(out.iter().all(|p| p == &999u64.to_be_bytes()));
    }

    #[test]
    fn a_forgotten_host_leaves_the_queue_and_the_others_keep_their_order() {
        let mut q = SendQueue::default();
        let t = Instant::now();
        let gone = |host| ForgottenHost { host, cluster: 9 };
        q.push(key(1, 1), PacketKind::Metadata, b"1m", t);
        q.push(key(1, 1), PacketKind::Value, b"1v", t);
        q.push(key(2, 1), PacketKind::Value, b"2v", t);
        q.push(key(3, 1), PacketKind::Value, b"3v", t);
        q.push(key(2, 2), PacketKind::Value, b"2w", t);
        q.push(key(1, 2), PacketKind::Value, b"1w", t);
        assert_eq!(q.forget_hosts(&[gone(2), gone(4)]), 2);
        assert_eq!(q.len(), 4);
        assert!(!q.contains(key(2, 1)) && !q.contains(key(2, 2)));
        // A forgotten host that reports again queues afresh, behind the rest.
        q.push(key(2, 1), PacketKind::Value, b"2x", t);
        assert_eq!(
            drain(&mut q, 10),
            [&b"1m"[..], b"1v", b"3v", b"1w", b"2x"].map(<[u8]>::to_vec)
        );
        assert!(q.is_empty());
        // Forgetting every host pending drains the queue.
        q.push(key(5, 1), PacketKind::Value, b"5v", t);
        assert_eq!(q.forget_hosts(&[gone(5)]), 1);
        assert!(q.is_empty() && q.oldest().is_none());
        assert_eq!(q.forget_hosts(&[gone(5)]), 0);
    }

    #[test]
    fn a_drained_queue_gives_its_burst_back_and_garbage_is_compacted() {
        let mut q = SendQueue::default();
        let t = Instant::now();
        let meta = [b'm'; 300];
        for m in 0..(KEEP_SLOTS as u64 * 4) {
            q.push(key(1, m), PacketKind::Metadata, &meta, t);
            q.push(key(1, m), PacketKind::Value, b"v", t);
        }
        assert_eq!(q.len(), KEEP_SLOTS * 8);
        let big = q.footprint();
        assert!(big > KEEP_SLOTS * 4 * 300, "{big}");
        assert_eq!(drain(&mut q, usize::MAX).len(), KEEP_SLOTS * 8);
        assert!(q.footprint() < big / 2, "{} of {big}", q.footprint());
        // The burst's buffers are handed out to be freed once the lane's
        // lock is let go, and only once.
        let freed = q.take_freed().expect("the burst's buffers");
        assert!(freed.arena.capacity() > KEEP_BYTES);
        assert!(freed.slots.capacity() >= KEEP_SLOTS * 4);
        let mut trimmed = false;
        freed.give_back(|| trimmed = true);
        assert!(trimmed);
        assert!(q.take_freed().is_none());
        // Values replaced over and over: the arena does not grow with them.
        for round in 0..10_000u64 {
            for m in 0..10 {
                q.push(key(2, m), PacketKind::Value, &[b'x'; 200], t);
            }
            assert!(q.arena.len() <= 2 * KEEP_BYTES + 4000, "round {round}");
        }
        assert_eq!(q.len(), 10);
        let out = drain(&mut q, usize::MAX);
        assert!(out.iter().all(|p| p == &[b'x'; 200]));
        // A drain within what the queue keeps frees nothing.
        assert!(q.take_freed().is_none());
        assert!(!q.push(key(1, 1), PacketKind::Value, b"again", t));
        assert_eq!(q.clear(), 1);
        assert!(q.is_empty());
    }
}
