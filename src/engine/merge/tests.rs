//! The merge rule, case by case. Every expected value is worked out by
//! hand from the rule in the module's doc (not by running it): what each
//! gateway would send for the counter's next reading.

use super::*;

fn entry(started: Option<(u32, u32)>, counters: &[(u64, u64, u64)]) -> SavedSource {
    SavedSource {
        started,
        counters: counters.to_vec(),
    }
}

/// Merges `peer` into a copy of `mine`.
fn merged(mine: &SavedSource, peer: &SavedSource) -> SavedSource {
    let mut m = mine.clone();
    merge(&mut m, peer);
    m
}

const RUN1: Option<(u32, u32)> = Some((1_700_000_000, 77));
const RUN2: Option<(u32, u32)> = Some((1_700_003_600, 78));

#[test]
fn the_same_run_takes_the_larger_offset_and_keeps_my_readings() {
    // gw2 lost the last datagram before a reset: its offset is 4000 short.
    let mine = entry(RUN1, &[(1, 900, 10_000), (2, 5, 0)]);
    let peer = entry(RUN1, &[(1, 950, 6_000), (2, 6, 3)]);
    assert_eq!(
        merged(&mine, &peer),
        entry(RUN1, &[(1, 900, 10_000), (2, 5, 3)])
    );
    assert_eq!(
        merged(&peer, &mine),
        entry(RUN1, &[(1, 950, 10_000), (2, 6, 3)])
    );
    // Both now send reading + 10,000 for counter 1 and reading + 3 for 2.
    assert!(agrees(&merged(&mine, &peer), &merged(&peer, &mine)));
}

/// A server restarted while gw1 was down; gw1 back with its state file.
/// gw1 saved run 1 at reading 5,000 (offset 0); gw2 heard run 1 up to
/// 6,000, then run 2 (offset 6,000) up to 300. gw1 takes run 2 and offset
/// 6,000: its next reading, 400, goes out as 6,400 as gw2's does. Without
/// the merge gw1 would see a restart and send 400 + 5,000 = 5,400.
#[test]
fn a_restart_gw1_missed_while_down_is_taken_from_gw2() {
    let gw1 = entry(RUN1, &[(1, 5_000, 0)]);
    let gw2 = entry(RUN2, &[(1, 300, 6_000)]);
    let at_gw1 = merged(&gw1, &gw2);
    assert_eq!(at_gw1, entry(RUN2, &[(1, 0, 6_000)]));
    // gw2, told gw1's old run: keeps its own.
    let at_gw2 = merged(&gw2, &gw1);
    assert_eq!(at_gw2, entry(RUN2, &[(1, 300, 6_000)]));
    assert!(agrees(&at_gw1, &at_gw2));
}

/// The old run's last value was higher at the gateway that missed the
/// restart (gw2 lost run 1's last datagrams): the new run continues from
/// the higher one, at both.
#[test]
fn a_newer_run_continues_from_the_higher_end_of_the_old_one() {
    let gw1 = entry(RUN1, &[(1, 7_000, 100)]);
    let gw2 = entry(RUN2, &[(1, 300, 6_000)]);
    // 7,000 + 100 > 6,000.
    assert_eq!(merged(&gw1, &gw2), entry(RUN2, &[(1, 0, 7_100)]));
    assert_eq!(merged(&gw2, &gw1), entry(RUN2, &[(1, 300, 7_100)]));
}

/// gw1 replaced by a fresh machine (no state file): it hears run 2 and
/// has offset 0, reading 400; gw2 has offset 6,000. Same run: gw1 takes
/// 6,000 and sends 400 + 6,000 = 6,400, as gw2 does, not 400.
#[test]
fn a_fresh_gateway_takes_the_offsets_it_never_saw() {
    let gw1 = entry(RUN2, &[(1, 400, 0)]);
    let gw2 = entry(RUN2, &[(1, 400, 6_000)]);
    assert_eq!(merged(&gw1, &gw2), entry(RUN2, &[(1, 400, 6_000)]));
    // Before it has heard the server at all: no run, no counter.
    let blank = entry(None, &[]);
    assert_eq!(merged(&blank, &gw2), entry(RUN2, &[(1, 0, 6_000)]));
}

#[test]
fn my_newer_run_takes_the_end_of_the_peers_old_run() {
    let gw1 = entry(RUN2, &[(1, 10, 5_000)]);
    let gw2 = entry(RUN1, &[(1, 5_500, 0)]);
    // gw2 heard run 1 up to 5,500: run 2 continues from there.
    assert_eq!(merged(&gw1, &gw2), entry(RUN2, &[(1, 10, 5_500)]));
}

#[test]
fn a_restart_within_one_second_takes_the_entry_that_published_more() {
    let a = entry(Some((1_700_000_000, 77)), &[(1, 100, 1_000)]);
    let b = entry(Some((1_700_000_000, 91)), &[(1, 50, 2_000)]);
    // b publishes 2,050 > 1,100: b's run, offset max(2,000, 1,000 + 100).
    assert_eq!(merged(&a, &b), entry(b.started, &[(1, 0, 2_000)]));
    assert_eq!(merged(&b, &a), entry(b.started, &[(1, 50, 2_000)]));
    // A tie: the larger pid.
    let c = entry(Some((1_700_000_000, 91)), &[(1, 100, 1_000)]);
    assert_eq!(merged(&a, &c).started, c.started);
    assert_eq!(merged(&c, &a).started, c.started);
}

#[test]
fn the_pair_converges_in_one_round_trip_whatever_each_holds() {
    let entries = [
        entry(None, &[(1, 5, 0)]),
        entry(RUN1, &[(1, 5_000, 0), (2, 9, 9)]),
        entry(RUN1, &[(1, 6_000, 0)]),
        entry(RUN2, &[(1, 300, 6_000)]),
        entry(RUN2, &[(1, 100, 5_000), (3, 1, 1)]),
        entry(Some((1_700_003_600, 79)), &[(1, 1, 1)]),
    ];
    for a in &entries {
        // Idempotent: merging the same entry changes nothing it publishes.
        assert!(agrees(&merged(a, a), a), "{a:?}");
        for b in &entries {
            // Commutative in what both publish.
            assert!(
                agrees(&merged(a, b), &merged(b, a)),
                "{a:?} {b:?}: {:?} / {:?}",
                merged(a, b),
                merged(b, a)
            );
            // Never lower than either side was.
            let ab = merged(a, b);
            for &(key, _, off) in &a.counters {
                let now = ab.counters.iter().find(|c| c.0 == key).map_or(0, |c| c.2);
                assert!(now >= off, "{a:?} {b:?} key {key}");
            }
        }
    }
}

#[test]
fn a_source_with_more_counters_than_it_may_have_is_refused() {
    let many = entry(RUN1, &[(1, 1, 1), (2, 1, 1), (3, 1, 1)]);
    assert_eq!(check(&many, 3), Ok(()));
    assert_eq!(
        check(&many, 2),
        Err("more counters than max_metrics_per_source")
    );
}

/// A peer's entries of sources no engine has are kept for their return,
/// but no more than `max_sources` of them wait.
#[test]
fn a_peer_cannot_grow_the_waiting_sources_without_end() {
    use crate::engine::saved::SavedState;
    let saved = SavedState::default();
    let ip = |i: u8| std::net::IpAddr::from([10, 0, 0, i]);
    let e = entry(RUN2, &[(1, 300, 6_000)]);
    // Taken as a newer run than none: its offset, no reading of its own.
    let kept = entry(RUN2, &[(1, 0, 6_000)]);
    let now = 1_700_010_000;
    assert_eq!(saved.merge_unclaimed(ip(1), "xrootd", &e, 2, now).0, kept);
    assert_eq!(saved.merge_unclaimed(ip(2), "xrootd", &e, 2, now).0, kept);
    saved.merge_unclaimed(ip(3), "xrootd", &e, 2, now);
    assert_eq!(saved.unclaimed(), 2);
    // One already waiting is merged still.
    let newer = entry(RUN2, &[(1, 400, 7_000)]);
    let (merged, _) = saved.merge_unclaimed(ip(1), "xrootd", &newer, 2, now);
    assert_eq!(merged, entry(RUN2, &[(1, 0, 7_000)]));
}
