//! gmond end to end, (b) and (c): a burst of first reports, then a
//! sustained load; what gmond shows of each.

use super::*;

// ---------------------------------------------------------------------------
// (b) burst.

#[derive(Clone, Debug, Default)]
pub struct Burst {
    pub servers: usize,
    pub sent_within: Duration,
    /// When the gateway's queue was first seen empty, from the burst's start.
    pub drained_at: Option<Duration>,
    pub polled_at: Duration,
    pub check: Check,
    pub drops: u64,
    pub gw_socket_drops: u64,
    pub queue: QueueStats,
    pub cpu_s: f64,
    pub peak_rss_kib: u64,
    /// gmond's CPU (utime + stime) from the burst's start to the poll.
    pub gmond_cpu_s: f64,
    /// When gmond last worked (its CPU time rose by 0.1 ms in 5 ms), from
    /// the burst's start: when it took the last packet.
    pub gmond_busy_until: Option<Duration>,
    /// Drops at gmond's socket per half-second from the burst's start.
    pub drops_by_time: Vec<u64>,
}

impl Burst {
    /// The time every metric, with its last value, was in gmond and the
    /// gateway had nothing left to send.
    pub fn settle(&self) -> Option<Duration> {
        (self.check.all_last()).then_some(self.drained_at?)
    }
}

pub(super) fn burst(
    bin: &Path,
    records: &Records,
    expect: &mut Expect,
    o: &E2eOptions,
) -> Result<Burst, String> {
    let gmond = Gmond::start(free_port(), free_port(), "")?;
    let gw = gateway(bin, gmond.port, o.servers, &o.gateway_conf);
    let mut fleet = Fleet::new(records, gw.addr());
    let cpu0 = gw.cpu_ticks();
    let gmond_cpu0 = crate::cpu_ticks(gmond.pid());
    let t0 = Instant::now();
    let busy = BusyWatch::start(&gmond, t0);
    let sent_within = fleet.burst(Duration::from_millis(100));
    let drained_at = ready_to_poll(&gw, &gmond, t0, fleet.total);
    let watched = busy.stop();
    let drained_at = drained_at?;
    let drops = gmond.drops();
    let gmond_cpu_s =
        crate::cpu_ticks(gmond.pid()).saturating_sub(gmond_cpu0) as f64 / clock_ticks();
    let polled = Instant::now();
    let xml = gmond.xml()?;
    let check = check(&fleet, expect, &xml, None);
    Ok(Burst {
        gmond_cpu_s,
        gmond_busy_until: watched.last_busy,
        drops_by_time: watched.drops,
        servers: fleet.len(),
        sent_within,
        drained_at: Some(drained_at.duration_since(t0)),
        polled_at: polled.duration_since(t0),
        check,
        drops,
        gw_socket_drops: gw.socket_drops(),
        queue: queue_stats(&gw, t0, polled),
        cpu_s: cpu_s(&gw, cpu0),
        peak_rss_kib: gw.status_kib("VmHWM:"),
    })
}

// ---------------------------------------------------------------------------
// (c) sustained.

#[derive(Clone, Debug, Default)]
pub struct Sustained {
    pub servers: usize,
    pub rps: f64,
    pub value_pps: f64,
    pub interval: Duration,
    pub duration: Duration,
    pub records: u64,
    pub achieved_rps: f64,
    pub drops: u64,
    pub gw_socket_drops: u64,
    pub drained_after: Option<Duration>,
    pub check: Check,
    pub queue: QueueStats,
    pub cpu_s: f64,
}

pub(super) fn sustained(
    bin: &Path,
    records: &Records,
    expect: &mut Expect,
    o: &E2eOptions,
    ceiling: f64,
) -> Result<Sustained, String> {
    let value_pps = 0.6 * ceiling;
    let rps = value_pps / records.value_packets_per_record();
    let interval = Duration::from_secs_f64(records.servers as f64 / rps);
    let gmond = Gmond::start(free_port(), free_port(), "")?;
    let gw = gateway(bin, gmond.port, o.servers, &o.gateway_conf);
    let mut fleet = Fleet::new(records, gw.addr());
    let cpu0 = gw.cpu_ticks();
    let t0 = Instant::now();
    // The first round (every server's first report, with its metadata)
    // spread over one interval, then the measured run.
    fleet.run(rps, interval);
    fleet.run(rps, o.sustain);
    let stopped = Instant::now();
    let drained_at = ready_to_poll(&gw, &gmond, stopped, fleet.total)?;
    let drops = gmond.drops();
    let poll_at = Instant::now();
    let xml = gmond.xml()?;
    let check = check(&fleet, expect, &xml, Some(poll_at));
    let elapsed = stopped.duration_since(t0);
    Ok(Sustained {
        servers: fleet.len(),
        rps,
        value_pps,
        interval,
        duration: elapsed,
        records: fleet.total,
        achieved_rps: fleet.total as f64 / elapsed.as_secs_f64(),
        drops,
        gw_socket_drops: gw.socket_drops(),
        drained_after: Some(drained_at.duration_since(stopped)),
        check,
        queue: queue_stats(&gw, t0, poll_at),
        cpu_s: cpu_s(&gw, cpu0),
    })
}
