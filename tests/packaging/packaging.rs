//! What an admin installs, against the real binary and systemd's own
//! checker: the unit (packaging/xrd2ganglia.service) starts with every
//! option the sysconfig file documents, and does not restart a gateway
//! that cannot start as configured; the shipped config shows every
//! default commented out, each one true and each one uncommentable.
//!
//! Every process here is started by the test and stopped by its own pid.

use xrd2ganglia_testkit as common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::child::{start_until, stop};
use common::{Scratch, free_port};
use xrd2ganglia::config::file::{Absent, ChannelConfig, FileConfig};
use xrd2ganglia::config::{CHANNEL_KEYS, KEYS};

const BIN: &str = env!("CARGO_BIN_EXE_xrd2ganglia");

fn source(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

/// The unit's value of `key` (the last line that sets it), as written.
fn unit_values(unit: &str, key: &str) -> Vec<String> {
    unit.lines()
        .filter_map(|l| l.strip_prefix(&format!("{key}=")))
        .map(str::to_string)
        .collect()
}

/// `systemd-analyze verify` on a copy of the unit whose binary is the one
/// built here (verify checks that the ExecStart binaries exist): no
/// complaint at all, so every line parsed (a value systemd cannot parse
/// is only warned about, "Failed to parse value, ignoring").
fn verify_unit(dir: &Path) {
    let unit = source("packaging/xrd2ganglia.service").replace("/usr/bin/xrd2ganglia", BIN);
    let path = dir.join("xrd2ganglia.service");
    std::fs::write(&path, unit).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&path)
        .output()
        .expect("systemd-analyze (Debian package systemd)");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "systemd-analyze verify: {said}"
    );
}

/// The environment systemd gives the unit's commands from `env_file`
/// (EnvironmentFile=): the file's assignments, as a shell reads them
/// (the file's values are plain double-quoted strings).
fn environment(env_file: &Path) -> Vec<(String, String)> {
    let out = Command::new("bash")
        .arg("-c")
        .arg("set -a; . \"$1\"; printf '%s\\0%s' \"$XRD2GANGLIA_OPTIONS\" \"$RUST_LOG\"")
        .arg("bash")
        .arg(env_file)
        .env_clear()
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let (options, rust_log) = text.split_once('\0').unwrap();
    vec![
        ("XRD2GANGLIA_OPTIONS".into(), options.into()),
        ("RUST_LOG".into(), rust_log.into()),
    ]
}

/// A command line of the unit with its variables expanded as systemd
/// expands them: `$NAME` alone as a word becomes the variable's value
/// split at whitespace (zero or more words), systemd.service(5).
fn expand(line: &str, env: &[(String, String)]) -> Vec<String> {
    line.split_whitespace()
        .flat_map(|word| match word.strip_prefix('$') {
            Some(name) => env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default(),
            None => vec![word.to_string()],
        })
        .collect()
}

/// Defect 1 of issue 27: `--log-level debug` in XRD2GANGLIA_OPTIONS, which
/// the sysconfig file invites, made ExecStartPre (`check-config`) exit 2.
/// For every XRD2GANGLIA_OPTIONS the sysconfig file shows, and for all
/// of them on one line: the unit verifies, `check-config` with them
/// (expanded as systemd expands them) exits 0, and ExecStart's serves. The
/// examples together name every option `serve --help` lists but
/// `--config` (the unit's) and `--help`.
///
/// To run here, the unit's paths are the test's: the binary built here,
/// a scratch copy of the shipped config (its listen and channel on
/// loopback ports of this test), and in the options, wildcard addresses
/// on loopback ports of this test and /var/lib/xrd2ganglia in a scratch
/// directory.
#[test]
fn the_unit_starts_with_every_option_the_sysconfig_documents() {
    let dir = Scratch::new("unit-options");
    verify_unit(dir.path());
    let unit = source("packaging/xrd2ganglia.service");
    let sysconfig = source("packaging/xrd2ganglia.sysconfig");
    let start = unit_values(&unit, "ExecStart");
    assert_eq!(start.len(), 1, "{unit}");
    assert!(
        start[0].contains(" serve ") && start[0].contains("$XRD2GANGLIA_OPTIONS"),
        "serve takes the options: {start:?}"
    );
    // check-config takes the same options, for an admin to check them and
    // the config by hand as the sysconfig file says.
    let pre = [start[0].replacen(" serve ", " check-config ", 1)];

    let examples: Vec<&str> = sysconfig
        .lines()
        .filter_map(|l| {
            l.strip_prefix('#')?
                .trim()
                .strip_prefix("XRD2GANGLIA_OPTIONS=")
        })
        .collect();
    assert!(examples.len() >= 3, "{sysconfig}");
    let live: Vec<&str> = sysconfig
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains('='))
        .collect();
    assert!(
        live.iter().any(|l| l.starts_with("XRD2GANGLIA_OPTIONS=")),
        "{sysconfig}"
    );

    // Every option of serve is shown (clap's help is the list).
    let help = Command::new(BIN)
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let options: Vec<&str> = help
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .filter(|w| !["--config", "--help"].contains(w))
        .collect();
    assert!(options.contains(&"--log-level"), "{help}");
    for option in &options {
        assert!(
            examples
                .iter()
                .any(|e| e.split_whitespace().any(|w| w.trim_matches('"') == *option)),
            "the sysconfig file shows no example of serve's {option}"
        );
    }

    let state_dir = dir.path().join("var-lib");
    let config = dir.path().join("xrd2ganglia.toml");
    let shipped = source("conf/xrd2ganglia.toml");
    std::fs::write(
        &config,
        format!(
            "{shipped}\nlisten = [\"127.0.0.1:{}\"]\nstate_file = {:?}\nstats_interval = 0\n\
             self_metrics_interval = 0\ncontrol_socket = {:?}\n[[channel]]\nhost = \"127.0.0.1\"\nport = {}\n",
            free_port(),
            state_dir.join("state").display().to_string(),
            dir.path().join("control").display().to_string(),
            free_port()
        ),
    )
    .unwrap();
    let here = |word: String| -> String {
        let word = word
            .replace("/usr/bin/xrd2ganglia", BIN)
            .replace(
                "/etc/xrd2ganglia/xrd2ganglia.toml",
                config.to_str().unwrap(),
            )
            .replace("/var/lib/xrd2ganglia", state_dir.to_str().unwrap());
        match word.strip_prefix("0.0.0.0:") {
            Some(_) => format!("127.0.0.1:{}", free_port()),
            None => word,
        }
    };
    let mut all: Vec<String> = examples.iter().map(|e| e.to_string()).collect();
    // All at once (each option once: --xml-listen and --no-send together).
    let together = examples
        .iter()
        .map(|e| e.trim_matches('"'))
        .filter(|e| !e.contains("--no-send"))
        .collect::<Vec<_>>()
        .join(" ");
    all.push(format!("\"{together}\""));
    for (n, example) in all.iter().enumerate() {
        let env_file = dir.path().join(format!("sysconfig-{n}"));
        let text = sysconfig.replace(
            "\nXRD2GANGLIA_OPTIONS=\"\"\n",
            &format!("\nXRD2GANGLIA_OPTIONS={example}\n"),
        );
        assert_ne!(text, sysconfig, "no live XRD2GANGLIA_OPTIONS=\"\" line");
        std::fs::write(&env_file, text).unwrap();
        let env = environment(&env_file);
        let run = |line: &str| -> Command {
            let words: Vec<String> = expand(line, &env).into_iter().map(&here).collect();
            let mut cmd = Command::new(&words[0]);
            cmd.args(&words[1..])
                .env_clear()
                .envs(env.iter().cloned())
                .env("PATH", "/usr/bin:/bin")
                .stdin(Stdio::null());
            cmd
        };
        let out = run(&pre[0]).output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "check-config with XRD2GANGLIA_OPTIONS={example}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let log = dir.path().join(format!("serve-{n}.log"));
        let (child, served) = start_until(run(&start[0]), &log, "serving")
            .unwrap_or_else(|e| panic!("ExecStart with XRD2GANGLIA_OPTIONS={example}: {e}"));
        let (code, _) = stop(child, &log);
        assert_eq!(code, Some(0), "{served}");
    }
}

/// Defect 3 of issue 27: with `Restart=on-failure`, a gateway that cannot
/// start as configured was restarted into the same error. The codes the
/// binary exits with for a bad config file and a bad option, in
/// ExecStartPre's `check-config` and in `serve`, are each in the unit's
/// RestartPreventExitStatus, which systemd parses (verify) and which
/// does not hold a success.
#[test]
fn a_gateway_that_cannot_start_as_configured_is_not_restarted() {
    let dir = Scratch::new("unit-restart");
    verify_unit(dir.path());
    let unit = source("packaging/xrd2ganglia.service");
    assert_eq!(unit_values(&unit, "Restart"), ["on-failure"]);
    let prevent: Vec<i32> = unit_values(&unit, "RestartPreventExitStatus")
        .iter()
        .flat_map(|v| v.split_whitespace().map(|c| c.parse::<i32>().unwrap()))
        .collect();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "tmax = \"soon\"\n").unwrap();
    let bad = bad.to_str().unwrap();
    let port = format!("127.0.0.1:{}", free_port());
    let cases: [&[&str]; 4] = [
        &["check-config", "--config", bad],
        &["serve", "--config", bad, "--listen", &port],
        &["check-config", "--no-such-option"],
        &["serve", "--no-such-option"],
    ];
    for args in cases {
        let out = Command::new(BIN)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let code = out.status.code().expect("exited");
        assert_ne!(code, 0, "{args:?}");
        assert!(
            prevent.contains(&code),
            "{args:?} exits {code} ({}), which RestartPreventExitStatus={prevent:?} lacks: \
             systemd would restart it into the same error",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    assert!(!prevent.contains(&0), "{prevent:?}");
    // systemd tests RestartPreventExitStatus= against the main process's
    // exit only (service.c, service_shall_restart: main_exec_status): a
    // check in ExecStartPre failing with 2 would be restarted in a loop.
    assert_eq!(unit_values(&unit, "ExecStartPre"), Vec::<String>::new());
    // What may pass is retried: a send host that does not resolve (DNS not
    // up yet at boot) exits 3, which the unit restarts, every RestartSec;
    // over StartLimitIntervalSec / StartLimitBurst (systemd's 10 s / 5),
    // so that it is tried until it passes.
    let quiet = dir.path().join("quiet.toml");
    std::fs::write(&quiet, "control_socket = \"\"\nstate_file = \"\"\n").unwrap();
    let out = Command::new(BIN)
        .args([
            "serve",
            "--config",
            quiet.to_str().unwrap(),
            "--listen",
            &port,
        ])
        .args(["--send", "no-such-host.invalid:8649"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!prevent.contains(&3), "{prevent:?}");
    let secs: Vec<u64> = unit_values(&unit, "RestartSec")
        .iter()
        .map(|v| v.trim_end_matches('s').parse().unwrap())
        .collect();
    assert!(secs.len() == 1 && secs[0] * 5 > 10, "RestartSec={secs:?}");
}

/// A `# key = value` line of the shipped config: the key and its value.
fn default_line(line: &str) -> Option<(&str, &str)> {
    let (key, value) = line.strip_prefix("# ")?.split_once(" = ")?;
    key.chars()
        .all(|c| c.is_ascii_lowercase() || c == '_')
        .then_some((key, value))
}

/// `check-config` on `text`: its exit code and what it printed.
fn check_config(dir: &Path, name: &str, text: &str) -> (Option<i32>, String, String) {
    let path: PathBuf = dir.join(name);
    std::fs::write(&path, text).unwrap();
    let out = Command::new(BIN)
        .args(["check-config", "--config"])
        .arg(&path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The effective settings check-config prints, without its first line
/// (which names the file).
fn effective(printed: &str) -> String {
    printed.lines().skip(1).collect::<Vec<_>>().join("\n")
}

/// Defect 4 of issue 27: the shipped config said "the value shown is the
/// default" of values that were not, had half its defaults as live lines
/// (which %config(noreplace) keeps through upgrades), and uncommenting
/// `value_heartbeat = 60` failed. Now: every key with a default has one
/// `# key = value` line showing it (the `[[channel]]` keys in the
/// commented table at the end), equal to the default of the key
/// definitions; no live line sets a key to its default; uncommenting
/// each line alone, and all of them together, passes the real
/// check-config, and the settings it prints do not change.
#[test]
fn every_default_in_the_shipped_config_is_commented_out_true_and_uncommentable() {
    let dir = Scratch::new("conf-defaults");
    let shipped = source("conf/xrd2ganglia.toml");
    let lines: Vec<&str> = shipped.lines().collect();
    let channel_at = lines
        .iter()
        .position(|l| *l == "# [[channel]]")
        .expect("a commented [[channel]] table");
    assert!(
        lines[channel_at..]
            .iter()
            .skip(1)
            .all(|l| default_line(l).is_some()),
        "the commented [[channel]] table ends the file: a key after it would be the channel's"
    );
    let defaults = toml::Table::try_from(FileConfig::default()).unwrap();
    let channel_defaults =
        toml::Table::try_from(toml::from_str::<ChannelConfig>("host = \"h\"").unwrap()).unwrap();
    let value_of = |key: &str, value: &str| -> toml::Value {
        let table: toml::Table = toml::from_str(&format!("{key} = {value}"))
            .unwrap_or_else(|e| panic!("{key} = {value}: {e}"));
        table[key].clone()
    };

    // The file's keys: shown at their default, or set live to another value.
    let mut shown: Vec<(usize, &str)> = Vec::new();
    for (i, line) in lines[..channel_at].iter().enumerate() {
        if let Some((key, value)) = default_line(line) {
            let def = KEYS
                .iter()
                .find(|k| k.name == key)
                .unwrap_or_else(|| panic!("line {}: {key} is no key", i + 1));
            assert!(
                matches!(def.absent, Absent::Default),
                "line {}: {key} has no default value to show (say what leaving it out \
                 means, and indent an example)",
                i + 1
            );
            assert_eq!(
                value_of(key, value),
                defaults[key],
                "line {}: {line} is not the default",
                i + 1
            );
            shown.push((i, key));
        }
    }
    let live: toml::Table = toml::from_str(&shipped).unwrap();
    for (key, value) in &live {
        assert_ne!(
            Some(value),
            defaults.get(key),
            "{key} is set live at its default: comment it out"
        );
    }
    for key in KEYS.iter().filter(|k| matches!(k.absent, Absent::Default)) {
        let n = shown.iter().filter(|(_, k)| *k == key.name).count();
        // Tables ([[channel]], [[metric]], [[cluster]]) are shown as
        // tables, not as `key = value` lines.
        let table = key.value.starts_with("array of tables");
        let expected = if table || live.contains_key(key.name) {
            0
        } else {
            1
        };
        assert_eq!(
            n, expected,
            "# {} = ... lines in the shipped config",
            key.name
        );
    }
    let channel: Vec<(&str, &str)> = lines[channel_at + 1..]
        .iter()
        .filter_map(|l| default_line(l))
        .collect();
    for key in CHANNEL_KEYS {
        let line = channel.iter().find(|(k, _)| *k == key.name);
        match key.absent {
            Absent::Default => {
                let (_, value) =
                    line.unwrap_or_else(|| panic!("[[channel]] shows no {}", key.name));
                assert_eq!(
                    value_of(key.name, value),
                    channel_defaults[key.name],
                    "{}",
                    key.name
                );
            }
            Absent::Required => assert!(line.is_some(), "[[channel]] shows no {}", key.name),
            Absent::Means(_) => assert!(
                line.is_none(),
                "[[channel]] shows {} as a default",
                key.name
            ),
        }
    }

    // The real check-config: as shipped, each line uncommented, all of them.
    let (code, as_shipped, stderr) = check_config(dir.path(), "shipped.toml", &shipped);
    assert_eq!(code, Some(0), "{stderr}");
    let uncomment = |which: &[usize]| -> String {
        lines
            .iter()
            .enumerate()
            .map(|(i, l)| match which.contains(&i) {
                true => l.strip_prefix("# ").unwrap(),
                false => l,
            })
            .collect::<Vec<_>>()
            .join("\n")
            + "\n"
    };
    for (i, key) in &shown {
        let (code, printed, stderr) = check_config(dir.path(), "one.toml", &uncomment(&[*i]));
        assert_eq!(code, Some(0), "{key} uncommented: {stderr}");
        assert_eq!(
            effective(&printed),
            effective(&as_shipped),
            "{key} uncommented"
        );
    }
    let every: Vec<usize> = shown.iter().map(|(i, _)| *i).collect();
    let (code, printed, stderr) = check_config(dir.path(), "all.toml", &uncomment(&every));
    assert_eq!(code, Some(0), "all uncommented: {stderr}");
    assert_eq!(
        effective(&printed),
        effective(&as_shipped),
        "all uncommented"
    );
    let with_channel: Vec<usize> = every
        .iter()
        .copied()
        .chain(channel_at..lines.len())
        .collect();
    let (code, printed, stderr) =
        check_config(dir.path(), "channel.toml", &uncomment(&with_channel));
    assert_eq!(
        code,
        Some(0),
        "all and the [[channel]] uncommented: {stderr}"
    );
    assert!(
        printed.contains("[[channel]]\nhost = \"239.2.11.71\"\nport = 8649\nttl = 1\n"),
        "{printed}"
    );
}
