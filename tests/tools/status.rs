//! `xrd2ganglia status` and the control socket where the user is not root
//! or not allowed: these run the gateway and `status` as `nobody`
//! (setpriv), so they need root. The rest is in the quick tier
//! (tests/quick/status.rs).
//!
//! Every gateway here is started by the test and stopped by its own pid
//! (its guard, or SIGTERM to the child's pid).

use xrd2ganglia_testkit as common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::child::spawn_logging;
use common::status::{QUIET, gateway, status, status_json};
use common::{Scratch, chown_nobody, free_port};

const BIN: &str = env!("CARGO_BIN_EXE_xrd2ganglia");

/// A non-root quick look with the default control socket: one line says
/// it runs without it, and it serves.
#[test]
fn non_root_at_the_default_socket_runs_on_without_it() {
    let dir = Scratch::new("status-nobody");
    let conf = dir.path().join("x.toml");
    std::fs::write(&conf, format!("{QUIET}state_file = \"\"\n")).unwrap();
    chown_nobody(dir.path());
    let log = dir.path().join("log");
    let port = free_port();
    let mut child = spawn_logging(
        Command::new("setpriv")
            .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
            .arg(BIN)
            .args(["serve", "--config"])
            .arg(&conf)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--send", &format!("127.0.0.1:{}", free_port())]),
        &log,
    );
    let text = || std::fs::read_to_string(&log).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !text().contains("serving") {
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("did not start as nobody: {}", text());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let still = child.try_wait().unwrap().is_none();
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().unwrap();
    let log_text = text();
    assert!(still, "{log_text}");
    assert!(status.success(), "{status:?}: {log_text}");
    let lines: Vec<&str> = log_text
        .lines()
        .filter(|l| l.contains("control socket"))
        .collect();
    assert_eq!(lines.len(), 1, "{log_text}");
    assert!(
        lines[0].contains("control socket /run/xrd2ganglia/control")
            && lines[0].contains("running without it"),
        "{log_text}"
    );
}

/// A gateway that does not answer (stopped with SIGSTOP) and a socket the
/// user may not use each end `status` with 1 and why.
#[test]
fn a_stopped_gateway_or_a_forbidden_socket_exits_1() {
    let dir = Scratch::new("status-stopped");
    let (gw, socket) = gateway(&dir);
    let path = socket.to_str().unwrap();

    // Not root, not in the socket's group.
    let out = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
        .args([BIN, "status", "--socket", path])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with(&format!(
            "xrd2ganglia status: no gateway answers on {path}: permission denied"
        )),
        "{err}"
    );

    let pid = gw.proc.child.id().to_string();
    let signal = |sig: &str| {
        assert!(
            Command::new("kill")
                .args([sig, &pid])
                .status()
                .unwrap()
                .success()
        )
    };
    signal("-STOP");
    let started = Instant::now();
    let out = status(&["--socket", path]);
    signal("-CONT");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(": no answer within 10 s"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(15));
    // Answered once it runs again.
    assert_eq!(status_json(&socket)["pid"], gw.proc.child.id());
}
