//! gmond end to end, the table of figures and targets, and what the smoke checks.

use super::*;

// ---------------------------------------------------------------------------
// The table.

pub(crate) struct Row {
    pub(crate) figure: String,
    pub(crate) value: String,
    pub(crate) target: String,
    pub(crate) pass: Option<bool>,
    /// The smoke fails on it (drops, missing or stale metrics, a bad exit).
    pub(crate) strict: bool,
}

pub(crate) fn row(figure: impl Into<String>, value: impl Into<String>) -> Row {
    Row {
        figure: figure.into(),
        value: value.into(),
        target: String::new(),
        pass: None,
        strict: false,
    }
}

impl Row {
    pub(crate) fn target(mut self, target: &str, pass: bool) -> Row {
        self.target = target.into();
        self.pass = Some(pass);
        self
    }

    pub(crate) fn strict(mut self) -> Row {
        self.strict = true;
        self
    }
}

pub(crate) fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

pub(crate) fn or_unknown(v: Option<u64>, unit: &str) -> String {
    v.map(|v| format!("{v}{unit}"))
        .unwrap_or_else(|| "- (not logged)".into())
}

pub(crate) fn fraction(a: usize, b: usize) -> String {
    format!("{a}/{b}")
}

impl Check {
    /// The rows every view of gmond has.
    pub(crate) fn rows(&self, rows: &mut Vec<Row>) {
        rows.push(
            row(
                "    hosts in gmond",
                fraction(self.hosts_present, self.hosts),
            )
            .target("all", self.hosts > 0 && self.hosts_present == self.hosts)
            .strict(),
        );
        rows.push(
            row(
                "    metrics in gmond",
                fraction(self.metrics_present, self.metrics),
            )
            .target("all", self.complete())
            .strict(),
        );
        rows.push(
            row(
                "    hosts showing their last value for every metric",
                fraction(self.hosts_all_last, self.hosts),
            )
            .target("all", self.all_last())
            .strict(),
        );
    }
}

impl E2e {
    fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        if let Some(c) = &self.ceiling {
            ceiling_rows(c, &mut rows);
        }
        if let Some(b) = &self.burst {
            burst_rows(b, &mut rows);
        }
        if let Some(s) = &self.sustained {
            sustained_rows(s, &mut rows);
        }
        if let Some(r) = &self.restart {
            restart_rows(r, &mut rows);
        }
        if let Some(s) = &self.sigterm {
            sigterm_rows(s, &mut rows);
        }
        for e in &self.errors {
            rows.push(
                row("could not run", e.clone())
                    .target("runs", false)
                    .strict(),
            );
        }
        rows
    }

    /// The figures whose target this run missed.
    pub(crate) fn missed_targets(&self) -> Vec<String> {
        self.rows()
            .into_iter()
            .filter(|r| r.pass == Some(false))
            .map(|r| format!("{}: {} (target {})", r.figure.trim(), r.value, r.target))
            .collect()
    }

    pub fn print(&self) {
        println!();
        println!(
            "gmond end to end: {} simulated servers, a real gmond with its stock receive buffer, \
             xrd2ganglia serve with default delivery settings",
            self.servers
        );
        println!("{:<64} {:<48} {:<14} result", "figure", "value", "target");
        for r in self.rows() {
            println!(
                "{:<64} {:<48} {:<14} {}",
                r.figure,
                r.value,
                r.target,
                match r.pass {
                    Some(true) => "PASS",
                    Some(false) => "FAIL",
                    None => "",
                }
            );
        }
        for (what, c) in [
            ("(b)", self.burst.as_ref().map(|b| &b.check)),
            ("(c)", self.sustained.as_ref().map(|s| &s.check)),
            ("(d)", self.restart.as_ref().map(|r| &r.check)),
        ] {
            if let Some(ex) = c.and_then(|c| c.example.as_ref()) {
                println!("  {what} first problem seen: {ex}");
            }
        }
    }

    /// What fails the smoke: drops at gmond, missing or stale metrics, a
    /// bad exit, a run that could not run.
    pub fn smoke_failures(&self) -> Vec<String> {
        self.rows()
            .into_iter()
            .filter(|r| r.strict && r.pass == Some(false))
            .map(|r| format!("gmond: {} [{}]: {}", r.figure.trim(), r.target, r.value))
            .collect()
    }
}

/// (a): gmond's ceiling, and each step of its search.
fn ceiling_rows(c: &Ceiling, rows: &mut Vec<Row>) {
    rows.push(row(
        format!(
            "(a) gmond ceiling, value packets/s with 0 drops ({} metrics, {} hosts, {} per step)",
            c.metrics,
            c.hosts,
            secs(c.step_len)
        ),
        format!(
            "{:.0}{}",
            c.best,
            if c.sender_bound {
                " (sender-bound)"
            } else {
                ""
            }
        ),
    ));
    let steps: Vec<String> = c
        .steps
        .iter()
        .map(|s| {
            if s.ok() {
                format!("{:.0} ok", s.rate)
            } else if s.drops > 0 {
                format!("{:.0}: {} drops", s.rate, s.drops)
            } else {
                format!("{:.0}: sent only {:.0}/s", s.rate, s.achieved)
            }
        })
        .collect();
    for chunk in steps.chunks(4) {
        rows.push(row("    steps", chunk.join(", ")));
    }
}

/// (b): every server's first report at once.
fn burst_rows(b: &Burst, rows: &mut Vec<Row>) {
    rows.push(row(
        format!(
            "(b) burst: {} servers' first reports sent within",
            b.servers
        ),
        secs(b.sent_within),
    ));
    b.check.rows(rows);
    rows.push(
        row("    drops at gmond's socket", b.drops.to_string())
            .target("0", b.drops == 0)
            .strict(),
    );
    let when: Vec<String> = b
        .drops_by_time
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(i, n)| format!("{:.1} s: {n}", i as f64 / 2.0))
        .collect();
    for chunk in when.chunks(4) {
        rows.push(row(
            "    of which in the half-second from",
            chunk.join(", "),
        ));
    }
    let settle = match (b.settle(), b.drained_at) {
        (Some(t), _) => secs(t),
        (None, Some(t)) => format!(
            "never: {} at {}, but {}/{} last values",
            if b.queue.max_queue.is_some() {
                "queue empty"
            } else {
                "sending stopped"
            },
            secs(t),
            b.check.metrics_last,
            b.check.metrics
        ),
        (None, None) => format!("never: still sending at {}", secs(b.polled_at)),
    };
    rows.push(
        row(
            "    time to settle (queue empty, every last value in gmond)",
            settle,
        )
        .target("<= 10 s", b.settle().is_some_and(|t| t <= SETTLE_TARGET)),
    );
    rows.push(row(
        "    gmond last busy (took the last packet) at",
        b.gmond_busy_until
            .map(secs)
            .unwrap_or_else(|| "never busy".into()),
    ));
    rows.push(row(
        "    gmond's XML at the poll",
        format!(
            "{} bytes, polled at {}",
            b.check.xml_bytes,
            secs(b.polled_at)
        ),
    ));
    rows.push(row(
        "    gateway send queue: max packets, max age",
        format!(
            "{}, {}",
            or_unknown(b.queue.max_queue, ""),
            or_unknown(b.queue.max_age_ms, " ms")
        ),
    ));
    rows.push(row(
        "    gateway: CPU, peak RSS (VmHWM); gmond: CPU",
        format!(
            "{:.2} s, {} KiB; {:.2} s",
            b.cpu_s, b.peak_rss_kib, b.gmond_cpu_s
        ),
    ));
    rows.push(row(
        "    gateway: socket drops, send errors, packets conflated",
        format!(
            "{}, {}, {}",
            b.gw_socket_drops,
            or_unknown(b.queue.send_errors, ""),
            or_unknown(b.queue.conflated, "")
        ),
    ));
}

/// (c): servers reporting at 60% of the ceiling.
fn sustained_rows(s: &Sustained, rows: &mut Vec<Row>) {
    rows.push(row(
        format!(
            "(c) sustained: {} servers at 60% of (a) (smoke: of 16,000), offered",
            s.servers
        ),
        format!(
            "{:.0} records/s = {:.0} value packets/s",
            s.rps, s.value_pps
        ),
    ));
    rows.push(row(
        "    each server every, measured for (incl. first round)",
        format!("{}, {}", secs(s.interval), secs(s.duration)),
    ));
    rows.push(row(
        "    records sent, records/s achieved",
        format!("{}, {:.0}", s.records, s.achieved_rps),
    ));
    rows.push(
        row(
            "    hosts fresh: lag behind last report <= 3 s (TN whole s: <= 1 s high)",
            format!(
                "{}, max lag {}",
                fraction(s.check.hosts_fresh, s.check.hosts),
                s.check
                    .max_lag
                    .map(|l| format!("{l:.2} s"))
                    .unwrap_or_else(|| "-".into())
            ),
        )
        .target(
            "all",
            s.check.hosts > 0 && s.check.hosts_fresh == s.check.hosts,
        )
        .strict(),
    );
    s.check.rows(rows);
    rows.push(
        row("    drops at gmond's socket", s.drops.to_string())
            .target("0", s.drops == 0)
            .strict(),
    );
    rows.push(row(
        "    gateway drained after the servers stopped",
        s.drained_after
            .map(secs)
            .unwrap_or_else(|| "not within the wait (smoke 10 s, else 20 s)".into()),
    ));
    rows.push(row(
        "    gateway send queue: max packets, max send_queue_age",
        format!(
            "{}, {}",
            or_unknown(s.queue.max_queue, ""),
            or_unknown(s.queue.max_age_ms, " ms")
        ),
    ));
    rows.push(row(
        "    gateway: CPU per record, socket drops, send errors, conflated",
        format!(
            "{:.1} us, {}, {}, {}",
            s.cpu_s * 1e6 / s.records.max(1) as f64,
            s.gw_socket_drops,
            or_unknown(s.queue.send_errors, ""),
            or_unknown(s.queue.conflated, "")
        ),
    ));
}

/// (d): gmond restarted while the servers report.
fn restart_rows(r: &Restart, rows: &mut Vec<Row>) {
    rows.push(row(
        format!(
            "(d) gmond restart: {} servers (50% of (a); smoke 25% of 16,000), metadata_requests",
            r.servers
        ),
        format!(
            "{:.0} records/s, each server every {}, gmond down {}",
            r.rps,
            secs(r.interval),
            secs(r.down)
        ),
    ));
    rows.push(
        row(
            "    before the restart: metrics in gmond, with last value",
            format!(
                "{}, {}",
                fraction(r.before.metrics_present, r.before.metrics),
                fraction(r.before.metrics_last, r.before.metrics)
            ),
        )
        .target("all", r.before.complete() && r.before.all_last())
        .strict(),
    );
    let polls: Vec<String> = r
        .polls
        .iter()
        .map(|(t, n)| format!("{:.1} s: {n}", t.as_secs_f64()))
        .collect();
    for chunk in polls.chunks(4) {
        rows.push(row(
            "    polls after restart: metrics present",
            chunk.join(", "),
        ));
    }
    rows.push(
        row(
            "    every metric of every host back by (queue empty before the poll)",
            r.back_after.map(secs).unwrap_or_else(|| {
                format!(
                    "not back ({})",
                    fraction(r.check.metrics_present, r.check.metrics)
                )
            }),
        )
        .target("<= 5 s", r.back_after.is_some_and(|t| t <= BACK_TARGET)),
    );
    r.check.rows(rows);
    rows.push(
        row(
            "    drops at gmond's socket while the servers sent",
            format!(
                "{} ({} before the stop, {} after the restart)",
                r.drops_sending,
                r.drops_before_stop,
                r.drops_sending - r.drops_before_stop.min(r.drops_sending)
            ),
        )
        .target("0", r.drops_sending == 0)
        .strict(),
    );
    rows.push(
        row(
            "    drops at gmond's socket during XML polls (servers paused)",
            format!("{} (gateway drained before each poll)", r.drops_polls),
        )
        .target("0", r.drops_polls == 0)
        .strict(),
    );
    rows.push(row(
        "    gmond's 136 requests heard, answered (gateway counters)",
        format!(
            "{}, {}",
            or_unknown(r.requests, ""),
            or_unknown(r.answered, "")
        ),
    ));
}

/// (e): SIGTERM right after a burst.
fn sigterm_rows(s: &Sigterm, rows: &mut Vec<Row>) {
    let ok = s.status == Some(0) && s.exit_after.is_some_and(|t| t <= EXIT_TARGET);
    rows.push(
        row(
            format!("(e) SIGTERM right after a {}-server burst: exit", s.servers),
            match (s.exit_after, s.status, s.signal) {
                (None, _, _) => "still running after 30 s (killed)".into(),
                (Some(t), Some(c), _) => format!("status {c} after {}", secs(t)),
                (Some(t), None, sig) => {
                    format!("killed by signal {sig:?} after {}", secs(t))
                }
            },
        )
        .target("0 within 10 s", ok)
        .strict(),
    );
    let every = s.gw_sources.unwrap_or(s.servers as u64).max(1) as usize;
    rows.push(
        row(
            "    state file: bytes, servers named (the gateway had)",
            format!(
                "{}, {} ({})",
                s.state_bytes
                    .map(|b| b.to_string())
                    .unwrap_or_else(|| "missing".into()),
                fraction(s.state_sources, s.servers),
                or_unknown(s.gw_sources, " sources")
            ),
        )
        .target(
            "written, all",
            s.state_bytes.is_some_and(|b| b > 0) && s.state_sources >= every,
        )
        .strict(),
    );
}
