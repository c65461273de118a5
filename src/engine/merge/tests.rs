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

// The trust rule ([`take`]), case by case: each case of docs/pair.md's
// "What happens when" table still merges; what a lying peer claims is
// refused and counted.

const NOW: u64 = 1_700_010_000;

/// What a gateway that hears the server knows: it reported `ago` s ago.
fn live(ago: u64, may_raise: bool) -> Heard {
    Heard {
        now_unix: NOW,
        reported_unix: Some(NOW - ago),
        may_raise,
    }
}

/// What a gateway knows of a source it has not heard since its start
/// (its state file's entry, or nothing).
fn saved(may_raise: bool) -> Heard {
    Heard {
        now_unix: NOW,
        reported_unix: None,
        may_raise,
    }
}

/// Takes `peer` into a copy of `mine`.
fn taken(mine: &SavedSource, peer: &SavedSource, heard: Heard) -> (SavedSource, Taken) {
    let mut m = mine.clone();
    let t = take(&mut m, peer, &heard);
    (m, t)
}

/// Table, first row: gw1 killed. Both held the same: nothing moves,
/// nothing is refused.
#[test]
fn trust_a_peer_that_agrees_changes_nothing() {
    let e = entry(RUN2, &[(1, 300, 6_000)]);
    let (m, t) = taken(&e, &e, live(2, true));
    assert_eq!((m, t), (e, Taken::default()));
}

/// Table, second and fifth rows: gw1 back with its state file (or
/// restarted at once, an upgrade), pulling gw2's before it hears anyone.
/// gw2 saw a 32-bit wrap meanwhile (+2^32): taken, once.
#[test]
fn trust_a_gateway_back_with_its_state_takes_what_it_missed_once() {
    let gw1 = entry(RUN1, &[(1, 4_000_000_000, 0), (2, 9, 0)]);
    let gw2 = entry(RUN1, &[(1, 5_000, 1 << 32), (2, 9, 0)]);
    let (m, t) = taken(&gw1, &gw2, saved(true));
    assert_eq!(m, entry(RUN1, &[(1, 4_000_000_000, 1 << 32), (2, 9, 0)]));
    assert_eq!((t.refused, t.raised), (0, true));
    // Its stopped server's entry, and one both hold alike: as they were.
    let stopped = entry(RUN1, &[(1, 77, 0)]);
    assert_eq!(taken(&stopped, &stopped, saved(true)).0, stopped);
}

/// Table, third row: a server restarted while gw1 was down. gw1's state
/// file has run 1 at 5,000; gw2 heard run 1 to 6,000, then run 2. gw1,
/// having heard nothing since its start, takes run 2 and offset 6,000
/// (a raise of 1,000 over its own end, 5,000: less than it publishes).
#[test]
fn trust_a_restart_missed_while_down_is_taken() {
    let gw1 = entry(RUN1, &[(1, 5_000, 0)]);
    let gw2 = entry(RUN2, &[(1, 300, 6_000)]);
    let (m, t) = taken(&gw1, &gw2, saved(true));
    assert_eq!(m, entry(RUN2, &[(1, 0, 6_000)]));
    assert_eq!(t.refused, 0);
}

/// Table, fourth row: a fresh machine (no state file) holds nothing of
/// the server: the peer's history is taken whole, however large.
#[test]
fn trust_a_fresh_gateway_takes_the_whole_history() {
    let blank = entry(None, &[]);
    let gw2 = entry(RUN2, &[(1, 400, 6_000_000_000_000)]);
    let (m, t) = taken(&blank, &gw2, saved(true));
    assert_eq!(m, entry(RUN2, &[(1, 0, 6_000_000_000_000)]));
    assert_eq!(t, Taken::default());
}

/// Table, sixth row (both into one gmond, after they diverged): gw1 lost
/// run 1's last datagram (6,000) before the restart; both heard run 2.
/// gw1's offset is 5,000, gw2's 6,000: the restart opened gw1's window
/// and 1,000 is less than the 5,100 gw1 publishes, so it is taken. Had
/// gw2's push come before gw1 heard the restart itself, it waits (not
/// merged, not refused) for the server's own report.
#[test]
fn trust_a_datagram_lost_before_a_restart_is_made_good() {
    let gw1 = entry(RUN2, &[(1, 100, 5_000)]);
    let gw2 = entry(RUN2, &[(1, 100, 6_000)]);
    let (m, t) = taken(&gw1, &gw2, live(2, true));
    assert_eq!(m, entry(RUN2, &[(1, 100, 6_000)]));
    assert_eq!((t.refused, t.raised), (0, true));
    // Before gw1 heard the restart: run 1 here, reported 2 s ago.
    let before = entry(RUN1, &[(1, 5_000, 0)]);
    let gw2_now = entry(Some((NOW as u32 - 1, 78)), &[(1, 100, 6_000)]);
    let (m, t) = taken(&before, &gw2_now, live(2, true));
    assert_eq!(m, before);
    assert_eq!((t.refused, t.waiting), (0, true));
}

/// Issue 42: one push with an offset of 2^63-1-10^8 moved a server's
/// `xrootd.ds.link.in` from 63,081,435 to 9.2e18. Refused, counted, and
/// the entry's other counters are still taken.
#[test]
fn trust_a_spiking_offset_is_refused_and_counted() {
    let spike = (1u64 << 63) - 1 - 100_000_000;
    let gw = entry(RUN1, &[(1, 63_081_435, 0), (2, 10, 100)]);
    let liar = entry(RUN1, &[(1, 63_081_435, spike), (2, 10, 150)]);
    for heard in [live(2, true), live(2, false), saved(true)] {
        let (m, t) = taken(&gw, &liar, heard);
        assert_eq!(m.counters[0], (1, 63_081_435, 0), "{heard:?}");
        assert!(t.refused >= 1, "{heard:?}");
        assert!(t.why.as_deref().unwrap().contains("raised by"), "{t:?}");
    }
    // In a window, the honest raise of counter 2 (50) is taken beside it.
    let (m, t) = taken(&gw, &liar, live(2, true));
    assert_eq!(m, entry(RUN1, &[(1, 63_081_435, 0), (2, 10, 150)]));
    assert_eq!(t.refused, 1);
}

/// Issue 42: a fake restart (a tos in the future, pid 1) was adopted and
/// the counter jumped by its whole value. Refused and counted, whether
/// the gateway hears the server or not; a restart in the past that the
/// server's later reports contradict is refused too.
#[test]
fn trust_a_fake_restart_is_refused_and_counted() {
    let gw = entry(RUN1, &[(1, 63_081_435, 0)]);
    let fake = entry(Some((NOW as u32 + 3_600, 1)), &[(1, 63_081_435, 0)]);
    for heard in [live(2, true), saved(true)] {
        let (m, t) = taken(&gw, &fake, heard);
        assert_eq!(m, gw);
        assert_eq!(t.refused, 1);
        assert!(t.why.as_deref().unwrap().contains("in the future"), "{t:?}");
    }
    // A restart an hour ago; the server reported run 1 to me 2 s ago.
    let past = entry(Some((NOW as u32 - 3_600, 1)), &[(1, 5, 0)]);
    let (m, t) = taken(&gw, &past, live(2, true));
    assert_eq!(m, gw);
    assert_eq!(t.refused, 1);
    assert!(t.why.as_deref().unwrap().contains("contradicts"), "{t:?}");
}

/// A peer cannot ratchet a counter up a little at a time: outside a
/// window (no report missed, no restart, reset or wrap here since the last
/// raise) any raise is refused; a source not heard since the start is
/// raised once.
#[test]
fn trust_a_raise_needs_something_this_gateway_missed() {
    let gw = entry(RUN1, &[(1, 5_000, 1_000)]);
    let more = entry(RUN1, &[(1, 5_000, 1_010)]);
    let (m, t) = taken(&gw, &more, live(2, false));
    assert_eq!((m, t.refused), (gw.clone(), 1));
    let saved_state = crate::engine::saved::SavedState::default();
    let ip = std::net::IpAddr::from([10, 0, 0, 1]);
    saved_state.merge_unclaimed(ip, "xrootd", &gw, 10, NOW);
    let (first, t1) = saved_state.merge_unclaimed(ip, "xrootd", &more, 10, NOW);
    assert_eq!((first.counters[0].2, t1.refused), (1_010, 0));
    let again = entry(RUN1, &[(1, 5_000, 1_020)]);
    let (second, t2) = saved_state.merge_unclaimed(ip, "xrootd", &again, 10, NOW);
    assert_eq!((second.counters[0].2, t2.refused), (1_010, 1));
}

/// A fake restart of a source this gateway holds nothing of yet is
/// refused too: its first report would otherwise be taken for a restart
/// and continue from the peer's readings.
#[test]
fn trust_a_run_in_the_future_is_refused_even_where_nothing_is_held() {
    let blank = entry(None, &[]);
    let fake = entry(Some((NOW as u32 + 3_600, 1)), &[(1, 63_081_435, 0)]);
    let (m, t) = taken(&blank, &fake, saved(true));
    assert_eq!((m, t.refused), (blank, 1));
}
