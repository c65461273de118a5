//! No config value panics: every key of the key table (and of the
//! `[[channel]]`, `[[metric]]`, `[[cluster]]` and `[[cluster.channel]]`
//! tables), set to each extreme value (0, i64::MAX, u64::MAX, -1, empty,
//! a NUL byte, a string of nearly 1 MiB, the wrong type; alone and in a
//! list), is either refused by the real `check-config` with exit 2 and a
//! message that names the key, or taken by it, and then a real `serve`
//! with it starts, reloads on SIGHUP and stops with exit 0 on SIGTERM. A
//! 10 MB string makes a file over the 1 MiB a config may be: refused with
//! exit 2 as such, whatever the key.
//!
//! The keys come from the tables themselves (`KEYS`, `CHANNEL_KEYS`,
//! `METRIC_KEYS`, `ClusterConfig::keys()`): a key added later is covered
//! without a word here. `serve` runs only for values `check-config`
//! takes (about a fifth of them), one process each.
//!
//! Every process here is started by the test and stopped by its own pid.

use xrd2ganglia_testkit as common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use common::child::{exit_within_10s, spawn_logging};
use common::{Scratch, free_port};
use xrd2ganglia::config::{CHANNEL_KEYS, ClusterConfig, KEYS, METRIC_KEYS};

const BIN: &str = env!("CARGO_BIN_EXE_xrd2ganglia");

/// Where a key is written in the file.
#[derive(Clone, Copy, Debug)]
enum Table {
    Top,
    Channel,
    Metric,
    Cluster,
    ClusterChannel,
}

/// The extreme values, as TOML text, each alone and as the one entry of
/// a list; and a list without any.
fn extremes() -> Vec<String> {
    let scalars = [
        "0",
        "9223372036854775807",
        "18446744073709551615",
        "-1",
        "\"\"",
        "\"\\u0000\"",
        "\"a\\u0000b\"",
        "{ x = 1 }",
        "true",
    ];
    let mut all: Vec<String> = scalars.iter().map(|v| v.to_string()).collect();
    all.extend(scalars.iter().map(|v| format!("[{v}]")));
    all.push("[]".into());
    all
}

/// A string of `len` bytes, alone or in a list. A long one takes a
/// while to parse in a debug build, so it goes only where a string (or a
/// list of strings) is taken: elsewhere it is refused as the wrong type,
/// as `""` was.
fn long_string(len: usize, in_list: bool) -> String {
    let text = format!("\"{}\"", "x".repeat(len));
    if in_list { format!("[{text}]") } else { text }
}

/// The longest string a config can hold with the rest of the test's
/// config beside it (about 1 KB) under the 1 MiB a config file may be.
const NEARLY_ONE_MIB: usize = (1 << 20) - 16 * 1024;

/// The config with `key = value` in `table`, every other key as a
/// gateway that a test may run: its own ports, state file and control
/// socket in `dir`, sending to a port nobody reads.
fn config(dir: &Path, table: Table, key: &'static str, value: &str, companion: &str) -> String {
    let mut top = vec![
        ("listen", format!("[\"127.0.0.1:{}\"]", free_port())),
        (
            "state_file",
            format!("{:?}", dir.join("state").display().to_string()),
        ),
        (
            "control_socket",
            format!("{:?}", dir.join("control").display().to_string()),
        ),
        ("stats_interval", "0".into()),
        ("self_metrics_interval", "0".into()),
    ];
    let sink = free_port();
    let channel = |k: Option<&'static str>| {
        let mut t = vec![
            ("host", "\"127.0.0.1\"".to_string()),
            ("port", sink.to_string()),
        ];
        if let Some(k) = k {
            t.retain(|(name, _)| *name != k);
            t.push((k, value.to_string()));
        }
        t
    };
    let mut text = String::new();
    let lines = |t: &[(&str, String)]| -> String {
        t.iter().map(|(k, v)| format!("{} = {v}\n", k)).collect()
    };
    if let Table::Top = table {
        top.retain(|(k, _)| *k != key);
        top.push((key, value.to_string()));
    }
    text.push_str(companion);
    text.push_str(&lines(&top));
    // The default channel, unless the key under test is `channel` itself.
    if !matches!(table, Table::Top) || key != "channel" {
        let k = matches!(table, Table::Channel).then_some(key);
        text.push_str("[[channel]]\n");
        text.push_str(&lines(&channel(k)));
    }
    match table {
        Table::Top | Table::Channel => {}
        Table::Metric => {
            let mut t = vec![("match", "\"myplug.*\"".to_string())];
            t.retain(|(k, _)| *k != key);
            t.push((key, value.to_string()));
            text.push_str("[[metric]]\n");
            text.push_str(&lines(&t));
        }
        Table::Cluster | Table::ClusterChannel => {
            let mut t = vec![
                ("name", "\"C1\"".to_string()),
                ("sites", "[\"S\"]".to_string()),
            ];
            if let Table::Cluster = table {
                t.retain(|(k, _)| *k != key);
                t.push((key, value.to_string()));
            }
            text.push_str("[[cluster]]\n");
            text.push_str(&lines(&t));
            if let Table::ClusterChannel = table {
                text.push_str("[[cluster.channel]]\n");
                text.push_str(&lines(&channel(Some(key))));
            }
        }
    }
    text
}

/// What a key needs beside it to be used at all (its range is then
/// checked too).
fn companion(key: &str) -> &'static str {
    match key {
        "value_heartbeat" => "send_values = \"changed\"\n",
        _ => "",
    }
}

/// Runs `cmd` to its end (10 s at most); its exit code and stderr.
fn run(cmd: &mut Command, err: &Path) -> (Option<i32>, String) {
    let mut child = spawn_logging(cmd, err);
    let status = exit_within_10s(&mut child, || format!("{cmd:?}"));
    (
        status.code(),
        std::fs::read_to_string(err).unwrap_or_default(),
    )
}

fn wait_for_log(log: &Path, text: &str, child: &mut Child, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(log).is_ok_and(|l| l.contains(text)) {
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{what}: no {text:?} in its log within 10 s:\n{}",
                short(&std::fs::read_to_string(log).unwrap_or_default())
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// At most 2,000 characters of a message (a 10 MB value is in some).
fn short(text: &str) -> String {
    let cut: String = text.chars().take(2000).collect();
    if cut.len() < text.len() {
        format!("{cut}... ({} bytes)", text.len())
    } else {
        cut
    }
}

/// `serve` with `conf`: serving, then SIGTERM; and serving, a SIGHUP
/// (reloading or refusing the file, as it says), then SIGTERM: exit 0
/// each time.
fn serve_reload_stop(conf: &Path, dir: &Path, what: &str) {
    serve_and_stop(conf, dir, false, what);
    serve_and_stop(conf, dir, true, what);
}

fn serve_and_stop(conf: &Path, dir: &Path, reload: bool, what: &str) {
    let what = format!("{what} (SIGHUP first: {reload})");
    let log = dir.join("serve.log");
    let mut child = spawn_logging(
        Command::new(BIN).args(["serve", "--config"]).arg(conf),
        &log,
    );
    let pid = child.id() as libc::pid_t;
    wait_for_log(&log, "serving", &mut child, &what);
    if reload {
        // SAFETY: kill(2) on the pid of the child this test started.
        unsafe { libc::kill(pid, libc::SIGHUP) };
        wait_for_log(&log, "SIGHUP", &mut child, &what);
    }
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let code = exit_within_10s(&mut child, || {
        format!(
            "{what}: after SIGTERM:\n{}",
            short(&std::fs::read_to_string(&log).unwrap_or_default())
        )
    })
    .code();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        code,
        Some(0),
        "{what}: serve took it, then exited {code:?}:\n{}",
        short(&text)
    );
}

/// Every key of every table, where it is written.
fn every_key() -> Vec<(Table, &'static str)> {
    let mut keys: Vec<(Table, &'static str)> = KEYS.iter().map(|k| (Table::Top, k.name)).collect();
    keys.extend(CHANNEL_KEYS.iter().map(|k| (Table::Channel, k.name)));
    keys.extend(METRIC_KEYS.iter().map(|k| (Table::Metric, k.name)));
    keys.extend(ClusterConfig::keys().iter().map(|k| (Table::Cluster, *k)));
    keys.extend(CHANNEL_KEYS.iter().map(|k| (Table::ClusterChannel, k.name)));
    keys
}

/// One key at every extreme, in `dir`: how many values `check-config`
/// refused and how many `serve` ran with.
fn try_key(dir: &Path, table: Table, key: &'static str) -> (usize, usize) {
    let conf: PathBuf = dir.join("x.toml");
    let err = dir.join("check.err");
    let (mut refused, mut served) = (0, 0);
    let mut try_value = |value: &str| -> String {
        std::fs::write(&conf, config(dir, table, key, value, companion(key))).unwrap();
        let what = format!("{table:?} {key} = {}", short(value));
        let (code, stderr) = run(
            Command::new(BIN)
                .args(["check-config", "--config"])
                .arg(&conf),
            &err,
        );
        match code {
            Some(2) => {
                assert!(
                    stderr.contains(key),
                    "{what}: check-config exit 2 without naming {key}: {}",
                    short(&stderr)
                );
                refused += 1;
            }
            Some(0) => {
                serve_reload_stop(&conf, dir, &what);
                served += 1;
            }
            other => panic!(
                "{what}: check-config exited {other:?}, not 2 (refused) or 0: {}",
                short(&stderr)
            ),
        }
        stderr
    };
    let wrong_type = |stderr: &str| stderr.contains("invalid type: string");
    let mut takes_string = true;
    let mut takes_strings = true;
    for value in extremes() {
        let stderr = try_value(&value);
        match value.as_str() {
            "\"\"" => takes_string = !wrong_type(&stderr),
            "[\"\"]" => {
                takes_strings = !wrong_type(&stderr) && !stderr.contains("invalid type: sequence")
            }
            _ => {}
        }
    }
    if takes_string {
        try_value(&long_string(NEARLY_ONE_MIB, false));
    }
    if takes_strings {
        try_value(&long_string(NEARLY_ONE_MIB, true));
    }
    // 10 MB: a file no config needs, refused as a file (it is not parsed:
    // no key to name).
    std::fs::write(
        &conf,
        config(
            dir,
            table,
            key,
            &long_string(10 << 20, false),
            companion(key),
        ),
    )
    .unwrap();
    let (code, stderr) = run(
        Command::new(BIN)
            .args(["check-config", "--config"])
            .arg(&conf),
        &err,
    );
    assert_eq!(code, Some(2), "{key} = 10 MB: {}", short(&stderr));
    assert!(
        stderr.contains("larger than 1 MiB, which no config needs"),
        "{key} = 10 MB: {}",
        short(&stderr)
    );
    refused += 1;
    (refused, served)
}

/// Two workers (the machine's two cores), each key to one of them.
#[test]
fn every_key_at_every_extreme_is_refused_by_name_or_served_and_stopped() {
    let started = Instant::now();
    let mut keys = every_key();
    assert!(keys.len() > 50, "{keys:?}");
    // X2G_KEYS=drain_timeout,host: only those (to look at one).
    if let Ok(only) = std::env::var("X2G_KEYS") {
        keys.retain(|(_, k)| only.split(',').any(|o| o == *k));
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let totals = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let dir = Scratch::new("values");
                    let (mut refused, mut served) = (0, 0);
                    while let Some(&(table, key)) =
                        keys.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
                    {
                        let (r, s) = try_key(dir.path(), table, key);
                        refused += r;
                        served += s;
                    }
                    (refused, served)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    });
    eprintln!(
        "{} refused by check-config, {} served and stopped, in {:.1} s",
        totals.0,
        totals.1,
        started.elapsed().as_secs_f64()
    );
}
