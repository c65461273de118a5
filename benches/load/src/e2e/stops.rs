//! gmond end to end, (d) and (e): gmond restarted under load (metadata on
//! request), and the gateway stopped by SIGTERM right after a burst.

use super::*;

// ---------------------------------------------------------------------------
// (d) gmond restart, metadata on request.

#[derive(Clone, Debug, Default)]
pub struct Restart {
    pub servers: usize,
    pub rps: f64,
    pub interval: Duration,
    pub down: Duration,
    /// What gmond showed before it was stopped.
    pub before: Check,
    /// From gmond's restart until the gateway had sent everything before
    /// the first poll that showed every metric (or that poll, if the
    /// gateway did not drain): every metric was back by then.
    pub back_after: Option<Duration>,
    /// Polls after the restart: (time since restart, metrics present).
    pub polls: Vec<(Duration, usize)>,
    /// The last poll's view.
    pub check: Check,
    /// Drops at gmond's socket while the servers sent (both gmonds).
    pub drops_sending: u64,
    /// Of those, at the first gmond (before it was stopped).
    pub drops_before_stop: u64,
    /// Drops at gmond's socket while it wrote its XML for a poll (servers
    /// paused, the gateway drained).
    pub drops_polls: u64,
    pub requests: Option<u64>,
    pub answered: Option<u64>,
}

pub(super) fn restart(
    bin: &Path,
    records: &Records,
    expect: &mut Expect,
    o: &E2eOptions,
    ceiling: f64,
) -> Result<Restart, String> {
    // A moderate load: half of gmond's ceiling in value packets. The smoke
    // takes a quarter: at half, 2 of 5 clean CI runs saw 18 and 114 drops
    // at the restarted gmond (none in any full run at 1,000 servers); why
    // is not known yet (gmond's start-up, or its requests for every value
    // it has no metadata for), and the smoke must not be flaky.
    let share = if o.smoke { 0.25 } else { 0.5 };
    let rps = share * ceiling / records.value_packets_per_record();
    let interval = Duration::from_secs_f64(records.servers as f64 / rps);
    let request_port = free_port();
    let sections = format!("udp_send_channel {{ host = 127.0.0.1  port = {request_port} }}");
    let mut gmond = Gmond::start(free_port(), free_port(), &sections)?;
    // The answer to a restarted gmond is every metadata and value at once:
    // it follows the new gmond's receive queue (the default), and while
    // gmond's socket is not there yet, max_send_rate paces. The full run
    // keeps the default (what a site runs); the smoke paces that part at
    // half of SMOKE_BASIS, so that it checks the mechanism, not the
    // machine's load.
    let rate = if o.smoke {
        format!(
            "\nmax_send_rate = {}",
            ((ceiling * 0.5) as u64).min(xrd2ganglia::config::DEFAULT_SEND_RATE)
        )
    } else {
        String::new()
    };
    let gw = gateway(
        bin,
        gmond.port,
        o.servers,
        &format!(
            "metadata_requests = [\"127.0.0.1:{request_port}\"]{rate}\n{}",
            o.gateway_conf
        ),
    );
    let mut fleet = Fleet::new(records, gw.addr());
    let mut r = Restart {
        servers: fleet.len(),
        rps,
        interval,
        down: o.down,
        ..Restart::default()
    };
    fleet.run(rps, interval.mul_f64(2.0).max(Duration::from_secs(2)));
    r.before = pause_and_poll(&gw, &gmond, &fleet, expect, &mut r)?.0;
    fleet.run(rps, Duration::from_secs(1));
    let polls_before_stop = r.drops_polls;
    let (old_total, _) = gmond.terminate();
    fleet.run(rps, o.down);
    gmond = gmond.restart()?;
    let restarted = Instant::now();
    loop {
        fleet.run(rps, Duration::from_secs(1));
        let (c, drained_at) = pause_and_poll(&gw, &gmond, &fleet, expect, &mut r)?;
        let at = restarted.elapsed();
        r.polls.push((at, c.metrics_present));
        let done = c.complete();
        r.check = c;
        if done {
            // Everything was in gmond once the gateway had sent it all
            // (nothing was sent between then and the poll).
            r.back_after = Some(drained_at.map_or(at, |t| t.duration_since(restarted)));
            break;
        }
        if at > Duration::from_secs(if o.smoke { 12 } else { 30 }) {
            break;
        }
    }
    r.drops_sending = (old_total + gmond.drops()).saturating_sub(r.drops_polls);
    r.drops_before_stop = old_total.saturating_sub(polls_before_stop);
    let last = gw.log.last();
    r.requests = last.as_ref().and_then(|l| l.get("metadata_requests"));
    r.answered = last.as_ref().and_then(|l| l.get("requests_answered"));
    Ok(r)
}

/// Pauses the servers (the caller does not send meanwhile), lets the
/// gateway drain, polls gmond's XML once; drops while gmond writes its XML
/// are counted apart.
pub(super) fn pause_and_poll(
    gw: &Gateway,
    gmond: &Gmond,
    fleet: &Fleet,
    expect: &mut Expect,
    r: &mut Restart,
) -> Result<(Check, Option<Instant>), String> {
    let drained_at = Some(ready_to_poll(gw, gmond, Instant::now(), fleet.total)?);
    let before = gmond.drops();
    let xml = gmond.xml();
    gmond.wait_read(Duration::from_secs(2));
    r.drops_polls += gmond.drops() - before;
    xml.map(|x| (check(fleet, expect, &x, None), drained_at))
}

// ---------------------------------------------------------------------------
// (e) SIGTERM right after a burst.

#[derive(Clone, Debug, Default)]
pub struct Sigterm {
    pub servers: usize,
    pub exit_after: Option<Duration>,
    pub status: Option<i32>,
    pub signal: Option<i32>,
    pub state_bytes: Option<u64>,
    /// Servers named in the state file.
    pub state_sources: usize,
    /// Sources the gateway said it had when it stopped.
    pub gw_sources: Option<u64>,
}

pub(super) fn sigterm(bin: &Path, records: &Records, o: &E2eOptions) -> Result<Sigterm, String> {
    use std::os::unix::process::ExitStatusExt;
    let gmond = Gmond::start(free_port(), free_port(), "")?;
    let mut gw = gateway(bin, gmond.port, o.servers, &o.gateway_conf);
    let mut fleet = Fleet::new(records, gw.addr());
    fleet.burst(Duration::from_millis(100));
    let (status, took) = gw.terminate(Duration::from_secs(30));
    let state = gw.dir().join("state");
    let text = std::fs::read_to_string(&state).unwrap_or_default();
    let ips: std::collections::HashSet<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("{\"ip\":\"")?.split('"').next())
        .collect();
    Ok(Sigterm {
        servers: fleet.len(),
        exit_after: status.map(|_| took),
        status: status.and_then(|s| s.code()),
        signal: status.and_then(|s| s.signal()),
        state_bytes: std::fs::metadata(&state).ok().map(|m| m.len()),
        state_sources: (0..fleet.len())
            .filter(|&s| ips.contains(server_ip(s).to_string().as_str()))
            .count(),
        gw_sources: gw
            .log
            .all()
            .iter()
            .rev()
            .find(|l| l.stopped)
            .and_then(|l| l.get("sources")),
    })
}
