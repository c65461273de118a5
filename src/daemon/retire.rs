//! A host that moved to a cluster with other gmonds leaves the old one:
//! its metadata, sent there again with DMAX 1 s.
//!
//! gmond 3.7.2 has no message that removes a host or a metric (its
//! packets are 128-136, `lib/gm_protocol.x`). It drops what has expired
//! in `cleanup_data` (`gmond/gmond.c`): a metric whose DMAX is not 0 and
//! whose last metadata is older than DMAX, a host silent for longer than
//! `host_dmax` (if not 0). It runs that every `cleanup_threshold` seconds
//! (300 by default), on its collection tick. So the metrics of a host that
//! moved leave the old gmond at its next cleanup after this (at most
//! `cleanup_threshold` and a tick later), instead of after their own DMAX
//! (`dmax`, an hour by default) while gmond shows their last values; the
//! host itself, without metrics, stays until gmond's `host_dmax`.
//!
//! Only on a move (a reload, a new site or host name): the batch's
//! metadata decoded and encoded again, nothing per datagram.

use crate::engine::packets::{PacketBatch, PacketKind, SlotKey};
use crate::ganglia::xdr::{self, Packet};

/// What a metadata packet's DMAX is set to, in seconds (0 would be
/// "never").
pub const RETIRE_DMAX: u32 = 1;

/// The batch's metadata packets with DMAX [`RETIRE_DMAX`], each with its
/// queue key. The batch of a move holds every metadata of its host (it is
/// new to its new cluster).
pub fn packets(batch: &PacketBatch) -> Vec<(SlotKey, Vec<u8>)> {
    batch
        .entries()
        .filter(|(_, kind, _)| *kind == PacketKind::Metadata)
        .filter_map(|(key, _, bytes)| match xdr::decode(bytes) {
            Ok(Packet::Metadata { id, mut meta }) => {
                meta.dmax = RETIRE_DMAX;
                let mut out = Vec::with_capacity(bytes.len());
                xdr::encode(&mut out, &Packet::Metadata { id, meta });
                Some((key, out))
            }
            _ => None,
        })
        .collect()
}
