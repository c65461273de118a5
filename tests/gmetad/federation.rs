//! A federation past one gmetad (docs/clusters.md, "A federation over
//! several gmetads"), end to end with the real daemons: one gateway whose
//! two `[[cluster]]` rules each keep one cluster per site (`name =
//! "{site}"`) and serve them on a port of their own (`xml_listen`); a real
//! gmetad 3.7.2 polling each rule's port (a shard, its own `gridname`); a
//! real top gmetad polling the two shards' `xml_port`s (Ganglia's grid of
//! grids, `scalable on`); ganglia-web on the top and on each shard (the
//! top links to each shard's `authority`). Every expected value is a sum
//! of what the test sent, never read back through our parser.

use xrd2ganglia_testkit as common;

mod gweb;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{
    Gateway, Gmetad, GmetadOf, Polls, Site, clusters_of, free_port, names as set, parse_ganglia,
    read_xml, replay::unix_now,
};
use gweb::ganglia_web_shows_the_federation;

/// Every gmetad's polling interval, which is also its RRDs' step. 2 s, not
/// 1: a gmetad that misses polls for 8 steps (a busy 2-core machine)
/// writes unknown rows, and 16 s of that is far less likely than 8 s.
/// The sums below do not depend on the step: gauges are held constant,
/// and a counter's rows are compared by their integral, which rrdtool
/// keeps whatever whole-second stamps the polls got.
const STEP: u64 = 2;
/// Rounds (one a second) in which the counters grow.
const GROWTH_ROUNDS: u64 = 5;

/// A shard: its gmetad's `gridname` (the top's directory for it), the
/// sites of its rule.
struct Shard {
    grid: &'static str,
    sites: &'static [&'static str],
}

const SHARDS: [Shard; 2] = [
    Shard {
        grid: "East",
        sites: &["SITEA", "SITEB"],
    },
    Shard {
        grid: "West",
        sites: &["SITEC", "SITED"],
    },
];
const TOP: &str = "Federation";

/// (address, host, site); SITEE is in no rule: it is in `cluster_name`,
/// on the gateway's own `xml_listen` only.
const SERVERS: [(&str, &str, &str); 7] = [
    ("127.0.38.1", "a1.example", "SITEA"),
    ("127.0.38.2", "a2.example", "SITEA"),
    ("127.0.38.3", "b1.example", "SITEB"),
    ("127.0.38.4", "c1.example", "SITEC"),
    ("127.0.38.5", "c2.example", "SITEC"),
    ("127.0.38.6", "d1.example", "SITED"),
    ("127.0.38.7", "e1.example", "SITEE"),
];

/// What server `i` sends: open connections (a gauge), bytes in at the
/// start and per growth round (a counter).
fn connections(i: usize) -> u64 {
    10 + i as u64
}
fn bytes_in(i: usize, round: u64) -> u64 {
    1_000_000 * (i as u64 + 1) + 1_000 * (i as u64 + 1) * round
}

/// The shard of server `i`'s site (None: no rule takes it).
fn shard_of(i: usize) -> Option<usize> {
    SHARDS.iter().position(|s| s.sites.contains(&SERVERS[i].2))
}

/// The servers of shard `s` (or of site `site`): their indices.
fn of_shard(s: usize) -> Vec<usize> {
    (0..SERVERS.len())
        .filter(|&i| shard_of(i) == Some(s))
        .collect()
}
fn of_site(site: &str) -> Vec<usize> {
    (0..SERVERS.len())
        .filter(|&i| SERVERS[i].2 == site)
        .collect()
}

/// A real data server's record (srv_xrootd.xml, as xrootd 5.5.3 sent it)
/// as server `i` sends it in growth round `round`: its host, site, the
/// time, anonymous instance (the reports' metric names), its connections
/// and bytes in.
fn record(i: usize, round: u64) -> Vec<u8> {
    let (_, host, site) = SERVERS[i];
    let text = String::from_utf8(common::fixture("srv_xrootd.xml")).unwrap();
    let replace = |text: String, from: &str, to: String| {
        assert!(text.contains(from), "srv_xrootd.xml has no {from:?}");
        text.replacen(from, &to, 1)
    };
    let text = replace(text, "src=\"vm:", format!("src=\"{host}:"));
    let text = replace(text, "site=\"TESTSITE\"", format!("site=\"{site}\""));
    let text = replace(text, "ins=\"srv\"", "ins=\"anon\"".into());
    let text = replace(
        text,
        "tod=\"1795303790\"",
        format!("tod=\"{}\"", unix_now()),
    );
    let text = replace(
        text,
        "<stats id=\"link\"><num>0</num>",
        format!("<stats id=\"link\"><num>{}</num>", connections(i)),
    );
    let text = replace(
        text,
        "<in>5248682</in>",
        format!("<in>{}</in>", bytes_in(i, round)),
    );
    text.trim_end().as_bytes().to_vec()
}

/// A top gmetad's sums of `metric` for child grid `grid` (its `METRICS`
/// element: SUM, NUM), from the top's own XML.
fn grid_sums(top_xml: &str, grid: &str, metric: &str) -> Option<(f64, f64)> {
    let doc = parse_ganglia(top_xml);
    let g = doc
        .descendants()
        .find(|n| n.has_tag_name("GRID") && n.attribute("NAME") == Some(grid))?;
    let m = g
        .children()
        .find(|n| n.has_tag_name("METRICS") && n.attribute("NAME") == Some(metric))?;
    Some((
        m.attribute("SUM")?.parse().ok()?,
        m.attribute("NUM")?.parse().ok()?,
    ))
}

/// The names in directory `dir`.
fn names_in(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// A gmetad's rrd_rootdir: each cluster directory with its host
/// directories (gmetad's summaries left out).
fn rrd_tree(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    names_in(root)
        .into_iter()
        .filter(|c| c != "__SummaryInfo__")
        .map(|c| {
            let mut hosts = names_in(&root.join(&c));
            hosts.remove("__SummaryInfo__");
            (c, hosts)
        })
        .collect()
}

/// The daemons of the federation, each started by the test and stopped
/// when dropped.
struct Federation {
    /// The gateway; the shards' gmetads (SHARDS' order), then the top's.
    site: Site,
    /// Each rule's own port, in SHARDS' order.
    rule_ports: [u16; 2],
    /// The ports ganglia-web serves on for each shard and the top: each
    /// gmetad's `authority`, named in its gmetad.conf.
    gweb_ports: [u16; 3],
}

/// The gateway's config: what a site writes (docs/clusters.md).
fn gateway_config(rule_ports: [u16; 2]) -> String {
    let mut config =
        String::from("stats_interval = 0\nself_metrics_interval = 0\nlog_interval = 1\n");
    for (shard, port) in SHARDS.iter().zip(rule_ports) {
        let sites: Vec<String> = shard.sites.iter().map(|s| format!("{s:?}")).collect();
        config.push_str(&format!(
            "[[cluster]]\nname = \"{{site}}\"\nsites = [{}]\nxml_listen = [\"127.0.0.1:{port}\"]\n",
            sites.join(", ")
        ));
    }
    config
}

impl Federation {
    fn start() -> Federation {
        let rule_ports = [free_port(), free_port()];
        let gweb_ports = [free_port(), free_port(), free_port()];
        let authority = |i: usize| format!("authority \"http://127.0.0.1:{}/\"\n", gweb_ports[i]);
        // The shards: each polls its rule's port, as a site's gmetad.conf
        // says (docs/clusters.md).
        let extra: Vec<String> = SHARDS
            .iter()
            .enumerate()
            .map(|(i, s)| format!("gridname {:?}\n{}", s.grid, authority(i)))
            .collect();
        let polls = rule_ports.map(Polls::Port);
        let mut gmetads: Vec<GmetadOf> = SHARDS
            .iter()
            .enumerate()
            .map(|(i, s)| GmetadOf {
                sources: vec![(s.grid, std::slice::from_ref(&polls[i]))],
                extra: &extra[i],
            })
            .collect();
        // The top: the shards' own xml_ports, scalable on (its default,
        // written as a site would).
        let top_extra = format!("gridname {TOP:?}\nscalable on\n{}", authority(2));
        gmetads.push(GmetadOf {
            sources: vec![
                (SHARDS[0].grid, &[Polls::Gmetad(0)]),
                (SHARDS[1].grid, &[Polls::Gmetad(1)]),
            ],
            extra: &top_extra,
        });
        Federation {
            site: Site::start_with(STEP, &gateway_config(rule_ports), &gmetads),
            rule_ports,
            gweb_ports,
        }
    }

    /// The gateway.
    fn gw(&self) -> &Gateway {
        &self.site.gateway
    }

    /// The shards' gmetads, in SHARDS' order.
    fn shards(&self) -> &[Gmetad] {
        &self.site.gmetads[..SHARDS.len()]
    }

    /// The top gmetad, polling the shards'.
    fn top(&self) -> &Gmetad {
        &self.site.gmetads[SHARDS.len()]
    }

    fn send_round(&self, round: u64) {
        for (i, (ip, _, _)) in SERVERS.iter().enumerate() {
            self.gw().send_as(ip, &record(i, round));
        }
    }

    /// Sends round `round` every second until `done` holds (at most
    /// `within`), then for `more` rounds. `what` names it in a failure.
    fn send_until(&self, round: u64, what: &str, within: Duration, done: impl Fn() -> bool) {
        let start = Instant::now();
        loop {
            self.send_round(round);
            if done() {
                return;
            }
            assert!(
                start.elapsed() < within,
                "{what}: not within {within:?}; the top's sums (SUM, NUM) of {}\ngateway: {}\ntop gmetad: {}",
                self.top_sums(),
                self.gw().proc.log_text(),
                self.top().proc.log_text()
            );
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    /// What the top's XML sums of each shard, for a failure's message.
    fn top_sums(&self) -> String {
        let xml = read_xml(self.top().xml_port);
        let mut out = String::new();
        for s in &SHARDS {
            for m in ["xrootd.link.num", "xrootd.link.in"] {
                out.push_str(&format!(
                    "{} {m}: {:?}; ",
                    s.grid,
                    grid_sums(&xml, s.grid, m)
                ));
            }
        }
        out
    }

    /// Whether the top's XML holds, for every shard, `metric`'s sum over
    /// that shard's servers as `value` gives it.
    fn top_sums_are(&self, metric: &str, value: impl Fn(usize) -> u64) -> bool {
        let xml = read_xml(self.top().xml_port);
        (0..SHARDS.len()).all(|s| {
            let want: u64 = of_shard(s).into_iter().map(&value).sum();
            grid_sums(&xml, SHARDS[s].grid, metric) == Some((want as f64, of_shard(s).len() as f64))
        })
    }
}

/// The top's summary RRD of child grid `grid` (or of the whole
/// federation: None) for `metric`.
fn top_summary(top: &Gmetad, grid: Option<&str>, metric: &str) -> PathBuf {
    let dir = match grid {
        Some(g) => top.rrd_root.join(g),
        None => top.rrd_root.clone(),
    };
    dir.join("__SummaryInfo__").join(format!("{metric}.rrd"))
}

/// Rows of `ds` in `path` stamped in (`after`, `end`]: all known, each
/// value as returned.
fn known_rows(gmetad: &Gmetad, path: &Path, ds: &str, after: u64, end: u64) -> Vec<f64> {
    let rows = gmetad.fetch_ds(path, ds, after, end);
    let rows: Vec<_> = rows
        .into_iter()
        .filter(|(t, _)| *t > after && *t <= end)
        .collect();
    assert!(
        rows.len() as u64 >= (end - after) / STEP - 1,
        "{}: {rows:?}",
        path.display()
    );
    rows.iter()
        .map(|(t, v)| {
            v.unwrap_or_else(|| panic!("{}: unknown row at {t}: {rows:?}", path.display()))
        })
        .collect()
}

/// The times the assertions read the RRDs at (epoch seconds, each
/// gmetad's stamps).
struct Window {
    /// The top's XML summed every server from then on.
    whole: u64,
    /// A step before the counters grew: rows after it are whole sums.
    after: u64,
    /// The top's last update of every shard's sums once it had the
    /// counters' last values.
    end: u64,
    /// The top's last update of the federation's sums (its own RRDs, of a
    /// 15 s step), a whole row after `whole`.
    root_end: u64,
}

/// gmetad 3.7.2's step for a grid's own sums (`rrd_rootdir/__SummaryInfo__`),
/// whatever its data sources' (measured: `rrdtool info`).
const ROOT_STEP: u64 = 15;

#[test]
fn a_federation_sharded_by_rule_over_two_gmetads_under_a_top_gmetad() {
    let fed = Federation::start();
    let window = fed.run();
    the_gateway_serves_each_rule_its_own_clusters(&fed);
    each_shard_writes_only_its_own_sites(&fed);
    the_top_keeps_each_shards_sums(&fed, &window);
    ganglia_web_shows_the_federation(&fed, &window);
}

impl Federation {
    /// The servers' reports: the counters held where they start until the
    /// top's XML sums every shard's servers, then two steps more; grown
    /// for GROWTH_ROUNDS seconds; held at their last values until the top
    /// sums those and has written its RRDs once more, and until the
    /// federation's own sums have a whole row.
    fn run(&self) -> Window {
        let (num, bytes) = ("xrootd.link.num", "xrootd.link.in");
        self.send_until(0, "the top's sums", Duration::from_secs(90), || {
            self.top_sums_are(num, connections)
        });
        let whole = unix_now();
        for _ in 0..2 * STEP {
            self.send_round(0);
            std::thread::sleep(Duration::from_secs(1));
        }
        let after = unix_now() - STEP;
        for round in 1..=GROWTH_ROUNDS {
            self.send_round(round);
            std::thread::sleep(Duration::from_secs(1));
        }
        let last = GROWTH_ROUNDS;
        self.send_until(
            last,
            "the top's counter sums",
            Duration::from_secs(60),
            || self.top_sums_are(bytes, |i| bytes_in(i, last)),
        );
        let seen = unix_now();
        let probes = SHARDS.map(|s| top_summary(self.top(), Some(s.grid), bytes));
        let end = || {
            probes
                .iter()
                .map(|p| self.top().last_update(p))
                .min()
                .unwrap_or(0)
        };
        self.send_until(
            last,
            "one more update of the top",
            Duration::from_secs(30),
            || end() > seen,
        );
        let end = end();
        // The first 15 s row wholly after `whole`.
        let root_row = (whole + ROOT_STEP + 1).div_ceil(ROOT_STEP) * ROOT_STEP;
        let root = top_summary(self.top(), None, num);
        self.send_until(
            last,
            "a whole row of the federation's sums",
            Duration::from_secs(60),
            || self.top().last_update(&root) >= root_row,
        );
        Window {
            whole,
            after,
            end,
            root_end: self.top().last_update(&root),
        }
    }
}

/// Shard `s`'s sites, each with its servers' hosts.
fn sites_of_shard(s: usize) -> BTreeMap<String, BTreeSet<String>> {
    SHARDS[s]
        .sites
        .iter()
        .map(|site| {
            let hosts = of_site(site)
                .into_iter()
                .map(|i| SERVERS[i].1)
                .collect::<Vec<_>>();
            (site.to_string(), set(&hosts))
        })
        .collect()
}

/// The gateway: its own port every cluster, each rule's port that rule's
/// sites only, one cluster each.
fn the_gateway_serves_each_rule_its_own_clusters(fed: &Federation) {
    let all = clusters_of(&fed.gw().xml_text());
    for (i, (_, host, site)) in SERVERS.iter().enumerate() {
        let cluster = if shard_of(i).is_some() {
            *site
        } else {
            "XRootD"
        };
        assert!(
            all.get(cluster).is_some_and(|h| h.contains(*host)),
            "{host} not in {cluster} on the gateway's own port: {all:?}"
        );
    }
    for (s, port) in fed.rule_ports.iter().enumerate() {
        let want = sites_of_shard(s);
        assert_eq!(clusters_of(&read_xml(*port)), want, "rule {s}'s port");
    }
}

/// Each shard's RRDs: its own sites, each with its own hosts, and nothing
/// of the other shard's or of the site no rule takes.
fn each_shard_writes_only_its_own_sites(fed: &Federation) {
    for (s, gmetad) in fed.shards().iter().enumerate() {
        let want = sites_of_shard(s);
        assert_eq!(rrd_tree(&gmetad.rrd_root), want, "shard {}", SHARDS[s].grid);
        for i in of_shard(s) {
            let (_, host, site) = SERVERS[i];
            assert!(gmetad.rrd_path(site, host, "xrootd.link.in").exists());
        }
        // The site's summary: its hosts' connections, summed by gmetad.
        let site = SHARDS[s].sites[0];
        let path = gmetad.summary_rrd_path(site, "xrootd.link.num");
        let end = gmetad.last_update(&path);
        let want: u64 = of_site(site).into_iter().map(connections).sum();
        for v in known_rows(gmetad, &path, "sum", end - 4 * STEP, end) {
            assert_eq!(v, want as f64, "{}", path.display());
        }
    }
}

/// The top: a directory per shard (its gridname) holding only the shard's
/// sums (scalable on: no site, no host), equal to the sums of what the
/// shard's servers sent; and the federation's sums.
fn the_top_keeps_each_shards_sums(fed: &Federation, w: &Window) {
    let (top, after, end) = (fed.top(), w.after, w.end);
    assert_eq!(
        names_in(&top.rrd_root),
        set(&["East", "West", "__SummaryInfo__"])
    );
    for (s, shard) in SHARDS.iter().enumerate() {
        assert_eq!(
            names_in(&top.rrd_root.join(shard.grid)),
            set(&["__SummaryInfo__"])
        );
        let servers = of_shard(s);
        // A gauge: constant throughout, so every row is the whole sum.
        let path = top_summary(top, Some(shard.grid), "xrootd.link.num");
        let sum: u64 = servers.iter().map(|&i| connections(i)).sum();
        for (ds, want) in [("sum", sum as f64), ("num", servers.len() as f64)] {
            for v in known_rows(top, &path, ds, after, end) {
                assert_eq!(v, want, "{ds} of {}", path.display());
            }
        }
        // A counter: the rows are rates; over the window they add up to
        // what the shard's servers' counters grew by.
        let path = top_summary(top, Some(shard.grid), "xrootd.link.in");
        let grown: u64 = servers
            .iter()
            .map(|&i| bytes_in(i, GROWTH_ROUNDS) - bytes_in(i, 0))
            .sum();
        let total: f64 = known_rows(top, &path, "sum", after, end)
            .iter()
            .map(|r| r * STEP as f64)
            .sum();
        assert!(
            (total - grown as f64).abs() <= 1e-6 * grown as f64,
            "{}: {total} over ({after}, {end}], the servers grew by {grown}",
            path.display()
        );
    }
    // The whole federation: every shard's servers (not the site no rule
    // takes: no shard polls it), in its rows wholly after the top had
    // every server.
    let path = top_summary(top, None, "xrootd.link.num");
    let sharded: Vec<usize> = (0..SERVERS.len())
        .filter(|&i| shard_of(i).is_some())
        .collect();
    let sum: u64 = sharded.iter().map(|&i| connections(i)).sum();
    let rows = top.fetch_ds(&path, "sum", w.whole, w.root_end);
    let nums = top.fetch_ds(&path, "num", w.whole, w.root_end);
    let whole: Vec<_> = rows
        .iter()
        .zip(&nums)
        .filter(|((t, _), _)| *t >= w.whole + ROOT_STEP && *t <= w.root_end)
        .collect();
    assert!(!whole.is_empty(), "{}: {rows:?}", path.display());
    for ((t, v), (_, n)) in whole {
        assert_eq!(*v, Some(sum as f64), "{} at {t}: {rows:?}", path.display());
        assert_eq!(
            *n,
            Some(sharded.len() as f64),
            "{} at {t}: {nums:?}",
            path.display()
        );
    }
}
