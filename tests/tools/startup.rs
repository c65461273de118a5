//! Starting `serve` where only root can set the scene: README's commands
//! run as `nobody` in a checkout, and a mount namespace whose /proc hides
//! /proc/net. The rest of the start and its refusals are in the quick tier
//! (tests/quick/startup.rs).
//!
//! Every process here is started by the test and stopped by its own pid
//! (a guard that kills its child on drop, or SIGTERM to the child's pid).

use xrd2ganglia_testkit as common;

use std::net::UdpSocket;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::child::{exit_of, link_record, plain, spawn_logging, start_until, stop};
use common::{Scratch, free_port};

const BIN: &str = env!("CARGO_BIN_EXE_xrd2ganglia");

/// The first command of README's "Two commands", as an unprivileged user
/// in a checkout of its own: with no config file it runs on the built-in
/// try-out settings (issue 36): nothing sent, no state file, nothing
/// written into the checkout. The listen and XML addresses are overridden
/// so the test stays off ports 3333 and 8659.
#[test]
fn readme_first_command_runs_unprivileged_in_a_checkout() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let section = readme
        .split("## Two commands")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("README has a \"Two commands\" section");
    let commands: Vec<&str> = section
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty() && !l.starts_with("```"))
        .take_while(|l| !l.contains(".ci/run"))
        .collect();
    assert_eq!(
        commands.len(),
        1,
        "one command builds and runs: {commands:?}"
    );
    let args: Vec<&str> = commands[0]
        .strip_prefix("cargo run --release -- ")
        .unwrap_or_else(|| panic!("not a cargo run: {}", commands[0]))
        .split_whitespace()
        .collect();

    // A checkout: the shipped config at its place, the binary, all owned by nobody.
    let checkout = Scratch::new("checkout");
    std::fs::create_dir_all(checkout.path().join("conf")).unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/xrd2ganglia.toml"),
        checkout.path().join("conf/xrd2ganglia.toml"),
    )
    .unwrap();
    let bin = checkout.path().join("xrd2ganglia");
    std::fs::copy(BIN, &bin).unwrap();
    common::chown_nobody(checkout.path());
    let as_nobody = |extra: &[String]| {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid", "nobody", "--regid", "nogroup", "--clear-groups"])
            .arg(&bin)
            .args(extra)
            .current_dir(checkout.path());
        cmd
    };
    let port = free_port();
    let overrides = [
        "--listen".to_string(),
        format!("127.0.0.1:{port}"),
        "--xml-listen".to_string(),
        format!("127.0.0.1:{}", free_port()),
    ];
    let before: Vec<_> = std::fs::read_dir(checkout.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    let mut full: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    full.extend(overrides.iter().cloned());
    let log = checkout.path().join("serve.log");
    let mut child = spawn_logging(&mut as_nobody(&full), &log);
    let served = (|| {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("serving") {
                return Ok(text);
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("exited {status}: {text}"));
            }
            if Instant::now() > deadline {
                return Err(format!("not serving after 10 s: {text}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })();
    // Stop it by its pid (setpriv execs the gateway in place).
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("README's command did not stop on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let served = served.unwrap_or_else(|e| panic!("README's command {args:?}: {e}"));
    // Issue 36: the built-in try-out settings, which send nothing and keep
    // no state (was: the shipped config, state kept in the checkout).
    assert!(served.contains("built-in try-out settings"), "{served}");
    assert!(plain(&served).contains("channels=[]"), "{served}");
    assert_eq!(status.code(), Some(0));
    let mut after: Vec<_> = std::fs::read_dir(checkout.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != "serve.log")
        .collect();
    after.sort();
    let mut before = before;
    before.sort();
    assert_eq!(
        after, before,
        "README's first command wrote into the checkout"
    );

    // A state file named as the RPM's /var/lib/xrd2ganglia, which an
    // ordinary user cannot write: refused at once with what to do, not a
    // warning at the first save.
    let named = checkout.path().join("conf/named.toml");
    std::fs::write(&named, "state_file = \"/var/lib/xrd2ganglia/state\"\n").unwrap();
    common::chown_nobody(checkout.path());
    let without: Vec<String> = ["serve", "--config", "conf/named.toml"]
        .iter()
        .map(|s| s.to_string())
        .chain(overrides.iter().cloned())
        .collect();
    let (code, stderr) = exit_of(&mut as_nobody(&without), checkout.path());
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with("xrd2ganglia: state file /var/lib/xrd2ganglia/state: cannot ")
            && stderr.contains("Permission denied"),
        "{stderr}"
    );
}

/// Defect 2 of issue 27: under the unit's `ProcSubset=pid` (and
/// `ProtectProc=invisible`), /proc/net/udp does not exist, and the
/// `kernel_drops` self-metric disappeared. Reproduced as systemd does it:
/// a mount namespace whose /proc is procfs mounted `subset=pid` (and
/// `hidepid=invisible`). There the counters line still tells kernel drops,
/// a number, from /proc/self/net/udp.
#[test]
fn kernel_drops_are_read_where_proc_subset_pid_hides_proc_net() {
    let dir = Scratch::new("procsubset");
    let conf = dir.path().join("c.toml");
    std::fs::write(
        &conf,
        "stats_interval = 1\nself_metrics_interval = 0\nstate_file = \"\"\n",
    )
    .unwrap();
    // unshare and sh exec in place: the pid is the gateway's.
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(
            "mount -t proc -o subset=pid,hidepid=invisible proc /proc || exit 90; \
             test -e /proc/net/udp && exit 91; test -e /proc/self/net/udp || exit 92; \
             exec \"$0\" \"$@\"",
        )
        .arg(BIN)
        .args(["serve", "--config"])
        .arg(&conf)
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--send", &format!("127.0.0.1:{}", free_port())]);
    let log = dir.path().join("log");
    let (child, _) = start_until(cmd, &log, "counters: ").unwrap_or_else(|e| {
        panic!("under subset=pid (exit 90: no such mount here, 91: /proc/net/udp still there): {e}")
    });
    let (code, text) = stop(child, &log);
    assert_eq!(code, Some(0), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("counters: "))
        .unwrap_or_default();
    let drops = line.split("kernel_drops=").nth(1).unwrap_or("");
    assert!(
        drops.parse::<u64>().is_ok(),
        "kernel drops unknown where ProcSubset=pid leaves /proc/self/net/udp: {line}"
    );
}

/// Defect 5 of issue 27: README's quick look exited 2 for any user but
/// root (the default state file's directory, /var/lib/xrd2ganglia). Its
/// command line, as README writes it, run as nobody: it keeps no state
/// (`--state-file ""`), receives a record and sends it on, where
/// gmond.conf says (issue 45). Its ports and gmond.conf are this test's
/// (the addresses are README's; its XML port a free one). A
/// state file named, in the file or on the command line, that cannot be
/// made still stops the start.
#[test]
fn readme_quick_look_runs_as_any_user_and_receives_and_sends() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let after = readme
        .split("A quick look")
        .nth(1)
        .expect("README has a quick look");
    let line = after
        .lines()
        .find(|l| l.contains("xrd2ganglia serve "))
        .expect("the quick look's command");
    let args: Vec<&str> = line.split_whitespace().skip(1).collect();
    let dir = Scratch::new("quick-look");
    let bin = dir.path().join("xrd2ganglia");
    std::fs::copy(BIN, &bin).unwrap();
    common::chown_nobody(dir.path());
    let capture = common::Capture::new();
    let listen_port = free_port();
    let mut listen_at = None;
    let mut config = None;
    // It sends where gmond.conf's udp_send_channel says: here a gmond.conf
    // of the test's (through the config README leaves empty), unicast to
    // the capture (tests/gmond/quick_look.rs: the real stock one, multicast).
    let gmond_conf = dir.path().join("gmond.conf");
    std::fs::write(
        &gmond_conf,
        format!(
            "udp_send_channel {{\n  host = 127.0.0.1\n  port = {}\n}}\n",
            capture.port
        ),
    )
    .unwrap();
    let empty_but_gmond_conf = dir.path().join("quick-look.toml");
    std::fs::write(
        &empty_but_gmond_conf,
        format!("gmond_conf = {:?}\n", gmond_conf.display().to_string()),
    )
    .unwrap();
    let here: Vec<String> = args
        .iter()
        .enumerate()
        .map(|(i, a)| match i.checked_sub(1).map(|p| args[p]) {
            Some("--listen") => {
                let host = a.rsplit_once(':').unwrap().0;
                listen_at = Some(host.to_string());
                format!("{host}:{listen_port}")
            }
            Some("--config") => {
                config = Some(a.to_string());
                empty_but_gmond_conf.display().to_string()
            }
            // The shell's "" is an empty word.
            _ if *a == "\"\"" => String::new(),
            _ => a.to_string(),
        })
        .collect();
    assert!(
        listen_at.is_some() && config.as_deref() == Some("/dev/null"),
        "{line}"
    );
    let here: Vec<String> = here
        .into_iter()
        .chain([
            "--xml-listen".to_string(),
            format!("127.0.0.1:{}", free_port()),
        ])
        .collect();
    let as_nobody = |args: &[String]| {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--reuid", "nobody", "--regid", "nogroup", "--clear-groups"])
            .arg(&bin)
            .args(args)
            .current_dir(dir.path());
        cmd
    };
    let log = dir.path().join("quick.log");
    let (child, _) = start_until(as_nobody(&here), &log, "serving")
        .unwrap_or_else(|e| panic!("README's quick look as nobody: {e}"));
    let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
    sender
        .send_to(link_record(41, 5000).as_bytes(), ("127.0.0.1", listen_port))
        .unwrap();
    let packet = capture.next();
    let (code, text) = stop(child, &log);
    assert_eq!(code, Some(0), "{text}");
    assert!(!packet.is_empty());
    assert!(
        plain(&text).contains("state_file= "),
        "it keeps state: {text}"
    );
    assert!(!text.contains("/var/lib/xrd2ganglia"), "{text}");

    // Named, the same file is not passed over.
    let conf = dir.path().join("named.toml");
    std::fs::write(&conf, "state_file = \"/var/lib/xrd2ganglia/state\"\n").unwrap();
    let named_in_file = [
        "serve".to_string(),
        "--config".into(),
        conf.to_str().unwrap().into(),
        "--listen".into(),
        format!("127.0.0.1:{}", free_port()),
        "--send".into(),
        format!("127.0.0.1:{}", capture.port),
    ];
    let mut named_by_option = named_in_file[3..].to_vec();
    named_by_option.insert(0, "serve".into());
    named_by_option.extend(["--state-file".into(), "/var/lib/xrd2ganglia/state".into()]);
    for args in [&named_in_file[..], &named_by_option[..]] {
        let (code, stderr) = exit_of(&mut as_nobody(args), dir.path());
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("xrd2ganglia: state file /var/lib/xrd2ganglia/state: cannot ")
                && stderr.contains("Permission denied"),
            "{stderr}"
        );
    }
}
