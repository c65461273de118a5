//! `recover_from`: at start, the last values published, read back from
//! gmetad (its `xml_port`) or a gmond (its `tcp_accept_channel`).
//!
//! A gateway that lacks a server's history (no state file, a fresh
//! machine, both gateways of a pair lost at once) would publish a counter
//! of a server that ever restarted as its raw reading, below what gmetad
//! stored: a wrap in every graph (issue 43, item 3: 21-23x, 3.0e11x where
//! the lost offset was above 2^32). gmetad still holds every host's last
//! values. So each port listed is read once, before any record is
//! handled, and every counter of a host read is sent no lower than its
//! value there ([`crate::engine::series::MetricState::floor`]), on the
//! source's first record; the XML port listens once every host read has
//! reported again, or after `warmup_max` ([`super::xml_port::Warmup`]).
//!
//! **What it trusts**: the ports the admin listed, for one thing only: a
//! lower bound of each counter of the hosts of the gateway's own clusters
//! (`cluster_name`, the `[[cluster]]` rules' names; any cluster with
//! site-named clusters), by the host's `IP` and `NAME` and the metric's name. A value
//! can only raise a counter's offset to it, never lower one; the values
//! of hosts and metrics the gateway never publishes are never used.
//!
//! **How it bounds what it reads**: each port has [`DEADLINE`] for the
//! whole exchange (resolving, connecting, reading) and [`MAX_BYTES`]; a
//! document that is not gmond's XML, is larger, or is late is logged and
//! left out whole. Hosts: at most `max_sources`, metrics per host at most
//! `max_metrics_per_source`. Each value is checked on its own: decimal
//! digits (or a decimal fraction, taken without it), below 2^63
//! ([`crate::engine::saved::MAX_COUNTER`]); a host whose `IP` is not an
//! address, or a value that fails, is skipped alone and counted in the
//! log line.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::sync::watch;

use super::peer::Link;
use crate::config::Settings;
use crate::engine::saved::{FloorHost, Floors, MAX_COUNTER, SavedState};
use crate::poll::Cluster;

/// The whole exchange with one port, at most.
pub const DEADLINE: Duration = Duration::from_secs(10);
/// The longest document read from one port (gmetad's holds every cluster
/// of its grid: a 500-host cluster of the gateway's is 17 MB).
pub const MAX_BYTES: u64 = 256 << 20;

/// Reads every `recover_from` port, in order, and gives the saved state
/// the highest value read of each (server address, metric).
pub(super) async fn recover(settings: &Settings, saved: &SavedState) {
    if settings.recover_from.is_empty() {
        return;
    }
    let mut floors: HashMap<FloorHost, Floors> = HashMap::new();
    for (addr, read) in read_ports(settings, &mut floors).await {
        match read {
            Ok(taken) => tracing::info!(
                "recover_from {addr}: {} hosts, {} values taken as the last published; {} hosts and {} values skipped (not an address, not a counter reading, or over max_sources / max_metrics_per_source)",
                taken.hosts,
                taken.values,
                taken.hosts_skipped,
                taken.values_skipped
            ),
            Err(e) => tracing::warn!(
                "recover_from {addr}: nothing taken: {e} (counters of servers without saved state start from their readings)"
            ),
        }
    }
    saved.set_floors(floors);
}

/// Reads every `recover_from` port, in order, one at a time, each within
/// [`DEADLINE`] and [`MAX_BYTES`], into `floors` (the highest value of
/// each host and metric); what each gave.
async fn read_ports(
    settings: &Settings,
    floors: &mut HashMap<FloorHost, Floors>,
) -> Vec<(String, Result<Taken, String>)> {
    let mut out = Vec::new();
    for addr in &settings.recover_from {
        let read = match tokio::time::timeout(DEADLINE, fetch(addr)).await {
            Ok(r) => r,
            Err(_) => Err(format!("no whole document within {} s", DEADLINE.as_secs())),
        };
        let taken = read
            .and_then(|text| crate::poll::read(&text))
            .map(|clusters| take(&clusters, settings, floors));
        out.push((addr.clone(), taken));
    }
    out
}

/// While the peer is unreachable, `recover_from` is read again this often
/// for the hosts whose server restarted after a gap ([`keep_floors`]):
/// each read's floor is what gmetad stored at its last poll, and the
/// other gateway counts on after it; a failover to this one reads it
/// after one step (5 s at the least, 15 s by default) at the earliest,
/// so a floor at most this old leaves this one below what gmetad stored
/// by what was counted in less than a step (a rate, never a decrease).
pub const REREAD_EVERY: Duration = Duration::from_secs(2);

/// What `status` shows of the holds [`keep_floors`] serves: the hosts
/// watched and whether a hold keeps the XML ports refusing now.
#[derive(Clone)]
pub(super) struct Holds {
    saved: Arc<SavedState>,
    held: watch::Receiver<bool>,
}

impl Holds {
    pub(super) fn new(saved: Arc<SavedState>, held: watch::Receiver<bool>) -> Holds {
        Holds { saved, held }
    }

    /// Fills the pair's `held` (each host as `NAME (ADDRESS)`, sorted) and
    /// `holding`.
    pub(super) fn show(&self, pair: &mut crate::status::PairStatus) {
        let mut hosts: Vec<String> = self
            .saved
            .watched()
            .into_iter()
            .map(|(ip, name)| format!("{name} ({ip})"))
            .collect();
        hosts.sort_unstable();
        pair.held = hosts;
        pair.holding = *self.held.borrow();
    }
}

/// A restart seen after a gap in what this gateway heard, its peer
/// unreachable (issue 43): the engine holds that server's counters
/// ([`SavedState::watch`]) and this task, told, reads the `recover_from`
/// ports for the hosts held (one read for all of them at a time, bounded
/// as at start) and gives their values as floors; the source applies them
/// at its next record and publishes again. With the peer reachable
/// nothing is read: the hold is released at once (the exchange and its
/// trust rule make the two agree). While the link stays cut the ports are
/// read again every [`REREAD_EVERY`] (floors only raise), until the peer
/// is back or the source is gone. `held` says whether a hold keeps
/// counters from being published (the XML port refuses meanwhile, for
/// at most `warmup_max` per hold).
pub(super) async fn keep_floors(
    settings: Arc<Settings>,
    saved: Arc<SavedState>,
    link: Arc<Link>,
    held: watch::Sender<bool>,
    mut stop: watch::Receiver<bool>,
) {
    if settings.recover_from.is_empty() {
        return;
    }
    let mut last_read: Option<Instant> = None;
    let mut warned: Option<Instant> = None;
    loop {
        let now = Instant::now();
        let watched = saved.watched();
        if !watched.is_empty() {
            if link.reachable(now) {
                saved.end_watching();
                tracing::info!(
                    "the peer answers: {} held hosts released (the exchange makes the two agree)",
                    watched.len()
                );
            } else if saved.unanswered() || last_read.is_none_or(|t| now >= t + REREAD_EVERY) {
                last_read = Some(now);
                let wanted: HashSet<&FloorHost> = watched.iter().collect();
                let mut floors = HashMap::new();
                let reads = tokio::select! {
                    _ = stop.changed() => break,
                    r = read_ports(&settings, &mut floors) => r,
                };
                floors.retain(|host, _| wanted.contains(host));
                saved.give(&floors);
                let failed: Vec<String> = reads
                    .into_iter()
                    .filter_map(|(addr, r)| r.err().map(|e| format!("{addr}: {e}")))
                    .collect();
                let quiet = warned.is_some_and(|t| now < t + settings.log_interval);
                if !failed.is_empty() && !quiet {
                    warned = Some(now);
                    tracing::warn!(
                        "recover_from read again for {} held hosts ({} found): {} (held counters continue from this gateway's own offsets)",
                        watched.len(),
                        floors.len(),
                        failed.join("; ")
                    );
                }
            }
        }
        held.send_if_modified(|h| {
            let now_held = saved.holding(Instant::now(), settings.warmup_max);
            std::mem::replace(h, now_held) != now_held
        });
        let busy = !saved.watched().is_empty() || *held.borrow();
        tokio::select! {
            _ = stop.changed() => break,
            () = saved.watch_changed.notified() => {}
            () = tokio::time::sleep(REREAD_EVERY), if busy => {}
        }
    }
}

/// The document at `addr` (HOST:PORT), at most [`MAX_BYTES`].
async fn fetch(addr: &str) -> Result<String, String> {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let mut bytes = Vec::new();
    (&mut stream)
        .take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .await
        .map_err(|e| format!("reading: {e}"))?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(format!(
            "the document is larger than {} MiB",
            MAX_BYTES >> 20
        ));
    }
    // gmond says ISO-8859-1; the names and values taken are ASCII.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// What one document gave.
#[derive(Debug, Default, PartialEq, Eq)]
struct Taken {
    hosts: usize,
    values: usize,
    hosts_skipped: usize,
    values_skipped: usize,
}

/// Takes the hosts of the gateway's own clusters into `floors` (the
/// highest value of each metric wins), checked one by one.
fn take(
    clusters: &[Cluster],
    settings: &Settings,
    floors: &mut HashMap<FloorHost, Floors>,
) -> Taken {
    let grouping = &settings.grouping;
    let site_named = grouping.by_site || grouping.rules.iter().any(|r| r.by_site);
    let own = |name: &str| {
        site_named
            || name == settings.cluster_name
            || grouping.rules.iter().any(|r| !r.by_site && r.name == name)
    };
    let mut taken = Taken::default();
    for cluster in clusters.iter().filter(|c| own(&c.name)) {
        for host in &cluster.hosts {
            if host.name.starts_with(super::self_metrics::OWN_HOST_PREFIX) {
                continue;
            }
            let Some(key) = floor_host(&host.ip, &host.name) else {
                taken.hosts_skipped += 1;
                continue;
            };
            if floors.len() >= settings.max_sources && !floors.contains_key(&key) {
                taken.hosts_skipped += 1;
                continue;
            }
            let of_host = floors.entry(key).or_default();
            taken.hosts += 1;
            for m in &host.metrics {
                let Some(v) = counter_reading(&m.value) else {
                    taken.values_skipped += 1;
                    continue;
                };
                let key = crate::mapping::name_key(&m.name);
                if of_host.len() >= settings.max_metrics_per_source && !of_host.contains_key(&key) {
                    taken.values_skipped += 1;
                    continue;
                }
                let f = of_host.entry(key).or_insert(0);
                *f = (*f).max(v);
                taken.values += 1;
            }
        }
    }
    taken
}

/// A host's server address and NAME, as the gateway names it: `IP` as the
/// gateway writes it (the real address) or as gmond does (its spoof
/// string's, IPv6 with `-` for `:`), and NAME without the `@ADDRESS` the
/// second of two servers with one name gets.
fn floor_host(ip: &str, name: &str) -> Option<FloorHost> {
    let addr = ip
        .parse::<IpAddr>()
        .or_else(|_| ip.replace('-', ":").parse::<IpAddr>())
        .ok()?
        .to_canonical();
    let name = match name.rsplit_once('@') {
        Some((n, suffix)) if suffix == ip || suffix.replace('-', ":") == ip => n,
        _ => name,
    };
    (!name.is_empty()).then(|| (addr, name.to_string()))
}

/// A value as a counter reading: decimal digits, or a decimal fraction
/// (gmetad may write a double), taken without its fraction; below 2^63.
fn counter_reading(text: &str) -> Option<u64> {
    let whole = match text.split_once('.') {
        Some((whole, frac)) if frac.bytes().all(|b| b.is_ascii_digit()) => whole,
        Some(_) => return None,
        None => text,
    };
    if whole.is_empty() || whole.len() > 19 || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    whole.parse::<u64>().ok().filter(|&v| v < MAX_COUNTER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_counter_readings_are_taken() {
        assert_eq!(counter_reading("63081435"), Some(63_081_435));
        assert_eq!(counter_reading("63081435.00"), Some(63_081_435));
        assert_eq!(counter_reading("9223372036854775808"), None);
        assert_eq!(
            counter_reading("9223372036854775807"),
            Some(MAX_COUNTER - 1)
        );
        assert_eq!(counter_reading("-1"), None);
        assert_eq!(counter_reading("1e9"), None);
        assert_eq!(counter_reading("v5.5.3"), None);
        assert_eq!(counter_reading(""), None);
        assert_eq!(counter_reading(".5"), None);
    }

    #[test]
    fn a_bad_host_or_value_loses_only_itself_and_other_clusters_are_left() {
        let doc = r#"<GANGLIA_XML VERSION="3.7.2" SOURCE="gmetad"><GRID NAME="g">
<CLUSTER NAME="XRootD">
<HOST NAME="ds1" IP="10.0.0.1" TN="3"><METRIC NAME="xrootd.link.in" VAL="500" UNITS="B"/><METRIC NAME="xrootd.ver" VAL="v5" UNITS=""/></HOST>
<HOST NAME="ds2" IP="not-an-ip" TN="3"><METRIC NAME="xrootd.link.in" VAL="7" UNITS="B"/></HOST>
<HOST NAME="ds3" IP="10.0.0.3" TN="3"><METRIC NAME="xrootd.link.in" VAL="18446744073709551615" UNITS="B"/><METRIC NAME="xrootd.link.out" VAL="9" UNITS="B"/></HOST>
</CLUSTER>
<CLUSTER NAME="Other"><HOST NAME="x" IP="10.0.0.9" TN="1"><METRIC NAME="bytes_in" VAL="1" UNITS=""/></HOST></CLUSTER>
</GRID></GANGLIA_XML>"#;
        let clusters = crate::poll::read(doc).unwrap();
        let h = crate::engine::tests::Harness::new("");
        let mut floors = HashMap::new();
        let taken = take(&clusters, &h.settings, &mut floors);
        assert_eq!(
            taken,
            Taken {
                hosts: 2,
                values: 2,
                hosts_skipped: 1,
                values_skipped: 2
            }
        );
        let key = |n: &str| crate::mapping::name_key(n);
        let host = |s: &str, n: &str| (s.parse::<IpAddr>().unwrap(), n.to_string());
        assert_eq!(
            floors[&host("10.0.0.1", "ds1")],
            HashMap::from([(key("xrootd.link.in"), 500)])
        );
        assert_eq!(
            floors[&host("10.0.0.3", "ds3")],
            HashMap::from([(key("xrootd.link.out"), 9)])
        );
        assert_eq!(floors.len(), 2);
    }

    #[test]
    fn hosts_are_named_as_the_gateway_names_them() {
        let v4 = "10.0.0.1".parse::<IpAddr>().unwrap();
        let v6 = "2001:db8::1".parse::<IpAddr>().unwrap();
        assert_eq!(floor_host("10.0.0.1", "ds1"), Some((v4, "ds1".into())));
        // The second server with one name, renamed.
        assert_eq!(
            floor_host("10.0.0.1", "ds1@10.0.0.1"),
            Some((v4, "ds1".into()))
        );
        assert_eq!(floor_host("10.0.0.1", "a@b"), Some((v4, "a@b".into())));
        // gmond's IP for an IPv6 sender.
        assert_eq!(floor_host("2001-db8--1", "ds6"), Some((v6, "ds6".into())));
        assert_eq!(
            floor_host("::ffff:10.0.0.1", "ds1"),
            Some((v4, "ds1".into()))
        );
        assert_eq!(floor_host("x", "ds1"), None);
        assert_eq!(floor_host("10.0.0.1", ""), None);
    }
}
