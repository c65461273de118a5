//! `xrd2ganglia dump`: prints exactly what `serve` sends, and sends nothing.

use xrd2ganglia_testkit as common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use common::{Gateway, Scratch, free_port, send_from, udp_bound};
use serde_json::Value;
use xrd2ganglia::ganglia::xdr::{Metadata, Packet, decode};

const CONFIG: &str = "stats_interval = 0\nself_metrics_interval = 0\n";

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_xrd2ganglia"))
}

type Key = (String, String);

/// How long serve may take to send the first packet for a record.
const FIRST_PACKET: Duration = Duration::from_secs(10);
/// Quiet after the last packet that means serve has sent all it will.
const QUIET: Duration = Duration::from_secs(2);
/// How long serve may go on sending (it sends a record's packets at once).
const SENDING: Duration = Duration::from_secs(30);

/// What a real `serve` sent for one record, as (host, name) -> fields.
fn sent_by_serve(record: &[u8]) -> BTreeMap<Key, BTreeMap<&'static str, String>> {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(FIRST_PACKET)).unwrap();
    let gw = Gateway::start(sink.local_addr().unwrap().port(), CONFIG);
    gw.send(record);
    let started = Instant::now();
    let mut packets = 0usize;
    let mut meta: BTreeMap<Key, Metadata<'static>> = BTreeMap::new();
    let mut out = BTreeMap::new();
    let mut buf = [0u8; 2048];
    loop {
        let n = match sink.recv_from(&mut buf) {
            Ok((n, _)) => n,
            // A signal (another test's child exiting) interrupted the wait.
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                assert!(
                    packets > 0,
                    "serve sent no packet within {FIRST_PACKET:?} of the record; its log:\n{}",
                    gw.proc.log_text()
                );
                // QUIET with nothing more: that is all.
                break;
            }
            Err(e) => panic!("receive from serve: {e}"),
        };
        if packets == 0 {
            sink.set_read_timeout(Some(QUIET)).unwrap();
        }
        packets += 1;
        assert!(
            started.elapsed() < SENDING,
            "serve still sending after {SENDING:?} ({packets} packets) for one record"
        );
        match decode(&buf[..n]).unwrap().into_owned() {
            Packet::Metadata { id, meta: m } => {
                meta.insert((id.host.into_owned(), id.name.into_owned()), m);
            }
            Packet::Value { id, value, .. } => {
                let key = (id.host.into_owned(), id.name.into_owned());
                let m = meta.get(&key);
                let text = |f: for<'m> fn(&'m Metadata<'static>) -> String, default: &str| {
                    m.map_or(default.to_string(), f)
                };
                let fields = BTreeMap::from([
                    ("value", value.to_string()),
                    // The heartbeat has no metadata.
                    ("type", text(|m| m.value_type.to_string(), "uint32")),
                    ("slope", text(|m| m.slope.as_str().to_string(), "zero")),
                    ("units", text(|m| m.units.to_string(), "")),
                    (
                        "group",
                        text(|m| m.extra("GROUP").unwrap_or("").to_string(), ""),
                    ),
                    ("tmax", text(|m| m.tmax.to_string(), "0")),
                    ("dmax", text(|m| m.dmax.to_string(), "0")),
                ]);
                out.insert(key, fields);
            }
            Packet::Request { .. } => {}
        }
    }
    drop(gw);
    out
}

fn dump_json(args: &[&str], stdin: &[u8]) -> (Vec<Value>, String, Option<i32>) {
    let mut child = bin()
        .arg("dump")
        .arg("--json")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    let rows = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (
        rows,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code(),
    )
}

#[test]
fn dump_prints_what_serve_sends() {
    let record = common::fixture("ds_loaded.xml");
    let sent = sent_by_serve(&record);
    let dir = Scratch::new("dump");
    let file = dir.path().join("records.xml");
    std::fs::write(&file, &record).unwrap();
    // Its config names a gmond (this socket): dump sends it nothing.
    let gmond = UdpSocket::bind("127.0.0.1:0").unwrap();
    let channel = format!(
        "[[channel]]\nhost = \"127.0.0.1\"\nport = {}\n",
        gmond.local_addr().unwrap().port()
    );
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, format!("{CONFIG}{channel}")).unwrap();
    let (rows, err, code) = dump_json(
        &["--config", cfg.to_str().unwrap(), file.to_str().unwrap()],
        b"",
    );
    assert_eq!(code, Some(0), "{err}");
    // Nothing came (dump has exited: anything sent is in the buffer now).
    gmond.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 2048];
    let got = gmond.recv_from(&mut buf);
    assert!(
        matches!(&got, Err(e) if e.kind() == ErrorKind::WouldBlock),
        "dump sent to the configured gmond: {got:?}"
    );
    let mut dumped = BTreeMap::new();
    for r in &rows {
        for key in [
            "host", "name", "value", "type", "slope", "units", "group", "tmax", "dmax",
        ] {
            assert!(r.get(key).is_some(), "{key} missing in {r}");
        }
        let s = |k: &str| match &r[k] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let fields = BTreeMap::from([
            ("value", s("value")),
            ("type", s("type")),
            ("slope", s("slope")),
            ("units", s("units")),
            ("group", s("group")),
            ("tmax", s("tmax")),
            ("dmax", s("dmax")),
        ]);
        dumped.insert((s("host"), s("name")), fields);
    }
    assert!(sent.len() > 80, "serve sent {} metrics", sent.len());
    assert_eq!(dumped, sent, "dump differs from what serve sent");
}

#[test]
fn unknown_and_sanitized_are_marked() {
    let record = br#"<statistics tod="10" src="h.example:1" tos="1" pgm="xrootd" ins="anon"><stats id="link"><in>5</in></stats><stats id="newer"><thing>7</thing><we:ird>1</we:ird></stats></statistics>"#;
    let (rows, _, code) = dump_json(&["-"], record);
    assert_eq!(code, Some(0));
    let find = |name: &str| {
        rows.iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {rows:?}"))
    };
    assert_eq!(find("xrootd.link.in")["unknown"], false);
    assert_eq!(find("xrootd.newer.thing")["unknown"], true);
    assert_eq!(find("xrootd.newer.thing")["slope"], "both");
    let weird = find("xrootd.newer.we_ird");
    assert_eq!(
        (weird["sanitized"].clone(), weird["var"].clone()),
        (Value::Bool(true), Value::String("newer.we_ird".into()))
    );
    assert_eq!(find("heartbeat")["packet"], 132);
    // The table says the same in its NOTE column.
    let out = bin()
        .args(["dump", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(record)?;
            c.wait_with_output()
        });
    let table = String::from_utf8(out.unwrap().stdout).unwrap();
    let line = table
        .lines()
        .find(|l| l.contains("xrootd.newer.thing"))
        .unwrap();
    assert!(line.ends_with("unknown variable newer.thing"), "{line}");
    assert!(table.lines().any(|l| l.contains("xrootd.newer.we_ird") && l.contains("sanitized from newer.we:ird")), "{table}");
    assert!(table.starts_with("HOST"));
}

#[test]
fn bad_records_are_reported_and_the_rest_dumped() {
    let input = [
        common::fixture("srv_cmsd.xml"),
        b"\n<statistics><stats id=\"x\"><n>1\n".to_vec(),
        common::fixture("mgr_cmsd.xml"),
        b"\n".to_vec(),
    ]
    .concat();
    let (rows, err, code) = dump_json(&[], &input);
    assert_eq!(code, Some(1));
    assert_eq!(
        err.trim(),
        "xrd2ganglia dump: record 2: truncated record: ended with 3 element(s) still open"
    );
    assert!(
        rows.iter()
            .any(|r| r["name"] == "cmsd.srv.cms.role" && r["value"] == "S")
    );
    assert!(rows.iter().any(|r| r["name"] == "cmsd.mgr.cmsm.sel.t"));
}

/// A child process, killed (by its pid) on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn dump_from_a_live_port() {
    const WAIT: Duration = Duration::from_secs(10);
    let port = free_port();
    let mut child = Killed(
        bin()
            .args(["dump", "--json", "--listen", &format!("127.0.0.1:{port}")])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Until it has bound the port, a datagram would be lost.
    let deadline = Instant::now() + WAIT;
    loop {
        let (bound, sockets) = udp_bound(child.0.id(), port);
        if bound {
            break;
        }
        if let Ok(Some(status)) = child.0.try_wait() {
            panic!("dump exited ({status}) before binding UDP port {port}");
        }
        assert!(
            Instant::now() < deadline,
            "dump did not bind UDP port {port} within {WAIT:?} (sockets on that port: {sockets:?})"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Its first line, read aside so that the wait has a deadline.
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut line = String::new();
        let read = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(read.map(|_| line));
    });
    // Sent again every 2 s until a line comes, in case one is lost.
    let mut sent = 0;
    let line = loop {
        send_from(
            "127.0.0.3:0",
            &format!("127.0.0.1:{port}"),
            &common::fixture("ds_idle.xml"),
        );
        sent += 1;
        match rx.recv_timeout(Duration::from_secs(2)) {
            Ok(Ok(line)) if !line.is_empty() => break line,
            Ok(Ok(_)) => panic!(
                "dump closed its stdout without a line ({:?})",
                child.0.try_wait()
            ),
            Ok(Err(e)) => panic!("read dump's stdout: {e}"),
            Err(RecvTimeoutError::Timeout) => assert!(
                Instant::now() < deadline,
                "dump printed no line within {WAIT:?} of its start ({sent} datagrams sent to 127.0.0.1:{port}; exited: {:?})",
                child.0.try_wait()
            ),
            Err(RecvTimeoutError::Disconnected) => panic!("the reader of dump's stdout died"),
        }
    };
    drop(child);
    let _ = reader.join();
    let row: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(row["host"], "127.0.0.3:vm");
    assert_eq!(row["name"], "heartbeat");
}
