//! README's Try it: `serve` with no config runs on the built-in try-out
//! settings (loopback, nothing sent), `replay` feeds it the shipped
//! recording at its pace, `poll` shows what gmetad would read; and
//! `dump --listen --record` writes the recordings `replay` sends.
//!
//! Expected values come from the captures themselves
//! (tests/data/records/NAME.xml, byte for byte) and from the real
//! mpxstats' output for each (NAME.flat), never from the gateway's parser.

use xrd2ganglia_testkit as common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::UdpSocket;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::child::plain;
use common::{Proc, Scratch, free_port, udp_bound};

const BIN: &str = env!("CARGO_BIN_EXE_xrd2ganglia");
const RECORDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/records");

/// The shipped recording's entries, in order, with the capture each one
/// is (tests/data/records/README.md: the order of the provenance table's
/// arrival times, each capture's sender port).
const RECORDING: &[(&str, u16)] = &[
    ("ds_idle", 54480),
    ("mgr_cmsd_idle", 45163),
    ("spaces_idle", 49533),
    ("pfc_idle", 35311),
    ("srv_cmsd", 36653),
    ("ds_loaded", 54480),
    ("mgr_xrootd", 59726),
    ("mgr_cmsd", 45163),
    ("spaces", 49533),
    ("srv_xrootd", 57115),
    ("pfc_loaded", 35311),
    ("pfc_cached", 54207),
    ("rmc_loaded", 43683),
];

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run xrd2ganglia")
}

/// `serve` with no `--config` (so the try-out settings, the file at
/// /etc/xrd2ganglia being absent here) on the given ports.
fn serve_try_out(dir: &Scratch, port: u16, xml_port: u16) -> Proc {
    assert!(
        !Path::new("/etc/xrd2ganglia/xrd2ganglia.toml").exists(),
        "this test runs serve without a config: /etc/xrd2ganglia/xrd2ganglia.toml must not exist"
    );
    let log = dir.path().join("serve.log");
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new(BIN)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--xml-listen", &format!("127.0.0.1:{xml_port}")])
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let proc = Proc {
        child,
        name: "xrd2ganglia".into(),
        log,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !proc.log_text().contains("serving") {
        assert!(Instant::now() < deadline, "{}", proc.log_text());
        std::thread::sleep(Duration::from_millis(20));
    }
    proc
}

/// An XML attribute of a raw record, by string search.
fn raw_attr(record: &str, name: &str) -> String {
    let at = record.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
    record[at..at + record[at..].find('"').unwrap()].to_string()
}

/// `poll --metrics` output: host -> metric -> value.
fn polled(text: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let mut hosts: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut host = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("      ") {
            let mut f = rest.split_whitespace();
            let (Some(name), value) = (f.next(), f.next().unwrap_or("")) else {
                continue;
            };
            hosts
                .entry(host.clone())
                .or_default()
                .insert(name.into(), value.into());
        } else if let Some(rest) = line.strip_prefix("  ")
            && !rest.starts_with("HOST ")
        {
            host = rest.split_whitespace().next().unwrap_or("").to_string();
        }
    }
    hosts
}

/// README's Try it, on free ports: the recording is the 13 captures byte
/// for byte; `replay` sends them (9 senders); `poll` shows host `vm` with
/// every server's variables at the values the real mpxstats read from the
/// same datagrams; the gateway sent nothing and kept no state.
#[test]
fn try_it_shows_every_recorded_server_as_gmetad_would() {
    let recording = Path::new(RECORDS).join("try-out.jsonl");
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&recording)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), RECORDING.len());
    for (line, (name, port)) in lines.iter().zip(RECORDING) {
        let capture = std::fs::read_to_string(format!("{RECORDS}/{name}.xml")).unwrap();
        assert_eq!(line["text"].as_str(), Some(capture.as_str()), "{name}");
        assert_eq!(line["from"], format!("127.0.0.1:{port}"), "{name}");
    }

    let dir = Scratch::new("try-out");
    let (port, xml_port) = (free_port(), free_port());
    let mut gw = serve_try_out(&dir, port, xml_port);
    let log = plain(&gw.log_text());
    assert!(
        log.contains("config=built-in try-out settings"),
        "not the try-out settings: {log}"
    );
    assert!(log.contains("channels=[]"), "it would send: {log}");
    assert!(log.contains("state_file= "), "it keeps state: {log}");

    let started = Instant::now();
    let out = run(&[
        "replay",
        "--to",
        &format!("127.0.0.1:{port}"),
        recording.to_str().unwrap(),
    ]);
    let took = started.elapsed();
    assert!(out.status.success(), "{out:?}");
    let senders: BTreeSet<u16> = RECORDING.iter().map(|r| r.1).collect();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!(
            "xrd2ganglia replay: sent {} datagrams of {} senders to 127.0.0.1:{port}",
            RECORDING.len(),
            senders.len()
        )
    );
    // At their pace: the recording spans its first to its last time.
    let span = lines.last().unwrap()["time"].as_f64().unwrap() - lines[0]["time"].as_f64().unwrap();
    assert!(
        took.as_secs_f64() >= span - 0.05 && took.as_secs_f64() < span + 5.0,
        "replay took {took:?}, the recording spans {span} s"
    );

    let out = run(&["poll", "--metrics", &format!("127.0.0.1:{xml_port}")]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    let hosts = polled(&text);
    // Every recorded server ran on `vm`; beside it, the gateway's own
    // host, in the document from the start (issue 43, item 6).
    let own =
        xrd2ganglia::daemon::self_metrics::own_host_name(&xrd2ganglia::ganglia::local_hostname());
    assert_eq!(
        hosts.keys().collect::<Vec<_>>(),
        ["vm", own.as_str()],
        "{text}"
    );
    let metrics = &hosts["vm"];
    // The last capture of each server whose run the recording does not
    // restart (pfc's runs do: its counters are carried on, not raw).
    for name in [
        "ds_loaded",
        "mgr_xrootd",
        "mgr_cmsd",
        "srv_xrootd",
        "srv_cmsd",
        "spaces",
        "rmc_loaded",
    ] {
        let capture = std::fs::read_to_string(format!("{RECORDS}/{name}.xml")).unwrap();
        let prefix = format!(
            "{}.{}.",
            raw_attr(&capture, "pgm"),
            raw_attr(&capture, "ins")
        );
        let flat = std::fs::read_to_string(format!("{RECORDS}/{name}.flat")).unwrap();
        let (mut shown, mut all) = (0, 0);
        for line in flat.lines() {
            let Some((var, value)) = line.split_once(' ') else {
                continue;
            };
            // List entries are named by their key, not their index.
            if var
                .split('.')
                .any(|p| p.bytes().all(|b| b.is_ascii_digit()))
            {
                continue;
            }
            all += 1;
            let Some(got) = metrics.get(&format!("{prefix}{var}")) else {
                continue;
            };
            shown += 1;
            match (got.parse::<f64>(), value.parse::<f64>()) {
                (Ok(g), Ok(v)) => assert_eq!(g, v, "{name}: {prefix}{var}"),
                _ => assert_eq!(got, value, "{name}: {prefix}{var}"),
            }
        }
        // The rest are left out by the default `exclude` or renamed (list
        // entries by their path): most are there by mpxstats' own name.
        assert!(
            shown * 3 >= all * 2,
            "{name}: {shown} of mpxstats' {all} variables on the XML port"
        );
    }
    assert!(gw.terminate().success());
}

/// `dump --listen --record` writes each datagram as it came (text or
/// binary, byte for byte, with its sender and time), and `replay` sends
/// such a file to a socket at the recorded pace, each recorded sender's
/// from one port of its own, skipping (and naming) a bad line only.
#[test]
fn a_recording_is_what_arrived_and_replays_at_its_pace() {
    let dir = Scratch::new("record");
    let file = dir.path().join("rec.jsonl");
    let port = free_port();
    let log = dir.path().join("dump.log");
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new(BIN)
        .args(["dump", "--listen", &format!("127.0.0.1:{port}"), "--record"])
        .arg(&file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(out)
        .spawn()
        .unwrap();
    let dump = Proc {
        child,
        name: "dump".into(),
        log,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !udp_bound(dump.child.id(), port).0 {
        assert!(
            Instant::now() < deadline,
            "dump did not bind: {}",
            dump.log_text()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Two servers (two sockets); an XCache g-stream-like binary datagram.
    let (a, b) = (
        UdpSocket::bind("127.0.0.1:0").unwrap(),
        UdpSocket::bind("127.0.0.1:0").unwrap(),
    );
    let capture = |n: &str| std::fs::read(format!("{RECORDS}/{n}.xml")).unwrap();
    let sent: Vec<(&UdpSocket, Vec<u8>)> = vec![
        (&a, capture("ds_idle")),
        (&b, vec![0x80, 0, 0xff, b'<', 0]),
        (&a, capture("ds_loaded")),
        (&b, capture("mgr_cmsd")),
    ];
    let gap = Duration::from_millis(400);
    for (socket, bytes) in &sent {
        socket.send_to(bytes, ("127.0.0.1", port)).unwrap();
        std::thread::sleep(gap);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&file)
        .unwrap_or_default()
        .lines()
        .count()
        < sent.len()
    {
        assert!(Instant::now() < deadline, "{}", dump.log_text());
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(dump);

    let text = std::fs::read_to_string(&file).unwrap();
    let entries: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(entries.len(), sent.len());
    let mut last_time = 0.0;
    for (e, (socket, bytes)) in entries.iter().zip(&sent) {
        assert_eq!(e["from"], socket.local_addr().unwrap().to_string());
        let got = match (e["text"].as_str(), e["hex"].as_str()) {
            (Some(t), None) => t.as_bytes().to_vec(),
            (None, Some(h)) => (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
                .collect(),
            other => panic!("{other:?}"),
        };
        assert_eq!(&got, bytes);
        let time = e["time"].as_f64().unwrap();
        if last_time > 0.0 {
            let d = time - last_time;
            assert!((0.35..0.8).contains(&d), "{d} s between entries");
        }
        last_time = time;
    }

    // Replayed with a damaged line after the first entry.
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(1, "{\"time\":1,\"from\":\"127.0.0.1:1\",\"text\":");
    let damaged = dir.path().join("damaged.jsonl");
    std::fs::write(&damaged, lines.join("\n")).unwrap();
    let to = UdpSocket::bind("127.0.0.1:0").unwrap();
    to.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let to_addr = to.local_addr().unwrap().to_string();
    let replay = std::thread::spawn({
        let damaged = damaged.clone();
        move || run(&["replay", "--to", &to_addr, damaged.to_str().unwrap()])
    });
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65536];
    for _ in 0..sent.len() {
        let (n, from) = to.recv_from(&mut buf).expect("a replayed datagram");
        got.push((buf[..n].to_vec(), from, Instant::now()));
    }
    let out = replay.join().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains(&format!("{}:2: not an entry", damaged.display())),
        "{out:?}"
    );
    for (i, ((bytes, _, at), (_, want))) in got.iter().zip(&sent).enumerate() {
        assert_eq!(bytes, want, "datagram {i}");
        if i > 0 {
            let d = at.duration_since(got[i - 1].2);
            assert!(d >= gap / 2 && d < gap * 2, "{d:?} between datagrams {i}");
        }
    }
    // Sender a's two datagrams from one port, b's from another.
    assert_eq!(got[0].1, got[2].1);
    assert_eq!(got[1].1, got[3].1);
    assert_ne!(got[0].1, got[1].1);
}
