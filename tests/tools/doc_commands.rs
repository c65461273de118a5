//! The docs' commands that need a real component run as written:
//! troubleshooting.md's record checks (the real mpxstats) and
//! docs/ganglia-web.md's private copy (a real gmetad). The rest of what
//! README and docs/ hold is checked in the quick tier
//! (tests/quick/doc_commands.rs).

use xrd2ganglia_testkit as common;

use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Proc;
use common::markdown::blocks;

const BIN: &str = env!("CARGO_BIN_EXE_xrd2ganglia");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// docs/troubleshooting.md's look at what a server sends, its two
/// listeners on port 3334 run as written (the real mpxstats in the
/// second), each fed the shipped recording by `replay`: the first prints
/// the records as mpxstats does, the second the metrics the gateway would
/// send, each server's program among them.
#[test]
fn troubleshooting_s_record_checks_run_as_written() {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let page = std::fs::read_to_string(Path::new(ROOT).join("docs/troubleshooting.md")).unwrap();
    let lines: Vec<String> = blocks(&page)
        .into_iter()
        .flat_map(|(_, lines)| lines)
        .filter(|l| l.contains("-p 3334"))
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    let bin_dir = Path::new(BIN).parent().unwrap();
    let recording = Path::new(ROOT).join("tests/data/records/try-out.jsonl");
    let dir = common::Scratch::new("trouble-records");
    for (line, wanted) in lines.iter().zip([
        // mpxstats' flat form: `pgm` and its value, per record.
        &["pgm xrootd", "pgm cmsd"][..],
        // dump's table: its header, an xrootd's and a cmsd's metrics.
        &["HOST", " xrootd.ds.link.in ", " cmsd."][..],
    ]) {
        // The last listener may still be going away (its group was sent
        // SIGTERM; only `sh` was waited for).
        let deadline = Instant::now() + Duration::from_secs(5);
        while UdpSocket::bind(("0.0.0.0", 3334)).is_err() {
            assert!(
                Instant::now() < deadline,
                "troubleshooting.md's checks use UDP 3334, which something here holds (`ss -uanp 'sport = :3334'`)"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = dir.path().join("out");
        let f = std::fs::File::create(&out).unwrap();
        // Its own process group: the pipeline is stopped as one, and
        // nothing else.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(line.split(" #").next().unwrap())
            .current_dir(ROOT)
            .env(
                "PATH",
                format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap()),
            )
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(f.try_clone().unwrap())
            .stderr(f)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut text = String::new();
        while !wanted.iter().all(|w| text.contains(w)) {
            if Instant::now() > deadline {
                let _ = Command::new("kill")
                    .args(["-TERM", "--", &format!("-{}", child.id())])
                    .status();
                let _ = child.wait();
                panic!("{line}: no {wanted:?} in:\n{text}");
            }
            let sent = Command::new(BIN)
                .args(["replay", "--speed", "100", "--to", "127.0.0.1:3334"])
                .arg(&recording)
                .output()
                .unwrap();
            assert!(sent.status.success(), "{sent:?}");
            std::thread::sleep(Duration::from_millis(300));
            text.clear();
            std::fs::File::open(&out)
                .unwrap()
                .read_to_string(&mut text)
                .unwrap();
        }
        let killed = Command::new("kill")
            .args(["-TERM", "--", &format!("-{}", child.id())])
            .status()
            .unwrap();
        assert!(killed.success());
        let _ = child.wait();
    }
}

/// Files and their modification times under `dir` (to see that nothing
/// of the system's changed).
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, std::time::SystemTime> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if let Ok(m) = std::fs::symlink_metadata(&p) {
                if m.is_dir() {
                    stack.push(p.clone());
                }
                out.insert(p, m.modified().unwrap());
            }
        }
    }
    out
}

/// docs/ganglia-web.md's private copy, its block run as written (HOME a
/// scratch directory), its `site.php` pointed at a real gmetad that polls
/// a gateway fed the shipped recording: PHP's own server answers
/// the cluster page with the host and the reports, and nothing of the
/// system's ganglia-web changed.
#[test]
fn the_private_ganglia_web_copy_runs_as_documented() {
    let page = std::fs::read_to_string(Path::new(ROOT).join("docs/ganglia-web.md")).unwrap();
    let section = page
        .split("\n### A private copy, to try it\n")
        .nth(1)
        .expect("docs/ganglia-web.md: no private copy section");
    let (_, lines) = blocks(section)
        .into_iter()
        .find(|(lang, _)| lang == "sh")
        .unwrap();
    let (serve_line, setup): (Vec<&String>, Vec<&String>) =
        lines.iter().partition(|l| l.starts_with("php -S "));
    assert_eq!(serve_line.len(), 1, "{lines:?}");
    let system = [
        snapshot(Path::new("/usr/share/ganglia-webfrontend")),
        snapshot(Path::new("/var/lib/ganglia-web")),
    ];

    let dir = common::Scratch::new("gweb-private");
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    let script = setup
        .iter()
        .map(|l| l.as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let out = Command::new("sh")
        .args(["-e", "-c", &script])
        .current_dir(ROOT)
        .env("HOME", &home)
        .env("PATH", &path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{script}\n{out:?}");

    // A gateway as the try-out's (nothing sent, no state), fed the
    // recording, and a real gmetad polling it. Its own config: no control
    // socket, which README's Try it (run beside this) has.
    let (port, xml_port) = (common::free_port(), common::free_port());
    let conf = dir.path().join("gateway.toml");
    std::fs::write(
        &conf,
        "send = false\nstate_file = \"\"\ncontrol_socket = \"\"\n",
    )
    .unwrap();
    let log = dir.path().join("serve.log");
    let f = std::fs::File::create(&log).unwrap();
    let child = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&conf)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--xml-listen", &format!("127.0.0.1:{xml_port}")])
        .stdin(Stdio::null())
        .stdout(f.try_clone().unwrap())
        .stderr(f)
        .spawn()
        .unwrap();
    let _serve = Proc {
        child,
        name: "xrd2ganglia serve".into(),
        log,
    };
    let recording = Path::new(ROOT).join("tests/data/records/try-out.jsonl");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = Command::new(BIN)
            .args(["replay", "--speed", "100", "--to"])
            .arg(format!("127.0.0.1:{port}"))
            .arg(&recording)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let polled = Command::new(BIN)
            .args(["poll", &format!("127.0.0.1:{xml_port}")])
            .output()
            .unwrap();
        if String::from_utf8_lossy(&polled.stdout).contains("  vm ") {
            break;
        }
        assert!(Instant::now() < deadline, "{polled:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let gmetad = common::Gmetad::start(xml_port, 1);
    let rrd = gmetad.rrd_path("XRootD", "vm", "xrootd.ds.link.in");
    gmetad.wait_for_rrd(&rrd, Duration::from_secs(30));

    // The site's settings, in the file the page says holds them.
    let site = home.join("gweb/site.php");
    let mut text = std::fs::read_to_string(&site).unwrap();
    text.push_str(&format!(
        "\n$conf['rrds'] = \"{}\";\n$conf['ganglia_port'] = {};\n",
        gmetad.rrd_root.display(),
        gmetad.interactive_port
    ));
    std::fs::write(&site, text).unwrap();

    let web_port = common::free_port();
    let serve_line = serve_line[0]
        .split(" #")
        .next()
        .unwrap()
        .replace("127.0.0.1:8080", &format!("127.0.0.1:{web_port}"))
        .replace("~/", &format!("{}/", home.display()));
    let log = dir.path().join("php.log");
    let f = std::fs::File::create(&log).unwrap();
    let child = Command::new("sh")
        .args(["-c", &format!("exec {serve_line}")])
        .env("HOME", &home)
        .stdin(Stdio::null())
        .stdout(f.try_clone().unwrap())
        .stderr(f)
        .spawn()
        .unwrap();
    let php = Proc {
        child,
        name: "php -S".into(),
        log,
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", web_port)).is_err() {
        assert!(Instant::now() < deadline, "{}", php.log_text());
        std::thread::sleep(Duration::from_millis(50));
    }
    // gmetad answers for the cluster's hosts from its second poll on.
    let deadline = Instant::now() + Duration::from_secs(30);
    let body = loop {
        let body = http_get(web_port, "/?c=XRootD");
        if body.contains("xrootd_throughput_report") || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert!(
        body.starts_with("HTTP/1.") && body.contains(" 200 "),
        "{body}"
    );
    assert!(!body.contains("Fatal error"), "{body}");
    assert!(!body.contains("There was an error"), "{body}");
    assert!(body.contains("xrootd_throughput_report"), "{body}");
    assert!(body.contains("vm"), "{body}");
    // The /javascript route: a script the page loads from there is served.
    let script = body
        .split("src=\"/javascript/")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .expect("the page loads a script from /javascript/");
    let js = http_get(web_port, &format!("/javascript/{script}"));
    assert!(
        js.contains(" 200 "),
        "{script}: {}",
        &js[..js.len().min(200)]
    );

    drop(php);
    assert_eq!(
        [
            snapshot(Path::new("/usr/share/ganglia-webfrontend")),
            snapshot(Path::new("/var/lib/ganglia-web")),
        ],
        system,
        "the system's ganglia-web changed"
    );
}

/// GET `path` from 127.0.0.1:`port`: the whole answer, headers included.
fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    String::from_utf8_lossy(&buf).into_owned()
}

/// docs/tools.md's gmetric block, run as written where each install puts
/// the binary: Debian's /usr/local/bin (docs/install.md) and EL's /usr/bin
/// (the RPM; here a directory standing for it, after /usr/local/bin on
/// PATH as on EL). Its link must lead to the binary, so that `gmetric` is
/// ours: `--dry-run` (ours alone) prints the packets. (The link named
/// /usr/bin/xrd2ganglia: on Debian it dangled, and the shell ran Ganglia's
/// gmetric, which knows no `--dry-run`.) In a mount namespace whose
/// /usr/local/bin is a tmpfs, and a network namespace of its own (gmetric
/// sends to gmond.conf's multicast group, which goes nowhere from there).
#[test]
fn tools_md_s_gmetric_link_runs_as_written_on_debian_s_and_el_s_paths() {
    let text = std::fs::read_to_string(Path::new(ROOT).join("docs/tools.md")).unwrap();
    let block = blocks(&text)
        .into_iter()
        .map(|(_, lines)| lines)
        .find(|lines| lines.iter().any(|l| l.contains("/usr/local/bin/gmetric")))
        .expect("tools.md's gmetric block");
    let script = block.join("\n");
    for layout in ["debian", "el"] {
        let dir = common::Scratch::new("gmetric-link");
        let el_bin = dir.path().join("usr-bin");
        std::fs::create_dir(&el_bin).unwrap();
        let setup = format!(
            r#"set -eu
ip link set lo up && ip link set lo multicast on && ip route add 224.0.0.0/4 dev lo
mount -t tmpfs tmpfs /usr/local/bin
case {layout} in
  debian) install -m 0755 "$BIN" /usr/local/bin/xrd2ganglia ;;
  el) install -m 0755 "$BIN" {el}/xrd2ganglia ;;
esac
export PATH=/usr/local/bin:{el}:/usr/sbin:/usr/bin:/sbin:/bin
echo "== block"
{script}
echo "== link"
readlink -e /usr/local/bin/gmetric
"#,
            el = el_bin.display()
        );
        let out = Command::new("unshare")
            .args([
                "--net",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                &setup,
            ])
            .env("BIN", BIN)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{layout}: {}\n{said}", out.status);
        let link = said.split("== link\n").nth(1).unwrap_or("").trim();
        let expected = match layout {
            "debian" => "/usr/local/bin/xrd2ganglia".to_string(),
            _ => el_bin.join("xrd2ganglia").display().to_string(),
        };
        assert_eq!(link, expected, "{layout}:\n{said}");
        // The dry run's packets, as ours prints them: metadata, then value.
        assert!(
            said.contains("gmetadata_full (128)\n  host   \"10.0.0.5:node5\"\n  metric \"m\""),
            "{layout}:\n{said}"
        );
    }
}

/// docs/install.md's "Running without systemd", its block run as written:
/// the directories made, the gateway started as `xrd2ganglia` with the
/// shipped config (in the background, as a supervisor would), then
/// `xrd2ganglia status` as root answers from it. (Without
/// /run/xrd2ganglia it ran without its control socket, Permission denied,
/// and `status` could not ask.) Nothing of the host's changes: a mount
/// namespace (tmpfs on /etc/xrd2ganglia, /var/lib, /run and
/// /usr/local/bin; /etc/passwd and /etc/group copies with the
/// service user, as systemd-sysusers would add it) and a network
/// namespace (its ports and gmond.conf's multicast stay there).
#[test]
fn install_md_s_path_without_systemd_gives_a_working_status() {
    let text = std::fs::read_to_string(Path::new(ROOT).join("docs/install.md")).unwrap();
    let section = text
        .split("\n## Running without systemd\n")
        .nth(1)
        .expect("install.md's Running without systemd");
    let (_, block) = blocks(section).into_iter().next().expect("its commands");
    // The gateway runs until stopped: started in the background (as a
    // supervisor does), the next lines once it says it serves.
    let mut lines = Vec::new();
    for line in &block {
        if line.starts_with("runuser ") {
            lines.push(format!("{line} 2>\"$DIR/serve.log\" &"));
            lines.push("pid=$!".to_string());
            lines.push(
                "n=0; until grep -q serving \"$DIR/serve.log\"; do n=$((n + 1)); [ $n -lt 250 ] || exit 90; sleep 0.04; done"
                    .to_string(),
            );
        } else {
            lines.push(line.clone());
        }
    }
    assert!(
        lines.iter().any(|l| l.starts_with("xrd2ganglia status")),
        "{block:?}"
    );
    let dir = common::Scratch::new("no-systemd");
    let script = format!(
        r#"set -eu
ip link set lo up && ip link set lo multicast on && ip route add 224.0.0.0/4 dev lo
cp /etc/passwd "$DIR/passwd"; cp /etc/group "$DIR/group"
echo 'xrd2ganglia:x:{id}:{id}:xrd2ganglia gateway:/:/usr/sbin/nologin' >> "$DIR/passwd"
echo 'xrd2ganglia:x:{id}:' >> "$DIR/group"
mount --bind "$DIR/passwd" /etc/passwd; mount --bind "$DIR/group" /etc/group
mkdir -p /etc/xrd2ganglia; mount -t tmpfs tmpfs /etc/xrd2ganglia
install -m 0644 "$ROOT/conf/xrd2ganglia.toml" /etc/xrd2ganglia/xrd2ganglia.toml
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t tmpfs tmpfs /usr/local/bin; install -m 0755 "$BIN" /usr/local/bin/xrd2ganglia
mount -t tmpfs -o mode=0755 tmpfs /var/lib
export PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
pid=""
trap 'kill -TERM $pid 2>/dev/null || :' EXIT
echo "== block"
{block}
echo "== end"
"#,
        id = 64999,
        block = lines.join("\n")
    );
    let out = Command::new("unshare")
        .args([
            "--net",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
        ])
        .env("BIN", BIN)
        .env("ROOT", ROOT)
        .env("DIR", dir.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let said = format!(
        "{}{}\nserve's log:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(dir.path().join("serve.log")).unwrap_or_default()
    );
    assert!(out.status.success(), "{}\n{said}", out.status);
    assert!(
        said.contains("on /run/xrd2ganglia/control") && said.contains("== end"),
        "{said}"
    );
    assert!(!said.contains("running without it"), "{said}");
}
