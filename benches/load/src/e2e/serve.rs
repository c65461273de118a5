//! gmond end to end: the gateway as these runs start it (`serve` with
//! default delivery settings), and what its log says (drained, queue,
//! CPU).

use super::*;

/// `serve` with DEFAULT delivery settings: only the listen address, the
/// channel to gmond, a state file in its temp dir, room for the sources,
/// counters logged every second, and `extra`.
pub(crate) fn gateway(bin: &Path, gmond_port: u16, servers: usize, extra: &str) -> Gateway {
    Gateway::start_config(bin, |dir, port| {
        format!(
            "listen = [\"127.0.0.1:{port}\"]\nstate_file = {:?}\nmax_sources = {}\n\
             stats_interval = 1\n{extra}\n[[channel]]\nhost = \"127.0.0.1\"\nport = {gmond_port}\n",
            dir.join("state").display().to_string(),
            (servers * 2).max(10_000)
        )
    })
}

/// Waits until the gateway has sent everything it got: two counters lines
/// in a row, after `after`, identical (nothing received, sent, answered or
/// failed in between), the first with every datagram offered read
/// (`datagrams` >= offered - drops at its socket) and, when the gateway
/// logs its queue, `send_queue=0`. Returns when the first of the two was
/// logged (everything was sent by then), or None after `timeout`.
pub(crate) fn drained(
    gw: &Gateway,
    after: Instant,
    offered: u64,
    timeout: Duration,
) -> Option<Instant> {
    let t0 = Instant::now();
    loop {
        let want = offered.saturating_sub(gw.socket_drops());
        let lines = gw.log.since(after);
        if let Some(w) = lines.windows(2).find(|w| {
            w[0].get("datagrams").is_none_or(|d| d >= want)
                && w[0].pairs.get("send_queue").is_none_or(|q| q == "0")
                && w[0].pairs == w[1].pairs
        }) {
            return Some(w[0].at);
        }
        if t0.elapsed() > timeout {
            return None;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until gmond may be polled: the gateway has sent everything it got
/// ([`drained`], up to [`DRAIN_TIMEOUT`]) and gmond has read its receive
/// queue. A poll makes gmond deaf while it writes its XML: polled while
/// the gateway still sent, it would drop what arrived meanwhile (or the
/// gateway, following its queue, would hold it and the document lack it),
/// and the run would measure the machine's load, not the gateway. Err
/// when the gateway has not drained by then: that is a failure of its own,
/// named, and gmond is not polled. Returns when the gateway had drained.
pub(crate) fn ready_to_poll(
    gw: &Gateway,
    gmond: &Gmond,
    after: Instant,
    offered: u64,
) -> Result<Instant, String> {
    let Some(at) = drained(gw, after, offered, DRAIN_TIMEOUT) else {
        let last = gw.log.last();
        let get = |k: &str| {
            last.as_ref()
                .and_then(|l| l.pairs.get(k).cloned())
                .unwrap_or_else(|| "?".into())
        };
        return Err(format!(
            "the gateway was still sending {} s after the servers stopped \
             (datagrams {} of {offered}, send_queue {}): gmond not polled",
            DRAIN_TIMEOUT.as_secs(),
            get("datagrams"),
            get("send_queue")
        ));
    };
    gmond.wait_read(Duration::from_secs(10));
    if gmond.rx_queue() > 0 {
        return Err(format!(
            "gmond had not read its receive queue ({} bytes) 10 s after the gateway drained",
            gmond.rx_queue()
        ));
    }
    Ok(at)
}

/// The queue figures of the gateway's counters lines in [from, to].
#[derive(Clone, Debug, Default)]
pub struct QueueStats {
    pub max_queue: Option<u64>,
    pub max_age_ms: Option<u64>,
    pub conflated: Option<u64>,
    pub send_errors: Option<u64>,
}

pub(super) fn queue_stats(gw: &Gateway, from: Instant, to: Instant) -> QueueStats {
    let lines: Vec<LogLine> = gw
        .log
        .since(from)
        .into_iter()
        .filter(|l| l.at <= to)
        .collect();
    let max = |k: &str| lines.iter().filter_map(|l| l.get(k)).max();
    let last = |k: &str| lines.iter().rev().find_map(|l| l.get(k));
    QueueStats {
        max_queue: max("send_queue"),
        max_age_ms: max("send_queue_age"),
        conflated: last("packets_conflated"),
        send_errors: last("send_errors"),
    }
}

pub(super) fn cpu_s(gw: &Gateway, before: u64) -> f64 {
    gw.cpu_ticks().saturating_sub(before) as f64 / clock_ticks()
}
