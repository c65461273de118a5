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

/// Two users' try-out gateways on one host (no config: the try-out
/// settings; each on ports of its own) each make their own control
/// socket, and `status` run by each user with no config either answers
/// from that user's gateway. (Both had /tmp/xrd2ganglia-try-out/control:
/// the second ran without a socket, Permission denied, and its user's
/// `status` could not ask it.) The other user's socket is not theirs to
/// ask. In a mount namespace with a /tmp of its own, so nothing of the
/// host's /tmp is touched.
#[test]
fn two_users_try_outs_each_have_their_own_control_socket() {
    let dir = Scratch::new("try-out-users");
    std::fs::copy(BIN, dir.path().join("xrd2ganglia")).unwrap();
    chown_nobody(dir.path());
    let bin = dir.path().join("xrd2ganglia");
    // Users 65534 (nobody) and 65533: each starts a try-out, waits for
    // its `serving`, asks `status --json`, then tries the other's socket.
    let script = r#"
set -u
# The binary, from the scratch directory the new /tmp hides.
mount --bind "${BIN%/*}" /mnt
mount -t tmpfs -o mode=1777 tmpfs /tmp
cp /mnt/xrd2ganglia /tmp/xrd2ganglia && chmod 0755 /tmp/xrd2ganglia
BIN=/tmp/xrd2ganglia
as() { u=$1; shift; setpriv --reuid="$u" --regid="$u" --clear-groups "$@"; }
pids=""
trap 'kill -TERM $pids 2>/dev/null' EXIT
for u in 65534 65533; do
  # setpriv execs the gateway: $! is its pid (stopped by it below).
  setpriv --reuid="$u" --regid="$u" --clear-groups \
    "$BIN" serve --listen "127.0.0.1:$1" --xml-listen "127.0.0.1:$2" >/dev/null 2>"/tmp/log-$u" &
  pids="$pids $!"
  shift 2
  n=0
  until grep -q serving "/tmp/log-$u" 2>/dev/null; do
    n=$((n + 1)); [ "$n" -lt 500 ] || break; sleep 0.02
  done
done
for u in 65534 65533; do
  echo "== status of $u"; as "$u" "$BIN" status --json 2>&1; echo "== exit $?"
done
echo "== 65533 asks 65534's"; as 65533 "$BIN" status --socket /tmp/xrd2ganglia-try-out-65534/control 2>&1; echo "== exit $?"
kill -TERM $pids; wait; trap - EXIT
for u in 65534 65533; do echo "== log of $u"; cat "/tmp/log-$u"; done
"#;
    let ports: Vec<String> = (0..4).map(|_| free_port().to_string()).collect();
    let out = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .args(&ports)
        .env("BIN", &bin)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let section = |head: &str| -> String {
        text.split(&format!("== {head}\n"))
            .nth(1)
            .and_then(|s| s.split("\n== ").next())
            .unwrap_or_else(|| panic!("no {head:?}:\n{text}"))
            .to_string()
    };
    let mut pids = Vec::new();
    for u in ["65534", "65533"] {
        let status = section(&format!("status of {u}"));
        let json: serde_json::Value = serde_json::from_str(status.trim())
            .unwrap_or_else(|e| panic!("{u}'s status: {e}:\n{text}"));
        pids.push(json["pid"].as_u64().unwrap());
        let log = section(&format!("log of {u}"));
        assert!(!log.contains("running without it"), "{u}:\n{log}");
    }
    assert_ne!(pids[0], pids[1], "both users asked one gateway:\n{text}");
    assert!(text.contains("== exit 0\n== status of 65533"), "{text}");
    let other = section("65533 asks 65534's");
    assert!(
        other.contains("permission denied") || other.contains("Permission denied"),
        "{text}"
    );
    assert!(text.contains("== exit 1\n== log of 65534"), "{text}");
}
