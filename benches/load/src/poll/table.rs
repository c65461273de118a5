//! The run's table: a mode's figures and each poll's, as printed.

use super::{DROP_TARGET_PCT, ModeRun, PollFigures, PollRun, mode};

fn opt(v: Option<u64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

fn lag(v: Option<f64>) -> String {
    v.map(|l| format!("{l:.1}")).unwrap_or_else(|| "-".into())
}

fn verdict(ok: bool) -> &'static str {
    if ok { "PASS" } else { "FAIL" }
}

impl PollRun {
    pub fn print(&self) {
        println!();
        println!(
            "gmetad polls gmond while the servers send: {} simulated servers reporting every {:.0} s \
             ({:.0} records/s), gmond's and the gateway's XML polled every {:.0} s for {:.0} s per mode",
            self.servers,
            self.interval.as_secs_f64(),
            self.servers as f64 / self.interval.as_secs_f64().max(1e-9),
            self.every.as_secs_f64(),
            self.duration.as_secs_f64()
        );
        println!(
            "  behind: hosts (summed over polls) showing a report older than their last one sent \
             at least {:.0} s before the poll; missing: such hosts absent; lag: poll instant - send \
             instant of the report shown; partial: hosts showing the same report as the gateway's \
             document but not all of its values (packets of it lost)",
            self.interval.as_secs_f64()
        );
        for m in &self.modes {
            m.print_polls();
        }
        self.print_table();
        self.print_modes();
        for e in &self.errors {
            println!("  not run: {e}");
        }
    }

    /// One line per mode: what was sent, dropped and shown in the polls.
    fn print_table(&self) {
        println!();
        println!(
            "{:<9} {:>8} {:>10} {:>8} {:>9} {:>9} {:>7} {:>9} {:>11} {:>9} {:>9} {:>9} {:>11} {:>9} {:>12} {:>10}",
            "mode",
            "rec/s",
            "sent",
            "resent",
            "held ms",
            "drops",
            "drop %",
            "in polls",
            "gmond poll",
            "behind",
            "missing",
            "partial",
            "max lag",
            "xml poll",
            "xml behind",
            "xml lag"
        );
        for m in &self.modes {
            let (g, x) = (&m.gmond, &m.xml);
            let (gmin, gmax) = g.took();
            let (xmin, xmax) = x.took();
            println!(
                "{:<9} {:>8.1} {:>10} {:>8} {:>9} {:>9} {:>7} {:>9} {:>11} {:>9} {:>9} {:>9} {:>11} {:>9} {:>12} {:>10}",
                m.mode,
                m.records as f64 / m.seconds.max(1e-9),
                format!("{}{}", if m.sent_estimated { "~" } else { "" }, opt(m.sent)),
                opt(m.resent),
                opt(m.held_ms),
                m.drops,
                m.drop_pct()
                    .map(|p| format!("{p:.2}"))
                    .unwrap_or_else(|| "-".into()),
                m.drops_in_polls,
                format!("{gmin:.2}-{gmax:.2} s"),
                format!("{}/{}", g.sum(|p| p.behind), g.sum(|p| p.hosts)),
                g.sum(|p| p.missing + p.unknown),
                g.sum(|p| p.partial.unwrap_or(0)),
                format!("{} s", lag(g.max_lag())),
                format!("{xmin:.2}-{xmax:.2} s"),
                format!(
                    "{}+{}",
                    x.sum(|p| p.behind),
                    x.sum(|p| p.missing + p.unknown)
                ),
                format!("{} s", lag(x.max_lag())),
            );
        }
    }

    /// What each mode cost the gateway, and the targets of `follow`.
    fn print_modes(&self) {
        println!(
            "  sent: the gateway's packets_sent over the run (second copies included; ~: estimated \
             from what it encoded, for a binary that does not log it); drops: at gmond's socket over \
             the run, drop %: of sent; in polls: of those, while gmond wrote a document; xml behind: \
             behind+missing hosts at the gateway's own port"
        );
        for m in &self.modes {
            let failed = m.gmond.failed() + m.xml.failed();
            println!(
                "  {:<9} gateway CPU {:.1} s ({:.1}% of one core), peak RSS {} KiB, conflated {}, \
                 drops at its own socket {}, documents {} and {} bytes (gmond, xml port){}{}; {}",
                m.mode,
                m.cpu_s,
                m.cpu_pct(),
                m.peak_rss_kib,
                opt(m.conflated),
                m.gw_socket_drops,
                m.gmond.bytes(),
                m.xml.bytes(),
                if m.drained {
                    ""
                } else {
                    "; NOT drained within 20 s of the end"
                },
                if failed > 0 {
                    format!("; {failed} polls failed")
                } else {
                    String::new()
                },
                mode(m.mode).map_or("", |x| x.about)
            );
            if mode(m.mode).is_some_and(|x| x.old_bin) {
                println!("            binary {}", m.bin.display());
            }
        }
        for m in self.modes.iter().filter(|m| m.mode == "follow") {
            println!("  targets (follow: default settings, local gmond):");
            println!(
                "    drops at gmond <= {DROP_TARGET_PCT}% of packets sent   {:>8}   {}",
                m.drop_pct()
                    .map(|p| format!("{p:.2}%"))
                    .unwrap_or_else(|| "-".into()),
                verdict(m.drops_ok())
            );
            println!(
                "    every host within one interval at every poll   {:>8}   {}",
                format!(
                    "{}/{} polls",
                    m.gmond.polls.iter().filter(|p| p.fresh()).count(),
                    m.gmond.polls.len()
                ),
                verdict(m.gmond.fresh())
            );
        }
    }
}

impl ModeRun {
    /// One line per poll: gmond's document and the gateway's, side by side.
    fn print_polls(&self) {
        println!();
        println!(
            "  mode {}: per poll (t: seconds into the run; drops: at gmond's socket while it wrote \
             the document; rep. back: how many reports the most stale host was behind; partial: hosts \
             (their values not the report's))",
            self.mode
        );
        println!(
            "  {:>6} | {:>7} {:>8} {:>7} {:>7} {:>8} {:>9} {:>9} | {:>7} {:>7} {:>7} {:>8}",
            "t",
            "gmond",
            "drops",
            "behind",
            "missing",
            "max lag",
            "rep. back",
            "partial",
            "xml",
            "behind",
            "missing",
            "max lag"
        );
        let took = |p: &PollFigures| match &p.error {
            None => format!("{:.2} s", p.took_s),
            Some(_) => "failed".into(),
        };
        for (i, g) in self.gmond.polls.iter().enumerate() {
            let x = self.xml.polls.get(i).cloned().unwrap_or_default();
            println!(
                "  {:>6.1} | {:>7} {:>8} {:>7} {:>7} {:>8} {:>9} {:>9} | {:>7} {:>7} {:>7} {:>8}",
                g.at_s,
                took(g),
                opt(g.drops),
                format!("{}/{}", g.behind, g.hosts),
                g.missing + g.unknown,
                lag(g.max_lag),
                g.max_reports_behind,
                g.partial
                    .map(|h| format!("{h} ({})", g.values_off))
                    .unwrap_or_else(|| "-".into()),
                took(&x),
                x.behind,
                x.missing + x.unknown,
                lag(x.max_lag),
            );
        }
        for (what, path) in [("gmond", &self.gmond), ("xml port", &self.xml)] {
            if let Some(e) = path.polls.iter().find_map(|p| p.error.as_ref()) {
                println!("  {what}: a poll failed: {e}");
            }
        }
    }
}
