//! One xrootd scenario for every path to gmetad: two replayed servers,
//! one restarting twice (once while the gateway itself restarts), one
//! whose C `int` counter wraps past 2^32; then the host and summary RRDs
//! that a real gmetad wrote must show every rate within the sampling
//! jitter of the true one, with no spike and no gap.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::{Gateway, Gmetad, Scratch, free_port};

const QUIET: &str = "stats_interval = 0\nself_metrics_interval = 0\nlog_interval = 1\n";

pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// An xrootd replayed by the test: its byte counter grows at `rate` per
/// second of the wall clock, whether or not the test is sending (an
/// xrootd counts while the gateway restarts), and starts from zero again
/// at each restart (new pid).
pub struct Replayed {
    ip: &'static str,
    host: &'static str,
    pid: u32,
    tos: u64,
    /// When its counter was zero: its (re)start.
    origin: Instant,
    /// When it last reported (its restart follows at once: nothing it
    /// counted goes unreported).
    last_sent: Instant,
    /// Where its C `int` timeout counter starts: xrootd prints it with %d,
    /// so past 2^31 it reads negative, and it wraps at 2^32.
    tmo_base: u64,
}

impl Replayed {
    /// A server whose counter has counted `counted` seconds by now.
    fn new(
        ip: &'static str,
        host: &'static str,
        pid: u32,
        tos: u64,
        counted: f64,
        tmo_base: u64,
    ) -> Self {
        let now = Instant::now();
        Replayed {
            ip,
            host,
            pid,
            tos,
            origin: now - Duration::from_secs_f64(counted),
            last_sent: now,
            tmo_base,
        }
    }

    /// Its record now, and the unix time it was taken at.
    fn record(&mut self, rate: f64) -> String {
        let now = Instant::now();
        self.last_sent = now;
        let reading = ((now - self.origin).as_secs_f64() * rate) as u64;
        let tmo = (self.tmo_base + reading / 100) as u32 as i32;
        format!(
            r#"<statistics tod="{}" ver="v5.5.3" src="{}:1094" tos="{}" pgm="xrootd" ins="anon" pid="{}" site="T2_TEST"><stats id="link"><num>3</num><in>{reading}</in><tmo>{tmo}</tmo></stats></statistics>"#,
            unix_now(),
            self.host,
            self.tos,
            self.pid
        )
    }

    /// A restart right after its last report: the new process counts from
    /// then, so its counter and the old one's together grew at `rate`
    /// every second (as a real restart's would, less what the old one
    /// counted and never reported, which no gateway can know of).
    fn restart(&mut self) {
        self.pid += 1;
        self.tos += 100;
        self.origin = self.last_sent;
    }
}

/// Sends both servers' records every 250 ms for `secs` seconds; returns
/// the unix time (fractional) of the last send. A late tick on a busy
/// machine sends what the servers counted meanwhile: the true rate stays
/// `rate`.
pub fn replay(gw: &Gateway, servers: &mut [Replayed], rate: f64, secs: f64) -> f64 {
    let tick = Duration::from_millis(250);
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut last = unix_now_f64();
    while Instant::now() < end {
        for s in servers.iter_mut() {
            gw.send_as(s.ip, s.record(rate).as_bytes());
        }
        last = unix_now_f64();
        std::thread::sleep(tick);
    }
    last
}

fn unix_now_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Longest run of unknown rows between the first and the last known one.
pub fn longest_gap(rows: &[(u64, Option<f64>)]) -> usize {
    let first = rows.iter().position(|(_, v)| v.is_some());
    let last = rows.iter().rposition(|(_, v)| v.is_some());
    let (Some(first), Some(last)) = (first, last) else {
        return usize::MAX;
    };
    let (mut longest, mut run) = (0, 0);
    for (_, v) in &rows[first..=last] {
        if v.is_none() {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    longest
}

/// Runs the scenario through gateways made by `launch(port, config)` (the
/// same port each time; `config` adds to the scenario's own), with
/// `gmetad` polling whatever they feed, its RRDs under `cluster`.
pub fn restarts_draw_no_spike(
    gmetad: &Gmetad,
    cluster: &str,
    config: &str,
    launch: &dyn Fn(u16, &str) -> Gateway,
) {
    const RATE: f64 = 1000.0;
    let dir = Scratch::new("continuity");
    let config = format!(
        "{QUIET}metadata_interval = 5\ndmax = 0\nstate_interval = 1\nstate_file = {:?}\n{config}",
        dir.path().join("state").display().to_string()
    );
    let gw_port = free_port();
    let mut gw = launch(gw_port, &config);
    let tos = unix_now() - 1000;
    let mut servers = [
        Replayed::new("127.0.8.1", "a.example", 100, tos, 1000.0, 0),
        // 80 short of 2^32 at the start: at 10/s it wraps 8 s in.
        Replayed::new(
            "127.0.8.2",
            "b.example",
            200,
            tos,
            5000.0,
            (1u64 << 32) - 80 - 50_000,
        ),
    ];
    let start = unix_now();
    replay(&gw, &mut servers, RATE, 6.0);
    // a.example restarts: its counters start from zero.
    servers[0].restart();
    replay(&gw, &mut servers, RATE, 6.0);
    // The gateway restarts, and a.example restarts again while it is down.
    assert!(gw.proc.terminate().success(), "{}", gw.proc.log_text());
    servers[0].restart();
    gw = launch(gw_port, &config);
    let last_sent = replay(&gw, &mut servers, RATE, 6.0);
    assert!(
        gw.proc.log_text().contains("2 sources restored"),
        "{}",
        gw.proc.log_text()
    );
    // The last row whose every poll came while the servers still sent: a
    // row stamped T holds (T - 1, T] and gmetad reads at any moment of
    // the second it stamps, so T + 1 must precede the last send (a row
    // after it holds no growth, read past the senders' end).
    let end = last_sent.floor() as u64 - 1;

    let checks = [
        (
            "a.example",
            gmetad.rrd_path(cluster, "a.example", "xrootd.link.in"),
            RATE,
        ),
        (
            "b.example",
            gmetad.rrd_path(cluster, "b.example", "xrootd.link.in"),
            RATE,
        ),
        (
            "summary",
            gmetad.summary_rrd_path(cluster, "xrootd.link.in"),
            2.0 * RATE,
        ),
        (
            "a.example tmo",
            gmetad.rrd_path(cluster, "a.example", "xrootd.link.tmo"),
            RATE / 100.0,
        ),
        (
            "b.example tmo (wraps)",
            gmetad.rrd_path(cluster, "b.example", "xrootd.link.tmo"),
            RATE / 100.0,
        ),
        (
            "summary tmo",
            gmetad.summary_rrd_path(cluster, "xrootd.link.tmo"),
            2.0 * RATE / 100.0,
        ),
    ];
    for (what, path, rate) in &checks {
        gmetad.wait_for_update(path, end, Duration::from_secs(15));
        let rows = gmetad.fetch(path, start, end);
        let known: Vec<f64> = rows.iter().filter_map(|(_, v)| *v).collect();
        assert!(
            known.len() >= 12,
            "{what}: only {} known rows: {rows:?}",
            known.len()
        );
        let max = known.iter().cloned().fold(0.0, f64::max);
        let mean = known.iter().sum::<f64>() / known.len() as f64;
        eprintln!(
            "{what}: {} rows, max {max:.1}/s, mean {mean:.1}/s (true {rate}/s)",
            known.len()
        );
        // Polls and sends are not in step and gmetad stamps whole seconds: a
        // row may hold two polls' growth, and on a busy machine a record
        // late by up to a poll makes one row short and the next that much
        // more. A restart or wrap spike would be ~4.3e9. The servers count
        // on the wall clock (through the gateway's restart too) and the
        // rows end before their last send, so every row's true rate is
        // `rate`: issue 45 saw a mean of 89% when the replayed servers'
        // clock stopped while the gateway restarted (rows short by the
        // pause, never made up) and the rows ran past the senders' end
        // (rows after the last send held no growth); since, over six runs
        // on this 2-core VM (2026-11-28), every row was 967-1252 and the
        // means 98.4-101.8% of the rate.
        assert!(
            max <= 3.0 * rate,
            "{what}: rate {max} over the true {rate}: {rows:?}"
        );
        assert!(
            mean >= 0.9 * rate && mean <= 1.1 * rate,
            "{what}: mean rate {mean}, true {rate}: {rows:?}"
        );
        assert!(
            longest_gap(&rows) <= 1,
            "{what}: a gap of more than one step: {rows:?}"
        );
    }
}
