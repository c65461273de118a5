//! Issue 37, item 1: the engine's output is typed. What a batch says of
//! each packet (the host once, its metadata's fields, its value, the
//! heartbeat's start) is what the packet itself carries, read back by the
//! XDR decoder (held to gmond's own by `ganglia/xdr/tests.rs`); the XML
//! table takes the former and decodes nothing.

use super::*;
use crate::engine::packets::Item;
use crate::ganglia::xdr::{self, Value};

/// Every real record, its first report (all metadata), its second and
/// its third (the fast path): each packet is what the batch says.
#[test]
fn a_batch_says_what_each_of_its_packets_carries() {
    let mut seen = (0, 0, 0, 0);
    for name in ["ds_idle", "ds_loaded", "mgr_cmsd", "spaces", "pfc_loaded"] {
        let record = fixture(name);
        let mut h = Harness::new("");
        for secs in 0..3 {
            h.feed(&record, "10.0.0.7:1094", secs);
            let batch = h.engine.batch();
            let host = batch
                .host
                .as_deref()
                .expect("a record's batch names its host");
            // The sender's address and the name the record's `src` gives.
            assert_eq!(&*host.ip, "10.0.0.7", "{name}");
            assert!(host.spoofed && !host.name.is_empty(), "{name}");
            let spoof = format!("{}:{}", host.ip, host.name);
            assert_eq!(batch.len(), batch.items().count(), "{name}");
            for ((key, item), (key2, _, bytes)) in batch.items().zip(batch.entries()) {
                assert_eq!(key, key2);
                let packet = xdr::decode(bytes).unwrap();
                assert_eq!(packet.id().host, spoof, "{name}");
                match (item, packet) {
                    (Item::HostMetadata, xdr::Packet::Metadata { id, meta }) => {
                        assert_eq!(id.name, "heartbeat");
                        assert!(meta.extra.iter().any(|(k, _)| k == "SPOOF_HEARTBEAT"));
                        seen.0 += 1;
                    }
                    (Item::Metadata(f), xdr::Packet::Metadata { id, meta }) => {
                        assert_eq!(f.name, id.name);
                        assert_eq!(f.value_type, meta.value_type);
                        assert_eq!(f.units, meta.units);
                        assert_eq!(f.slope, meta.slope);
                        assert_eq!((f.tmax, f.dmax), (meta.tmax, meta.dmax));
                        let extra = |k: &str| {
                            let found = meta.extra.iter().find(|(key, _)| key == k);
                            found.map(|(_, v)| v.to_string()).unwrap_or_default()
                        };
                        assert_eq!(f.group, extra("GROUP"), "{}", f.name);
                        assert_eq!(f.desc, extra("DESC"), "{}", f.name);
                        assert_eq!(f.title, extra("TITLE"), "{}", f.name);
                        seen.1 += 1;
                    }
                    (
                        Item::Value(v),
                        xdr::Packet::Value {
                            value: Value::Str(s),
                            ..
                        },
                    ) => {
                        assert_eq!(v, s.as_bytes());
                        seen.2 += 1;
                    }
                    (
                        Item::Started(n),
                        xdr::Packet::Value {
                            id,
                            value: Value::UInt(u),
                            ..
                        },
                    ) => {
                        assert_eq!(id.name, "heartbeat");
                        assert_eq!(n, u);
                        seen.3 += 1;
                    }
                    (item, packet) => panic!("{name}: {item:?} for {packet:?}"),
                }
            }
        }
    }
    // Every kind was seen: heartbeat metadata and start, metadata, values.
    assert!(
        seen.0 >= 5 && seen.1 > 100 && seen.2 > 300 && seen.3 >= 15,
        "{seen:?}"
    );
}
