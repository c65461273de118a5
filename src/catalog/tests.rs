use super::*;
use crate::ganglia::sanitize;

// The release table (`tests/data/xrootd-releases.tsv`) and its reader,
// shared with the integration tests through the test kit.
use xrd2ganglia_testkit::releases;

/// Every variable documented in the XRootD System Monitoring Reference,
/// section 2.2 (2018, `shared/reference/000_*`), as listed in its tables and
/// XML schemas, plus the 2009 edition's (`003_*`) end-tag `toe`, less what
/// no release sends ([`NO_RELEASE_SENDS`]).
/// (`host` is mpxstats' -s sender, not part of a record.)
const DOCUMENTED: &[&str] = &[
    "ins",
    "pgm",
    "pid",
    "site",
    "src",
    "tod",
    "tos",
    "ver",
    "toe",
    "buff.adj",
    "buff.buffs",
    "buff.mem",
    "buff.reqs",
    "cmsm.role",
    "cmsm.sel.t",
    "cmsm.sel.r",
    "cmsm.sel.w",
    "cmsm.node",
    "cmsm.node.i.host",
    "cmsm.node.i.role",
    "cmsm.node.i.run",
    "cmsm.node.i.ref.r",
    "cmsm.node.i.ref.w",
    "cmsm.node.i.shr",
    "cmsm.node.i.shr.use",
    "cmsm.frq.add",
    "cmsm.frq.add.d",
    "cmsm.frq.rsp",
    "cmsm.frq.rsp.m",
    "cmsm.frq.lf",
    "cmsm.frq.ls",
    "cmsm.frq.rf",
    "cmsm.frq.rs",
    "info.host",
    "info.name",
    "info.port",
    "link.ctime",
    "link.in",
    "link.maxn",
    "link.num",
    "link.out",
    "link.sfps",
    "link.stall",
    "link.tmo",
    "link.tot",
    "ofs.bxq",
    "ofs.dly",
    "ofs.err",
    "ofs.han",
    "ofs.opp",
    "ofs.opr",
    "ofs.opw",
    "ofs.rdr",
    "ofs.rep",
    "ofs.role",
    "ofs.ser",
    "ofs.sok",
    "ofs.ups",
    "ofs.tpc.grnt",
    "ofs.tpc.deny",
    "ofs.tpc.err",
    "ofs.tpc.exp",
    "oss.paths",
    "oss.paths.i.free",
    "oss.paths.i.ifr",
    "oss.paths.i.ino",
    "oss.paths.i.lp",
    "oss.paths.i.rp",
    "oss.paths.i.tot",
    "oss.space",
    "oss.space.i.free",
    "oss.space.i.fsn",
    "oss.space.i.maxf",
    "oss.space.i.name",
    "oss.space.i.qta",
    "oss.space.i.tot",
    "oss.space.i.usg",
    "poll.att",
    "poll.en",
    "poll.ev",
    "poll.int",
    "proc.sys.s",
    "proc.sys.u",
    "proc.usr.s",
    "proc.usr.u",
    "rootd.num",
    "sched.idle",
    "sched.inq",
    "sched.jobs",
    "sched.maxinq",
    "sched.tcr",
    "sched.tde",
    "sched.threads",
    "sched.tlimr",
    "sgen.as",
    "sgen.et",
    "sgen.toe",
    "xrootd.num",
    "xrootd.aio.max",
    "xrootd.aio.num",
    "xrootd.aio.rej",
    "xrootd.dly",
    "xrootd.err",
    "xrootd.ops.getf",
    "xrootd.ops.misc",
    "xrootd.ops.open",
    "xrootd.ops.pr",
    "xrootd.ops.putf",
    "xrootd.ops.rf",
    "xrootd.ops.rd",
    "xrootd.ops.rs",
    "xrootd.ops.rv",
    "xrootd.ops.sync",
    "xrootd.ops.wr",
    "xrootd.rdr",
    "xrootd.lgn.num",
    "xrootd.lgn.af",
    "xrootd.lgn.au",
    "xrootd.lgn.ua",
];

/// In the 2018 reference but sent by no release (the release table's
/// header says why): `<prr>` is a typo for `<err>` in its format example;
/// cmsd sends `cms` or `cmsm`, never `cmsc` or `cmss`.
const NO_RELEASE_SENDS: &[&str] = &["xrootd.prr", "cmsc.role", "cmss.role"];

#[test]
fn every_documented_variable_is_in_the_catalog() {
    let missing: Vec<_> = DOCUMENTED.iter().filter(|v| lookup(v).is_none()).collect();
    assert!(missing.is_empty(), "not in the catalog: {missing:?}");
}

#[test]
fn what_no_release_sends_is_neither_catalogued_nor_in_the_table() {
    let table = releases::load();
    for var in NO_RELEASE_SENDS {
        assert!(lookup(var).is_none(), "{var} is catalogued");
        assert!(
            table.iter().all(|r| r.variable != *var),
            "{var} is in the release table"
        );
    }
}

/// The width a counter kind reads its field at.
fn counter_bits(kind: Kind) -> Option<u8> {
    match kind {
        Kind::Counter8 => Some(8),
        Kind::Counter32 => Some(32),
        Kind::Counter64 => Some(64),
        _ => None,
    }
}

/// The catalog against the release table, built from XRootD's source
/// (never from this crate): every entry is in it (or derived, or from the
/// g-stream); counter or not, the counter's width, the releases of an
/// entry no current release sends and a field's older width all agree.
#[test]
fn catalog_holds_to_the_release_table() {
    let table = releases::load();
    let newest = releases::newest(&table);
    let mut wrong = Vec::new();
    for spec in CATALOG {
        let var = spec.var;
        if is_derived(var) || is_from_gstream(var) || is_from_detailed(var) {
            assert!(
                table.iter().all(|r| r.variable != var),
                "{var}: made by the gateway, yet in the release table"
            );
            continue;
        }
        let Some(row) = newest.iter().find(|r| r.variable == var) else {
            wrong.push(format!("{var}: no release sends it"));
            continue;
        };
        if spec.kind.is_counter() != row.cumulative {
            wrong.push(format!(
                "{var}: {:?}, but the table says cumulative {} ({})",
                spec.kind, row.cumulative, row.source
            ));
        }
        if row.cumulative && counter_bits(spec.kind) != row.width {
            wrong.push(format!(
                "{var}: {:?}, but the field is {:?} bits ({})",
                spec.kind, row.width, row.source
            ));
        }
        if row.width.is_none() && spec.kind != Kind::Text {
            wrong.push(format!("{var}: {:?}, but xrootd sends text", spec.kind));
        }
        let until = (!row.is_current()).then_some(row.last_text.as_str());
        if spec.until != until {
            wrong.push(format!(
                "{var}: until {:?}, but the table's last release is {}",
                spec.until, row.last_text
            ));
        }
        // The newest older range whose field had another width.
        let older = table
            .iter()
            .filter(|r| r.variable == var && r.last < row.first && r.width != row.width)
            .max_by(|a, b| a.last.cmp(&b.last))
            .map(|r| (r.last_text.as_str(), r.width.unwrap_or(0)));
        if spec.old_width != older {
            wrong.push(format!(
                "{var}: old_width {:?}, but the table says {older:?}",
                spec.old_width
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every variable a current release sends is catalogued (what only old
/// releases sent may be left out; the table still lists it).
#[test]
fn every_variable_current_releases_send_is_catalogued() {
    let table = releases::load();
    let missing: Vec<_> = table
        .iter()
        .filter(|r| r.is_current() && lookup(&r.variable).is_none())
        .map(|r| format!("{} ({})", r.variable, r.source))
        .collect();
    assert!(missing.is_empty(), "not catalogued: {missing:?}");
}

/// The table against real records of xrootd 5.5.3 and 6.1.0 (the
/// captures in `tests/data`): each names only variables the table says
/// its release sends, and each section in it has every variable the table
/// says that release sends there unconditionally (list fields when the
/// list has entries). The parser only reads the names.
#[test]
fn real_records_match_the_release_table() {
    let table = releases::load();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut files = Vec::new();
    for sub in ["records", "records-5.9"] {
        for e in std::fs::read_dir(dir.join(sub)).unwrap() {
            let path = e.unwrap().path();
            if matches!(
                path.extension().and_then(|x| x.to_str()),
                Some("xml" | "json")
            ) {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 30, "{files:?}");
    let mut parser = crate::summary::SummaryParser::new();
    for path in &files {
        let datagram = std::fs::read(path).unwrap();
        let record = parser.parse(&datagram).unwrap();
        let ver = record.header().ver.unwrap();
        let release = ver.strip_prefix('v').unwrap();
        let mut names = std::collections::BTreeSet::new();
        for v in record.vars() {
            names.insert(match v.entry {
                Some(e) if !e.field.is_empty() => format!("{}.i.{}", e.list, e.field),
                // An entry's own text: none in these records.
                Some(e) => panic!("{}: text of entry {}", path.display(), e.list),
                None => v.name.to_string(),
            });
        }
        let sends: Vec<_> = releases::sent_by(&table, release).collect();
        for name in &names {
            assert!(
                sends.iter().any(|r| r.variable == *name),
                "{}: {name} is not sent by {release}, says the table",
                path.display()
            );
        }
        let sections: std::collections::BTreeSet<_> = sends
            .iter()
            .filter(|r| names.contains(&r.variable))
            .map(|r| r.section.as_str())
            .collect();
        for r in &sends {
            let expected = sections.contains(r.section.as_str())
                && r.when.is_none()
                && r.list_entry().is_none_or(|(list, _)| {
                    names.iter().any(|n| n.starts_with(&format!("{list}.i.")))
                });
            assert!(
                !expected || names.contains(&r.variable),
                "{}: {release} sends {} ({}), says the table",
                path.display(),
                r.variable,
                r.source
            );
        }
    }
}

#[test]
fn catalog_names_are_unique() {
    assert_eq!(INDEX.len(), CATALOG.len(), "a variable is listed twice");
}

#[test]
fn slope_follows_meaning() {
    use Kind::*;
    let expect = [
        ("link.in", Counter64),
        ("xrootd.ops.rd", Counter64),
        ("link.tmo", Counter32),
        ("link.num", Gauge32),
        // High-water marks and resettable counters must not be COUNTERs.
        ("link.maxn", Gauge32),
        ("sched.maxinq", Gauge32),
        ("xrootd.aio.max", Gauge32),
        ("buff.reqs", Gauge32),
        ("cmsm.sel.r", Gauge64),
        ("cmsm.sel.w", Gauge64),
        // Reference arrow is wrong for these.
        ("sched.threads", Gauge32),
        ("proc.usr.u", Gauge32),
        ("proc.sys.u", Gauge32),
        ("ofs.role", Text),
        ("tod", Timestamp),
    ];
    for (var, kind) in expect {
        assert_eq!(lookup(var).map(|s| s.kind), Some(kind), "{var}");
    }
    assert_eq!(Counter32.slope(), Slope::Positive);
    assert_eq!(Counter64.slope(), Slope::Positive);
    assert_eq!(Gauge64.slope(), Slope::Both);
    assert_eq!(Text.slope(), Slope::Zero);
    // Counters are kept continuous past 32 bits (engine/series.rs).
    assert_eq!(
        (
            Counter32.value_type(),
            Counter64.value_type(),
            Gauge32.value_type()
        ),
        ("double", "double", "uint32")
    );
}

#[test]
fn catalog_text_is_safe_for_gmond() {
    for s in CATALOG {
        assert!(sanitize::is_clean_name(s.var), "{}", s.var);
        for t in [s.units, s.title, s.desc] {
            assert!(
                sanitize::is_clean_text(t, sanitize::MAX_TEXT),
                "{}: {t:?}",
                s.var
            );
        }
        assert!(!s.title.is_empty() && !s.desc.is_empty(), "{}", s.var);
        // Rates for counters, since gmetad graphs COUNTERs as rates.
        if s.kind.is_counter() {
            assert!(
                s.units.ends_with("/s"),
                "{} counter units {:?}",
                s.var,
                s.units
            );
        }
    }
}

#[test]
fn list_keys_and_sections() {
    assert_eq!(list_key("oss.paths"), Some("lp"));
    assert_eq!(list_key("oss.space"), Some("name"));
    assert_eq!(list_key("cmsm.node"), Some("host"));
    assert_eq!(list_key("pss.x"), None);
    assert_eq!(section("oss.paths.i.free"), "oss");
    assert_eq!(section("tod"), "info");
}

/// Variables releases send but never fill (or fill wrongly): each left out
/// by the default set, with its reason citing XRootD's source, and listed
/// in docs/metrics.md with that reason; nothing else beyond the report
/// times and CPU halves is left out by default.
/// The catalog's entries left out by default, sorted.
fn left_out() -> Vec<&'static str> {
    let mut left_out: Vec<&str> = CATALOG
        .iter()
        .filter(|s| s.left_out.is_some())
        .map(|s| s.var)
        .collect();
    left_out.sort_unstable();
    left_out
}

#[test]
fn always_zero_upstream_is_left_out_by_default_and_documented() {
    use crate::mapping::{DEFAULT_EXCLUDE, VarFilter};
    // What XRootD's source (v6.1.0) shows, read there, not from the catalog.
    let expected = [
        "xrootd.aio.num",
        "xrootd.aio.max",
        "ofs.ser",
        "poll.int",
        "http_plugin.response.100",
        "cache.pass.cnt",
        "cache.opcl.defero",
        "cache.files.opened",
        "cache.files.closed",
        "cache.files.new",
        "cache.files.del",
        "cache.files.now",
        "cache.files.full",
        "cache.store.used",
        "cache.store.min",
        "cache.store.max",
        "cmsm.frq.lf",
        "cmsm.frq.ls",
        "cmsm.frq.rf",
        "cmsm.frq.rs",
    ];
    let left_out = left_out();
    let mut want = expected.to_vec();
    want.sort_unstable();
    assert_eq!(left_out, want);

    let filter = VarFilter::default();
    let docs =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/metrics.md")).unwrap();
    for spec in CATALOG {
        let excluded = filter.excludes(spec.var, spec.var);
        match spec.left_out {
            Some(why) => {
                assert!(excluded, "{} not left out by default", spec.var);
                // Cites a file and line of XRootD's source.
                assert!(
                    why.contains(".cc:") || why.contains(".hh:") || why.contains(".icc:"),
                    "{}: {why}",
                    spec.var
                );
                let line = docs
                    .lines()
                    .find(|l| l.starts_with(&format!("| `{}` |", spec.var)))
                    .unwrap_or_else(|| panic!("docs/metrics.md has no row for {}", spec.var));
                assert!(
                    line.contains(why),
                    "docs/metrics.md row for {}: {line}",
                    spec.var
                );
            }
            None => assert!(
                !excluded
                    || ["tod", "toe", "sgen.toe"].contains(&spec.var)
                    || spec.var.starts_with("proc."),
                "{} left out by default with no reason",
                spec.var
            ),
        }
    }
    // Every default pattern matches something catalogued.
    for p in DEFAULT_EXCLUDE {
        let g = crate::mapping::Glob::parse(p).unwrap();
        assert!(CATALOG.iter().any(|s| g.matches(s.var)), "{p}");
    }
}

/// The default set leaves out exactly what the release table (read from
/// XRootD's source) notes current releases never fill ("always 0"; on
/// Linux, "0 with epoll") or inflate.
#[test]
fn left_out_by_default_is_what_the_release_table_notes_as_useless() {
    let useless = |note: &str| {
        note.contains("always 0") || note.contains("0 with epoll") || note.contains("inflated")
    };
    let rows = releases::load();
    let mut from_table: Vec<&str> = rows
        .iter()
        .filter(|r| r.is_current() && useless(&r.note))
        .map(|r| r.variable.as_str())
        .collect();
    from_table.sort_unstable();
    from_table.dedup();
    let left_out = left_out();
    assert_eq!(left_out, from_table);
}
