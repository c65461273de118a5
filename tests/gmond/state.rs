//! The state file on a bad day, against a real gmond: a damaged file
//! loses only its bad lines, every good source stays continuous through
//! the gateway's restart and its xrootd's.

use xrd2ganglia_testkit as common;

use std::time::Duration;

use common::{Gateway, Gmond, Scratch, replay::unix_now};
use xrd2ganglia::daemon::state_file::{StateStore, tmp_path};
use xrd2ganglia::engine::saved::write_entry;

const QUIET: &str = "stats_interval = 0\nself_metrics_interval = 0\nlog_interval = 1\n";

/// Server `i` (at 127.0.0.1`i`, named ds`i`.example), run `pid`, with
/// `link.in` at `inb`.
fn record(i: u32, pid: u32, inb: u64) -> String {
    format!(
        r#"<statistics tod="{}" ver="v5.5.3" src="ds{i}.example:1094" tos="1700000000" pgm="xrootd" ins="anon" pid="{pid}" site="T2_TEST"><stats id="link"><num>3</num><in>{inb}</in><out>7</out></stats></statistics>"#,
        unix_now()
    )
}

/// Before the restart, server `i` read this many bytes in.
fn before(i: u32) -> u64 {
    62_980_000 + u64::from(i)
}

/// Replaces the offset (the last field) of the counter whose reading is
/// `reading` (and offset 0).
fn set_offset(text: &str, reading: u64, offset: &str) -> String {
    let old = format!(",{reading},0]");
    assert!(text.contains(&old), "no counter reading {reading}:\n{text}");
    text.replacen(&old, &format!(",{reading},{offset}]"), 1)
}

/// Inserts `counter` first among the counters of the server at `ip`.
fn add_counter(text: &str, ip: &str, counter: &str) -> String {
    let at = text
        .find(&format!("{{\"ip\":\"{ip}\""))
        .unwrap_or_else(|| panic!("no entry of {ip}:\n{text}"));
    let list = at + text[at..].find("\"counters\":[").unwrap() + "\"counters\":[".len();
    format!("{}{counter},{}", &text[..list], &text[list..])
}

/// Inserts `line` after the entry of the server at `ip`.
fn after_source(text: &str, ip: &str, line: &str) -> String {
    let s = format!("{{\"ip\":\"{ip}\"");
    let at = text.find(&s).unwrap_or_else(|| panic!("no {s:?}:\n{text}"));
    let end = at + text[at..].find('\n').unwrap() + 1;
    format!("{}{line}{}", &text[..end], &text[end..])
}

/// Issue 34 items 4 and 5: one negative offset, one u64::MAX counter,
/// one value above u64, garbage in the middle and a cut-off last line.
/// Before, any of them threw away every source's counters (and a lone
/// u64::MAX was sent for ever after). Now gmond shows every good
/// counter continued across both restarts (the gateway's, then each
/// xrootd's), the two damaged ones start again from their readings, and
/// one log line names the five lines skipped.
#[test]
fn a_damaged_state_file_loses_only_its_bad_lines() {
    let gmond = Gmond::start();
    let dir = Scratch::new("state");
    let state = dir.path().join("state");
    let config = format!("state_file = {:?}\n{QUIET}", state.display().to_string());
    let servers = 11..=15u32;

    let mut first = Gateway::start(gmond.port, &config);
    for i in servers.clone() {
        first.send_as(&format!("127.0.0.{i}"), record(i, 77, before(i)).as_bytes());
    }
    gmond.wait_for(Duration::from_secs(10), "every server's link.in", |x| {
        servers
            .clone()
            .all(|i| x.has(&format!("ds{i}.example"), &["xrootd.link.in"]))
    });
    assert!(first.proc.terminate().success());
    let saved = std::fs::read_to_string(&state).unwrap();
    assert!(
        saved.starts_with("{\"format\":\"xrd2ganglia-state\",\"version\":2}\n"),
        "{saved}"
    );

    // ds12's link.in: a negative offset; ds13's: u64::MAX.
    let mut damaged = set_offset(&saved, before(12), "-3");
    damaged = set_offset(&damaged, before(13), "18446744073709551615");
    // A counter above u64 for ds14, garbage after ds11's source line, a
    // last line cut off in the middle of its key.
    damaged = add_counter(
        &damaged,
        "127.0.0.14",
        "[\"00000000000000ab\",1,18446744073709551616]",
    );
    damaged = after_source(&damaged, "127.0.0.11", "%%\u{1}garbage%%\n");
    damaged.push_str("{\"ip\":\"127.0.0.99\",\"program\":\"xrootd\",\"counters\":[[\"00000000000");
    std::fs::write(&state, &damaged).unwrap();

    let mut second = Gateway::start(gmond.port, &config);
    let log = second.proc.log_text();
    let skipped: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(" skipped: line "))
        .collect();
    assert_eq!(skipped.len(), 1, "{log}");
    assert!(
        skipped[0].contains(": 2 lines and 3 counters skipped: line "),
        "{}",
        skipped[0]
    );
    for why in [
        "offset \"-3\": negative",
        "offset \"18446744073709551615\": 2^63 or more",
        ": above u64",
        "not an entry",
        "cut off (no newline at its end)",
    ] {
        assert!(skipped[0].contains(why), "{why} not in {}", skipped[0]);
    }
    assert!(log.contains("5 sources restored"), "{log}");

    // Every xrootd restarted meanwhile (pid 78) and has read 2,000 bytes.
    for i in servers.clone() {
        second.send_as(&format!("127.0.0.{i}"), record(i, 78, 2_000).as_bytes());
    }
    let expected = |i: u32| match i {
        12 | 13 => 2_000,
        _ => before(i) + 2_000,
    };
    let x = gmond.wait_for(Duration::from_secs(10), "the new values", |x| {
        servers.clone().all(|i| {
            x.hosts.get(&format!("ds{i}.example")).is_some_and(|h| {
                h.metrics
                    .get("xrootd.link.in")
                    .is_some_and(|m| m.get("VAL") == expected(i).to_string())
            })
        })
    });
    for i in servers.clone() {
        assert_eq!(
            x.metric(&format!("ds{i}.example"), "xrootd.link.in")
                .get("VAL"),
            expected(i).to_string()
        );
    }
    assert!(second.proc.terminate().success());
    let log = second.proc.log_text();
    assert!(log.contains(" state_lines_skipped=5 "), "{log}");
    // The next save holds every source again, without the bad lines.
    let again = std::fs::read_to_string(&state).unwrap();
    assert_eq!(
        again.lines().filter(|l| l.starts_with("{\"ip\":")).count(),
        5,
        "{again}"
    );
    assert!(
        !again.contains("garbage") && !again.contains(",-3]"),
        "{again}"
    );
}

/// Issue 34 item 7, through the real daemon into a real gmond: a live
/// server that reports every few seconds keeps its continuity through a
/// flood of new one-record senders (three times `max_sources`, each its
/// own loopback address) and through its own restart right after: its
/// `link.in` goes on upward from 62,980,717 instead of dropping to the
/// 2,000 of its new run.
#[test]
fn a_flood_of_new_senders_leaves_a_live_servers_counters() {
    let gmond = Gmond::start();
    let config = format!("{QUIET}max_sources = 100\n");
    let gw = Gateway::start(gmond.port, &config);
    let live = "127.0.0.5";
    // Its run before: three reports, a few seconds apart.
    for (k, inb) in [62_000_000u64, 62_500_000, 62_980_717]
        .into_iter()
        .enumerate()
    {
        if k > 0 {
            std::thread::sleep(Duration::from_secs(1));
        }
        gw.send_as(live, record(5, 77, inb).as_bytes());
    }
    gmond.wait_for(Duration::from_secs(10), "the live server", |x| {
        x.hosts
            .get("ds5.example")
            .and_then(|h| h.metrics.get("xrootd.link.in"))
            .is_some_and(|m| m.get("VAL") == "62980717")
    });
    // 300 new senders, one record each, from 127.0.2.0 on.
    for i in 0..300u32 {
        let ip = format!("127.0.{}.{}", 2 + i / 250, 1 + i % 250);
        gw.send_as(&ip, record(1000 + i, 1, u64::from(i)).as_bytes());
    }
    std::thread::sleep(Duration::from_millis(500));
    // Restarted (pid 78), 2,000 bytes in since.
    gw.send_as(live, record(5, 78, 2_000).as_bytes());
    let want = (62_980_717u64 + 2_000).to_string();
    gmond.wait_for(Duration::from_secs(10), "link.in continued", |x| {
        x.hosts
            .get("ds5.example")
            .and_then(|h| h.metrics.get("xrootd.link.in"))
            .is_some_and(|m| m.get("VAL") == want)
    });
    let log = gw.proc.log_text();
    // Only the one-record senders went.
    let evictions: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("more than 100 sources (max_sources): forgot the"))
        .collect();
    assert!(!evictions.is_empty(), "{log}");
    for line in evictions {
        assert!(line.contains(", 0 established"), "{line}");
    }
}

/// A tmpfs of `size` mounted on a fresh directory, unmounted on drop
/// (mounting needs root: the full tier runs as root, `.ci/run`).
struct SmallFs(std::path::PathBuf);

impl SmallFs {
    fn mount(tag: &str, size: &str) -> SmallFs {
        let dir = std::env::temp_dir().join(format!("x2g-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            ok,
            "cannot mount a tmpfs on {} (this test needs root)",
            dir.display()
        );
        SmallFs(dir)
    }

    fn remount_read_only(&self) {
        let ok = std::process::Command::new("mount")
            .args(["-o", "remount,ro"])
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "cannot remount {} read-only", self.0.display());
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A save that fails for a full disk (ENOSPC, for real: a 64 KiB
/// tmpfs) or a read-only file system leaves the last good file as it
/// was and no temporary file behind.
#[test]
fn a_failed_save_leaves_the_last_good_file_and_no_temporary_one() {
    let fs = SmallFs::mount("enospc", "64k");
    let path = fs.0.join("state");
    let (store, _) = StateStore::open(&path, u64::MAX);
    let mut part = Vec::new();
    let ip = "10.0.0.1".parse().unwrap();
    let one = std::iter::once((1, 5000, 120));
    write_entry(&mut part, ip, "xrootd", Some((1, 2)), one, None);
    store.state().hand_in(0, part);
    store.save().unwrap();
    let good = std::fs::read(&path).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&good),
        "{\"format\":\"xrd2ganglia-state\",\"version\":2}\n\
         {\"ip\":\"10.0.0.1\",\"program\":\"xrootd\",\"start\":[1,2],\"counters\":[[\"0000000000000001\",5000,120]]}\n"
    );

    // 10,000 counters (about 450 KB) do not fit in 64 KiB.
    let mut big = Vec::new();
    let counters = (0..10_000).map(|key| (key, 1_000_000_000_000, 1_000_000_000_000));
    write_entry(&mut big, ip, "xrootd", Some((1, 3)), counters, None);
    store.state().hand_in(0, big);
    let e = store.save().unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), good);
    assert!(
        !tmp_path(&path).exists(),
        "a partial {} is left",
        tmp_path(&path).display()
    );
    let entries: Vec<_> = std::fs::read_dir(&fs.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, ["state"]);

    // Read-only: nothing written, the file as it was.
    fs.remount_read_only();
    let e = store.save().unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), good);
    assert!(!tmp_path(&path).exists());
}
