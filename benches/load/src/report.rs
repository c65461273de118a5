//! The load tool: the report and the smoke checks.

use super::*;

// ---------------------------------------------------------------------------
// Report.

#[derive(Default)]
pub(crate) struct Report {
    pub(crate) raw_send: Option<Run>,
    pub(crate) raw_mmsg: Option<Run>,
    pub(crate) serve_max: Option<Run>,
    pub(crate) paced: Vec<Run>,
    pub(crate) mpxstats_theirs: Option<Run>,
    pub(crate) mpxstats_ours: Option<Run>,
    pub(crate) chain: Option<Run>,
    pub(crate) memory: Option<Memory>,
    pub(crate) gmond: Option<e2e::E2e>,
    /// The memory run again, with an XML port, and one poll of it.
    pub(crate) memory_xml: Option<Memory>,
    pub(crate) xml: Option<xml::XmlRun>,
    /// gmetad's polls with hostile clients on the XML port.
    pub(crate) hostile: Option<hostile::HostileRun>,
    /// gmetad polling gmond at a site's load, per delivery mode (`--only poll`).
    pub(crate) poll: Option<poll::PollRun>,
}

impl Report {
    pub(crate) fn raw_best(&self) -> Option<f64> {
        [&self.raw_send, &self.raw_mmsg]
            .iter()
            .filter_map(|r| r.as_ref().map(|r| r.packets_ps))
            .reduce(f64::max)
    }

    /// The runs of the first table, in order.
    pub(crate) fn runs(&self) -> impl Iterator<Item = &Run> {
        [&self.raw_send, &self.raw_mmsg, &self.serve_max]
            .into_iter()
            .flatten()
            .chain(self.paced.iter())
            .chain(
                [&self.mpxstats_theirs, &self.mpxstats_ours, &self.chain]
                    .into_iter()
                    .flatten(),
            )
    }

    pub(crate) fn print(&self, records: &Records) {
        // Only the runs into gmond or polled by gmetad: no empty first table.
        if self.runs().next().is_none()
            && self.memory.is_none()
            && self.memory_xml.is_none()
            && (self.gmond.is_some() || self.poll.is_some())
        {
            if let Some(e) = &self.gmond {
                e.print();
            }
            if let Some(p) = &self.poll {
                p.print();
            }
            return;
        }
        self.print_runs();
        self.print_ratios(records);
        self.print_memory();
        if let Some(e) = &self.gmond {
            e.print();
        }
        if let Some(x) = &self.xml {
            x.print();
        }
        if let Some(h) = &self.hostile {
            h.print();
        }
        if let Some(p) = &self.poll {
            p.print();
        }
    }

    /// The table of the runs into the counting sink, one line each.
    fn print_runs(&self) {
        println!();
        let some = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_else(|| "-".into());
        println!(
            "{:<42} {:>10} {:>10} {:>11} {:>8} {:>10} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6} {:>9}",
            "run",
            "offered/s",
            "records/s",
            "packets/s",
            "lost",
            "superseded",
            "conflated",
            "drops",
            "sendfail",
            "sinkdrop",
            "p50 us",
            "p99 us",
            "cpu %",
            "peak KiB"
        );
        for r in self.runs() {
            println!(
                "{:<42} {:>10} {:>10.0} {:>11.0} {:>8} {:>10} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6} {:>9}",
                r.label,
                r.offered_rps
                    .map(|v| format!("{v:.0}"))
                    .unwrap_or_else(|| "-".into()),
                r.achieved_rps,
                r.packets_ps,
                r.not_forwarded,
                some(r.superseded),
                some(r.conflated),
                r.socket_drops,
                some(r.send_errors),
                r.sink_drops,
                opt(r.p50_us),
                opt(r.p99_us),
                r.cpu_pct
                    .map(|v| format!("{v:.0}"))
                    .unwrap_or_else(|| "-".into()),
                some(r.peak_rss_kib),
            );
        }
        if self.serve_max.is_some() || !self.paced.is_empty() {
            for line in [
                "serve runs: lost: a record's last value packet never arrived, nor a later record's of its server",
                "            superseded: it never arrived but a later record's did (only newer values were sent)",
                "            conflated: the gateway's packets_conflated in the run (final minus before, warm-up excluded)",
                "            p50/p99: over the records that arrived",
            ] {
                println!("  {line}");
            }
        }
    }

    /// The ratios against their targets.
    fn print_ratios(&self, records: &Records) {
        println!();
        println!("ratios (targets in brackets):");
        if let (Some(raw), Some(s)) = (self.raw_best(), &self.serve_max) {
            println!(
                "  serve forwarded packets/s / raw loopback    {:>8.2}   [>= 0.80] (raw: counting sink, best of send and sendmmsg)",
                s.packets_ps / raw
            );
        }
        if let Some(us) = self.serve_max.as_ref().and_then(|s| s.cpu_us_per_record) {
            println!(
                "  serve flat out: gateway CPU per record read {:>6.1} us (arrived or superseded)",
                us
            );
        }
        if let (Some(theirs), Some(ours)) = (&self.mpxstats_theirs, &self.mpxstats_ours) {
            println!(
                "  receive+parse: our mpxstats / XRootD's      {:>8.2}   [>= 2]",
                ours.achieved_rps / theirs.achieved_rps.max(1e-9)
            );
        }
        if let (Some(c), Some(s)) = (&self.chain, &self.serve_max) {
            println!(
                "  serve records/s / mpxstats+gmetric chain   {:>8.0}   [>= 500] (chain: {:.1} values/s = {:.3} records/s)",
                s.achieved_rps / c.achieved_rps.max(1e-9),
                c.achieved_rps * records.flat_lines_per_record(),
                c.achieved_rps
            );
        }
        if let Some(r) = self
            .paced
            .iter()
            .find(|r| r.label == "serve at 1000 records/s")
        {
            println!(
                "  p99 latency at 1000 records/s              {:>8} us [< 1000]",
                opt(r.p99_us)
            );
        }
    }

    /// Bytes per (host, metric) pair, without and with an XML port.
    fn print_memory(&self) {
        if let Some(m) = &self.memory {
            println!(
                "  memory: {} sources x {} metrics = {} pairs; VmRSS before {} KiB; {}",
                m.sources,
                m.pairs / m.sources.max(1) as u64,
                m.pairs,
                m.rss_before_kib,
                match m.drained_after {
                    Some(s) => format!("all read and send_queue=0 {s:.1} s after the last send"),
                    None => "NOT drained within 60 s (send_queue not 0): RSS read anyway".into(),
                }
            );
            println!(
                "    steady (VmRSS, queue empty)   {:>8} KiB: {:>6.0} bytes per pair [<= 250]",
                m.rss_after_kib,
                m.bytes_per_pair()
            );
            println!(
                "    peak (VmHWM)                  {:>8} KiB: {:>6.0} bytes per pair",
                m.peak_kib,
                m.peak_bytes_per_pair()
            );
        }
        if let Some(m) = &self.memory_xml {
            println!(
                "  memory with an XML port (last values kept for gmetad): {} pairs",
                m.pairs
            );
            println!(
                "    steady (VmRSS, queue empty)   {:>8} KiB: {:>6.0} bytes per pair [<= 250]",
                m.rss_after_kib,
                m.bytes_per_pair()
            );
            if let Some(p) = &m.poll {
                println!(
                    "    one poll: {} bytes ({:.1} MB) in {:.2} s; VmHWM after it {} KiB ({:.0} bytes per pair)",
                    p.bytes,
                    p.bytes as f64 / 1e6,
                    p.secs,
                    p.peak_kib,
                    m.per_pair(p.peak_kib)
                );
            }
        }
    }

    /// What the smoke pass must show: every part ran, no serve run lost a
    /// record (flat out, superseded ones are fine: that is overload; so
    /// are records the kernel dropped at the gateway's socket with no later
    /// record of their server sent after them, which flat out happens when
    /// the window ends with that socket full: a CI run saw 47 such records
    /// with 2,745 socket drops, two reruns 0; more lost than dropped is a
    /// loss of the gateway's own), and at a low rate the gateway forwarded
    /// every record, none superseded, nothing dropped at its socket (the
    /// send queue must not hold values back without overload).
    pub(crate) fn check_smoke(&self) {
        let mut failed = Vec::new();
        for r in [&self.raw_send, &self.raw_mmsg, &self.serve_max]
            .into_iter()
            .flatten()
        {
            if r.packets_ps <= 0.0 {
                failed.push(format!("{}: no packets arrived", r.label));
            }
        }
        // A record is lost when its last packet was dropped (at the
        // gateway's socket, or at the sink's: flat out the gateway sends
        // unpaced, and a CI run at load 13 starved the sink into 20,577
        // drops and 12 lost records); more lost than both is the gateway's.
        if let Some(r) = &self.serve_max
            && r.not_forwarded > r.socket_drops + r.sink_drops
        {
            failed.push(format!(
                "{}: {} of {} records lost ({} arrived, {} superseded, {} socket drops, {} at the sink)",
                r.label,
                r.not_forwarded,
                r.sent,
                r.completed,
                r.superseded.unwrap_or(0),
                r.socket_drops,
                r.sink_drops
            ));
        }
        for r in &self.paced {
            if r.completed == 0
                || r.not_forwarded > 0
                || r.superseded != Some(0)
                || r.socket_drops > 0
            {
                failed.push(format!(
                    "{}: {} of {} records arrived, {} lost, {} superseded, {} socket drops",
                    r.label,
                    r.completed,
                    r.sent,
                    r.not_forwarded,
                    r.superseded
                        .map(|v| v.to_string())
                        .unwrap_or_else(|| "?".into()),
                    r.socket_drops
                ));
            }
            if r.p99_us.is_none() {
                failed.push(format!("{}: no latency measured", r.label));
            }
        }
        // A tool that is missing fails the smoke, as it fails the tests.
        for (what, r) in [
            ("XRootD's mpxstats", &self.mpxstats_theirs),
            ("our mpxstats", &self.mpxstats_ours),
            ("the mpxstats | perl | gmetric chain", &self.chain),
        ] {
            match r {
                None => failed.push(format!("{what}: not run (a tool missing or not started)")),
                Some(r) if r.completed == 0 => {
                    failed.push(format!("{}: nothing came out", r.label))
                }
                Some(_) => {}
            }
        }
        if let Some(m) = &self.memory {
            if m.rss_after_kib == 0 {
                failed.push("memory: no RSS read".into());
            }
            if m.drained_after.is_none() {
                failed.push("memory: the gateway's send queue did not drain".into());
            }
        }
        if let Some(e) = &self.gmond {
            failed.extend(e.smoke_failures());
        }
        if let Some(x) = &self.xml {
            failed.extend(x.problems());
        }
        if let Some(h) = &self.hostile {
            failed.extend(h.problems(false));
        }
        if let Some(m) = &self.memory_xml {
            match &m.poll {
                Some(p) if p.bytes > 0 => {}
                _ => failed.push("memory with an XML port: the poll got nothing".into()),
            }
        }
        if !failed.is_empty() {
            eprintln!("load smoke failed:\n  {}", failed.join("\n  "));
            std::process::exit(1);
        }
        println!("load smoke: ok");
    }
}

/// A latency, or "-" where none was measured.
fn opt(v: Option<u32>) -> String {
    v.map(|v| format!("{v}")).unwrap_or_else(|| "-".into())
}
