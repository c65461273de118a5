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

use std::collections::{HashMap, VecDeque};
use std::time::Instant;

use super::packets::{PacketBatch, PacketKind, SlotKey};

/// Emptied slots kept for reuse past a drained queue (their buffers are
/// kept too); more are freed.
const KEEP_FREE: usize = 4096;

/// One (host, metric) with something to send.
struct Slot {
    key: SlotKey,
    metadata: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    /// When it was first queued (its age is the queue's latency).
    since: Instant,
}

/// Pending packets of one send channel, conflated per (host, metric).
#[derive(Default)]
pub struct SendQueue {
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Spare packet buffers (a popped packet's, for the next push).
    spare: Vec<Vec<u8>>,
    line: VecDeque<u32>,
    index: HashMap<SlotKey, u32, foldhash::fast::RandomState>,
    packets: usize,
}

impl SendQueue {
    /// Queues one packet; true if it replaced a pending one (conflated).
    pub fn push(&mut self, key: SlotKey, kind: PacketKind, bytes: &[u8], now: Instant) -> bool {
        let at = match self.index.get(&key) {
            Some(&at) => at,
            None => {
                let slot = Slot {
                    key,
                    metadata: None,
                    value: None,
                    since: now,
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
        let slot = &mut self.slots[at as usize];
        let place = match kind {
            PacketKind::Metadata => &mut slot.metadata,
            PacketKind::Value => &mut slot.value,
        };
        let conflated = place.is_some();
        let buf = place.get_or_insert_with(|| self.spare.pop().unwrap_or_default());
        buf.clear();
        buf.extend_from_slice(bytes);
        if !conflated {
            self.packets += 1;
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
    /// metadata packet `metadata_cost` (the last one taken may overdraw
    /// the budget by less than that). Returns the tokens spent.
    pub fn pop(&mut self, budget: usize, metadata_cost: usize, out: &mut Outgoing) -> usize {
        let mut spent = 0;
        let mut packets = 0;
        while spent < budget {
            let Some(&at) = self.line.front() else {
                break;
            };
            let slot = &mut self.slots[at as usize];
            if let Some(p) = slot.metadata.take() {
                out.push(&p);
                self.spare.push(p);
                spent += metadata_cost;
                packets += 1;
                if spent >= budget && slot.value.is_some() {
                    break;
                }
            }
            if let Some(p) = slot.value.take() {
                out.push(&p);
                self.spare.push(p);
                spent += 1;
                packets += 1;
            }
            let key = slot.key;
            self.line.pop_front();
            self.index.remove(&key);
            self.free.push(at);
        }
        self.packets -= packets;
        if self.line.is_empty() {
            self.trim();
        }
        spent
    }

    /// Drops everything pending; returns how many packets that was.
    pub fn clear(&mut self) -> usize {
        let n = self.packets;
        self.line.clear();
        self.index.clear();
        self.slots.clear();
        self.free.clear();
        self.packets = 0;
        n
    }

    /// Packets pending.
    pub fn len(&self) -> usize {
        self.packets
    }

    pub fn is_empty(&self) -> bool {
        self.packets == 0
    }

    /// When the oldest pending slot was queued.
    pub fn oldest(&self) -> Option<Instant> {
        self.line.front().map(|&at| self.slots[at as usize].since)
    }

    /// After a burst drained: frees what only the burst needed.
    fn trim(&mut self) {
        if self.slots.len() > KEEP_FREE {
            self.slots.clear();
            self.free.clear();
            self.slots.shrink_to(KEEP_FREE);
            self.index.shrink_to(KEEP_FREE);
            self.line.shrink_to(KEEP_FREE);
        }
        if self.spare.len() > KEEP_FREE {
            self.spare.truncate(KEEP_FREE);
            self.spare.shrink_to(KEEP_FREE);
        }
    }
}

/// Packets taken from the queue for one send, back to back.
#[derive(Default)]
pub struct Outgoing {
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl Outgoing {
    fn push(&mut self, packet: &[u8]) {
        self.data.extend_from_slice(packet);
        self.ends.push(self.data.len());
    }

    pub fn clear(&mut self) {
        self.data.clear();
        self.ends.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The packets, for one sendmmsg pass.
    pub fn packets(&self) -> Vec<&[u8]> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&end| {
                let p = &self.data[start..end];
                start = end;
                p
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(host: u64, metric: u64) -> SlotKey {
        SlotKey { host, metric }
    }

    fn drain(q: &mut SendQueue, budget: usize) -> Vec<Vec<u8>> {
        let mut out = Outgoing::default();
        q.pop(budget, 1, &mut out);
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
    fn metadata_costs_more_tokens() {
        let mut q = SendQueue::default();
        let t = Instant::now();
        for m in 0..4 {
            q.push(key(1, m), PacketKind::Metadata, b"m", t);
            q.push(key(1, m), PacketKind::Value, b"v", t);
        }
        let mut out = Outgoing::default();
        // 6 tokens: metadata (3) + value (1), then metadata (3): overdrawn by 1.
        assert_eq!(q.pop(6, 3, &mut out), 7);
        assert_eq!(out.packets(), [b"m", b"v", b"m"]);
        assert_eq!(q.len(), 5);
    }

    #[test]
    fn bounded_by_metrics_not_by_load_and_ages_by_first_queued() {
        let mut q = SendQueue::default();
        let t0 = Instant::now();
        for round in 0..1000u64 {
            let t = t0 + std::time::Duration::from_millis(round);
            for m in 0..50 {
                q.push(key(7, m), PacketKind::Value, &round.to_be_bytes(), t);
            }
        }
        assert_eq!(q.len(), 50);
        assert_eq!(q.oldest(), Some(t0));
        let out = drain(&mut q, 100);
        assert!(out.iter().all(|p| p == &999u64.to_be_bytes()));
    }

    #[test]
    fn slots_and_buffers_are_reused_and_trimmed() {
        let mut q = SendQueue::default();
        let t = Instant::now();
        for m in 0..(KEEP_FREE as u64 * 2) {
            q.push(key(1, m), PacketKind::Metadata, b"m", t);
            q.push(key(1, m), PacketKind::Value, b"v", t);
        }
        assert_eq!(q.len(), KEEP_FREE * 4);
        assert_eq!(drain(&mut q, usize::MAX).len(), KEEP_FREE * 4);
        assert!(q.slots.is_empty() && q.spare.len() <= KEEP_FREE);
        assert!(!q.push(key(1, 1), PacketKind::Value, b"again", t));
        assert_eq!(q.clear(), 1);
        assert!(q.is_empty());
    }
}
