//! Starting `serve` (and `check-config`, `dump`) as real processes: one
//! owner per state file, and exit code 2 with a message for every way a
//! configuration cannot be put into effect.
//!
//! Every process here is started by the test and stopped by its own pid
//! (a guard that kills its child on drop, or SIGTERM to the child's pid).

use xrd2ganglia_testkit as common;

use std::net::UdpSocket;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::child::{exit_of, exit_within_10s, link_record, spawn_logging, start_until, stop};
use common::{Gateway, Scratch, free_port};

const BIN: &str = env!("CARGO_BIN_EXE_xrd2ganglia");
/// A gateway that sends no counters of its own and opens no control
/// socket (the default, /run/xrd2ganglia/control, is one per machine).
const QUIET: &str = "stats_interval = 0\nself_metrics_interval = 0\ncontrol_socket = \"\"\n";

fn serve(config: &Path, port: u16) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--config"])
        .arg(config)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--send", &format!("127.0.0.1:{}", free_port())]);
    cmd
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_second_gateway_on_the_same_state_file_is_refused_and_the_first_keeps_it() {
    let dir = Scratch::new("owner");
    let state = dir.path().join("state");
    let lock = dir.path().join("state.lock");
    let config = format!("{QUIET}state_file = {:?}\n", state.display().to_string());
    let mut first = Gateway::start(free_port(), &config);
    let first_pid = first.proc.child.id();
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap(),
        format!("{first_pid}\n")
    );

    // A second serve on another port but the same file: refused at start.
    let conf = dir.path().join("second.toml");
    std::fs::write(&conf, &config).unwrap();
    let second_port = free_port();
    let (code, stderr) = exit_of(&mut serve(&conf, second_port), dir.path());
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(
        stderr.trim(),
        format!(
            "xrd2ganglia: state file {} is in use by another process (pid {first_pid}, which holds {}): give each gateway a state_file of its own",
            state.display(),
            lock.display()
        )
    );
    // Refused before binding anything.
    UdpSocket::bind(("127.0.0.1", second_port)).expect("the refused gateway kept its port");

    // check-config does not try what a running gateway holds: it passes.
    let (code, stderr) = exit_of(
        Command::new(BIN)
            .args(["check-config", "--config"])
            .arg(&conf)
            .args(["--listen", &format!("127.0.0.1:{}", first.port)])
            .args(["--send", "127.0.0.1:9"]),
        dir.path(),
    );
    assert_eq!((code, stderr.as_str()), (Some(0), ""));

    // The first is still the owner: what it hears is what the file keeps.
    // (SIGTERM: the gateway handles what is queued, saves, then exits.)
    first.send(link_record(41, 5000).as_bytes());
    assert_eq!(first.proc.terminate().code(), Some(0));
    let saved = std::fs::read_to_string(&state).unwrap();
    assert!(
        saved.contains("{\"ip\":\"127.0.0.1\",\"program\":\"xrootd\",\"start\":[1700000000,41],"),
        "{saved}"
    );

    // Released at exit: a new gateway owns the file now.
    let mut next = Gateway::start(free_port(), &config);
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap(),
        format!("{}\n", next.proc.child.id())
    );
    assert_eq!(next.proc.terminate().code(), Some(0));
}

#[test]
fn a_gateway_killed_with_sigkill_does_not_block_its_restart() {
    let dir = Scratch::new("stale");
    let state = dir.path().join("state");
    let lock = dir.path().join("state.lock");
    let config = format!(
        "{QUIET}state_interval = 1\nstate_file = {:?}\n",
        state.display().to_string()
    );
    let mut crashed = Gateway::start(free_port(), &config);
    let crashed_pid = crashed.proc.child.id();
    crashed.send(link_record(7, 100).as_bytes());
    // Saved once, then killed without a chance to clean up.
    wait_until("a periodic save", || {
        std::fs::read_to_string(&state).is_ok_and(|s| s.contains("\"program\":\"xrootd\""))
    });
    crashed.proc.child.kill().unwrap(); // SIGKILL, to our own child's pid
    let status = crashed.proc.child.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    // The lock file stays behind with the dead pid in it...
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap(),
        format!("{crashed_pid}\n")
    );
    // ...and stops nobody: the kernel released the lock with the process.
    let mut restarted = Gateway::start(free_port(), &config);
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap(),
        format!("{}\n", restarted.proc.child.id())
    );
    // "serving" is logged before the runtime starts and reads the state
    // file: the restored line follows it.
    wait_until("the saved source restored", || {
        restarted.proc.log_text().contains("1 sources restored")
    });
    assert_eq!(restarted.proc.terminate().code(), Some(0));
}

/// A stop (or a reload, then a stop) sent the moment "serving" shows, as
/// systemd or a script may: handled, so the gateway saves and exits 0.
/// (Before the handlers were installed ahead of that line, about a third
/// of such stops killed it.)
#[test]
fn signals_sent_as_soon_as_it_says_serving_are_handled() {
    let dir = Scratch::new("signals");
    for run in 0..20 {
        let state = dir.path().join(format!("state-{run}"));
        let conf = dir.path().join(format!("c-{run}.toml"));
        std::fs::write(
            &conf,
            format!("{QUIET}state_file = {:?}\n", state.display().to_string()),
        )
        .unwrap();
        let log = dir.path().join(format!("log-{run}"));
        let mut child = spawn_logging(&mut serve(&conf, free_port()), &log);
        let pid = child.id() as libc::pid_t;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !std::fs::read_to_string(&log).is_ok_and(|l| l.contains("serving")) {
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!(
                    "not serving after 10 s: {:?}",
                    std::fs::read_to_string(&log)
                );
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // Our own child, by its pid.
        if run % 2 == 1 {
            // SAFETY: kill(2) on the pid of a child this test started.
            unsafe { libc::kill(pid, libc::SIGHUP) };
        }
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let status = exit_within_10s(&mut child, || format!("run {run}, after SIGTERM"));
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        assert_eq!(status.code(), Some(0), "run {run}: {status:?}\n{log}");
        assert!(log.contains("SIGTERM: stopping"), "run {run}: {log}");
        // It saved (an empty state: nothing was heard) and let go of the file.
        assert!(state.exists(), "run {run}: no state file\n{log}");
    }
}

#[test]
fn without_a_state_file_nothing_is_locked() {
    let config = format!("{QUIET}state_file = \"\"\n");
    let mut a = Gateway::start(free_port(), &config);
    let mut b = Gateway::start(free_port(), &config);
    assert_eq!(a.proc.terminate().code(), Some(0));
    assert_eq!(b.proc.terminate().code(), Some(0));
}

#[test]
fn what_cannot_be_put_into_effect_exits_2_or_3_with_the_reason() {
    let dir = Scratch::new("exit2");
    let conf = dir.path().join("x.toml");
    std::fs::write(&conf, format!("{QUIET}state_file = \"\"\n")).unwrap();
    let in_use = std::io::Error::from_raw_os_error(libc::EADDRINUSE);

    // The listen address is taken (by this test).
    let taken = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    // Exit 3: it may pass (the unit restarts it).
    let (code, stderr) = exit_of(&mut serve(&conf, port), dir.path());
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(
        stderr.trim(),
        format!(
            "xrd2ganglia: cannot listen on 127.0.0.1:{port}: {in_use} (`ss -lunp 'sport = :{port}'` shows which process has it)"
        )
    );

    // The metadata_requests address is taken.
    let requests = dir.path().join("requests.toml");
    std::fs::write(
        &requests,
        format!("{QUIET}state_file = \"\"\nmetadata_requests = [\"127.0.0.1:{port}\"]\n"),
    )
    .unwrap();
    let (code, stderr) = exit_of(&mut serve(&requests, free_port()), dir.path());
    assert_eq!(code, Some(3), "{stderr}");
    assert_eq!(
        stderr.trim(),
        format!(
            "xrd2ganglia: cannot listen for gmond's metadata requests on 127.0.0.1:{port}: {in_use} (`ss -lunp 'sport = :{port}'` shows which process has it)"
        )
    );

    // A send host that does not resolve (yet): serve and check-config
    // alike, exit 3.
    let unresolvable = ["--send", "no-such-host.invalid:8649"];
    let (code, stderr) = exit_of(
        Command::new(BIN)
            .args(["serve", "--config"])
            .arg(&conf)
            .args(["--listen", &format!("127.0.0.1:{}", free_port())])
            .args(unresolvable),
        dir.path(),
    );
    assert_eq!(code, Some(3), "{stderr}");
    let expected = "xrd2ganglia: send channel no-such-host.invalid:8649: cannot resolve no-such-host.invalid: ";
    assert!(stderr.starts_with(expected), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    let (code, check) = exit_of(
        Command::new(BIN)
            .args(["check-config", "--config"])
            .arg(&conf)
            .args(unresolvable),
        dir.path(),
    );
    assert_eq!((code, check.as_str()), (Some(3), stderr.as_str()));

    // A state file whose directory cannot be made (a file is in the way).
    std::fs::write(dir.path().join("plain-file"), "").unwrap();
    let state = dir.path().join("plain-file/state");
    let (code, stderr) = exit_of(
        serve(&conf, free_port()).args(["--state-file", &state.display().to_string()]),
        dir.path(),
    );
    assert_eq!(code, Some(2), "{stderr}");
    let exists = std::io::Error::from_raw_os_error(libc::EEXIST);
    assert_eq!(
        stderr.trim(),
        format!(
            "xrd2ganglia: state file {}: cannot create its directory {}: {exists} (set state_file or --state-file to a file in a writable directory, or to \"\" to keep no counter state)",
            state.display(),
            dir.path().join("plain-file").display()
        )
    );

    // A bad value, as before.
    let (code, stderr) = exit_of(
        Command::new(BIN).args(["serve", "--listen", "127.0.0.1:0x", "--send", "127.0.0.1:9"]),
        dir.path(),
    );
    assert_eq!(code, Some(2), "{stderr}");

    // dump follows the same rule for its own listen address.
    let (code, stderr) = exit_of(
        Command::new(BIN)
            .args(["dump", "--config"])
            .arg(&conf)
            .args(["--listen", &format!("127.0.0.1:{port}")]),
        dir.path(),
    );
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "xrd2ganglia: cannot listen on 127.0.0.1:{port}: {in_use}"
        )),
        "{stderr}"
    );
    drop(taken);
}

/// Defect 6 of issue 27: a `recv_buffer` above net.core.rmem_max was
/// capped silently. Asked for twice the machine's cap (read from /proc),
/// on two sockets: one warning, with the size asked, the size got (the
/// cap) and the sysctl that raises it. Asked for less: no warning.
#[test]
fn a_capped_recv_buffer_is_logged_once_with_the_sysctl_to_raise() {
    let rmem_max: usize = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let dir = Scratch::new("rcvbuf");
    for (asked, capped) in [(rmem_max * 2, true), (rmem_max / 2, false)] {
        let conf = dir.path().join(format!("{asked}.toml"));
        std::fs::write(
            &conf,
            format!("{QUIET}state_file = \"\"\nrecv_buffer = {asked}\n"),
        )
        .unwrap();
        let port = free_port();
        let mut cmd = serve(&conf, port);
        cmd.args(["--listen", &format!("[::1]:{port}")]);
        let log = dir.path().join(format!("{asked}.log"));
        let (child, _) = start_until(cmd, &log, "serving").unwrap();
        let (code, text) = stop(child, &log);
        assert_eq!(code, Some(0), "{text}");
        let warnings: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("WARN") && l.contains("recv_buffer"))
            .collect();
        if !capped {
            assert!(warnings.is_empty(), "{text}");
            continue;
        }
        assert_eq!(warnings.len(), 1, "{text}");
        for said in [
            format!("asked for {asked} bytes"),
            format!("gave {rmem_max}"),
            format!("sysctl -w net.core.rmem_max={asked}"),
        ] {
            assert!(warnings[0].contains(&said), "no {said:?}: {}", warnings[0]);
        }
    }
}

/// Defect 7 of issue 27: RUST_LOG, which the shipped sysconfig sets,
/// silently won over `--log-level`. With RUST_LOG=error, `--log-level
/// info` shows the info line "serving", and with RUST_LOG=info,
/// `--log-level error` hides it; without `--log-level`, RUST_LOG still
/// sets the filter. A `--log-level` that is no filter stops the start.
#[test]
fn log_level_wins_over_rust_log() {
    let dir = Scratch::new("log-level");
    let conf = dir.path().join("c.toml");
    std::fs::write(&conf, format!("{QUIET}state_file = \"\"\n")).unwrap();
    for (rust_log, log_level) in [("error", Some("info")), ("info", None)] {
        let mut cmd = serve(&conf, free_port());
        cmd.env("RUST_LOG", rust_log);
        if let Some(level) = log_level {
            cmd.args(["--log-level", level]);
        }
        let log = dir.path().join(format!("{rust_log}.log"));
        let (child, _) = start_until(cmd, &log, "serving")
            .unwrap_or_else(|e| panic!("RUST_LOG={rust_log} --log-level {log_level:?}: {e}"));
        let (code, text) = stop(child, &log);
        assert_eq!(code, Some(0), "{text}");
    }
    // And the other way: --log-level error hides the info line RUST_LOG=info shows.
    let mut cmd = serve(&conf, free_port());
    cmd.env("RUST_LOG", "info").args(["--log-level", "error"]);
    let log = dir.path().join("quiet.log");
    let mut child = spawn_logging(&mut cmd, &log);
    std::thread::sleep(Duration::from_secs(1));
    assert!(child.try_wait().unwrap().is_none(), "it runs");
    let (code, text) = stop(child, &log);
    assert_eq!(code, Some(0), "{text}");
    assert!(!text.contains("serving"), "{text}");
    let (code, stderr) = exit_of(
        serve(&conf, free_port()).args(["--log-level", "info,=bogus=["]),
        dir.path(),
    );
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--log-level"), "{stderr}");
}

/// Its log is plain text when stderr is not a terminal (here a file): no
/// colour codes. Under systemd, stderr is the journal's stream and
/// `JOURNAL_STREAM` names its device and inode: each line then starts with
/// its level as an sd-daemon priority (`<6>` info, `<4>` warning), which
/// journald takes as the entry's priority (`journalctl -p warning`), and
/// carries no timestamp (the journal's own stamps it). A `JOURNAL_STREAM`
/// naming another file (inherited, stderr since redirected) changes
/// nothing.
#[test]
fn the_log_is_plain_text_and_under_systemd_carries_each_lines_priority() {
    use std::os::unix::fs::MetadataExt;
    let dir = Scratch::new("journal");
    let config = dir.path().join("x.toml");
    std::fs::write(&config, format!("{QUIET}state_file = \"\"\n")).unwrap();
    let other = dir.path().join("other");
    std::fs::write(&other, "").unwrap();
    for journal in [true, false] {
        let log = dir.path().join(format!("serve-{journal}.log"));
        std::fs::write(&log, "").unwrap();
        let named = if journal { &log } else { &other };
        let m = std::fs::metadata(named).unwrap();
        let port = free_port();
        let mut cmd = serve(&config, port);
        cmd.env("JOURNAL_STREAM", format!("{}:{}", m.dev(), m.ino()));
        let (child, _) = start_until(cmd, &log, "serving").unwrap();
        // Sent where nothing listens: a warning.
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.send_to(&common::fixture("ds_idle.xml"), ("127.0.0.1", port))
            .unwrap();
        wait_until("the warning", || {
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("gmond is not listening")
        });
        let (code, text) = stop(child, &log);
        assert_eq!(code, Some(0), "{text}");
        assert!(!text.contains('\x1b'), "terminal codes in a file:\n{text}");
        for line in text.lines() {
            let (level, priority) = if line.contains(" WARN ") {
                ("WARN", "<4>")
            } else {
                ("INFO", "<6>")
            };
            assert!(line.contains(level), "{line}");
            if journal {
                assert!(line.starts_with(&format!("{priority} {level} ")), "{line}");
            } else {
                // A timestamp first, as the default format writes it.
                assert!(line.starts_with("20") && line.contains('T'), "{line}");
            }
        }
        assert!(
            text.lines()
                .any(|l| l.contains("gmond is not listening") && (!journal || l.starts_with("<4>"))),
            "{text}"
        );
    }
}

/// Issue 42, item 5: `peer` naming this gateway's own `peer_listen` (it
/// pulled from itself), a name no DNS can hold (5,000 characters, a
/// slash), and a name that does not resolve: check-config and serve
/// refuse each, naming the key. A name that does not resolve may pass
/// later (DNS at boot), exit 3 as a send host's; the rest exit 2.
#[test]
fn a_peer_that_is_this_gateway_or_no_host_is_refused() {
    let dir = Scratch::new("peer-check");
    let check = |peer: &str, listen: &str| {
        let conf = dir.path().join(format!("peer-{}.toml", free_port()));
        std::fs::write(
            &conf,
            format!(
                "{QUIET}state_file = \"\"\nsend = false\nxml_listen = [\"127.0.0.1:{}\"]\npeer = \"{peer}\"\npeer_listen = [\"{listen}\"]\n",
                free_port()
            ),
        )
        .unwrap();
        let checked = exit_of(
            Command::new(BIN)
                .args(["check-config", "--config"])
                .arg(&conf),
            dir.path(),
        );
        (conf, checked)
    };
    let port = free_port();
    // Itself, by the address it listens on.
    let (conf, (code, stderr)) = check(&format!("127.0.0.1:{port}"), &format!("127.0.0.1:{port}"));
    let own = format!(
        "xrd2ganglia: peer = \"127.0.0.1:{port}\": 127.0.0.1:{port} is this gateway's own peer_listen 127.0.0.1:{port}: peer names the other gateway"
    );
    assert_eq!((code, stderr.trim()), (Some(2), own.as_str()));
    // serve's start refuses it the same, before it binds anything.
    let (code, serve_err) = exit_of(
        Command::new(BIN)
            .args(["serve", "--config"])
            .arg(&conf)
            .args(["--listen", &format!("127.0.0.1:{}", free_port())]),
        dir.path(),
    );
    assert_eq!((code, serve_err.trim()), (Some(2), own.as_str()));
    // Itself by name, listening on every address.
    let (_, (code, stderr)) = check(&format!("localhost:{port}"), &format!("0.0.0.0:{port}"));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!("xrd2ganglia: peer = \"localhost:{port}\": "))
            && stderr.contains(&format!("is this gateway's own peer_listen 0.0.0.0:{port}")),
        "{stderr}"
    );
    // The other gateway on this host (another port): taken.
    let (_, (code, stderr)) = check(
        &format!("127.0.0.1:{}", free_port()),
        &format!("0.0.0.0:{port}"),
    );
    assert_eq!(code, Some(0), "{stderr}");
    // Absurd names.
    let long = format!("{}:8660", "a".repeat(5000));
    for bad in [
        long.as_str(),
        "gw2/../x:8660",
        "-gw2.example.org:8660",
        "[gw2]:8660",
    ] {
        let (_, (code, stderr)) = check(bad, &format!("127.0.0.1:{port}"));
        assert_eq!(code, Some(2), "{bad:.40}: {stderr}");
        assert!(stderr.starts_with("xrd2ganglia: peer = \""), "{stderr}");
        assert!(
            stderr.trim_end().ends_with(
                ": not a host name (letters, digits, '-', '_' and '.'; labels of 1 to 63, 253 in all) nor an IP address ([...] for IPv6)"
            ),
            "{stderr}"
        );
        assert!(stderr.len() < 1000, "{}", stderr.len());
    }
    // A name that does not resolve.
    let (_, (code, stderr)) = check("no-such-host.invalid:8660", &format!("127.0.0.1:{port}"));
    assert_eq!(code, Some(3), "{stderr}");
    assert!(
        stderr.starts_with("xrd2ganglia: peer = \"no-such-host.invalid:8660\": does not resolve ("),
        "{stderr}"
    );
}

/// The peak memory of `pid` (VmHWM) and its resident memory now (VmRSS),
/// in KiB, from /proc.
fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// What four allowed peers flooding at once make the real gateway hold
/// (docs/benchmarks.md, "A peer flood"): each of 127.0.0.2-5 sends, on
/// connection after connection for 15 s, frames of 128 KiB of entries
/// that are refused (a start a year ahead), frames of a kind it does not
/// know, and an entry continued without end; at `max_sources` 10 and
/// 10,000. `cargo test --release --test quick -- --ignored peer_flood
/// --nocapture`.
#[test]
#[ignore = "a measurement: run it on purpose, in release"]
fn peer_flood_memory() {
    use std::io::Write as _;
    for max_sources in [10, 10_000] {
        let dir = Scratch::new("peer-flood");
        let (xml, own) = (free_port(), free_port());
        let conf = dir.path().join("flood.toml");
        std::fs::write(
            &conf,
            format!(
                "{QUIET}state_file = \"\"\nsend = false\nxml_listen = [\"127.0.0.1:{xml}\"]\n\
                 peer = \"127.0.0.1:{}\"\npeer_listen = [\"127.0.0.1:{own}\"]\n\
                 peer_allow = [\"127.0.0.0/8\"]\nmax_sources = {max_sources}\n",
                free_port()
            ),
        )
        .unwrap();
        let mut cmd = Command::new(BIN);
        cmd.args(["serve", "--config"])
            .arg(&conf)
            .args(["--listen", &format!("127.0.0.1:{}", free_port())]);
        let log = dir.path().join("log");
        let (child, _) = start_until(cmd, &log, "xml_listen").unwrap();
        let pid = child.id();
        std::thread::sleep(Duration::from_secs(1));
        let before = memory_kib(pid);
        let frame = |kind: u8, payload: &[u8]| {
            let mut f = vec![kind];
            f.extend_from_slice(&(payload.len() as u32).to_be_bytes());
            f.extend_from_slice(payload);
            f
        };
        // An entry of a start a year ahead, refused whole (the schema's
        // JSON, its frame full).
        let mut refused = String::from(
            r#"{"ip":"10.0.0.1","program":"xrootd","start":[4000000000,1],"counters":["#,
        );
        while refused.len() < (128 << 10) - 64 {
            refused.push_str(r#"["0000000000000001",1,1],"#);
        }
        refused.push_str(r#"["0000000000000001",1,1]]}"#);
        let refused = refused.into_bytes();
        let counters = r#"["0000000000000002",1,1],"#.repeat(5300).into_bytes();
        let header = frame(b'H', b"xrd2ganglia-peer 3\tpush\t0\t1");
        let mut one = Vec::new();
        for i in 0..8 {
            one.extend(frame(b'E', &refused));
            one.extend(frame(b'F', &refused[..100_000 + i]));
        }
        one.extend(frame(
            b'E',
            br#"{"ip":"10.0.0.2","program":"xrootd","start":[1700000000,1],"counters":["#,
        ));
        for _ in 0..40 {
            one.extend(frame(b'+', &counters[..120_000]));
        }
        let until = Instant::now() + Duration::from_secs(15);
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let floods: Vec<_> = (2..=5u8)
            .map(|n| {
                let (header, one, sent) = (header.clone(), one.clone(), sent.clone());
                std::thread::spawn(move || {
                    while Instant::now() < until {
                        let s = socket2::Socket::new(
                            socket2::Domain::IPV4,
                            socket2::Type::STREAM,
                            None,
                        )
                        .unwrap();
                        s.bind(&std::net::SocketAddr::from(([127, 0, 0, n], 0)).into())
                            .unwrap();
                        if s.connect(&std::net::SocketAddr::from(([127, 0, 0, 1], own)).into())
                            .is_err()
                        {
                            continue;
                        }
                        let mut s: std::net::TcpStream = s.into();
                        let _ = s.write_all(&header);
                        while Instant::now() < until && s.write_all(&one).is_ok() {
                            sent.fetch_add(one.len() as u64, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        let mut peak_during = 0;
        while Instant::now() < until {
            peak_during = peak_during.max(memory_kib(pid).1);
            std::thread::sleep(Duration::from_millis(100));
        }
        for f in floods {
            f.join().unwrap();
        }
        let after = memory_kib(pid);
        let mut doc = Vec::new();
        let _ = std::io::Read::read_to_end(
            &mut std::net::TcpStream::connect(("127.0.0.1", xml)).unwrap(),
            &mut doc,
        );
        let (_, text) = stop(child, &log);
        let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
        for l in text.lines().filter(|l| l.contains("peer")) {
            let at = l.find("peer").unwrap_or(0);
            *kinds.entry(l[at..].chars().take(70).collect()).or_default() += 1;
        }
        for (k, n) in kinds.iter().take(8) {
            println!("  {n} x {k}");
        }
        println!(
            "max_sources {max_sources}: VmHWM {} KiB before, {} KiB after ({} MiB sent by 4 peers in 15 s); \
             VmRSS at most {} KiB during, {} KiB after; serving: {} bytes to a poll; {} peer lines in the log",
            before.0,
            after.0,
            sent.load(std::sync::atomic::Ordering::Relaxed) >> 20,
            peak_during,
            after.1,
            doc.len(),
            text.lines().filter(|l| l.contains("peer")).count()
        );
    }
}

/// Issue 43, item 4, through the real signal: SIGTERM while gmetad reads
/// a document closes the XML port at once (a new poll is refused) and
/// finishes the document; the process then exits 0. Before, the document
/// was cut (gmetad: `XML_ParseBuffer() error ... no element found`).
#[test]
fn sigterm_finishes_the_document_being_read() {
    use std::io::Read;
    use std::net::TcpStream;
    const SERVERS: usize = 150;
    let xml_port = free_port();
    let mut gw = Gateway::start_xml(
        free_port(),
        xml_port,
        None,
        &format!("{QUIET}state_file = \"\"\ndrain_timeout = 120\n"),
    );
    let record = String::from_utf8(common::fixture("ds_loaded.xml")).unwrap();
    for i in 0..SERVERS {
        let rec = record.replace("src=\"vm:", &format!("src=\"ds{i}.example:"));
        gw.send_as(
            &format!("127.0.{}.{}", 20 + i / 200, 1 + i % 200),
            rec.as_bytes(),
        );
    }
    let hosts = |doc: &str| doc.matches("<HOST ").count();
    wait_until("every server in the document", || {
        hosts(&gw.xml_text()) == SERVERS
    });
    // A poll begun: its first bytes read, megabytes still to come.
    let mut s = TcpStream::connect(("127.0.0.1", xml_port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut doc = vec![0u8; 4096];
    s.read_exact(&mut doc).unwrap();
    let pid = gw.proc.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    wait_until("the XML port to refuse a poll", || {
        matches!(TcpStream::connect(("127.0.0.1", xml_port)),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused)
    });
    s.read_to_end(&mut doc).unwrap();
    let doc = String::from_utf8(doc).unwrap();
    assert!(
        doc.ends_with("</GANGLIA_XML>\n"),
        "cut at {} bytes",
        doc.len()
    );
    assert_eq!(hosts(&doc), SERVERS);
    let log = gw.proc.log_text();
    let status = exit_within_10s(&mut gw.proc.child, || log.clone());
    assert!(status.success(), "{status:?}: {}", gw.proc.log_text());
}
