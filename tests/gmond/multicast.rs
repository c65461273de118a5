//! Multicast send channels (and several channels at once) into real gmonds.
//!
//! Multicast must not leave the machine, so the test runs in a network
//! namespace of its own: the test thread calls unshare(CLONE_NEWNET) (root
//! only), which leaves it with nothing but a loopback interface; every
//! process it starts inherits that namespace.

use xrd2ganglia_testkit as common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{Gmond, Scratch, free_port};

fn run(cmd: &[&str]) {
    let st = Command::new(cmd[0])
        .args(&cmd[1..])
        .status()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(st.success(), "{cmd:?} failed");
}

#[test]
fn multicast_and_unicast_channels_at_once() {
    std::thread::spawn(|| {
        // SAFETY: unshare takes no pointers; it moves this thread alone into a new network namespace.
        let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "unshare(CLONE_NEWNET) failed (needs root): {}", std::io::Error::last_os_error());
        run(&["ip", "link", "set", "lo", "up"]);
        run(&["ip", "link", "set", "lo", "multicast", "on"]);
        run(&["ip", "route", "add", "224.0.0.0/4", "dev", "lo"]);

        // gmond A joins the group; gmond B listens for unicast.
        let group = "239.255.42.42";
        let mport = free_port();
        let a = Gmond::start_multicast(group, mport);
        let b = Gmond::start();
        let dir = Scratch::new("mc");
        let conf = dir.path().join("gw.toml");
        std::fs::write(
            &conf,
            format!(
                "stats_interval = 0\nself_metrics_interval = 0\nstate_file = \"\"\ncontrol_socket = \"\"\n[[channel]]\nhost = \"{group}\"\nport = {mport}\nttl = 1\nmcast_if = \"lo\"\n\
                 [[channel]]\nhost = \"127.0.0.1\"\nport = {}\n",
                b.port
            ),
        )
        .unwrap();
        let port = free_port();
        let mut gw = Command::new(env!("CARGO_BIN_EXE_xrd2ganglia"));
        gw.args(["serve", "--config"]).arg(&conf).args(["--listen", &format!("127.0.0.1:{port}")]);
        let log = dir.path().join("gw.log");
        let err = dir.path().join("gw.err");
        gw.stdout(std::fs::File::create(&log).unwrap()).stderr(std::fs::File::create(&err).unwrap());
        let mut child = gw.spawn().unwrap();
        // Its sockets are bound once it says "serving" (stdout or stderr).
        let said = || {
            let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
            format!("stdout:\n{}\nstderr:\n{}", read(&log), read(&err))
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !said().contains("serving") {
            let exited = child.try_wait();
            if matches!(exited, Ok(Some(_))) || Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("gateway did not say 'serving' within 10 s (exited: {exited:?}); it said\n{}", said());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let rec = r#"<statistics tod="1700000100" ver="v5.5.3" src="mc.example.org:1094" tos="1700000000" pgm="xrootd" ins="anon" pid="1" site="S"><stats id="link"><in>77</in></stats></statistics>"#;
        for _ in 0..3 {
            common::send_from("127.0.0.1:0", &format!("127.0.0.1:{port}"), rec.as_bytes());
            std::thread::sleep(Duration::from_millis(200));
        }
        for g in [&a, &b] {
            let x = g.wait_for(Duration::from_secs(10), "the multicast/unicast record", |x| {
                x.hosts.get("mc.example.org").is_some_and(|h| h.metrics.contains_key("xrootd.link.in"))
            });
            assert_eq!(x.metric("mc.example.org", "xrootd.link.in").get("VAL"), "77");
        }
        let _ = child.kill();
        let _ = child.wait();
    })
    .join()
    .unwrap();
}
