//! Per-record cost of the hot path on real xrootd 5.5.3 records (an idle and
//! a loaded data server, a manager cmsd with its node list, a server with
//! spaces and quotas, a loaded proxy cache): parse (and the quick-xml
//! reference parse it replaces), parse+map, parse+map+encode (the packets
//! of one steady-state report), and xml-table (those packets into the XML
//! port's host table). Throughput is reported as records/s and bytes/s.
//!
//! `cargo bench --bench pipeline`; under `cargo test` each runs once.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use xrd2ganglia::config::{FileConfig, Overrides, validate};
use xrd2ganglia::daemon::table::HostTable;
use xrd2ganglia::engine::Engine;
use xrd2ganglia::events::{Counters, Events};
use xrd2ganglia::mapping::{
    DEFAULT_GROUP_TEMPLATE, DEFAULT_NAME_TEMPLATE, MappedRecord, Mapper, NameTemplate,
};
use xrd2ganglia::summary::SummaryParser;

const RECORDS: &[&str] = &["ds_idle", "ds_loaded", "mgr_cmsd", "spaces", "pfc_loaded"];

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/records")
            .join(format!("{name}.xml")),
    )
    .unwrap()
}

fn bench(c: &mut Criterion) {
    let settings = validate(
        FileConfig::default(),
        "bench".into(),
        &Overrides {
            send: vec!["127.0.0.1:9".into()],
            ..Default::default()
        },
    )
    .unwrap();
    for name in RECORDS {
        let d = fixture(name);
        let mut g = c.benchmark_group(*name);
        g.throughput(Throughput::ElementsAndBytes {
            elements: 1,
            bytes: d.len() as u64,
        });

        let mut parser = SummaryParser::new();
        g.bench_function("parse", |b| {
            b.iter(|| parser.parse(std::hint::black_box(&d)).unwrap().len())
        });

        g.bench_function("parse-reference", |b| {
            b.iter(|| {
                parser
                    .parse_reference(std::hint::black_box(&d))
                    .unwrap()
                    .len()
            })
        });

        let mut mapper = Mapper::new(
            NameTemplate::parse(DEFAULT_NAME_TEMPLATE).unwrap(),
            NameTemplate::parse(DEFAULT_GROUP_TEMPLATE).unwrap(),
        );
        let mut out = MappedRecord::default();
        let ip = "192.0.2.1".parse().unwrap();
        g.bench_function("parse+map", |b| {
            b.iter(|| {
                let r = parser.parse(std::hint::black_box(&d)).unwrap();
                mapper.map(&r, ip, &mut out);
                out.len()
            })
        });

        // Steady state: metadata already sent, values only (what a report
        // costs). "full" parses and maps every record; the default matches
        // the record against the source's template (engine/template.rs)
        // and gives the same packets.
        for (label, fast) in [("parse+map+encode", true), ("parse+map+encode-full", false)] {
            let counters = Counters::default();
            let mut events = Events::new(&counters, Duration::from_secs(60));
            let mut pipeline = Engine::new(Arc::new(settings.clone()), Instant::now());
            pipeline.set_fast_path(fast);
            let from = "192.0.2.1:40000".parse().unwrap();
            // Reports 1 s apart: the first sends metadata, the second sets
            // TMAX from the interval (and makes the template), then steady.
            let t0 = Instant::now();
            for i in 0..3 {
                let at = t0 + Duration::from_secs(i);
                pipeline.datagram(&d, from, at, &mut events);
            }
            g.bench_function(label, |b| {
                b.iter(|| {
                    pipeline.datagram(
                        std::hint::black_box(&d),
                        from,
                        t0 + Duration::from_secs(2),
                        &mut events,
                    );
                    pipeline.packets().count()
                })
            });
            assert_eq!(pipeline.fast_path_hits() > 0, fast, "{label}");
            if fast {
                // What the XML port adds per report: its packets into the
                // host table (a thousand other hosts in it).
                let table = HostTable::new(10_000);
                let ip: std::net::IpAddr = "192.0.2.1".parse().unwrap();
                for i in 0..1000u32 {
                    let other = std::net::SocketAddr::from(([10, 0, (i >> 8) as u8, i as u8], 1));
                    let mut p = Engine::new(Arc::new(settings.clone()), Instant::now());
                    p.datagram(&d, other, t0, &mut events);
                    table.take(p.batch(), other.ip(), t0);
                }
                let mut first = Engine::new(Arc::new(settings.clone()), Instant::now());
                first.datagram(&d, from, t0, &mut events);
                table.take(first.batch(), ip, t0);
                g.bench_function("xml-table", |b| {
                    b.iter(|| table.take(std::hint::black_box(pipeline.batch()), ip, t0))
                });
                // A report whose metadata is due (a new host, or every
                // metadata_interval): the table takes each metadata's
                // fields as the batch says them, no packet decoded.
                g.bench_function("xml-table-metadata", |b| {
                    b.iter(|| table.take(std::hint::black_box(first.batch()), ip, t0))
                });
            }
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
