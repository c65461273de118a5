use super::*;
use crate::mapping::{DEFAULT_NAME_TEMPLATE, Glob, MappedRecord, Mapper};
use crate::summary::SummaryParser;

const RECORDS: &[&str] = &[
    include_str!("../../tests/data/records/ds_loaded.xml"),
    include_str!("../../tests/data/records/mgr_cmsd.xml"),
    include_str!("../../tests/data/records/mgr_xrootd.xml"),
    include_str!("../../tests/data/records/pfc_loaded.xml"),
    include_str!("../../tests/data/records/rmc_loaded.xml"),
    include_str!("../../tests/data/records/spaces.xml"),
    include_str!("../../tests/data/records/srv_cmsd.xml"),
    include_str!("../../tests/data/records/srv_xrootd.xml"),
];
/// A real XCache's record and a datagram of its g-stream, of one run:
/// its XCache metrics come from the gateway's engine.
const XCACHE: (&str, &[u8]) = (
    include_str!("../../tests/data/gstream/pfc_summary.xml"),
    include_bytes!("../../tests/data/gstream/pfc_1.bin"),
);
/// The `-n` names the real records were taken with.
const INSTANCES: &[&str] = &["ds", "mgr", "pfc", "pfcA", "rmc", "spaces", "srv"];

fn site(instances: &[&str]) -> Site {
    Site {
        naming: NameTemplate::parse(DEFAULT_NAME_TEMPLATE).unwrap(),
        filter: VarFilter::default(),
        instances: instances.iter().map(|s| s.to_string()).collect(),
        site: None,
        cluster: "XRootD".into(),
        keep_standard_reports: false,
        every_cluster: false,
    }
}

/// Every metric name the default mapping gives the real records, with
/// their instance names or (`anon`) as if started without -n.
fn mapped_names(anon: bool) -> Vec<String> {
    let mut names = Vec::new();
    let mut parser = SummaryParser::new();
    let mut mapper = Mapper::new(
        NameTemplate::parse(DEFAULT_NAME_TEMPLATE).unwrap(),
        NameTemplate::parse(crate::mapping::DEFAULT_GROUP_TEMPLATE).unwrap(),
    );
    let mut out = MappedRecord::default();
    for text in RECORDS {
        for line in text.lines().filter(|l| !l.is_empty()) {
            let line = if anon {
                let ins = line
                    .split(" ins=\"")
                    .nth(1)
                    .and_then(|r| r.split('"').next());
                line.replace(&format!(" ins=\"{}\"", ins.unwrap()), " ins=\"anon\"")
            } else {
                line.to_string()
            };
            let record = parser.parse(line.as_bytes()).unwrap();
            mapper.map(&record, "10.0.0.1".parse().unwrap(), &mut out);
            names.extend(out.metrics().map(|m| m.name.to_string()));
        }
    }
    names.extend(xcache_names(anon));
    names
}

/// The metric names the gateway's engine sends for [`XCACHE`]'s
/// g-stream, as named for its instance or (`anon`) without -n.
fn xcache_names(anon: bool) -> Vec<String> {
    use crate::config::{FileConfig, Overrides, validate};
    use crate::events::{Counters, Events};
    let file = FileConfig::parse("", std::path::Path::new("t")).unwrap();
    let overrides = Overrides {
        send: vec!["127.0.0.1:9".into()],
        ..Default::default()
    };
    let settings = validate(file, "test".into(), &overrides).unwrap();
    let now = std::time::Instant::now();
    let mut engine = crate::engine::Engine::new(std::sync::Arc::new(settings), now);
    let counters = Counters::default();
    let mut events = Events::new(&counters, std::time::Duration::from_secs(60));
    let record = if anon {
        XCACHE.0.replace(" ins=\"pfcA\"", " ins=\"anon\"")
    } else {
        XCACHE.0.to_string()
    };
    let from = "10.0.0.1:1".parse().unwrap();
    engine.datagram(record.as_bytes(), from, now, &mut events);
    engine.datagram(XCACHE.1, from, now, &mut events);
    let names: Vec<String> = engine
        .packets()
        .filter_map(|p| match crate::ganglia::xdr::decode(p) {
            Ok(crate::ganglia::xdr::Packet::Value { id, .. }) => Some(id.name.into_owned()),
            _ => None,
        })
        .collect();
    assert_eq!(names.len(), 4, "{names:?}");
    names
}

fn report(files: &[File], name: &str) -> serde_json::Value {
    let f = files.iter().find(|f| f.path == name).unwrap();
    serde_json::from_str(&f.text).unwrap()
}

/// ganglia-web cuts a medium graph's title past about 47 characters, of
/// which `XRootD Cluster ` and ` last custom` take 27.
#[test]
fn titles_fit_ganglia_webs_medium_graph() {
    let titles = REPORTS
        .iter()
        .map(|r| r.title)
        .chain(LIST_REPORTS.iter().map(|r| r.title));
    for t in titles {
        assert!(t.len() <= 20, "{t:?}");
    }
}

#[test]
fn every_series_is_a_catalog_variable() {
    for r in REPORTS {
        for s in r.series {
            let spec = catalog::lookup(s.var).unwrap_or_else(|| panic!("{}: {}", r.key, s.var));
            assert!(!spec.units.is_empty(), "{}", s.var);
        }
    }
    for r in LIST_REPORTS {
        for f in r.fields {
            assert!(catalog::lookup(&f.catalog_name()).is_some(), "{f:?}");
            // The detailed stream's lists are keyed by the names it
            // counts under (no key field in a record).
            assert!(
                catalog::list_key(f.list).is_some() || catalog::is_from_detailed(f.list),
                "{f:?}"
            );
        }
    }
}

/// Each series of each report names a metric the real records produce,
/// for the shipped (anon) reports and for reports of the records' own
/// instance names; each list report finds entries of the records.
#[test]
fn every_report_metric_is_produced_by_real_records() {
    for (instances, anon) in [(&["anon"][..], true), (INSTANCES, false)] {
        let produced = mapped_names(anon);
        let site = site(instances);
        let files = generate(&site).unwrap();
        let names = Names::new(&site).unwrap();
        for r in REPORTS {
            // A JSON report's series, or a PHP report's rows (the metric first).
            let series: Vec<String> = if r.legend.is_none() {
                let json = report(&files, &format!("graph.d/{}.json", names.report(r.key)));
                json["series"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s["metric"].as_str().unwrap().to_string())
                    .collect()
            } else {
                let path = format!("graph.d/{}.php", names.report(r.key));
                let php = &files.iter().find(|f| f.path == path).unwrap().text;
                php.lines()
                    .filter_map(|l| l.trim().strip_prefix("array('"))
                    .filter_map(|l| l.split('\'').next())
                    .filter(|m| m.contains('.'))
                    .map(str::to_string)
                    .collect()
            };
            assert_eq!(
                series.len(),
                r.series
                    .iter()
                    .map(|s| names.instances(s.pgm).count())
                    .sum::<usize>()
            );
            for s in r.series {
                let hit = names
                    .instances(s.pgm)
                    .map(|h| names.metric(h, &s.name_var()))
                    .find(|m| produced.contains(m) && series.contains(m));
                assert!(
                    hit.is_some(),
                    "{}: {:?} {} from no record",
                    r.key,
                    s.pgm,
                    s.var
                );
            }
        }
        // The detailed stream's reports: their metrics come from no
        // summary record; engine::tests::detailed holds their names to
        // the real capture (tests/data/detailed).
        for r in LIST_REPORTS
            .iter()
            .filter(|r| !r.fields.iter().all(|f| catalog::is_from_detailed(f.list)))
        {
            let php = &files
                .iter()
                .find(|f| f.path == format!("graph.d/{}.php", names.report(r.key)))
                .unwrap()
                .text;
            for f in r.fields {
                let found = names.instances(f.pgm).any(|h| {
                    let pattern = names.metric(h, &format!("{}.*.{}", f.list, f.field));
                    let (prefix, suffix) = pattern.split_once('*').unwrap();
                    assert!(
                        php.contains(&format!("array('{prefix}', '{suffix}',")),
                        "{php}"
                    );
                    produced.iter().any(|m| {
                        m.starts_with(prefix)
                            && m.ends_with(suffix)
                            && m.len() > prefix.len() + suffix.len()
                    })
                });
                assert!(found, "{}: {f:?} from no record", r.key);
            }
        }
    }
}

#[test]
fn anon_names_drop_the_instance() {
    let files = generate(&site(&["anon"])).unwrap();
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "graph.d/xrootd_throughput_report.json",
            "graph.d/xrootd_connections_report.php",
            "graph.d/xrootd_operations_report.json",
            "graph.d/xrootd_problems_report.json",
            "graph.d/xrootd_scheduler_report.json",
            "graph.d/xrootd_selections_report.json",
            "graph.d/xrootd_xcache_report.json",
            "graph.d/xrootd_cache_reads_report.json",
            "graph.d/xrootd_cache_bytes_report.json",
            "graph.d/xrootd_cpu_report.json",
            "graph.d/xrootd_space_report.php",
            "graph.d/xrootd_vo_bytes_report.php",
            "graph.d/xrootd_protocol_bytes_report.php",
            "graph.d/xrootd_connections_per_server_report.php",
            "conf/view_xrootd.json",
            "conf/cluster_XRootD.json",
        ]
    );
    let t = report(&files, "graph.d/xrootd_throughput_report.json");
    assert_eq!(t["report_name"], "xrootd_throughput_report");
    assert_eq!(t["vertical_label"], "bytes/s");
    assert_eq!(t["series"][0]["metric"], "xrootd.link.in");
    assert_eq!(t["series"][0]["label"], "in");
    assert_eq!(t["series"][1]["metric"], "xrootd.link.out");
    let s = report(&files, "graph.d/xrootd_scheduler_report.json");
    assert_eq!(s["series"][3]["metric"], "cmsd.sched.threads");
    assert_eq!(s["series"][3]["label"], "cmsd threads");
    assert_eq!(s["vertical_label"], "threads, jobs");
    let c = report(&files, "conf/cluster_XRootD.json");
    assert_eq!(c["excluded_reports"][0], "load_report");
    assert_eq!(c["included_reports"][10], "xrootd_space_report");
}

#[test]
fn instance_names_tag_reports_and_labels() {
    let mut s = site(&["ds", "pfc-2"]);
    s.cluster = "My Site".into();
    s.keep_standard_reports = true;
    let files = generate(&s).unwrap();
    let t = report(&files, "graph.d/xrootd_ds_pfc_2_throughput_report.json");
    let metrics: Vec<(&str, &str)> = t["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["metric"].as_str().unwrap(), s["label"].as_str().unwrap()))
        .collect();
    assert_eq!(
        metrics,
        [
            ("xrootd.ds.link.in", "ds in"),
            ("xrootd.ds.link.out", "ds out"),
            ("xrootd.pfc-2.link.in", "pfc-2 in"),
            ("xrootd.pfc-2.link.out", "pfc-2 out"),
        ]
    );
    let php = &files[10];
    assert_eq!(php.path, "graph.d/xrootd_ds_pfc_2_space_report.php");
    assert!(
        php.text
            .contains("function graph_xrootd_ds_pfc_2_space_report(&$rrdtool_graph)")
    );
    assert!(
        php.text
            .contains("array('xrootd.pfc-2.oss.space.', '.free', 'pfc-2 space', false),")
    );
    let v = report(&files, "conf/view_xrootd_ds_pfc_2.json");
    assert_eq!(v["view_name"], "xrootd_ds_pfc_2");
    assert_eq!(v["items"][0]["cluster"], "My Site");
    assert_eq!(
        v["items"][13]["metric_regex"][0]["regex"],
        r"^(xrootd\.ds\.link\.out|xrootd\.pfc-2\.link\.out)$"
    );
    let c = report(&files, "conf/cluster_My_Site.json");
    assert_eq!(c["excluded_reports"], serde_json::json!([]));
}

#[test]
fn a_site_template_needs_the_site() {
    let mut s = site(&["anon"]);
    s.naming = NameTemplate::parse("{site}.{pgm}.{var}").unwrap();
    assert!(generate(&s).unwrap_err().contains("give --site"));
    s.site = Some("T2_X".into());
    let files = generate(&s).unwrap();
    assert_eq!(
        report(&files, "graph.d/xrootd_throughput_report.json")["series"][0]["metric"],
        "T2_X.xrootd.link.in"
    );
}

#[test]
fn refuses_what_cannot_work() {
    let mut s = site(&["ds", "ds"]);
    assert!(generate(&s).unwrap_err().contains("given twice"));
    s.instances.clear();
    assert!(generate(&s).unwrap_err().contains("--instance"));
    s = site(&["anon"]);
    s.cluster = "a/b".into();
    assert!(generate(&s).unwrap_err().contains("cluster name"));
    // A cluster the gateway can never publish (issue 42: the rule of
    // `ganglia/path_name.rs`).
    for bad in [" ", "..", "__SummaryInfo__"] {
        s.cluster = bad.into();
        let e = generate(&s).unwrap_err();
        assert!(
            e.starts_with(&format!("cluster name {bad:?}: must"))
                || e.contains("__SummaryInfo__ is"),
            "{e}"
        );
    }
    // A report may not show what the config leaves out.
    s = site(&["anon"]);
    s.filter = VarFilter {
        include: Vec::new(),
        exclude: vec![Glob::parse("link.*").unwrap()],
    };
    assert_eq!(
        generate(&s).unwrap_err(),
        "the throughput report shows link.in, which the config's exclude leaves out: add it to include"
    );
    s.filter.include = vec![
        Glob::parse("link.in").unwrap(),
        Glob::parse("link.?u?").unwrap(),
    ];
    assert_eq!(
        generate(&s).unwrap_err(),
        "the connections report shows link.tot, which the config's exclude leaves out: add it to include"
    );
    s.filter.include.push(Glob::parse("link.tot").unwrap());
    assert!(generate(&s).is_ok());
}

/// A gateway of many clusters: the reports go on every cluster's pages
/// (conf/default.json), with no file per cluster.
#[test]
fn every_cluster_gets_the_reports_from_default_json() {
    let mut s = site(&["anon"]);
    s.every_cluster = true;
    let files = generate(&s).unwrap();
    assert!(files.iter().all(|f| !f.path.starts_with("conf/cluster_")));
    let d = report(&files, "conf/default.json");
    let included: Vec<&str> = d["included_reports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        included.contains(&"xrootd_throughput_report"),
        "{included:?}"
    );
    assert!(STANDARD_REPORTS.iter().all(|r| !included.contains(r)));
    assert_eq!(d["excluded_reports"].as_array().unwrap().len(), 0);
    s.keep_standard_reports = true;
    let d = report(&generate(&s).unwrap(), "conf/default.json");
    let included = d["included_reports"].as_array().unwrap();
    for r in STANDARD_REPORTS {
        assert!(included.iter().any(|v| v == r), "{r}");
    }
}

/// The view's per-server graphs leave out the gateway's own host: each
/// aggregate graph has a host_regex, and the per-server PHP report is
/// written beside the view. That they match the servers and not
/// `xrd2ganglia@NAME`, as the real php runs them (ganglia-web's
/// preg_match, and the report over RRDs), is tests/gmetad/gweb.rs's
/// `per_server_graphs_leave_out_the_gateways_own_host` (php is a
/// program: the full tier).
#[test]
fn per_server_graphs_leave_out_the_gateways_own_host() {
    let files = generate(&site(&["anon"])).unwrap();
    let view = report(&files, "conf/view_xrootd.json");
    let mut aggregates = 0;
    let mut php_reports = 0;
    for item in view["items"].as_array().unwrap() {
        let graph = item["graph"].as_str().unwrap_or("");
        if graph.ends_with("_per_server_report") {
            php_reports += 1;
            let path = format!("graph.d/{graph}.php");
            assert!(files.iter().any(|f| f.path == path), "{path}");
            continue;
        }
        let Some(regex) = item["host_regex"][0]["regex"].as_str() else {
            continue;
        };
        assert!(!regex.is_empty(), "{graph}");
        aggregates += 1;
    }
    // Four per-server graphs: the counts' a PHP report of ours, for its
    // legend (connections), the others ganglia-web's aggregate graphs.
    assert_eq!((aggregates, php_reports), (3, 1));
}
