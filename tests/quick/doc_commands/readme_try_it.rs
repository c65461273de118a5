//! README's Try it as `readme_try_it_runs_as_written` runs it: on the
//! try-out settings' fixed ports and control socket, in namespaces of its
//! own where it can.

use std::io::Write;
use std::net::{TcpListener, UdpSocket};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::common::{Proc, Scratch, markdown::blocks};
use super::{BIN, ROOT};

/// Set in the copy of `readme_try_it_runs_as_written` that runs in
/// namespaces of its own.
const ALONE: &str = "X2G_TRY_IT_ALONE";

/// README's Try it, in namespaces of its own where they can be made (see
/// `readme_try_it_runs_as_written`, the test `name`), else here.
pub(super) fn alone(name: &str) {
    if std::env::var_os(ALONE).is_some() {
        return try_it();
    }
    match namespaces() {
        Ok(unshare) => try_it_alone(name, unshare),
        Err(why) => {
            // Written to the test's stderr itself, not through eprintln!,
            // which the harness keeps to itself when a test passes: a
            // skip is seen in every run.
            let mut said = std::io::stderr();
            let _ = writeln!(said, "README's Try it runs on this host's ports: {why}");
            let held: Vec<u16> = [3333, 8659].into_iter().filter(|&p| held(p)).collect();
            if held.is_empty() {
                try_it();
            } else {
                let _ = writeln!(
                    said,
                    "SKIPPED readme_try_it_runs_as_written: 127.0.0.1 ports {held:?} are another's (`ss -uatnp 'sport = :{}'`)",
                    held[0]
                );
            }
        }
    }
}

/// Whether something here holds 127.0.0.1:`port`, for UDP or TCP.
fn held(port: u16) -> bool {
    UdpSocket::bind(("127.0.0.1", port)).is_err() || TcpListener::bind(("127.0.0.1", port)).is_err()
}

/// Fails unless `port` on 127.0.0.1 is free for UDP and TCP alike, saying
/// how to see who holds it.
fn require_free(port: u16) {
    assert!(
        !held(port),
        "README's Try it uses 127.0.0.1:{port}, which something here holds (`ss -uatnp 'sport = :{port}'`)"
    );
}

/// The command that runs what follows it in a network and a mount
/// namespace of its own, with loopback up and a tmpfs on /tmp (and, as
/// any user but root, in a user namespace, as its root); Err with why not.
fn namespaces() -> Result<Vec<String>, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let tmp = std::env::temp_dir();
    for (what, path) in [("this test", exe.as_path()), ("the binary", Path::new(BIN))] {
        if path.starts_with(&tmp) {
            return Err(format!(
                "{what} is under {}, which a /tmp of its own would hide",
                tmp.display()
            ));
        }
    }
    // SAFETY: geteuid(2) only reads the calling process's credentials.
    let root = unsafe { libc::geteuid() } == 0;
    let mut unshare: Vec<String> = vec!["unshare".into()];
    if !root {
        unshare.extend(["--user".into(), "--map-root-user".into()]);
    }
    unshare.extend(
        [
            "--net",
            "--mount",
            "sh",
            "-c",
            "ip link set lo up && mount -t tmpfs tmpfs /tmp && exec \"$@\"",
            "sh",
        ]
        .map(String::from),
    );
    let probe = Command::new(&unshare[0])
        .args(&unshare[1..])
        .arg("true")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("unshare: {e}"))?;
    if probe.status.success() {
        Ok(unshare)
    } else {
        Err(format!(
            "{} true: {}: {}",
            unshare.join(" "),
            probe.status,
            String::from_utf8_lossy(&probe.stderr).trim()
        ))
    }
}

/// This test again, in the namespaces `unshare` makes: it must run there
/// (the one test, `--exact`) and pass.
fn try_it_alone(name: &str, unshare: Vec<String>) {
    let out = Command::new(&unshare[0])
        .args(&unshare[1..])
        .arg(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(ALONE, "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let said = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{name} in namespaces of its own ({}): {}\n{said}",
        unshare.join(" "),
        out.status
    );
    eprintln!(
        "{name}: passed in namespaces of its own ({})",
        unshare.join(" ")
    );
}

/// README's Try it, on 127.0.0.1:3333 and :8659 where the test runs.
fn try_it() {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let section = readme
        .split("\n## Try it\n")
        .nth(1)
        .expect("README has a Try it section");
    let (_, lines) = blocks(section)
        .into_iter()
        .find(|(lang, _)| lang == "sh")
        .expect("Try it has a sh block");
    let first = blocks(readme.split("\n## Two commands\n").nth(1).unwrap())
        .into_iter()
        .next()
        .unwrap()
        .1;
    assert!(
        first.iter().any(|l| l == "cargo run --release -- serve"),
        "{first:?}"
    );
    require_free(3333);
    require_free(8659);
    assert!(
        !Path::new("/etc/xrd2ganglia/xrd2ganglia.toml").exists(),
        "README's first command reads /etc/xrd2ganglia/xrd2ganglia.toml when it exists"
    );
    let dir = Scratch::new("try-it");
    let log = dir.path().join("serve.log");
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new(BIN)
        .arg("serve")
        .current_dir(ROOT)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    let mut serve = Proc {
        child,
        name: "xrd2ganglia serve".into(),
        log,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !serve.log_text().contains("serving") {
        assert!(Instant::now() < deadline, "{}", serve.log_text());
        std::thread::sleep(Duration::from_millis(20));
    }
    // Where a reader's shell finds the binary: target/release in the
    // clone; here, the test's build (target/debug or target/release).
    let bin_dir = Path::new(BIN).parent().unwrap();
    let mut outputs = Vec::new();
    for line in lines.iter().filter(|l| !l.trim().is_empty()) {
        let out = run_shell(line, bin_dir);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success() && !stdout.trim().is_empty(),
            "{line}: {out:?}"
        );
        outputs.push((line.clone(), stdout));
    }
    // What the comments promise.
    let said = |what: &str| {
        outputs
            .iter()
            .find(|(l, _)| l.contains(what))
            .map(|(_, o)| o.clone())
            .unwrap_or_else(|| panic!("no line with {what}"))
    };
    let replay = said(" replay ");
    let promised = lines
        .iter()
        .find(|l| l.contains(" replay "))
        .and_then(|l| l.split("# ").nth(1))
        .unwrap();
    assert!(replay.contains(promised), "{replay} is not {promised}");
    let poll = said(" poll  ");
    assert!(
        poll.lines()
            .any(|l| l.split_whitespace().next() == Some("vm")),
        "{poll}"
    );
    let status = said(" status ");
    let servers = status
        .lines()
        .filter(|l| l.starts_with("127.0.0.1 "))
        .count();
    assert!(
        status.contains(&format!("Sources: {servers}")) && servers == 8,
        "{status}"
    );

    // docs/troubleshooting.md's `status` checks, as written, on the same
    // gateway: the table, and jq over `--json` (no source or refused
    // sender of that address here, no state file in the try-out: nothing
    // printed or null, no error).
    let trouble = std::fs::read_to_string(Path::new(ROOT).join("docs/troubleshooting.md")).unwrap();
    let checks: Vec<String> = blocks(&trouble)
        .into_iter()
        .flat_map(|(_, lines)| lines)
        .filter(|l| l.starts_with("xrd2ganglia status"))
        .collect();
    assert_eq!(checks.len(), 4, "{checks:?}");
    for line in &checks {
        let out = run_shell(line, bin_dir);
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{line}: {out:?}"
        );
        if !line.contains("--json") {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains("Sources: 8"), "{line}: {text}");
        }
    }
    // docs/tools.md's `poll`, as written: the cluster, its host `vm` (every
    // recorded server ran there) under the columns the page shows.
    let tools = std::fs::read_to_string(Path::new(ROOT).join("docs/tools.md")).unwrap();
    let (_, shown) = blocks(&tools)
        .into_iter()
        .find(|(_, l)| l.first().is_some_and(|l| l == "$ xrd2ganglia poll"))
        .expect("tools.md shows `xrd2ganglia poll`");
    let out = run_shell("xrd2ganglia poll", bin_dir);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let got: Vec<&str> = text.lines().collect();
    assert_eq!(got.first().copied(), Some(shown[1].as_str()), "{text}");
    assert_eq!(
        got.get(1).map(|l| l.split_whitespace().collect::<Vec<_>>()),
        Some(shown[2].split_whitespace().collect()),
        "{text}"
    );
    let host =
        |l: &str| -> Vec<String> { l.split_whitespace().take(2).map(str::to_string).collect() };
    assert_eq!(got.get(2).map(|l| host(l)), Some(host(&shown[3])), "{text}");
    assert!(serve.terminate().success());
}

/// A line of a page's shell block, run by `sh` from the repository's root
/// with the test's build first on the PATH (as `xrd2ganglia`).
fn run_shell(line: &str, bin_dir: &Path) -> std::process::Output {
    Command::new("sh")
        .arg("-c")
        .arg(line.replace("target/release/xrd2ganglia", BIN))
        .current_dir(ROOT)
        .env(
            "PATH",
            format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap()),
        )
        .stdin(Stdio::null())
        .output()
        .unwrap()
}
