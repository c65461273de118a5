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
//! metadata, by its fields ([`Item::Metadata`]: nothing decoded), encoded
//! again with the short DMAX; nothing per datagram.

use crate::engine::packets::{Item, MetaFields, MetadataOf, PacketBatch};

/// What a metadata packet's DMAX is set to, in seconds (0 would be
/// "never").
pub const RETIRE_DMAX: u32 = 1;

/// The batch's metadata packets with DMAX [`RETIRE_DMAX`], in a batch of
/// their own (each with its queue key). The batch of a move holds every
/// metadata of its host (it is new to its new cluster).
pub fn packets(batch: &PacketBatch) -> PacketBatch {
    let mut out = PacketBatch::default();
    let Some(host) = batch.host.as_deref() else {
        return out;
    };
    // gmond's name for a spoofed host, as the wire carries it.
    let spoof = format!("{}:{}", host.ip, host.name);
    for (key, item) in batch.items() {
        if let Item::Metadata(m) = item {
            out.metadata_of(MetadataOf {
                key,
                host: if host.spoofed { &spoof } else { &host.name },
                spoof: host.spoofed,
                fields: MetaFields {
                    dmax: RETIRE_DMAX,
                    ..m
                },
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::packets::PacketKind;
    use crate::engine::tests::Harness;
    use crate::ganglia::xdr::{Packet, decode};

    /// Every metric's metadata of a real record's first batch (a new host:
    /// all of them), sent again as gmond reads it: the same packet, field by
    /// field, but for DMAX 1. The heartbeat's is not: gmond takes it as a
    /// sign of life, which would keep the host there the longer.
    #[test]
    fn a_moved_hosts_metadata_goes_again_with_dmax_1_and_nothing_else_changed() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/records/ds_loaded.xml");
        let record = std::fs::read(path).unwrap();
        let mut h = Harness::new("");
        h.feed(&record, "10.1.2.3:1094", 0);
        let batch = h.engine.batch();
        let originals: Vec<_> = batch
            .entries()
            .filter(|(_, kind, _)| *kind == PacketKind::Metadata)
            .filter_map(|(key, _, bytes)| match decode(bytes).unwrap() {
                Packet::Metadata { id, meta }
                    if !meta.extra.iter().any(|(k, _)| k == "SPOOF_HEARTBEAT") =>
                {
                    Some((key, id.into_owned(), meta.into_owned()))
                }
                _ => None,
            })
            .collect();
        assert!(originals.len() > 50, "{}", originals.len());
        let again = packets(batch);
        let resent: Vec<_> = again
            .entries()
            .map(|(key, kind, bytes)| {
                assert_eq!(kind, PacketKind::Metadata);
                match decode(bytes).unwrap() {
                    Packet::Metadata { id, meta } => (key, id.into_owned(), meta.into_owned()),
                    other => panic!("not metadata: {other:?}"),
                }
            })
            .collect();
        assert_eq!(resent.len(), originals.len());
        for ((key, id, meta), (rkey, rid, rmeta)) in originals.iter().zip(&resent) {
            assert_eq!((key, id), (rkey, rid));
            assert_eq!(rmeta.dmax, RETIRE_DMAX);
            let mut expected = meta.clone();
            expected.dmax = RETIRE_DMAX;
            assert_eq!(rmeta, &expected);
        }
    }
}
