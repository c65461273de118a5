//! Issue 42, items 7 and 8, and issue 45, item 7: every tool's input is
//! bounded, against the real binary. `replay` and `dump` read a line of at
//! most a stated size (a line of exactly that size is read, one byte more
//! stops them with exit 1 and a message naming it) and an endless line
//! stops them at that bound, within an address space of 64 MiB (a
//! quarter of what is fed); `poll` has a deadline for the
//! whole exchange (a port trickling a byte at a time is left at
//! `--timeout`), and a document cut before its end is an error. And no
//! `--help` says a default twice.
//!
//! Every child is ours, waited for by its pid; the servers are the
//! test's own threads on loopback ports.

use xrd2ganglia_testkit as common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::Scratch;
use common::child::exit_within_10s;

const BIN: &str = env!("CARGO_BIN_EXE_xrd2ganglia");

/// The bounds as docs/tools.md states them.
const DUMP_LINE: usize = 65_536;
const REPLAY_LINE: usize = 524_288;

/// The address space each child here may take (setrlimit RLIMIT_AS):
/// `dump` and `replay` take about 18 MiB of it at rest (VmPeak of the
/// debug build), plus their bound; one that holds an endless line aborts
/// at this limit ("memory allocation of N bytes failed", exit 134), as
/// the did at 2 GiB.
const ADDRESS_SPACE: u64 = 64 << 20;

/// Runs `args` with `input` written to its stdin by a thread (until the
/// child stops reading: a closed pipe ends the writing), within
/// [`ADDRESS_SPACE`]; its exit code and stderr.
fn fed(args: &[&str], input: impl Read + Send + 'static) -> (Option<i32>, String) {
    use std::os::unix::process::CommandExt as _;
    let dir = Scratch::new("bounded");
    let err = dir.path().join("stderr");
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap());
    // SAFETY: setrlimit is async-signal-safe; it touches only the child.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: ADDRESS_SPACE,
                rlim_max: ADDRESS_SPACE,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut input = input;
    let writer = std::thread::spawn(move || {
        // Ends with an error once the child has stopped reading.
        let _ = std::io::copy(&mut input, &mut stdin);
    });
    let status = exit_within_10s(&mut child, || format!("{args:?}"));
    writer.join().unwrap();
    (status.code(), std::fs::read_to_string(&err).unwrap())
}

/// 256 MiB without a newline, four times [`ADDRESS_SPACE`]: a reader
/// that holds a whole line cannot take it.
const ENDLESS: u64 = 256 << 20;

#[test]
fn dump_takes_a_line_up_to_64_kib_and_stops_at_an_endless_one() {
    let too_long = "xrd2ganglia dump: record 1: longer than 65536 bytes (64 KiB), the most \
                    one record (one UDP datagram) can be: not one record per line\n";
    // Endless first: a reader that holds a line aborts here (exit 134).
    let (code, err) = fed(&["dump"], std::io::repeat(b'x').take(ENDLESS));
    assert_eq!((code, err.as_str()), (Some(1), too_long));

    let (code, err) = fed(&["dump"], std::io::repeat(b'x').take(DUMP_LINE as u64));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.starts_with("xrd2ganglia dump: record 1: "), "{err}");
    assert!(
        !err.contains("longer than"),
        "a line of the bound is read: {err}"
    );

    let (code, err) = fed(&["dump"], std::io::repeat(b'x').take(DUMP_LINE as u64 + 1));
    assert_eq!((code, err.as_str()), (Some(1), too_long));
}

#[test]
fn replay_takes_a_line_up_to_512_kib_and_stops_at_an_endless_one() {
    // Sent nowhere: nothing of these lines is an entry.
    let args = ["replay", "--to", "127.0.0.1:9", "/dev/stdin"];
    let too_long = "xrd2ganglia replay: /dev/stdin: line 1: longer than 524288 bytes \
                    (512 KiB), the longest line a recording has (an entry of a 65507-byte \
                    datagram): not a recording\n";
    // Endless first (a reader that holds a line aborts here, exit 134),
    // after a good entry: the bound is per line, not per file.
    let entry = "{\"time\":1,\"from\":\"127.0.0.1:1\",\"text\":\"a\"}\n";
    let endless = entry.as_bytes().chain(std::io::repeat(0).take(ENDLESS));
    let (code, err) = fed(&args, endless);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err, too_long.replace("line 1:", "line 2:"));

    let (code, err) = fed(&args, std::io::repeat(b'x').take(REPLAY_LINE as u64));
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.starts_with("xrd2ganglia replay: /dev/stdin:1: not an entry"),
        "{err}"
    );

    let (code, err) = fed(&args, std::io::repeat(b'x').take(REPLAY_LINE as u64 + 1));
    assert_eq!((code, err.as_str()), (Some(1), too_long));
}

/// A port that accepts one poll and writes `document`, a byte every
/// `every` (Duration::ZERO: at once), then closes; or, with `trickle`,
/// keeps writing a byte every `every` until the reader is gone.
fn port(document: &'static str, every: Duration) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let Ok((mut c, _)) = listener.accept() else {
            return;
        };
        if every.is_zero() {
            let _ = c.write_all(document.as_bytes());
            return;
        }
        // Endless: the document's bytes again and again, one at a time.
        for b in document.bytes().cycle() {
            if c.write_all(&[b]).is_err() {
                return;
            }
            std::thread::sleep(every);
        }
    });
    port
}

const DOC_HEAD: &str = "<?xml version=\"1.0\" encoding=\"ISO-8859-1\" standalone=\"yes\"?>\n\
    <GANGLIA_XML VERSION=\"3.7.2\" SOURCE=\"gmond\">\n\
    <CLUSTER NAME=\"c\" LOCALTIME=\"1\" OWNER=\"u\" LATLONG=\"u\" URL=\"u\">\n\
    <HOST NAME=\"h\" IP=\"127.0.0.1\" TAGS=\"\" REPORTED=\"1\" TN=\"3\" TMAX=\"20\" DMAX=\"0\" LOCATION=\"u\" GMOND_STARTED=\"0\">\n\
    <METRIC NAME=\"xrootd.ds.link.in\" VAL=\"15748727\" TYPE=\"double\" UNITS=\"bytes/s\" TN=\"3\" TMAX=\"20\" DMAX=\"0\" SLOPE=\"positive\" SOURCE=\"gmetric\"/>\n\
    <METRIC NAME=\"xrootd.ds.link.ctime\" VAL=\"2\" TYPE=\"double\" UNITS=\"s\" TN=\"3\" TMAX=\"20\" DMAX=\"0\" SLOPE=\"both\" SOURCE=\"gmetric\"/>\n\
    </HOST>\n</CLUSTER>\n";

/// `poll ARGS`, waited for (at most 10 s) by its pid: exit code, stdout,
/// stderr and how long it took.
fn poll(args: &[&str]) -> (Option<i32>, String, String, Duration) {
    let dir = Scratch::new("poll");
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let started = Instant::now();
    let mut child = Command::new(BIN)
        .arg("poll")
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let status = exit_within_10s(&mut child, || format!("poll {args:?}"));
    let took = started.elapsed();
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap();
    (status.code(), read(&out), read(&err), took)
}

#[test]
fn poll_leaves_a_trickling_port_at_its_deadline() {
    let p = port(DOC_HEAD, Duration::from_millis(50));
    let addr = format!("127.0.0.1:{p}");
    let (code, out, err, took) = poll(&["--timeout", "1.5", &addr]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(out, "");
    let head = format!("xrd2ganglia poll: {addr}: no whole document within --timeout 1.5 s (");
    assert!(
        err.starts_with(&head)
            && err.ends_with(" bytes read): the port is stuck or sends too slowly\n"),
        "{err}"
    );
    // It read what trickled (a byte each 50 ms), then stopped at the deadline.
    let read: u64 = err[head.len()..]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(read >= 5, "{err}");
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(5),
        "took {took:?}"
    );
}

#[test]
fn poll_refuses_a_document_cut_before_its_end() {
    let p = port(DOC_HEAD, Duration::ZERO);
    let addr = format!("127.0.0.1:{p}");
    let (code, out, err, _) = poll(&[&addr]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(out, "");
    assert_eq!(
        err,
        format!(
            "xrd2ganglia poll: {addr}: the document ends at byte {} without its \
             </GANGLIA_XML>: cut short (the port stopped writing, or closed the connection \
             early)\n",
            DOC_HEAD.len()
        )
    );
}

/// Issue 45, item 6: the counter (SLOPE="positive") is said to be a
/// running total, the gauge keeps its units.
#[test]
fn poll_says_which_values_are_counters() {
    let whole: &'static str = Box::leak(format!("{DOC_HEAD}</GANGLIA_XML>\n").into_boxed_str());
    let p = port(whole, Duration::ZERO);
    let (code, out, err, _) = poll(&["--metrics", &format!("127.0.0.1:{p}")]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains(
            "      xrootd.ds.link.ctime  2 s\n      xrootd.ds.link.in     15748727 (counter: \
             total so far; graphed as its rate, bytes/s)\n"
        ),
        "{out}"
    );
}

/// Issue 45, item 7: every command's `--help` (and `help COMMAND`, which
/// the drop-ins answer) says each option's default once.
#[test]
fn no_help_says_a_default_twice() {
    let run = |args: &[&str]| {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let top = run(&["--help"]);
    let commands: Vec<String> = top
        .split("Commands:\n")
        .nth(1)
        .unwrap()
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect();
    assert!(commands.len() >= 9, "{commands:?}");
    let mut helps = vec![(vec!["--help".to_string()], top.clone())];
    for c in &commands {
        helps.push((vec!["help".into(), c.clone()], run(&["help", c])));
        if c != "gmetric" && c != "mpxstats" {
            helps.push((vec![c.clone(), "--help".into()], run(&[c, "--help"])));
        }
    }
    for (args, text) in helps {
        // One entry per option, argument or heading: a line that starts
        // one (`-x`, `--name`, `<ARG>`, `[ARG]`, or not indented) and
        // the lines under it.
        let mut entries: Vec<String> = Vec::new();
        for line in text.lines() {
            let starts = line.trim_start().starts_with(['-', '<', '[']) || !line.starts_with(' ');
            if starts || entries.is_empty() {
                entries.push(String::new());
            }
            entries.last_mut().unwrap().push_str(line);
        }
        for e in entries {
            assert!(e.matches("[default:").count() <= 1, "{args:?}: {e}");
        }
    }
}

/// A recording of endless senders: past 65,536 they are no longer
/// remembered one by one (each would take memory for good), and the
/// summary says so; every datagram is still sent.
#[test]
fn replay_remembers_at_most_65536_senders() {
    let to = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let to_addr = to.local_addr().unwrap().to_string();
    let n: u32 = 70_000;
    let recording: String = (0..n)
        .map(|i| {
            let from = std::net::Ipv4Addr::from(0x0a00_0000 + i);
            format!("{{\"time\":1,\"from\":\"{from}:1094\",\"text\":\"x\"}}\n")
        })
        .collect();
    let dir = Scratch::new("senders");
    let file = dir.path().join("r.jsonl");
    std::fs::write(&file, recording).unwrap();
    let out = Command::new(BIN)
        .args(["replay", "--to", &to_addr, file.to_str().unwrap()])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("xrd2ganglia replay: sent {n} datagrams of more than 65536 senders to {to_addr}\n")
    );
}
