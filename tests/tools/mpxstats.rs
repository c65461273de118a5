//! `xrd2ganglia mpxstats` against XRootD's real mpxstats: the same
//! datagrams give the same output, except where a documented fix applies.

use xrd2ganglia_testkit as common;

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{Capture, Scratch, Xrootd, free_port, send_from, udp_bound};

/// How long any wait for an mpxstats (binding its port, printing) may take.
const WAIT: Duration = Duration::from_secs(10);

/// A running mpxstats (real or ours) whose stdout and stderr we collect as
/// they are written; killed (by its pid) on drop.
struct Mpx {
    child: Child,
    port: u16,
    /// The command line, for messages.
    what: String,
    out: Arc<Mutex<Vec<u8>>>,
    err: Arc<Mutex<Vec<u8>>>,
    readers: Vec<JoinHandle<()>>,
}

/// Everything `from` yields until end of file, appended to the returned
/// buffer as it arrives.
fn collect(mut from: impl Read + Send + 'static) -> (Arc<Mutex<Vec<u8>>>, JoinHandle<()>) {
    let text = Arc::new(Mutex::new(Vec::new()));
    let into = Arc::clone(&text);
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        loop {
            match from.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => into
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    });
    (text, reader)
}

fn text(buf: &Mutex<Vec<u8>>) -> String {
    String::from_utf8_lossy(&buf.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
}

/// Records in mpxstats output of `format` printed so far: flat records end
/// with an empty line, cgi and xml ones are a line each (complete lines only).
fn printed(format: &str, out: &str) -> usize {
    match format {
        "flat" => out.matches("\n\n").count(),
        _ => out.matches('\n').count(),
    }
}

impl Mpx {
    fn real(args: &[&str]) -> Mpx {
        let port = free_port();
        let mut cmd = Command::new("mpxstats");
        cmd.args(args).args(["-p", &port.to_string()]);
        Self::spawn(cmd, port)
    }

    fn ours(args: &[&str]) -> Mpx {
        let port = free_port();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_xrd2ganglia"));
        cmd.arg("mpxstats")
            .args(args)
            .args(["-p", &port.to_string()]);
        Self::spawn(cmd, port)
    }

    fn spawn(mut cmd: Command, port: u16) -> Mpx {
        let what = format!("{cmd:?}");
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start mpxstats (xrootd-server installed?)");
        let (out, out_reader) = collect(child.stdout.take().expect("piped stdout"));
        let (err, err_reader) = collect(child.stderr.take().expect("piped stderr"));
        Mpx {
            child,
            port,
            what,
            out,
            err,
            readers: vec![out_reader, err_reader],
        }
    }

    fn send(&self, datagram: &[u8]) {
        send_from("127.0.0.1:0", &format!("127.0.0.1:{}", self.port), datagram);
    }

    /// Panics if it has exited (it never exits by itself while serving).
    fn check_running(&mut self, awaited: &str) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!(
                "{} exited ({status}) while waiting for {awaited}; stdout:\n{}\nstderr:\n{}",
                self.what,
                text(&self.out),
                text(&self.err)
            );
        }
    }

    /// Waits until it has bound its UDP port: datagrams sent from then on
    /// are queued for it.
    fn wait_bound(&mut self) {
        let deadline = Instant::now() + WAIT;
        loop {
            let (bound, sockets) = udp_bound(self.child.id(), self.port);
            if bound {
                return;
            }
            self.check_running(&format!("UDP port {}", self.port));
            assert!(
                Instant::now() < deadline,
                "{} did not bind UDP port {} within {WAIT:?} (sockets on that port: {sockets:?}); stderr so far:\n{}",
                self.what,
                self.port,
                text(&self.err)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until `done(stdout, stderr)` holds for what it printed so far.
    fn wait_output(&mut self, awaited: &str, done: impl Fn(&str, &str) -> bool) {
        let deadline = Instant::now() + WAIT;
        loop {
            let (out, err) = (text(&self.out), text(&self.err));
            if done(&out, &err) {
                return;
            }
            self.check_running(awaited);
            assert!(
                Instant::now() < deadline,
                "{} did not print {awaited} within {WAIT:?}; stdout so far:\n{out}\nstderr so far:\n{err}",
                self.what
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until it has printed `awaited` (`done(stdout, stderr)` holds),
    /// then stops it and returns (stdout, stderr).
    fn finish(mut self, awaited: &str, done: impl Fn(&str, &str) -> bool) -> (String, String) {
        self.wait_output(awaited, done);
        let _ = self.child.kill();
        let _ = self.child.wait();
        for r in std::mem::take(&mut self.readers) {
            let _ = r.join();
        }
        (text(&self.out), text(&self.err))
    }
}

impl Drop for Mpx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends every datagram to both, one at a time (mpxstats reverses bursts):
/// each is sent once both have bound their port and printed the one before
/// (output of `format`).
fn feed(a: &mut Mpx, b: &mut Mpx, format: &str, datagrams: &[Vec<u8>]) {
    a.wait_bound();
    b.wait_bound();
    for (i, d) in datagrams.iter().enumerate() {
        a.send(d);
        b.send(d);
        let awaited = format!("{} -f {format} record(s) (datagram {i} sent)", i + 1);
        a.wait_output(&awaited, |out, _| printed(format, out) > i);
        b.wait_output(&awaited, |out, _| printed(format, out) > i);
    }
}

/// Records of a real data server, captured in the test.
fn live_records() -> Vec<Vec<u8>> {
    let capture = Capture::new();
    let root = Scratch::new("mpx-xrd");
    for d in ["data", "admin"] {
        std::fs::create_dir_all(root.path().join(d)).unwrap();
    }
    let r = root.path().display().to_string();
    let _ds = Xrootd::start(
        "xrootd",
        "mpx",
        root.path(),
        &format!(
            "all.export /\noss.localroot {r}/data\nall.adminpath {r}/admin\nall.pidpath {r}/admin\nxrd.port {}\n\
             xrd.report 127.0.0.1:{} every 1s all sync\nall.sitename LIVESITE\n",
            free_port(),
            capture.port
        ),
    );
    (0..3).map(|_| capture.next()).collect()
}

/// Records both programs must print identically.
fn compatible_records() -> Vec<Vec<u8>> {
    let mut all = live_records();
    for name in [
        "ds_idle",
        "ds_loaded",
        "mgr_xrootd",
        "mgr_cmsd",
        "srv_cmsd",
        "spaces",
        "pfc_loaded",
    ] {
        all.push(common::fixture(&format!("{name}.xml")));
    }
    let crafted: &[&str] = &[
        // Undocumented tags and sections, nested counts, legacy toe.
        r#"<statistics tod="100" ver="20090202" src="old.example:1094" tos="50" pgm="xrootd" ins="anon" pid="9"><stats id="buff"><reqs>1</reqs></stats><stats id="future"><a>1<b>2</b></a><c>3</c></stats></statistics toe="101">"#,
        // The 5.5 XCache defect and SSI's fused end tag.
        r#"<statistics tod="1" ver="v5" src="c:1" tos="1" pgm="xrootd" ins="x" pid="2"><stats id="cache" type="pfc"><rd><hits>7></hits><miss>3</miss></rd></stats><stats id="ssi"><rsp><bad>0</bad><mdb>4</mdb</rsp><res><add>1</add></res></stats></statistics>"#,
        // 6.0 http plugin's numeric tags, empty elements (dropped by both).
        r#"<statistics tod="1" ver="v6" src="h:1" tos="1" pgm="xrootd" ins="anon" pid="3"><stats id="http_plugin"><response><200>12</200><404>1</404></response><empty></empty></stats></statistics>"#,
    ];
    all.extend(crafted.iter().map(|c| c.as_bytes().to_vec()));
    all
}

#[test]
fn same_output_as_real_mpxstats() {
    let records = compatible_records();
    for (format, ours_extra) in [("flat", "--compat"), ("cgi", "--compat"), ("xml", "")] {
        let mut real = Mpx::real(&["-f", format]);
        let mut ours = Mpx::ours(
            &["-f", format, ours_extra]
                .iter()
                .copied()
                .filter(|a| !a.is_empty())
                .collect::<Vec<_>>(),
        );
        feed(&mut real, &mut ours, format, &records);
        let all = format!("all {} -f {format} records", records.len());
        let (real_out, _) = real.finish(&all, |out, _| printed(format, out) >= records.len());
        let (ours_out, ours_err) =
            ours.finish(&all, |out, _| printed(format, out) >= records.len());
        assert!(
            !real_out.is_empty(),
            "real mpxstats printed nothing for -f {format}"
        );
        assert_eq!(ours_out, real_out, "-f {format}");
        assert!(ours_err.is_empty(), "{ours_err}");
        let per_record = match format {
            "flat" => real_out.matches("\n\n").count(),
            _ => real_out.lines().count(),
        };
        assert_eq!(
            per_record,
            records.len(),
            "-f {format}: one output record per datagram"
        );
    }
}

/// `-s`: the sender as mpxstats prints it (captured from the real mpxstats
/// with the fixtures; no reverse DNS lookup is made here).
#[test]
fn sender_like_mpxstats() {
    let mut ours = Mpx::ours(&["-f", "flat", "-s", "--compat"]);
    ours.wait_bound();
    ours.send(&common::fixture("ds_loaded.xml"));
    let (out, _) = ours.finish("one flat record", |out, _| printed("flat", out) >= 1);
    let expected = String::from_utf8(common::fixture("ds_loaded.flat-s")).unwrap();
    assert_eq!(out, expected);
}

/// Each documented fix, shown against the real mpxstats.
#[test]
fn fixed_defects() {
    let spaces = br#"<statistics tod="1" ver="v5" src="m:1" tos="1" pgm="xrootd" ins="anon" pid="4" site="S1"><stats id="ofs"><role>meta manager</role></stats></statistics>"#.to_vec();
    let padding = "<x>1</x>".repeat(1200);
    let big = format!(r#"<statistics tod="1" ver="v5" src="big:1" tos="1" pgm="xrootd" ins="anon" pid="5"><stats id="pad">{padding}<last>42</last></stats></statistics>"#).into_bytes();
    assert!(big.len() > 8190);
    let mut real = Mpx::real(&["-f", "flat"]);
    let mut ours = Mpx::ours(&["-f", "flat"]);
    // One at a time: the big one only once the first is printed (mpxstats
    // prints nothing for the big one, so there is nothing to wait for there).
    real.wait_bound();
    ours.wait_bound();
    real.send(&spaces);
    ours.send(&spaces);
    real.wait_output("the record with spaces", |out, _| printed("flat", out) >= 1);
    ours.wait_output("the record with spaces", |out, _| printed("flat", out) >= 1);
    real.send(&big);
    ours.send(&big);
    ours.wait_output("the big record", |out, _| printed("flat", out) >= 2);
    // A burst, back to back, and two malformed datagrams.
    std::thread::sleep(Duration::from_millis(100));
    for i in 0..20 {
        let r = format!(
            r#"<statistics tod="{i}" ver="v" src="b:1" tos="1" pgm="xrootd" ins="anon" pid="6"><stats id="x"><n>{i}</n></stats></statistics>"#
        );
        real.send(r.as_bytes());
        ours.send(r.as_bytes());
    }
    for bad in [&b"<statistics><stats id=\"x\"><n>1"[..], b"hello"] {
        real.send(bad);
        ours.send(bad);
    }
    // mpxstats prints the one with spaces and the burst (not the big one,
    // nor the malformed ones); ours all of them, and a line per malformed
    // one on stderr.
    let (real_out, _) = real.finish(
        "21 records (the one with spaces, the burst of 20)",
        |out, _| printed("flat", out) >= 21,
    );
    let (ours_out, ours_err) = ours.finish(
        "22 records and 2 lines on stderr (the malformed datagrams)",
        |out, err| printed("flat", out) >= 22 && err.matches('\n').count() >= 2,
    );

    // Values with spaces stay whole (mpxstats splits them), site is kept.
    assert!(
        ours_out.contains("pid 4\nsite S1\nofs.role meta manager\n"),
        "{ours_out}"
    );
    assert!(
        real_out.contains("ofs.role meta\nofs.role manager\n"),
        "{real_out}"
    );
    assert!(!real_out.contains("site"));
    // Datagrams over 8190 bytes are read whole.
    assert!(ours_out.contains("pad.last 42\n"));
    assert!(!real_out.contains("pad.last 42"));
    // Arrival order.
    let order: Vec<&str> = ours_out
        .lines()
        .filter_map(|l| l.strip_prefix("x.n "))
        .collect();
    assert_eq!(order, (0..20).map(|i| i.to_string()).collect::<Vec<_>>());
    // Every malformed datagram is reported, with its sender and the reason.
    let lines: Vec<&str> = ours_err.lines().collect();
    assert_eq!(lines.len(), 2, "{ours_err}");
    assert!(lines[0].starts_with("mpxstats: [::ffff:127.0.0.1] sent 30 bytes that are not a summary record: truncated record"), "{}", lines[0]);
    assert!(
        lines[1].contains("not a summary record: starts with \"hello\""),
        "{}",
        lines[1]
    );
}

#[test]
fn command_line_errors() {
    for (args, msg) in [
        (&[][..], "mpxstats: Port has not been specified."),
        (&["-h"][..], "mpxstats: 'h' option is invalid"),
        (&["-p", "abc"][..], "mpxstats: Invalid port number -  abc"),
        (
            &["-f", "bogus", "-p", "1"][..],
            "mpxstats: Invalid format -  bogus",
        ),
    ] {
        let real = Command::new("mpxstats").args(args).output().unwrap();
        let ours = Command::new(env!("CARGO_BIN_EXE_xrd2ganglia"))
            .arg("mpxstats")
            .args(args)
            .output()
            .unwrap();
        assert_eq!(
            (ours.status.code(), real.status.code()),
            (Some(1), Some(1)),
            "{args:?}"
        );
        let (ours_err, real_err) = (
            String::from_utf8_lossy(&ours.stderr),
            String::from_utf8_lossy(&real.stderr),
        );
        // mpxstats' logger adds a timestamp and pid; the message itself is the same.
        assert!(ours_err.starts_with(msg), "{args:?}: {ours_err}");
        assert!(
            real_err.contains(msg.trim_start_matches("mpxstats: ")),
            "{args:?}: {real_err}"
        );
        assert!(ours_err.contains("Usage: mpxstats [-f {cgi|flat|xml}] -p <port> [-s]"));
    }
}

#[test]
fn called_through_a_link_named_mpxstats() {
    let dir = Scratch::new("mpxlink");
    let link = dir.path().join("mpxstats");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_xrd2ganglia"), &link).unwrap();
    let port = free_port();
    let mut cmd = Command::new(&link);
    cmd.args(["-f", "cgi", "-p", &port.to_string(), "--compat"]);
    let mut m = Mpx::spawn(cmd, port);
    m.wait_bound();
    m.send(&common::fixture("srv_cmsd.xml"));
    let (out, _) = m.finish("one cgi record", |out, _| printed("cgi", out) >= 1);
    assert_eq!(
        out,
        String::from_utf8(common::fixture("srv_cmsd.cgi")).unwrap()
    );
}
