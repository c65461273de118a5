//! The federation's ganglia-web: on the top gmetad, and on each shard
//! the top links to (its `authority`).

use super::common::{Gweb, Scratch, gweb_files, included_reports};
use super::{Federation, SERVERS, SHARDS, TOP, Window, connections, of_shard, of_site, shard_of};

/// ganglia-web (private copies of Debian's 3.7.5) with what `xrd2ganglia
/// gweb` writes for the gateway's config: on the top, the federation's
/// page with a link to each shard's ganglia-web and the XRootD reports of
/// each shard and of the whole; on each shard, its sites with theirs.
pub(super) fn ganglia_web_shows_the_federation(fed: &Federation, w: &Window) {
    let files = Scratch::new("gweb-federation");
    gweb_files(&fed.gw().config, files.path());
    let window = format!("cs={}&ce={}", w.after, w.end);
    let top = Gweb::new(
        &fed.top().rrd_root,
        fed.top().interactive_port,
        files.path(),
    );
    let top_server = top.serve_on(fed.gweb_ports[2]);
    let (status, page) = top_server.get("");
    assert_eq!(status, 200, "{page}");
    for (s, shard) in SHARDS.iter().enumerate() {
        assert!(
            shard_link(&page, fed.gweb_ports[s]).is_some(),
            "the top's page has no link to {}",
            shard.grid
        );
        let sum: u64 = of_shard(s).into_iter().map(connections).sum();
        let open = gweb_last(
            &top,
            &format!(
                "G={}&g=xrootd_connections_report&z=medium&{window}",
                shard.grid
            ),
            "open",
        );
        assert_eq!(open, sum as f64, "{}'s connections on the top", shard.grid);
    }
    let sum: u64 = (0..SERVERS.len())
        .filter(|&i| shard_of(i).is_some())
        .map(connections)
        .sum();
    let root_window = format!("cs={}&ce={}", w.whole, w.root_end);
    let open = gweb_last(
        &top,
        &format!("me={TOP}&g=xrootd_connections_report&z=medium&{root_window}"),
        "open",
    );
    assert_eq!(open, sum as f64, "the federation's connections");
    images_render(&top, &page, true);
    // The view "xrootd" on the top: its reports in the grid's context,
    // which on the top is the federation's sums.
    let (status, view) = top_server.get("tab=v&vn=xrootd");
    assert_eq!(status, 200, "{view}");
    let src = view
        .split("src=\"")
        .map(|s| s.split('"').next().unwrap_or("").replace("&amp;", "&"))
        .find(|s| s.contains("g=xrootd_connections_report"))
        .unwrap_or_else(|| panic!("the top's view has no connections report: {view}"));
    let query = src
        .trim_start_matches("./")
        .trim_start_matches("graph.php?");
    let open = gweb_last(&top, &format!("{query}&{root_window}"), "open");
    assert_eq!(open, sum as f64, "the federation's connections in the view");
    // Its per-server graphs (aggregate=1) match no host on a top (it keeps
    // sums only): drawn empty (ganglia-web 3.7.5's graph.php died on that
    // under PHP 8, sort(null) in functions.php, which
    // docs/ganglia-web-php8.patch mends); the servers are a shard's.
    images_render(&top, &view, true);

    let reports = included_reports(files.path());
    for (s, shard) in SHARDS.iter().enumerate() {
        let gweb = Gweb::new(
            &fed.shards()[s].rrd_root,
            fed.shards()[s].interactive_port,
            files.path(),
        );
        let server = gweb.serve_on(fed.gweb_ports[s]);
        // The page the top's link opens: the shard's grid.
        let (status, grid) = server.get(&shard_link(&page, fed.gweb_ports[s]).unwrap());
        assert_eq!(status, 200, "{grid}");
        for other in SHARDS.iter().flat_map(|o| o.sites) {
            assert_eq!(
                grid.contains(&format!("c={other}&")),
                shard.sites.contains(other),
                "{}'s page and {other}",
                shard.grid
            );
        }
        // The view "xrootd" on a shard: its reports and per-server graphs.
        let (status, view) = server.get("tab=v&vn=xrootd");
        assert_eq!(status, 200, "{view}");
        images_render(&gweb, &view, true);
        for site in shard.sites {
            let (status, body) = server.get(&format!("c={site}&{window}"));
            assert_eq!(status, 200, "{body}");
            for r in &reports {
                assert!(
                    body.contains(&format!("g={r}&")),
                    "{site}'s page has no {r}"
                );
            }
            images_render(&gweb, &body, true);
            let sum: u64 = of_site(site).into_iter().map(connections).sum();
            let open = gweb_last(
                &gweb,
                &format!("c={site}&g=xrootd_connections_report&z=medium&{window}"),
                "open",
            );
            assert_eq!(open, sum as f64, "{site}'s connections");
        }
    }
}

/// The query of the top page's link to the ganglia-web on `port` (a
/// shard's `authority`), HTML-decoded.
fn shard_link(page: &str, port: u16) -> Option<String> {
    let prefix = format!("href=\"http://127.0.0.1:{port}/?");
    let at = page.find(&prefix)? + prefix.len();
    let query = &page[at..at + page[at..].find('"')?];
    Some(query.replace("&amp;", "&"))
}

/// The last known value of series `label` of graph.php's export of `query`.
fn gweb_last(gweb: &Gweb, query: &str, label: &str) -> f64 {
    let series = gweb.series(query);
    let (_, values) = series
        .iter()
        .find(|(l, _)| l == label)
        .unwrap_or_else(|| panic!("graph.php?{query}: no {label:?} in {series:?}"));
    *values
        .first()
        .unwrap_or_else(|| panic!("graph.php?{query}: {label:?} has no values"))
}

/// Every graph.php image of a page (without the per-server, aggregate,
/// ones unless `aggregates`) is a PNG, and there is one at least.
fn images_render(gweb: &Gweb, body: &str, aggregates: bool) {
    assert!(
        gweb.render_images(body, aggregates) > 0,
        "no graph on the page"
    );
}
