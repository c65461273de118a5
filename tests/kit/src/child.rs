//! Child processes a test starts and waits for: each is stopped by its own
//! pid, never by name, and a wait that runs past 10 s fails the test.

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::free_port;

/// Runs a command that should exit by itself; returns its exit code and
/// stderr. One that is still running after 10 s is killed (by its pid,
/// it is our child) and the test fails: it started when it should not have.
pub fn exit_of(cmd: &mut Command, scratch: &Path) -> (Option<i32>, String) {
    let err_path = scratch.join(format!("stderr-{}", free_port()));
    let mut child = spawn_logging(cmd, &err_path);
    let status = exit_within_10s(&mut child, || {
        format!(
            "{cmd:?}: {}",
            std::fs::read_to_string(&err_path).unwrap_or_default()
        )
    });
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    (status.code(), stderr)
}

/// Waits for our `child` to exit. One still running after 10 s is killed
/// (by its pid) and the test fails, saying `what`.
pub fn exit_within_10s(child: &mut Child, what: impl Fn() -> String) -> ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running after 10 s: {}", what());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Starts `cmd` (stdin and stdout nothing) with its stderr in `log`.
pub fn spawn_logging(cmd: &mut Command, log: &Path) -> Child {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"))
}

/// Starts `cmd` with its stderr in `log` and waits until the log says
/// `want`: the child and the log, or Err with what it said when it exited
/// or 10 s passed first (then it is killed, by its pid).
pub fn start_until(mut cmd: Command, log: &Path, want: &str) -> Result<(Child, String), String> {
    let mut child = spawn_logging(&mut cmd, log);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains(want) {
            return Ok((child, text));
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("exited {status}: {text}"));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("no {want:?} after 10 s: {text}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM to our child, by its pid; its exit code and the log.
pub fn stop(mut child: Child, log: &Path) -> (Option<i32>, String) {
    // SAFETY: kill(2) on the pid of a child this test started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let status = exit_within_10s(&mut child, || "after SIGTERM".into());
    (
        status.code(),
        std::fs::read_to_string(log).unwrap_or_default(),
    )
}

/// `text` without the ANSI colour sequences tracing puts around fields.
pub fn plain(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('\x1b') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        rest = rest.find('m').map_or("", |m| &rest[m + 1..]);
    }
    out.push_str(rest);
    out
}

/// A record of ds1.example.org's link counters, as xrootd `pid` sends it.
pub fn link_record(pid: u32, inb: u64) -> String {
    format!(
        r#"<statistics tod="1700000100" ver="v5.5.3" src="ds1.example.org:1094" tos="1700000000" pgm="xrootd" ins="anon" pid="{pid}" site="S"><stats id="link"><in>{inb}</in></stats></statistics>"#
    )
}
