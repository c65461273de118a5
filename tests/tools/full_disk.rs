//! Issue 42, item 9: a full disk at start is a bad day, not a bad config.
//! The state directory is a small tmpfs (a mount namespace of the
//! gateway's own: needs root), full before `serve` starts: of blocks (the
//! lock file is made, its pid cannot be written, nor the state file), or
//! of inodes (not even the lock file can be made). Either way the gateway
//! starts, serves a record, says in the log and in `status` that its state
//! is not being saved; once the test frees the space (through
//! /proc/PID/root, the gateway's view of its mounts) it takes the lock if
//! it had to wait for it, saves, says so, and `status` says saved. Before
//! the fix it exited 2 ("cannot lock ...: No space left on device"), which
//! the unit never restarts.
//!
//! The gateway is stopped by its own pid (SIGTERM).

use xrd2ganglia_testkit as common;

use std::net::UdpSocket;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::child::{link_record, plain, start_until, stop};
use common::status::status_json;
use common::{Scratch, free_port};

const BIN: &str = env!("CARGO_BIN_EXE_xrd2ganglia");

/// Waits (at most 10 s) until `done` gives Some.
fn wait<T>(what: &str, mut done: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = done() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts `serve` with its state file on a tmpfs mounted with `options`
/// and filled by `fill` (shell, `$D` the mount point), checks what it
/// says while full, frees the space (`freed`: the files `fill` made) and
/// checks that it saves. `lock_waits`: the lock file cannot be made.
fn full_disk_at_start(tag: &str, options: &str, fill: &str, freed: &[&str], lock_waits: bool) {
    let dir = Scratch::new(tag);
    let mount = dir.path().join("state-dir");
    std::fs::create_dir(&mount).unwrap();
    let state = mount.join("state");
    let socket = dir.path().join("control");
    let port = free_port();
    let conf = dir.path().join("c.toml");
    std::fs::write(
        &conf,
        format!(
            "stats_interval = 0\nself_metrics_interval = 0\nstate_interval = 1\n\
             send = false\nxml_listen = [\"127.0.0.1:{}\"]\nlisten = [\"127.0.0.1:{port}\"]\n\
             state_file = {:?}\ncontrol_socket = {:?}\n",
            free_port(),
            state.to_str().unwrap(),
            socket.to_str().unwrap()
        ),
    )
    .unwrap();
    // unshare and sh exec in place: the pid is the gateway's.
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "D=\"$1\"; shift; mount -t tmpfs -o {options} tmpfs \"$D\" || exit 90; {fill}; \
             exec \"$0\" \"$@\""
        ))
        .arg(BIN)
        .arg(&mount)
        .args(["serve", "--config"])
        .arg(&conf);
    let log = dir.path().join("log");
    let (child, _) = start_until(cmd, &log, "serving").unwrap_or_else(|e| {
        panic!("a full disk at start stopped the gateway (exit 90: no tmpfs here): {e}")
    });
    let pid = child.id();
    let seen = Path::new("/proc").join(pid.to_string()).join("root");
    let inside = |p: &Path| seen.join(p.strip_prefix("/").unwrap());
    let text = || plain(&std::fs::read_to_string(&log).unwrap_or_default());

    // Full: it serves (a record becomes a source) and says it saves nothing.
    let record = link_record(4242, 1_000_000);
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .send_to(record.as_bytes(), ("127.0.0.1", port))
        .unwrap();
    let status = wait("the record's source in status", || {
        let s = status_json(&socket);
        (s["sources"].as_array().unwrap().len() == 1).then_some(s)
    });
    let f = &status["state_file"];
    assert_eq!(f["path"], state.to_str().unwrap(), "{status}");
    assert_eq!(f["saved"], false, "{status}");
    assert!(
        f["error"]
            .as_str()
            .unwrap_or("")
            .contains("No space left on device"),
        "{status}"
    );
    let table = common::status::status(&["--socket", socket.to_str().unwrap()]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains(&format!(
            "WARNING: the state file {} is not being saved",
            state.display()
        )),
        "{table}"
    );
    let log_text = text();
    assert!(
        log_text.contains(&format!(
            "cannot write the state file {}: No space left on device",
            state.display()
        )),
        "{log_text}"
    );
    if lock_waits {
        assert!(
            log_text.contains(&format!(
                "state file {}: cannot lock {}.lock: No space left on device (os error 28): \
                 serving; the counter state is not saved until there is room",
                state.display(),
                state.display()
            )),
            "{log_text}"
        );
    }
    assert!(!inside(&state).exists());

    // Space returns: the next save writes the file, with the source.
    for f in freed {
        std::fs::remove_file(inside(&mount.join(f))).unwrap();
    }
    let saved = wait("the state file, with the source", || {
        std::fs::read_to_string(inside(&state)).ok().filter(|t| {
            t.contains("{\"ip\":\"127.0.0.1\",\"program\":\"xrootd\",\"start\":[1700000000,4242],")
        })
    });
    assert!(saved.contains(",\"counters\":[[\""), "{saved}");
    let log_text = text();
    assert!(
        log_text.contains(&format!("state file {} written again", state.display())),
        "{log_text}"
    );
    if lock_waits {
        assert!(
            log_text.contains(&format!(
                "state file {}: its lock {}.lock taken",
                state.display(),
                state.display()
            )),
            "{log_text}"
        );
    }
    let status = status_json(&socket);
    assert_eq!(status["state_file"]["saved"], true, "{status}");
    assert_eq!(status["state_file"]["error"], serde_json::Value::Null);
    let table = common::status::status(&["--socket", socket.to_str().unwrap()]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains(&format!("State file: {}, saved ", state.display()))
            && !table.contains("WARNING"),
        "{table}"
    );
    // Owned now: a second gateway on the same file is refused, naming this one.
    let lock = std::fs::read_to_string(inside(&state.with_extension("lock"))).unwrap();
    if lock_waits {
        assert_eq!(lock.trim(), pid.to_string());
    }
    let (code, log_text) = stop(child, &log);
    assert_eq!(code, Some(0), "{log_text}");
}

/// Full of blocks: the lock file is made (an inode needs no block), its
/// pid and the state file cannot be written.
#[test]
fn a_disk_full_of_blocks_at_start_serves_says_so_and_saves_once_there_is_room() {
    full_disk_at_start(
        "fullblocks",
        "size=64k",
        "head -c 1M /dev/zero > \"$D/filler\" 2>/dev/null; test -s \"$D/filler\" || exit 91",
        &["filler"],
        false,
    );
}

/// Out of inodes: not even the lock file can be made; the gateway takes
/// the lock at the first save that has room.
#[test]
fn a_disk_out_of_inodes_at_start_serves_and_takes_the_lock_once_there_is_room() {
    full_disk_at_start(
        "fullinodes",
        "size=1m,nr_inodes=4",
        "touch \"$D/a\" \"$D/b\" \"$D/c\" || exit 91; touch \"$D/d\" 2>/dev/null && exit 92; true",
        &["a", "b", "c"],
        true,
    );
}
