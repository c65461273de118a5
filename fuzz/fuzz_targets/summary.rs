//! Any datagram through the whole per-datagram path: parse, map, schedule,
//! encode. Nothing may panic; every packet must fit gmond's limit, decode,
//! and carry only names safe for gmond's XML. The fast parser must read the
//! datagram exactly as the quick-xml reference does.
#![no_main]

use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use xrd2ganglia::config::{FileConfig, Overrides, Settings, validate};
use xrd2ganglia::events::{Counters, Events};
use xrd2ganglia::ganglia::sanitize;
use xrd2ganglia::ganglia::xdr::{self, Packet};
use xrd2ganglia::engine::Engine;
use xrd2ganglia::summary::SummaryParser;

static SETTINGS: LazyLock<Settings> = LazyLock::new(|| {
    let overrides = Overrides {
        send: vec!["127.0.0.1:9".into()],
        ..Default::default()
    };
    validate(FileConfig::default(), "fuzz".into(), &overrides).expect("default settings")
});

fuzz_target!(|data: &[u8]| {
    let (mut fast, mut reference) = (SummaryParser::new(), SummaryParser::new());
    assert_eq!(
        fast.parse(data).map(|r| format!("{r:?}")),
        reference.parse_reference(data).map(|r| format!("{r:?}")),
    );
    let counters = Counters::default();
    let mut events = Events::new(&counters, Duration::from_secs(3600));
    let mut pipeline = Engine::new(Arc::new(SETTINGS.clone()), Instant::now());
    let from = "10.1.2.3:1094".parse().unwrap();
    // The same datagram three times, 10 s apart: the third one may take the
    // template fast path, which must send exactly what the full path sends.
    let mut full = Engine::new(Arc::new(SETTINGS.clone()), Instant::now());
    full.set_fast_path(false);
    let t0 = Instant::now();
    for i in 0..3 {
        let at = t0 + Duration::from_secs(10 * i);
        pipeline.datagram(data, from, at, &mut events);
        full.datagram(data, from, at, &mut events);
        assert!(pipeline.packets().eq(full.packets()), "fast path differs");
    }
    for p in pipeline.packets() {
        assert!(p.len() <= xdr::MAX_PACKET, "packet of {} bytes", p.len());
        match xdr::decode(p).expect("our own packet decodes") {
            Packet::Metadata { id, meta } => {
                assert!(sanitize::is_clean_name(&id.name), "{:?}", id.name);
                assert!(sanitize::is_clean_text(&meta.units, sanitize::MAX_TEXT));
                for (k, v) in meta.extra.iter() {
                    assert!(
                        !k.contains(['"', '<', '&']) && !v.contains(['"', '<', '&']),
                        "{k}={v:?}"
                    );
                }
            }
            Packet::Value { id, value, .. } => {
                assert!(sanitize::is_clean_name(&id.name) || id.name == "heartbeat");
                assert!(
                    !id.host.contains(['"', '<', '&']) && id.host.matches(':').count() == 1,
                    "{:?}",
                    id.host
                );
                assert!(value.to_string().len() <= sanitize::MAX_VALUE);
            }
            Packet::Request { .. } => unreachable!(),
        }
    }
});
