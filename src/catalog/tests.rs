use super::*;
use crate::ganglia::sanitize;

/// Every variable documented in the XRootD System Monitoring Reference,
/// section 2.2 (2018, `shared/reference/000_*`), as listed in its tables and
/// XML schemas, plus the 2009 edition's (`003_*`) end-tag `toe`.
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
    "cmsc.role",
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
    "cmss.role",
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
    "xrootd.prr",
    "xrootd.rdr",
    "xrootd.lgn.num",
    "xrootd.lgn.af",
    "xrootd.lgn.au",
    "xrootd.lgn.ua",
];

#[test]
fn every_documented_variable_is_in_the_catalog() {
    let missing: Vec<_> = DOCUMENTED.iter().filter(|v| lookup(v).is_none()).collect();
    assert!(missing.is_empty(), "not in the catalog: {missing:?}");
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
