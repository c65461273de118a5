//! `xrd2ganglia gmetric` against the real /usr/bin/gmetric 3.7.2: for the
//! same arguments and gmond.conf, the same datagrams byte for byte in the
//! same order, the same exit code, stdout and stderr.

use xrd2ganglia_testkit as common;

use std::io::ErrorKind;
use std::net::UdpSocket;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::Scratch;

const REAL: &str = "/usr/bin/gmetric";

#[derive(Debug, PartialEq, Eq)]
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    datagrams: Vec<Vec<u8>>,
}

/// How long the capture socket waits for a datagram before it is taken as
/// "no more": loopback datagrams are normally queued before the sender
/// exits, but a loaded machine may deliver them a little later.
const QUIET: Duration = Duration::from_millis(200);

/// One datagram from `socket`, waiting up to its read timeout (QUIET). A
/// signal (another test's child exiting) interrupting the wait is no answer:
/// the wait goes on.
fn recv(socket: &UdpSocket, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match socket.recv_from(buf) {
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            r => return r.map(|(n, _)| n),
        }
    }
}

/// Whether `e` is the read timeout expiring, not a failure.
fn timed_out(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// A gmond.conf with `channels` unicast channels to one capture socket (each
/// from its own source address), plus `extra` text.
struct Target {
    socket: UdpSocket,
    conf: std::path::PathBuf,
    _dir: Scratch,
}

impl Target {
    fn new(channels: usize, extra: &str) -> Target {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket.set_read_timeout(Some(QUIET)).unwrap();
        let port = socket.local_addr().unwrap().port();
        let dir = Scratch::new("gmetric");
        let mut text = String::from(extra);
        for i in 0..channels {
            text.push_str(&format!("\nudp_send_channel {{\n  host = 127.0.0.1\n  port = {port}\n  bind = 127.0.0.{}\n}}\n", i + 1));
        }
        let conf = dir.path().join("gmond.conf");
        std::fs::write(&conf, text).unwrap();
        Target {
            socket,
            conf,
            _dir: dir,
        }
    }

    /// Runs `program` as `gmetric -c CONF args...` and collects what arrives.
    fn run(&self, program: &str, args: &[&str]) -> Run {
        let out = Command::new(program)
            .arg0("gmetric")
            .arg("-c")
            .arg(&self.conf)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e} (is ganglia-monitor installed?)"));
        let mut datagrams = Vec::new();
        let mut buf = [0u8; 2048];
        loop {
            match recv(&self.socket, &mut buf) {
                Ok(n) => datagrams.push(buf[..n].to_vec()),
                Err(e) if timed_out(&e) => break,
                Err(e) => panic!("receive {program}'s datagrams: {e}"),
            }
        }
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            datagrams,
        }
    }
}

/// The arguments most sets begin with: metric `m` of `value` and `ty`;
/// then `more`.
fn m<'a>(value: &'a str, ty: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    [&["-n", "m", "-v", value, "-t", ty], more].concat()
}

/// A string metric of `value` from host 10.0.0.1:big: the longest
/// values, measured against the 1464-byte packet.
fn big(value: &str) -> Vec<&str> {
    vec!["-n", "m", "-t", "string", "-S", "10.0.0.1:big", "-v", value]
}

fn ours() -> &'static str {
    env!("CARGO_BIN_EXE_xrd2ganglia")
}

fn compare(channels: usize, extra_conf: &str, args: &[&str]) -> Run {
    assert!(
        Path::new(REAL).exists(),
        "{REAL} missing: install ganglia-monitor (.ci/run does)"
    );
    let t = Target::new(channels, extra_conf);
    let real = t.run(REAL, args);
    let mut mine = t.run(ours(), args);
    // Our one addition to stderr: a warning when gmond would cut the line.
    mine.stderr = mine
        .stderr
        .lines()
        .filter(|l| !l.starts_with("warning: "))
        .map(|l| format!("{l}\n"))
        .collect();
    if mine != real {
        let short = |r: &Run| {
            (
                r.code,
                r.stdout.clone(),
                r.stderr.clone(),
                r.datagrams.iter().map(|d| d.len()).collect::<Vec<_>>(),
            )
        };
        panic!(
            "gmetric {:?} with conf {extra_conf:?}:\n ours {:?}\n real {:?}\n (datagrams equal: {})",
            args.iter()
                .map(|a| if a.len() > 40 {
                    format!("<{} bytes>", a.len())
                } else {
                    a.to_string()
                })
                .collect::<Vec<_>>(),
            short(&mine),
            short(&real),
            mine.datagrams == real.datagrams
        );
    }
    real
}

/// 43 argument sets that gmetric sends; each must give identical datagrams.
#[test]
fn same_datagrams_as_real_gmetric() {
    let long_ok = "v".repeat(1420); // with host "10.0.0.1:big" and name "m": a 1464-byte packet
    // Metric m of each value and type, and nothing more.
    let values: &[(&str, &str)] = &[
        ("1", "uint32"),
        ("hello", "string"),
        ("-1", "int8"),
        ("2", "uint8"),
        ("-3", "int16"),
        ("4", "uint16"),
        ("-5", "int32"),
        ("1.5", "float"),
        ("2.25", "double"),
        ("a b  c", "string"),
        ("", "string"),
        ("1e10", "uint32"),
        ("nan", "double"),
        ("0x1F", "uint32"),
        ("", "uint32"),
    ];
    // m = 1 (uint32) with each option.
    let options: &[&[&str]] = &[
        &["-s", "zero"],
        &["-s", "positive"],
        &["-s", "negative"],
        &["-s", "both"],
        &["-s", "derivative"],
        &["-s", "unspecified"],
        &["-s", "sideways"],
        &["-x", "30", "-d", "3600"],
        &["-x", "-1", "-d", "-5"],
        &["--tmax=0x10", "--dmax", "010"],
        &["-g", "a,b c"],
        &["-g", ",a, ,b,"],
        &["-C", "mycluster"],
        &["-D", "a description"],
        &["-T", "A Title"],
        &["-S", "10.1.2.3:spoofed"],
        &[
            "-T",
            "t",
            "-D",
            "d",
            "-g",
            "g1,g2",
            "-C",
            "c",
            "-S",
            "1.2.3.4:sh",
            "-u",
            "u",
            "-s",
            "positive",
        ],
    ];
    let mut sets: Vec<(usize, &str, Vec<&str>)> = values
        .iter()
        .map(|(value, ty)| (1, "", m(value, ty, &[])))
        .chain(options.iter().map(|more| (1, "", m("1", "uint32", more))))
        .collect();
    sets.extend([
        (
            1,
            "",
            vec!["-n", "temp", "-v", "21", "-t", "int16", "-u", "Celsius"],
        ),
        (1, "", vec!["-S", "10.1.2.3:spoofed", "-H"]),
        (
            1,
            "",
            vec![
                "-S",
                "10.1.2.3:spoofed",
                "-H",
                "-C",
                "c",
                "-g",
                "g",
                "-D",
                "d",
                "-T",
                "t",
            ],
        ),
        (
            1,
            "globals {\n  override_hostname = \"ovh\"\n  override_ip = \"10.9.8.7\"\n}\n",
            m("1", "uint32", &[]),
        ),
        (
            1,
            "globals { override_hostname = ovh }",
            m("1", "uint32", &[]),
        ),
        (
            1,
            "globals { override_hostname = ovh }",
            m("1", "uint32", &["-S", "1.1.1.1:s"]),
        ),
        (2, "", m("1", "uint32", &[])),
        (3, "", m("x", "string", &["-S", "1.2.3.4:three"])),
        (
            1,
            "",
            vec![
                "extra",
                "--name=m",
                "--val",
                "7",
                "--ty=uint16",
                "-u",
                "",
                "positional",
                "--",
                "-x",
                "9",
            ],
        ),
        (1, "", vec!["-nm", "-v1", "-tuint32", "-Ssp:x"]),
        (1, "", big(&long_ok)),
    ]);
    assert!(sets.len() >= 30);
    for (channels, conf, args) in &sets {
        let run = compare(*channels, conf, args);
        assert_eq!(run.code, Some(0), "{args:?}: {}", run.stderr);
        assert_eq!(run.datagrams.len(), 2 * channels, "{args:?}");
        assert!(run.datagrams.iter().all(|d| d.len() <= 1464));
    }
}

/// The same mistakes give the same messages and exit codes (and packets, if any).
#[test]
fn same_messages_and_exit_codes_as_real_gmetric() {
    let too_long = "v".repeat(1421);
    let sets: Vec<Vec<&str>> = vec![
        vec![],
        vec!["-n", "m", "-v", "1"],
        vec!["-n", "m", "-t", "uint32"],
        vec!["-H"],
        m("1", "int64", &[]),
        m("1", "UINT32", &[]),
        m("abc", "uint32", &[]),
        m("5 ", "double", &[]),
        vec!["-n", "a\"b", "-v", "1", "-t", "uint32"],
        m("a\"b", "string", &[]),
        m("1", "uint\"32", &[]),
        m("1", "uint32", &["-u", "\""]),
        m("1", "uint32", &["-S", "nocolon"]),
        m("1", "uint32", &["-S", ""]),
        vec!["-Z"],
        vec!["--bogus=1"],
        vec!["-n", "m", "-t"],
        vec!["--type"],
        vec!["--heartbeat=yes"],
        vec!["--t=uint32"],
        vec!["-n", "a", "-n", "b"],
        vec!["-g", "a", "--group", "b"],
        vec!["-x", "abc"],
        vec!["-d", "1.5", "-Z"],
        // Value too long: the metadata goes out, the value cannot.
        big(&too_long),
        // Name too long for the metadata packet: nothing goes out.
        vec!["-n", &too_long[..800], "-v", "1", "-t", "uint32"],
    ];
    for args in &sets {
        let run = compare(1, "", args);
        assert_eq!(run.code, Some(1), "{args:?}");
        assert!(!run.stderr.is_empty(), "{args:?}");
    }
    // A missing config, given with -c.
    let missing = |program: &str| {
        let args = [
            "-c",
            "/nonexistent/gmond.conf",
            "-n",
            "m",
            "-v",
            "1",
            "-t",
            "uint32",
        ];
        Command::new(program)
            .arg0("gmetric")
            .args(args)
            .output()
            .unwrap()
    };
    let (real, mine) = (missing(REAL), missing(ours()));
    assert_eq!(
        (mine.status.code(), &mine.stderr),
        (real.status.code(), &real.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&mine.stderr),
        "Configuration file '/nonexistent/gmond.conf' not found.\n\n"
    );
}

/// Nothing listening: gmetric reports the refused channel; so do we, and the
/// channel that works still gets both packets.
#[test]
fn send_failure_is_reported_like_gmetric() {
    let dead = UdpSocket::bind("127.0.0.1:0").unwrap();
    let dead_port = dead.local_addr().unwrap().port();
    drop(dead);
    let conf = format!("udp_send_channel {{ host = 127.0.0.1 port = {dead_port} }}\n");
    let run = compare(1, &conf, &m("1", "uint32", &[]));
    assert_eq!(run.code, Some(1));
    assert_eq!(
        run.stderr,
        "There was an error sending to 1 of the send channels.\n"
    );
    assert_eq!(
        run.datagrams.len(),
        2,
        "the live channel got metadata and value"
    );
}

/// Where gmetric is wrong we refuse (non-zero, a reason), and gmetric does send.
#[test]
fn deliberate_differences() {
    let cases: &[(&[&str], &str)] = &[
        (&m("1", "uint32", &["-H"]), "needs -S"),
        (
            &["-n", "", "-v", "1", "-t", "uint32"],
            "name parameter is empty",
        ),
        (&m("1", "uint32", &["-T", "<b>"]), "unescaped"),
        (&m("1", "uint32", &["-D", "a & b"]), "unescaped"),
        (&m("1", "uint32", &["-g", "a\"b"]), "unescaped"),
        (&m("1", "uint32", &["-C", "<c>"]), "unescaped"),
        (&m("1", "uint32", &["-S", "1.2.3.4:a<b"]), "unescaped"),
        (&m("1", "uint32", &["-S", "hostonly:"]), "needs both parts"),
        (&["-n", "m&n", "-v", "1", "-t", "uint32"], "unescaped"),
        (&m("caf\u{e9}", "string", &[]), "ill-formed"),
    ];
    for (args, why) in cases {
        let t = Target::new(1, "");
        let real = t.run(REAL, args);
        assert_eq!(real.code, Some(0), "gmetric accepts {args:?}");
        assert_eq!(real.datagrams.len(), 2);
        let mine = t.run(ours(), args);
        assert_eq!(mine.code, Some(1), "{args:?}");
        assert!(mine.stderr.contains(why), "{args:?}: {}", mine.stderr);
        assert!(mine.datagrams.is_empty(), "{args:?} sent packets");
    }
}

#[test]
fn long_values_are_sent_with_a_warning() {
    let t = Target::new(1, "");
    let long = "v".repeat(1000);
    let run = t.run(ours(), &["-n", "m", "-t", "string", "-v", &long]);
    assert_eq!(run.code, Some(0));
    assert_eq!(run.datagrams.len(), 2);
    assert!(
        run.stderr
            .starts_with("warning: gmond 3.7 cuts its METRIC lines at 1023 bytes"),
        "{}",
        run.stderr
    );
}

#[test]
fn called_through_a_link_named_gmetric() {
    let dir = Scratch::new("link");
    let link = dir.path().join("gmetric");
    std::os::unix::fs::symlink(ours(), &link).unwrap();
    let t = Target::new(1, "");
    let via_link = Command::new(&link)
        .arg("-c")
        .arg(&t.conf)
        .args(m("1", "uint32", &[]))
        .status()
        .unwrap();
    assert!(via_link.success());
    let mut buf = [0u8; 2048];
    let n = recv(&t.socket, &mut buf)
        .unwrap_or_else(|e| panic!("no datagram from gmetric via the link within {QUIET:?}: {e}"));
    assert_eq!(u32::from_be_bytes(buf[..4].try_into().unwrap()), 128);
    assert!(n > 40);
    // Option errors name the program as called, like gmetric.
    let out = Command::new(&link).arg("-Z").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("{}: invalid option -- 'Z'\n", link.display())
    );
    // And as a subcommand.
    let out = Command::new(ours())
        .args(["gmetric", "-V"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("gmetric 3.7.2 (xrd2ganglia "));
}

#[test]
fn dry_run_prints_packets_and_sends_nothing() {
    let t = Target::new(2, "");
    let out = Command::new(ours())
        .args(["gmetric", "-c"])
        .arg(&t.conf)
        .args([
            "-n",
            "m",
            "-v",
            "42",
            "-t",
            "uint32",
            "-S",
            "10.0.0.1:dry",
            "-g",
            "g",
            "--dry-run",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for expect in [
        "# would send to 127.0.0.1:",
        "gmetadata_full (128)",
        "  host   \"10.0.0.1:dry\"",
        "  metric \"m\"",
        "  spoof  true",
        "  type   \"uint32\"",
        "  slope  3 (both)",
        "  tmax   60",
        "  extra  SPOOF_HOST=\"10.0.0.1:dry\"",
        "  extra  GROUP=\"g\"",
        "gmetric value (133)",
        "  fmt    \"%s\"",
        "  value  \"42\"",
    ] {
        assert!(text.contains(expect), "{expect:?} not in:\n{text}");
    }
    let mut buf = [0u8; 64];
    let sent = recv(&t.socket, &mut buf);
    assert!(sent.is_err(), "dry run sent a datagram");
    let e = sent.unwrap_err();
    assert!(timed_out(&e), "receive from the capture socket: {e}");
}
