//! Counters stay continuous (restarts, resets, wraps, gateway restarts);
//! changed-only sending.

use std::sync::Arc;

use super::super::saved::SavedState;
use super::{Harness, link_record, metric_tmaxes};

#[test]
fn counters_stay_continuous_across_restarts_resets_and_wraps() {
    for fast in [true, false] {
        let mut r = Harness::new("");
        r.engine.set_fast_path(fast);
        let top = i64::from(u32::MAX) - 99;
        // Readings as xrootd sends them (tmo is a C int: -100 is 2^32 - 100).
        let steps: [(u32, u64, i64, &str, &str); 8] = [
            (77, 1000, 5, "1000", "5"),
            (77, 2000, 6, "2000", "6"),
            (77, 3000, 7, "3000", "7"),
            // Restart (new pid): readings from zero, sent on from 3000 / 7.
            (78, 100, 1, "3100", "8"),
            (78, 300, 2, "3300", "9"),
            // A reset without a restart: continues as well.
            (78, 50, 3, "3350", "10"),
            // The int counter climbs to 2^32 - 100 (sent as xrootd's %d)...
            (78, 60, top - (1 << 32), "3360", &(top + 7).to_string()),
            // ...and wraps past 2^32 to 20: +120.
            (78, 70, 20, "3370", &(top + 127).to_string()),
        ];
        for (i, (pid, inb, tmo, want_in, want_tmo)) in steps.iter().enumerate() {
            let rec = link_record(1_700_000_000, *pid, *inb, *tmo, 4);
            let v = r.feed(rec, "10.0.0.1:40000", 10 * (i as u64 + 1)).values();
            assert_eq!(v["xrootd.link.in"], *want_in, "step {i}, fast path {fast}");
            assert_eq!(
                v["xrootd.link.tmo"], *want_tmo,
                "step {i}, fast path {fast}"
            );
            // A gauge goes as it came.
            assert_eq!(v["xrootd.link.num"], "4", "step {i}");
        }
    }
}

/// A meta-manager cmsd's record (`cms.repstats shr`) in 5.5.3's format
/// (XrdCmsCluster.cc:1282-1291 at v6.1.0, the same since 3.1.0): one
/// manager in its node list, whose `<use>` (Shrin) is a `char` since
/// 5.4.0, printed with `%d`.
fn meta_manager_record(tod: u64, selections: u64, used: i64) -> String {
    format!(
        r#"<statistics tod="{tod}" ver="v5.5.3" src="meta.example.org:1213" tos="1700000000" pgm="cmsd" ins="anon" pid="4242" site="T2_X"><stats id="cmsm"><role>MM</role><sel><t>{selections}</t><r>{selections}</r><w>0</w></sel><node>1<stats id="0"><host>mgr1.example.org</host><role>M</role><run>awn</run><ref><r>{selections}</r><w>0</w></ref><shr>50<use>{used}</use></shr></stats></node></stats></statistics>"#
    )
}

/// `cmsm.node.i.shr.use` counts on at a steady rate through its 8-bit wrap:
/// 127 -> -128 where `char` is signed (x86), 255 -> 0 where it is unsigned
/// (ARM); neither is read as a jump of about 4.3e9 (a C int's -128).
#[test]
fn a_char_counter_wraps_at_8_bits_without_a_spike() {
    for (arch, readings) in [
        ("signed char", [126, 127, -128, -127, -126]),
        ("unsigned char", [254, 255, 0, 1, 2]),
    ] {
        for fast in [true, false] {
            let mut r = Harness::new("");
            r.engine.set_fast_path(fast);
            let mut sent = Vec::new();
            for (i, used) in readings.iter().enumerate() {
                let step = i as u64 + 1;
                let rec = meta_manager_record(1_700_000_000 + 10 * step, 100 * step, *used);
                let v = r.feed(rec, "10.0.0.9:40000", 10 * step).values();
                let uses: Vec<_> = v.iter().filter(|(k, _)| k.ends_with(".shr.use")).collect();
                assert_eq!(uses.len(), 1, "{arch}, step {i}: {v:?}");
                let (name, value) = uses[0];
                assert!(
                    name.starts_with("cmsd.") && name.contains(".cmsm.node."),
                    "{name}"
                );
                sent.push(
                    value
                        .parse::<u64>()
                        .unwrap_or_else(|e| panic!("{arch}: {value:?}: {e}")),
                );
            }
            // One more exhaustion every 10 s: the rate gmetad draws is flat.
            let steps: Vec<u64> = sent.windows(2).map(|w| w[1].wrapping_sub(w[0])).collect();
            assert_eq!(
                steps,
                [1, 1, 1, 1],
                "{arch}, fast path {fast}: sent {sent:?}"
            );
        }
    }
}

#[test]
fn changed_only_sends_unchanged_values_on_the_heartbeat_and_grows_tmax() {
    let mut r = Harness::new("send_values = \"changed\"\nvalue_heartbeat = 45\n");
    // Report n (10 s apart) with link.in at `inb`: the value packets sent.
    let mut report = |n: u64, inb: u64| {
        let rec = link_record(1_700_000_000, 77, inb, 5, 4);
        r.feed(rec, "10.0.0.1:40000", 10 * n);
        (r.values(), r.packets())
    };
    // 7 header attributes (tod left out), 3 link values and uptime.
    assert_eq!(report(1, 1000).0.len(), 11);
    // The interval is now known: TMAX = 1.5 x 10 + 45; metadata goes out
    // with it (and takes its values along) with the periodic resend,
    // within 60 s of the first.
    let mut n = 2;
    let tmaxes = loop {
        let tmaxes = metric_tmaxes(&report(n, 1000).1);
        if !tmaxes.is_empty() || n > 7 {
            break tmaxes;
        }
        n += 1;
    };
    assert!(
        !tmaxes.is_empty() && tmaxes.iter().all(|t| *t == 60),
        "{tmaxes:?}"
    );
    // Nothing changed: only the host heartbeat goes out...
    for n in n + 1..n + 4 {
        let (v, all) = report(n, 1000);
        assert!(v.is_empty() && all.len() == 1, "report {n}: {all:?}");
    }
    // ...but what changed does.
    let v = report(n + 4, 1500).0;
    assert_eq!(v.keys().collect::<Vec<_>>(), ["xrootd.link.in"]);
    // 45 s (and more) after they were last sent, unchanged values go out again.
    let v = report(n + 5, 1500).0;
    assert!(
        v.contains_key("xrootd.link.num") && !v.contains_key("xrootd.link.in"),
        "{v:?}"
    );
}

#[test]
fn counter_state_survives_a_gateway_restart_through_the_state_file() {
    let dir = std::env::temp_dir().join(format!("x2g-gwstate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("state");
    let _ = std::fs::remove_file(&path);
    // A gateway on that state file: its harness, restored from the
    // file's text (the daemon's state_file reads and writes it whole).
    let gateway = || {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let saved = Arc::new(SavedState::from_text(&text).unwrap());
        let read = Ok::<usize, String>(saved.unclaimed());
        let r = Harness::with_saved("", saved);
        (r, read)
    };
    let save = |r: &Harness| {
        r.engine.hand_in_state();
        let saved = &r.engine.saved.as_ref().unwrap().0;
        std::fs::write(&path, saved.to_text()).unwrap();
    };
    let from = "10.0.0.1:40000";
    // First gateway: an xrootd restart gives link.in an offset of 5000.
    let (mut first, _) = gateway();
    first.feed(link_record(1_700_000_000, 77, 5000, 1, 4), from, 10);
    first.feed(link_record(1_700_000_000, 78, 100, 1, 4), from, 20);
    save(&first);

    // Second gateway, same xrootd: the offset is still applied.
    let (mut second, read) = gateway();
    assert_eq!(read, Ok(1));
    let v = second
        .feed(link_record(1_700_000_000, 78, 200, 1, 4), from, 10)
        .values();
    assert_eq!(v["xrootd.link.in"], "5200");
    save(&second);

    // Third gateway: the xrootd restarted while no gateway ran.
    let (mut third, _) = gateway();
    let v = third
        .feed(link_record(1_700_000_000, 79, 30, 1, 4), from, 10)
        .values();
    assert_eq!(v["xrootd.link.in"], "5230");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A plug-in's counter declared by `[[metric]]` is continuous through an
/// xrootd restart like the catalog's; undeclared, it would go as it came
/// (a gauge: the restart's drop drawn as it is).
#[test]
fn a_declared_plug_in_counter_is_continuous_through_a_restart() {
    let rec = |pid: u32, requests: &str| {
        format!(
            r#"{{"statistics":{{"tod":1795622437,"ver":"v6.1.0","src":"vm:48021","tos":{},"pgm":"xrootd","ins":"ds-json","pid":{pid},"site":"TESTSITE","stats_myplug":{{"requests":{requests}}}}}}}"#,
            1_795_622_257 + u64::from(pid)
        )
    };
    for (config, want) in [
        (
            "[[metric]]\nmatch = \"myplug.requests\"\nslope = \"counter\"\n",
            ["10", "30", "35", "40"],
        ),
        ("", ["10.000000", "30.000000", "5.000000", "10.000000"]),
    ] {
        for fast in [true, false] {
            let mut r = Harness::new(config);
            r.engine.set_fast_path(fast);
            let readings = [
                (1, "10.000000"),
                (1, "30.000000"),
                (2, "5.000000"),
                (2, "10.000000"),
            ];
            for (i, (pid, requests)) in readings.iter().enumerate() {
                let v = r
                    .feed(rec(*pid, requests), "10.0.0.7:40000", 10 * (i as u64 + 1))
                    .values();
                assert_eq!(
                    v["xrootd.ds-json.myplug.requests"], want[i],
                    "{config:?} step {i}, fast path {fast}"
                );
            }
        }
    }
}

/// A reload (SIGHUP: `Engine::reconfigure`) that adds a `[[metric]]`
/// applies to the next record: the plug-in's variable, a gauge before,
/// goes out as the declared counter with its units.
#[test]
fn a_reload_applies_a_new_metric_table() {
    let rec = |tod: u64, requests: u64| {
        format!(
            r#"{{"statistics":{{"tod":{tod},"ver":"v6.1.0","src":"vm:48021","tos":1795622257,"pgm":"xrootd","ins":"ds-json","pid":10174,"site":"TESTSITE","stats_myplug":{{"requests":{requests}.000000}}}}}}"#
        )
    };
    let name = "xrootd.ds-json.myplug.requests";
    let meta = |r: &Harness| {
        r.packets().into_iter().find_map(|p| match p {
            super::Packet::Metadata { id, meta } if id.name == name => {
                Some((meta.slope, meta.units.to_string()))
            }
            _ => None,
        })
    };
    let mut r = Harness::new("");
    r.feed(rec(1_795_622_437, 10), "10.0.0.7:40000", 10);
    assert_eq!(meta(&r), Some((super::Slope::Both, String::new())));
    r.engine.reconfigure(Arc::new(super::settings(
        "[[metric]]\nmatch = \"myplug.*\"\nslope = \"counter\"\nunits = \"requests/s\"\n",
    )));
    let v = r
        .feed(rec(1_795_622_442, 12), "10.0.0.7:40000", 15)
        .values();
    assert_eq!(v[name], "12");
    assert_eq!(
        meta(&r),
        Some((super::Slope::Positive, "requests/s".to_string()))
    );
}

/// Issue 43's last gap, in the engine: with `peer` and `recover_from`, a
/// restart seen after a gap (a report missed) while the peer's last
/// exchange failed holds the source's counters (metadata and other
/// values go out, no counter value) until the daemon answers
/// ([`SavedState::give`]); the answer's floor applies at the next record
/// and each later answer raises it again, until watching ends. Not held:
/// a restart without a gap, or with the peer reachable.
#[test]
fn a_restart_after_a_gap_with_the_peer_unreachable_is_held_until_floors_come() {
    use std::collections::HashMap;
    let config = "peer = \"127.0.0.1:9\"\npeer_listen = [\"127.0.0.1:8\"]\nrecover_from = [\"127.0.0.1:9\"]\n";
    let host: (std::net::IpAddr, String) = ("10.0.0.1".parse().unwrap(), "ds1.example.org".into());
    let floors = |v: u64| {
        HashMap::from([(
            host.clone(),
            HashMap::from([(crate::mapping::name_key("xrootd.link.in"), v)]),
        )])
    };
    let from = "10.0.0.1:40000";
    let link_in = |r: &Harness| r.values().get("xrootd.link.in").cloned();
    for fast in [true, false] {
        let saved = Arc::new(SavedState::from_text("").unwrap());
        let mut r = Harness::with_saved(config, saved.clone());
        r.engine.set_fast_path(fast);
        // Run 1, a report a second.
        for (s, inb) in [(0, 5000), (1, 5100), (2, 5200)] {
            r.feed(link_record(1, 77, inb, 1, 3), from, s);
        }
        assert_eq!(link_in(&r).as_deref(), Some("5200"));
        // Reports missed, then the restart.
        r.feed(link_record(2, 78, 100, 1, 3), from, 6);
        assert_eq!(link_in(&r), None, "held");
        assert!(
            r.values().contains_key("xrootd.link.num"),
            "a gauge goes out"
        );
        assert_eq!(saved.watched(), vec![host.clone()]);
        assert!(saved.holding(r.at(6), std::time::Duration::from_secs(90)));
        r.feed(link_record(2, 78, 150, 1, 3), from, 7);
        assert_eq!(link_in(&r), None, "held until an answer");
        saved.give(&floors(9000));
        r.feed(link_record(2, 78, 200, 1, 3), from, 8);
        assert_eq!(link_in(&r).as_deref(), Some("9000"), "the floor");
        assert!(!saved.holding(r.at(8), std::time::Duration::from_secs(90)));
        r.feed(link_record(2, 78, 300, 1, 3), from, 9);
        assert_eq!(link_in(&r).as_deref(), Some("9100"));
        // Read again: gmetad stored more.
        saved.give(&floors(9500));
        r.feed(link_record(2, 78, 400, 1, 3), from, 10);
        assert_eq!(link_in(&r).as_deref(), Some("9500"), "floored again");
        // The peer is back: watching ends, the counter goes on.
        saved.end_watching();
        r.feed(link_record(2, 78, 500, 1, 3), from, 11);
        assert_eq!(link_in(&r).as_deref(), Some("9600"));
        assert!(saved.watched().is_empty());
        // A restart right after a report (no gap): not held.
        r.feed(link_record(3, 79, 10, 1, 3), from, 12);
        assert_eq!(link_in(&r).as_deref(), Some("9610"));
        // After a gap, the peer reachable: not held either.
        saved.set_peer_reachable(true);
        r.feed(link_record(4, 80, 20, 1, 3), from, 20);
        assert_eq!(link_in(&r).as_deref(), Some("9630"));
        assert!(saved.watched().is_empty());
    }
}
