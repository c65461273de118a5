//! End to end with real servers: xrootd and cmsd (run as nobody) report to
//! the gateway, xrdcp moves their counters, a real gmond shows the result.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{Capture, Gateway, Gmond, Scratch, Xrootd, free_port};
use xrd2ganglia::catalog::Kind;
use xrd2ganglia::mapping::{
    DEFAULT_GROUP_TEMPLATE, DEFAULT_NAME_TEMPLATE, MappedRecord, Mapper, NameTemplate,
};
use xrd2ganglia::summary::SummaryParser;

const CONFIG: &str =
    "metadata_interval = 2\ndmax = 0\nstats_interval = 0\nself_metrics_interval = 0\n";

fn xrdcp(args: &[&str]) {
    let out = Command::new("xrdcp")
        .args(["-f", "-s"])
        .args(args)
        .output()
        .expect("run xrdcp (xrootd-client)");
    assert!(
        out.status.success(),
        "xrdcp {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Maps a record the way the gateway does; (host name, metric names and values, kinds).
fn expected(datagram: &[u8]) -> (String, Vec<(String, String, Kind)>) {
    let mut parser = SummaryParser::new();
    let record = parser
        .parse(datagram)
        .expect("xrootd sent a record we cannot parse");
    let mut mapper = Mapper::new(
        NameTemplate::parse(DEFAULT_NAME_TEMPLATE).unwrap(),
        NameTemplate::parse(DEFAULT_GROUP_TEMPLATE).unwrap(),
    );
    let mut out = MappedRecord::default();
    mapper.map(&record, "127.0.0.1".parse().unwrap(), &mut out);
    assert_eq!(out.rejected_count, 0, "values rejected: {:?}", out.rejected);
    let metrics = out
        .metrics()
        .map(|m| (m.name.to_string(), m.value.to_string(), m.kind))
        .collect();
    (out.host.name.clone(), metrics)
}

#[test]
fn real_xrootd_and_cmsd_reach_gmond() {
    let gmond = Gmond::start();
    let gw = Gateway::start(gmond.port, CONFIG);
    let capture = Capture::new();
    let root = Scratch::new("xrd");
    for d in ["ds/data", "ds/admin", "mgr/admin", "srv/data", "srv/admin"] {
        std::fs::create_dir_all(root.path().join(d)).unwrap();
    }
    let r = root.path().display().to_string();
    let (ds_port, mgr_port, cms_port, srv_port, srv_cms_port) = (
        free_port(),
        free_port(),
        free_port(),
        free_port(),
        free_port(),
    );
    let report = format!("xrd.report 127.0.0.1:{} every 1s all sync", gw.port);

    // Standalone data server, also reporting to our capture socket.
    let ds = Xrootd::start(
        "xrootd",
        "ds",
        root.path(),
        &format!(
            "all.export /\noss.localroot {r}/ds/data\nall.adminpath {r}/ds/admin\nall.pidpath {r}/ds/admin\nxrd.port {ds_port}\n\
             xrd.report 127.0.0.1:{},127.0.0.1:{} every 1s all sync\nall.sitename TESTSITE\n",
            gw.port, capture.port
        ),
    );
    // Manager pair (same host: must not collide) and a subscribed server.
    let mgr_cfg = format!(
        "all.role manager\nall.manager 127.0.0.1:{cms_port}\nall.export /\nall.adminpath {r}/mgr/admin\nall.pidpath {r}/mgr/admin\n\
         all.sitename TESTSITE\ncms.repstats frq\nif exec xrootd\nxrd.port {mgr_port}\nfi\n{report}\n"
    );
    let _mgr_xrd = Xrootd::start("xrootd", "mgr", root.path(), &mgr_cfg);
    let _mgr_cms = Xrootd::start("cmsd", "mgr", root.path(), &mgr_cfg);
    let srv_cfg = format!(
        "all.role server\nall.manager 127.0.0.1:{cms_port}\nall.export /\noss.localroot {r}/srv/data\nall.adminpath {r}/srv/admin\n\
         all.pidpath {r}/srv/admin\nall.sitename TESTSITE\nif exec xrootd\nxrd.port {srv_port}\nelse\nxrd.port {srv_cms_port}\nfi\n{report}\n"
    );
    let _srv_xrd = Xrootd::start("xrootd", "srv", root.path(), &srv_cfg);
    let _srv_cms = Xrootd::start("cmsd", "srv", root.path(), &srv_cfg);

    // Move the data server's counters: 5 MiB up, and back down.
    let _ = capture.next();
    let file = root.path().join("payload.bin");
    let payload: Vec<u8> = (0..5 * 1024 * 1024u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    std::fs::write(&file, &payload).unwrap();
    let url = format!("root://127.0.0.1:{ds_port}//payload.bin");
    xrdcp(&[file.to_str().unwrap(), &url]);
    xrdcp(&[&url, root.path().join("back.bin").to_str().unwrap()]);
    assert_eq!(
        std::fs::read(root.path().join("back.bin")).unwrap(),
        payload
    );

    // A captured record that shows the transfer.
    let deadline = Instant::now() + Duration::from_secs(20);
    let record = loop {
        let d = capture.next();
        let mut p = SummaryParser::new();
        let r = p.parse(&d).unwrap();
        let moved = r
            .get("link.in")
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|v| v >= 5 << 20)
            && r.get("link.out")
                .and_then(|v| v.parse::<u64>().ok())
                .is_some_and(|v| v >= 5 << 20);
        if moved {
            break d;
        }
        assert!(
            Instant::now() < deadline,
            "ds never reported the transfer; ds log: {}",
            ds.proc.log_text()
        );
    };
    let (host, metrics) = expected(&record);

    // gmond shows every metric of that record. The gateway got the datagram
    // when the capture socket did: wait for its values, not just the names.
    let x = gmond.wait_for(
        Duration::from_secs(15),
        "every metric of the ds record, after the transfer",
        |x| {
            x.hosts.get(&host).is_some_and(|h| {
                metrics
                    .iter()
                    .all(|(name, _, _)| h.metrics.contains_key(name))
                    && ["xrootd.ds.link.in", "xrootd.ds.link.out"].iter().all(|m| {
                        h.metrics
                            .get(*m)
                            .and_then(|m| m.get("VAL").parse::<u64>().ok())
                            .is_some_and(|v| v >= 5 << 20)
                    })
                    // The record's packets are paced: its last ones may
                    // reach gmond a moment after the first.
                    && h.metrics
                        .get("xrootd.ds.xrootd.ops.open")
                        .and_then(|m| m.get("VAL").parse::<u64>().ok())
                        .is_some_and(|v| v >= 1)
            })
        },
    );
    let h = x.host(&host);
    assert_eq!(h.attrs["IP"], "127.0.0.1");
    let numeric = metrics.iter().filter(|(_, _, k)| *k != Kind::Text).count();
    assert!(
        numeric >= 60,
        "only {numeric} numeric metrics in a real ds record"
    );
    for (name, _, kind) in &metrics {
        let m = &h.metrics[name];
        assert_eq!(m.get("TYPE"), kind.value_type(), "{name}");
        assert_eq!(m.get("SLOPE"), kind.slope().as_str(), "{name}");
    }
    let link_in = x.metric(&host, "xrootd.ds.link.in");
    assert!(link_in.get("VAL").parse::<u64>().unwrap() >= 5 << 20);
    assert_eq!(
        (
            link_in.get("TYPE"),
            link_in.get("SLOPE"),
            link_in.get("UNITS")
        ),
        ("double", "positive", "bytes/s")
    );
    assert_eq!(link_in.extra["GROUP"], "xrootd.ds.link");
    assert!(
        x.metric(&host, "xrootd.ds.xrootd.ops.open")
            .get("VAL")
            .parse::<u64>()
            .unwrap()
            >= 1
    );
    assert_eq!(x.metric(&host, "xrootd.ds.site").get("VAL"), "TESTSITE");
    assert_eq!(x.metric(&host, "xrootd.ds.oss.paths").get("VAL"), "1");
    assert!(
        h.metrics
            .keys()
            .any(|k| k.starts_with("xrootd.ds.oss.paths._") && k.ends_with(".free"))
    );

    // The manager's xrootd and cmsd, and the server's, share the host without colliding.
    let x = gmond.wait_for(
        Duration::from_secs(20),
        "manager cmsd with its node list",
        |x| {
            x.hosts.get(&host).is_some_and(|h| {
                ["cmsd.mgr.uptime", "xrootd.mgr.uptime", "cmsd.srv.uptime"]
                    .iter()
                    .all(|m| h.metrics.contains_key(*m))
                    && h.metrics.contains_key("cmsd.mgr.cmsm.sel.t")
                    && h.metrics.contains_key("xrootd.mgr.ofs.role")
                    && h.metrics.contains_key("cmsd.srv.cms.role")
                    && h.metrics
                        .keys()
                        .any(|k| k.starts_with("cmsd.mgr.cmsm.node.") && k.ends_with(".ref.r"))
            })
        },
    );
    assert_eq!(x.metric(&host, "xrootd.mgr.ofs.role").get("VAL"), "manager");
    assert_eq!(x.metric(&host, "cmsd.mgr.cmsm.role").get("VAL"), "M");
    assert_eq!(
        x.metric(&host, "cmsd.mgr.link.num").extra["GROUP"],
        "cmsd.mgr.link"
    );
    assert_ne!(
        x.metric(&host, "cmsd.mgr.proc.cpu.total").extra["TITLE"],
        x.metric(&host, "xrootd.mgr.proc.cpu.total").extra["TITLE"]
    );
    let sel = x.metric(&host, "cmsd.mgr.cmsm.sel.r");
    assert_eq!(
        sel.get("SLOPE"),
        "both",
        "cmsm.sel.r is resummed by cmsd: not a counter"
    );
}
