//! Per-record cost of the hot path on real xrootd 5.5.3 records (an idle and
//! a loaded data server, a manager cmsd with its node list, a server with
//! spaces and quotas, a loaded proxy cache): parse (and the quick-xml
//! reference parse it replaces), parse+map, parse+map+encode (the packets
//! of one steady-state report), and xml-table (those packets into the XML
//! port's host table). Throughput is reported as records/s and bytes/s.
//!
//! The detailed stream (`detailed`): f packets of 30 opens and 30 closes
//! by 100 logged-in users (6 VOs, 2 protocols, 4 domains), decoded and
//! added up (`decode+aggregate`), and the same with the server's metrics
//! sent after each packet (`+report`, its summary record taken first).
//! Throughput in f-stream records/s.
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

/// The detailed stream's packets of one xrootd run started at `stod`.
struct Detailed {
    stod: u32,
    map_seq: u8,
}

impl Detailed {
    fn packet(&self, code: u8, pseq: u8, body: &[u8]) -> Vec<u8> {
        let mut p = vec![code, pseq];
        p.extend_from_slice(&((8 + body.len()) as u16).to_be_bytes());
        p.extend_from_slice(&self.stod.to_be_bytes());
        p.extend_from_slice(body);
        p
    }

    fn login(&mut self, dictid: u32) -> Vec<u8> {
        let vo = ["atlas", "cms", "lhcb", "alice", "dteam", ""][dictid as usize % 6];
        let prot = ["xroot", "http"][dictid as usize % 2];
        let host = ["a.cern.ch", "b.fnal.gov", "c.desy.de", "d.in2p3.fr"][dictid as usize % 4];
        let mut body = dictid.to_be_bytes().to_vec();
        body.extend_from_slice(
            format!("{prot}/u{dictid}.1:2@{host}\n&p=sss&n=u{dictid}&h={host}&o=&r=&g={vo}&m=")
                .as_bytes(),
        );
        self.map_seq = self.map_seq.wrapping_add(1);
        self.packet(b'u', self.map_seq.wrapping_sub(1), &body)
    }

    /// An f packet: 30 files opened and closed (file ids from `first`).
    fn files(&self, pseq: u8, first: u32) -> Vec<u8> {
        let rec = |kind: u8, flag: u8, id: u32, body: &[u8]| {
            let mut r = vec![kind, flag];
            r.extend_from_slice(&((8 + body.len()) as u16).to_be_bytes());
            r.extend_from_slice(&id.to_be_bytes());
            r.extend_from_slice(body);
            r
        };
        let mut body = rec(2, 1, 60, &[0; 16]);
        for f in first..first + 30 {
            let mut open = 1_000_000u64.to_be_bytes().to_vec();
            open.extend_from_slice(&(1 + f % 100).to_be_bytes());
            open.extend_from_slice(b"/store/data/run2026/file.root\0\0\0");
            body.extend(rec(1, 1, f, &open));
            let mut close = Vec::new();
            for v in [1_000_000u64, 0, 4096] {
                close.extend_from_slice(&v.to_be_bytes());
            }
            close.extend_from_slice(&[0; 48]);
            body.extend(rec(0, 2, f, &close));
        }
        self.packet(b'f', pseq, &body)
    }
}

fn bench_detailed(c: &mut Criterion) {
    let settings = validate(
        FileConfig::default(),
        "bench".into(),
        &Overrides {
            send: vec!["127.0.0.1:9".into()],
            ..Default::default()
        },
    )
    .unwrap();
    // The capture's first summary record, and its start time.
    let capture = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/detailed/xrootd-5.5.3.jsonl"),
    )
    .unwrap();
    let summary = capture
        .lines()
        .map(|l| xrd2ganglia::recording::parse_entry(l).unwrap())
        .find(|e| e.datagram.starts_with(b"<"))
        .unwrap()
        .datagram;
    let stod = 1_795_896_130;
    let mut d = Detailed { stod, map_seq: 0 };
    let logins: Vec<Vec<u8>> = (1..=100).map(|i| d.login(i)).collect();
    // 256 packets, one full turn of the sequence number: none counts lost.
    let files: Vec<Vec<u8>> = (0..=255u8)
        .map(|i| d.files(i, 1_000 + 30 * u32::from(i)))
        .collect();
    let mut g = c.benchmark_group("detailed");
    g.throughput(Throughput::Elements(60));
    for (label, report) in [
        ("decode+aggregate", false),
        ("decode+aggregate+report", true),
    ] {
        let counters = Counters::default();
        let mut events = Events::new(&counters, Duration::from_secs(60));
        let mut engine = Engine::new(Arc::new(settings.clone()), Instant::now());
        let from = "127.0.0.1:40000".parse().unwrap();
        let t0 = Instant::now();
        if report {
            engine.datagram(
                &summary,
                "127.0.0.1:40001".parse().unwrap(),
                t0,
                &mut events,
            );
        }
        for l in &logins {
            engine.datagram(l, from, t0, &mut events);
        }
        let mut i = 0;
        g.bench_function(label, |b| {
            b.iter(|| {
                engine.datagram(std::hint::black_box(&files[i]), from, t0, &mut events);
                i = (i + 1) % files.len();
                engine.packets().count()
            })
        });
        let s = counters.snapshot();
        assert_eq!(
            (s.detailed_lost, s.detailed_unmatched, s.parse_errors),
            (0, 0, 0),
            "{label}"
        );
        assert_eq!(engine.packets().count() > 0, report, "{label}");
    }
    g.finish();
}

criterion_group!(benches, bench, bench_detailed);
criterion_main!(benches);
