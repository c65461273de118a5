//! `xrd2ganglia status` as a test runs it, and the gateway it asks.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::{Gateway, Scratch, free_port, gateway_bin};

/// Settings that keep a gateway's periodic counters out of its log and
/// its metrics.
pub const QUIET: &str = "stats_interval = 0\nself_metrics_interval = 0\n";

/// `xrd2ganglia status ARGS`.
pub fn status(args: &[&str]) -> Output {
    Command::new(gateway_bin())
        .arg("status")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// `xrd2ganglia status --socket SOCKET --json`, which must exit 0.
pub fn status_json(socket: &Path) -> serde_json::Value {
    let out = status(&["--socket", socket.to_str().unwrap(), "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A gateway that accepts 127.0.0.1 and 127.0.0.2, with its control
/// socket in `dir`.
pub fn gateway(dir: &Scratch) -> (Gateway, PathBuf) {
    let socket = dir.path().join("control");
    let config = format!(
        "{QUIET}allow = [\"127.0.0.1\", \"127.0.0.2\", \"::1\"]\ncontrol_socket = {:?}\n",
        socket.to_str().unwrap()
    );
    (Gateway::start(free_port(), &config), socket)
}
