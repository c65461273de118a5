use super::*;
use std::time::Instant;

/// 2026-11-27 12:00:00 UTC.
const NOW: Limits = Limits {
    now_unix: 1_795_780_800,
};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn a_foreign_file_is_reported_not_trusted() {
    let e = SavedState::read("hello\n", NOW).err().unwrap();
    assert!(e.contains("not an xrd2ganglia state file"), "{e}");
    let (state, skipped) = SavedState::read("xrd2ganglia-state 1\n", NOW).unwrap();
    assert_eq!((state.unclaimed(), skipped), (0, Skipped::default()));
    let (state, skipped) = SavedState::read("", NOW).unwrap();
    assert_eq!((state.unclaimed(), skipped.lines), (0, 0));
}

/// One flipped byte in the header dropped every source's counters (and
/// the next save overwrote them): a damaged header loses only itself when
/// entries follow; another format's or version's file is still refused.
#[test]
fn a_damaged_header_loses_only_itself() {
    let body = "S\t10.0.0.1\txrootd\t1700000000\t77\nC\t00000000000000aa\t5000\t62980717\n\
                S\t10.0.0.2\tcmsd\t1700000001\t78\n";
    let (state, skipped) = SavedState::read(&format!("xrd2ganglia-stbte 1\n{body}"), NOW).unwrap();
    assert_eq!(state.unclaimed(), 2);
    assert_eq!(skipped.lines, 1);
    assert_eq!(skipped.first, vec![(1, Bad::Header, 0)]);
    assert_eq!(
        skipped.to_string(),
        "1 line skipped: line 1: not the header \"xrd2ganglia-state 1\""
    );
    let kept = state
        .claim(ip("10.0.0.1"), "xrootd", Instant::now())
        .unwrap();
    assert_eq!(kept.started, Some((1_700_000_000, 77)));
    assert_eq!(kept.counters, vec![(0xaa, 5000, 62_980_717)]);
    for foreign in [
        format!("xrd2ganglia-state 2\n{body}"),
        "hello\nworld\n".to_string(),
        "\u{7f}ELF\n".to_string(),
    ] {
        let e = SavedState::read(&foreign, NOW).err().unwrap();
        assert!(
            e.contains("not an xrd2ganglia state file"),
            "{foreign:?}: {e}"
        );
    }
}

#[test]
fn each_line_is_checked_on_its_own() {
    fn ok(l: &str) -> Result<Line<'_>, Bad> {
        parse_line(l, false, NOW)
    }
    assert_eq!(
        ok("S\t10.0.0.1\txrootd anon\t1700000000\t77"),
        Ok(Line::Source {
            ip: ip("10.0.0.1"),
            program: "xrootd anon",
            started: Some((1_700_000_000, 77)),
        })
    );
    assert_eq!(
        ok("S\t::1\tcmsd\t0\t0"),
        Ok(Line::Source {
            ip: ip("::1"),
            program: "cmsd",
            started: None,
        })
    );
    assert_eq!(
        ok("C\t00000000deadbeef\t5000\t120"),
        Ok(Line::Counter {
            key: 0xdead_beef,
            last_raw: 5000,
            offset: 120
        })
    );
    assert_eq!(ok(""), Ok(Line::Blank));
    // The largest values allowed, and one past them.
    let top = (1u64 << 63) - 1;
    assert!(ok(&format!("C\tffffffffffffffff\t{top}\t{top}")).is_ok());
    let number = |field, text: &str, why| {
        Err(Bad::Number {
            field,
            text: text.to_string(),
            why,
        })
    };
    let huge = "2^63 or more (decades of 100 Gb/s)";
    assert_eq!(
        ok("C\t0000000000000001\t9223372036854775808\t0"),
        number("reading", "9223372036854775808", huge)
    );
    assert_eq!(
        ok("C\t0000000000000001\t18446744073709551615\t0"),
        number("reading", "18446744073709551615", huge)
    );
    assert_eq!(
        ok("C\t0000000000000001\t1\t18446744073709551616"),
        number("offset", "18446744073709551616", "above u64")
    );
    assert_eq!(
        ok("C\t0000000000000001\t1\t-5"),
        number("offset", "-5", "negative")
    );
    assert_eq!(
        ok("C\t0000000000000001\t+5\t0"),
        number("reading", "+5", "not a number")
    );
    assert_eq!(ok("C\t01\t1\t2"), number("key", "01", "not 16 hex digits"));
    assert_eq!(
        ok("C\t+00000000000001f\t1\t2"),
        number("key", "+00000000000001f", "not 16 hex digits")
    );
    // A tos more than a day ahead of now; a pid above pid_max.
    let tomorrow = NOW.now_unix + START_SLACK;
    assert!(ok(&format!("S\t10.0.0.1\txrootd\t{tomorrow}\t1")).is_ok());
    let later = (tomorrow + 1).to_string();
    assert_eq!(
        ok(&format!("S\t10.0.0.1\txrootd\t{later}\t1")),
        number("tos", &later, "in the future")
    );
    assert_eq!(
        ok("S\t10.0.0.1\txrootd\t1\t4194305"),
        number("pid", "4194305", "above Linux's pid_max")
    );
    assert!(ok("S\t10.0.0.1\txrootd\t1\t4194304").is_ok());
    assert_eq!(
        ok("S\tnope\txrootd\t1\t2"),
        Err(Bad::Address("nope".into()))
    );
    for program in ["a b c", "x y ", "a\u{7f}", "xrootd\"", &"p".repeat(65)] {
        assert_eq!(
            ok(&format!("S\t10.0.0.1\t{program}\t1\t2")),
            Err(Bad::Program(program.chars().take(40).collect())),
            "{program:?}"
        );
    }
    assert_eq!(ok("S\t10.0.0.1\txrootd\t1"), Err(Bad::Shape));
    assert_eq!(ok("C\t0000000000000001\t1\t2\t3"), Err(Bad::Shape));
    assert_eq!(ok("garbage"), Err(Bad::Shape));
    assert_eq!(
        parse_line("C\t0000000000000001\t1\t2", true, NOW),
        Err(Bad::CutOff)
    );
}

/// A file written by an older gateway, then damaged in every way the
/// issue names: the good entries all stay, the bad lines are named.
#[test]
fn a_bad_line_loses_only_itself() {
    let text = "xrd2ganglia-state 1\n\
        S\t10.0.0.1\txrootd\t1700000000\t77\n\
        C\t0000000000000001\t5000\t120\n\
        C\t0000000000000002\t7\t-3\n\
        C\t0000000000000003\t18446744073709551615\t0\n\
        S\t10.0.0.2\tcmsd\t1700000001\t78\n\
        C\t0000000000000001\t10\t99999999999999999999\n\
        C\t0000000000000004\t11\t0\n\
        %%garbage in the middle%%\n\
        S\tnot-an-ip\txrootd\t1\t2\n\
        C\t0000000000000001\t1\t1\n\
        C\t0000000000000002\t1\t1\n\
        S\t10.0.0.3\txrootd\t1700000002\t79\n\
        C\t0000000000000001\t62980717\t0\n\
        S\t10.0.0.4\txrootd\t1700000003\t80\n\
        C\t0000000000000001\t400\t5\n\
        C\t0000000000000002\t40";
    let (state, skipped) = SavedState::read(text, NOW).unwrap();
    assert_eq!(state.unclaimed(), 4);
    let claim = |a: &str, p: &str| state.claim(ip(a), p, std::time::Instant::now()).unwrap();
    assert_eq!(
        claim("10.0.0.1", "xrootd"),
        SavedSource {
            started: Some((1_700_000_000, 77)),
            counters: vec![(1, 5000, 120)],
        }
    );
    assert_eq!(
        claim("10.0.0.2", "cmsd"),
        SavedSource {
            started: Some((1_700_000_001, 78)),
            counters: vec![(4, 11, 0)],
        }
    );
    assert_eq!(
        claim("10.0.0.3", "xrootd").counters,
        vec![(1, 62_980_717, 0)]
    );
    assert_eq!(claim("10.0.0.4", "xrootd").counters, vec![(1, 400, 5)]);
    assert_eq!(skipped.lines, 8);
    assert_eq!(
        skipped.to_string(),
        "8 lines skipped: \
         line 4: offset \"-3\": negative; \
         line 5: reading \"18446744073709551615\": 2^63 or more (decades of 100 Gb/s); \
         line 7: offset \"99999999999999999999\": above u64; \
         line 9: not an S line (S, ip, program, tos, pid) or a C line (C, key, reading, offset); \
         line 10: not an IP address: \"not-an-ip\" (its 2 C lines skipped with it) \
         (and 1 more)"
    );
}

#[test]
fn the_same_source_or_counter_twice_keeps_the_first() {
    let text = "S\t10.0.0.1\txrootd\t1\t2\n\
        C\t0000000000000001\t5\t6\n\
        C\t0000000000000001\t7\t8\n\
        S\t10.0.0.1\txrootd\t3\t4\n\
        C\t0000000000000002\t5\t6\n\
        C\t0000000000000009\t1\t1\n";
    let read = read_entries(text, 2, NOW);
    assert_eq!(
        read.entries,
        vec![SavedEntry {
            ip: ip("10.0.0.1"),
            program: "xrootd".into(),
            source: SavedSource {
                started: Some((1, 2)),
                counters: vec![(1, 5, 6)],
            },
        }]
    );
    assert_eq!(read.skipped.lines, 4);
    assert_eq!(
        read.skipped.first,
        vec![
            (4, Bad::DuplicateCounter(1), 0),
            (5, Bad::DuplicateSource(2), 2),
        ]
    );
}

#[test]
fn one_entry_reads_back_as_written() {
    let entry = SavedEntry {
        ip: ip("2001:db8::7"),
        program: "xrootd anon".into(),
        source: SavedSource {
            started: Some((1_700_000_000, 4_194_304)),
            counters: vec![(u64::MAX, MAX_COUNTER - 1, 0), (0, 1, MAX_COUNTER - 1)],
        },
    };
    let mut text = String::new();
    entry.write(&mut text);
    assert_eq!(
        text,
        "S\t2001:db8::7\txrootd anon\t1700000000\t4194304\n\
         C\tffffffffffffffff\t9223372036854775807\t0\n\
         C\t0000000000000000\t1\t9223372036854775807\n"
    );
    assert_eq!(parse_entry(&text, NOW), Ok(entry.clone()));
    // Cut off, two entries, none, a bad line: the first fault, by line.
    assert_eq!(
        parse_entry(&text[..text.len() - 1], NOW),
        Err((3, Bad::CutOff))
    );
    let two = format!("{text}S\t10.0.0.1\tcmsd\t1\t1\n");
    assert_eq!(parse_entry(&two, NOW), Err((4, Bad::NotOneEntry)));
    assert_eq!(parse_entry("", NOW), Err((1, Bad::NotOneEntry)));
    assert_eq!(
        parse_entry("C\t0000000000000001\t1\t1\n", NOW),
        Err((1, Bad::Orphan))
    );
}

/// Whatever program name the mapper makes of a record's `pgm` and `ins`
/// is read back as written.
#[test]
fn every_program_the_mapper_names_reads_back() {
    use crate::mapping::HeaderParts;
    let long = "p".repeat(100);
    let names = [
        None,
        Some(""),
        Some("anon"),
        Some("xrootd"),
        Some("a b"),
        Some("x\ty\nz"),
        Some("caf\u{e9}.d/e"),
        Some(long.as_str()),
    ];
    for pgm in names {
        for ins in names {
            let mut program = String::new();
            HeaderParts::new(pgm, ins, None).write_program(&mut program);
            let mut line = String::new();
            write_source(&mut line, ip("10.0.0.1"), &program, Some((1, 2)));
            let read = parse_line(line.trim_end_matches('\n'), false, NOW);
            assert!(
                matches!(read, Ok(Line::Source { program: p, .. }) if p == program),
                "{pgm:?} {ins:?} -> {program:?}: {read:?}"
            );
        }
    }
}

/// A source evicted (and its state kept) after its engine handed in a part
/// that still holds it is written once, as kept at the eviction.
#[test]
fn an_evicted_source_is_saved_once_as_kept() {
    let state = SavedState::default();
    let mut part = String::new();
    write_source(&mut part, ip("10.0.0.1"), "xrootd", Some((1, 2)));
    write_counter(&mut part, 1, 100, 0);
    write_source(&mut part, ip("10.0.0.2"), "xrootd", Some((1, 3)));
    write_counter(&mut part, 1, 200, 0);
    state.hand_in(0, part);
    let newer = SavedSource {
        started: Some((1, 2)),
        counters: vec![(1, 150, 0)],
    };
    assert!(state.park(ip("10.0.0.1"), "xrootd", newer, 10));
    assert_eq!(
        state.to_text(),
        "xrd2ganglia-state 1\n\
         S\t10.0.0.1\txrootd\t1\t2\n\
         C\t0000000000000001\t150\t0\n\
         S\t10.0.0.2\txrootd\t1\t3\n\
         C\t0000000000000001\t200\t0\n"
    );
    let (read, skipped) = SavedState::read(&state.to_text(), NOW).unwrap();
    assert_eq!((read.unclaimed(), skipped.lines), (2, 0));
}

/// Lines a state file may hold, good and bad.
fn state_line() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let number = prop_oneof![
        12 => (0u64..5_000_000).prop_map(|n| n.to_string()),
        1 => Just("-3".to_string()),
        1 => Just("9223372036854775807".to_string()),
        1 => Just("9223372036854775808".to_string()),
        1 => Just("18446744073709551616".to_string()),
        1 => Just("4194305".to_string()),
        1 => Just(String::new()),
        1 => "[0-9+-]{1,22}",
    ];
    let ip = prop_oneof![
        3 => Just("10.0.0.1".to_string()),
        3 => Just("10.0.0.2".to_string()),
        3 => Just("::1".to_string()),
        1 => Just("nope".to_string()),
    ];
    let program = prop_oneof![
        3 => Just("xrootd".to_string()),
        3 => Just("cmsd".to_string()),
        3 => Just("xrootd cache".to_string()),
        1 => Just(String::new()),
        1 => "[ -~]{0,8}",
    ];
    let key = prop_oneof![
        8 => (0u64..4).prop_map(|k| format!("{k:016x}")),
        1 => "[0-9a-gA-G+]{0,18}",
    ];
    prop_oneof![
        3 => (ip, program, number.clone(), number.clone())
            .prop_map(|(i, p, t, d)| format!("S\t{i}\t{p}\t{t}\t{d}")),
        6 => (key, number.clone(), number).prop_map(|(k, r, o)| format!("C\t{k}\t{r}\t{o}")),
        1 => Just(String::new()),
        1 => "[ -~\t\u{80}-\u{10ffff}]{0,30}",
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 500, ..Default::default() })]

    /// Any text of lines: every line is kept or counted as skipped, never
    /// a panic; and what is kept, written again, reads back the same with
    /// nothing skipped.
    #[test]
    fn every_line_is_kept_or_skipped_and_what_is_kept_reads_back(
        lines in proptest::collection::vec(state_line(), 0..30),
        cut in proptest::bool::ANY,
    ) {
        let mut text = lines.join("\n");
        if !cut && !text.is_empty() {
            text.push('\n');
        }
        let read = read_entries(&text, 1, NOW);
        let lines_in = text.split('\n').filter(|l| !l.is_empty()).count();
        let kept: usize = read.entries.iter().map(|e| 1 + e.source.counters.len()).sum();
        proptest::prop_assert_eq!(kept + read.skipped.lines, lines_in, "{:?}", read);
        let mut again = String::new();
        for e in &read.entries {
            e.write(&mut again);
        }
        let back = read_entries(&again, 1, NOW);
        proptest::prop_assert_eq!(back.skipped.lines, 0);
        proptest::prop_assert_eq!(back.entries, read.entries);
    }
}
