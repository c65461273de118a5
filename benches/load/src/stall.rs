//! The longest receive stall (issue 46): how long a receive task waited
//! for a lock it shares with a sender thread (its send lane) or with a
//! poll (an XML table shard), while a send queue fills and drains.
//!
//! `--gmond-servers` (1,000) servers, for `--sustain` seconds: each second
//! every server's report within 0.1 s (the queue outgrows what a drained
//! queue keeps, so each drain frees it and trims the heap), then 0.9 s of
//! reports at 500/s (a receive task queues while the queue drains); the
//! gateway sends unpaced to the counting sink and its XML port is read
//! every second (each poll plans afresh: expires and lists every host).
//! The figures are the gateway's own (`src/daemon/lock_wait.rs`: the
//! clock is read only when a lock is found held), logged at its stop.

use super::*;

/// What the run saw.
pub(crate) struct StallRun {
    pub(crate) servers: usize,
    pub(crate) seconds: u64,
    pub(crate) records: u64,
    pub(crate) polls: usize,
    /// The gateway's log line, as logged (None: not logged, an older build).
    pub(crate) line: Option<String>,
    pub(crate) lane_us: Option<u64>,
    pub(crate) shard_us: Option<u64>,
}

/// The log line's two figures.
fn figures(line: &str) -> (Option<u64>, Option<u64>) {
    let after = |key: &str| -> Option<u64> {
        let rest = &line[line.find(key)? + key.len()..];
        rest.split_whitespace().next()?.parse().ok()
    };
    (after("send lane "), after("XML table shard "))
}

pub(crate) fn run(bin: &Path, servers: usize, sustain: Duration) -> StallRun {
    let records = Records::load(servers);
    let sink = Sink::start(&records, SinkMode::Polled);
    let sink_port = sink.port();
    let xml_port = free_port();
    let mut gw =
        Gateway::start_config_logging(bin, "info,xrd2ganglia::lock_wait=debug", |_, port| {
            Gateway::throughput_config(
                port,
                sink_port,
                0,
                &format!("xml_listen = [\"127.0.0.1:{xml_port}\"]"),
            )
        });
    let to = gw.addr();
    let sockets = records.sockets();
    let stop = Arc::new(AtomicBool::new(false));
    let poller = {
        let stop = stop.clone();
        thread::spawn(move || {
            let mut polls = 0;
            while !stop.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_secs(1));
                if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", xml_port)) {
                    use std::io::Read;
                    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
                    let mut buf = Vec::new();
                    if s.read_to_end(&mut buf).is_ok() && !buf.is_empty() {
                        polls += 1;
                    }
                }
            }
            polls
        })
    };
    let burst_rate = (servers as u64 * 10).max(1);
    let mut sent = 0;
    let t0 = Instant::now();
    while t0.elapsed() < sustain {
        sent += offer(
            &records,
            &sockets,
            to,
            Some(burst_rate),
            Duration::from_millis(100),
            None,
        );
        sent += offer(
            &records,
            &sockets,
            to,
            Some(500),
            Duration::from_millis(900),
            None,
        );
    }
    let seconds = t0.elapsed().as_secs();
    stop.store(true, Ordering::Relaxed);
    let polls = poller.join().unwrap_or(0);
    sink.settle(Duration::from_millis(300));
    gw.terminate(Duration::from_secs(30));
    let log = std::fs::read_to_string(gw.dir().join("log")).unwrap_or_default();
    let line = log
        .lines()
        .find(|l| l.contains("longest lock wait of a receive task"))
        .map(|l| strip_ansi(l).trim().to_string());
    let (lane_us, shard_us) = line.as_deref().map_or((None, None), figures);
    StallRun {
        servers,
        seconds,
        records: sent,
        polls,
        line,
        lane_us,
        shard_us,
    }
}

impl StallRun {
    pub(crate) fn print(&self) {
        println!(
            "stall: {} servers, {} s ({} records, each second all at once then 500/s), {} polls of the XML port",
            self.servers, self.seconds, self.records, self.polls
        );
        let us = |v: Option<u64>| v.map_or("not logged".to_string(), |v| format!("{v} us"));
        println!(
            "stall: longest wait of a receive task for a lock: send lane {}, XML table shard {}",
            us(self.lane_us),
            us(self.shard_us)
        );
        if let Some(line) = &self.line {
            println!("stall: the gateway logged: {line}");
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_the_gateways_line() {
        let line = "2026-11-28T21:00:00Z DEBUG xrd2ganglia::lock_wait: longest lock wait of a receive task: send lane 1234 us, XML table shard 56 us";
        assert_eq!(super::figures(line), (Some(1234), Some(56)));
    }
}
