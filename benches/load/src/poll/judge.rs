//! Judging each poll against the servers' schedule: which hosts were
//! behind or missing, by how much, which showed part of a report.

use std::time::{Duration, Instant};

use super::pollers::{HostShown, Poll, Shown, naming};
use super::{PathFigures, PollFigures};
use crate::e2e::Fleet;
use crate::server_ip;

pub(super) struct Judge<'a, 'r> {
    pub(super) fleet: &'a Fleet<'r>,
    pub(super) interval: Duration,
    pub(super) t0: Instant,
}

impl Judge<'_, '_> {
    /// Each poll of one path; with `reference` (the gateway's document,
    /// polled at the same instants), also its partial reports.
    pub(super) fn path(&self, polls: &[Poll], reference: Option<&[Poll]>) -> PathFigures {
        PathFigures {
            polls: polls
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let r = reference
                        .and_then(|r| r.get(i))
                        .and_then(|r| r.doc.as_ref().ok());
                    self.poll(p, r)
                })
                .collect(),
        }
    }

    /// Which of server `s`'s reports `host` shows (an index into its
    /// history): None when it shows none, Some(Err) when the value is none
    /// of its reports'.
    fn report(&self, s: usize, host: Option<&HostShown>) -> Option<Result<usize, ()>> {
        let records = self.fleet.records;
        let value = host?.named.get(naming(records, s))?;
        let k = value
            .trim()
            .parse::<f64>()
            .ok()
            .map(|v| v.round() as i64 - records.seq_offset[records.fixture_of(s)])
            .and_then(|k| usize::try_from(k).ok())
            .filter(|&k| k < self.fleet.history[s].len());
        Some(k.ok_or(()))
    }

    fn poll(&self, p: &Poll, reference: Option<&Shown>) -> PollFigures {
        let mut f = PollFigures {
            at_s: p.at.duration_since(self.t0).as_secs_f64(),
            took_s: p.took.as_secs_f64(),
            drops: p.drops,
            partial: reference.map(|_| 0),
            ..PollFigures::default()
        };
        let doc = match &p.doc {
            Ok(d) => d,
            Err(e) => {
                f.error = Some(e.clone());
                return f;
            }
        };
        f.bytes = doc.bytes;
        for s in 0..self.fleet.len() {
            let history = &self.fleet.history[s];
            // Reports sent before the poll, and at least an interval before.
            let before = history.partition_point(|t| *t <= p.at);
            let due = history.partition_point(|t| *t + self.interval <= p.at);
            if due == 0 {
                continue;
            }
            f.hosts += 1;
            let ip = server_ip(s).to_string();
            let host = doc.hosts.get(&ip);
            let k = match self.report(s, host) {
                None => {
                    f.missing += 1;
                    continue;
                }
                Some(Err(())) => {
                    f.unknown += 1;
                    continue;
                }
                Some(Ok(k)) => k,
            };
            let shown = k.min(before - 1);
            let lag = p.at.duration_since(history[shown]).as_secs_f64();
            f.max_lag = Some(f.max_lag.map_or(lag, |m| m.max(lag)));
            if k + 1 < due {
                f.behind += 1;
                f.max_reports_behind = f.max_reports_behind.max((due - 1 - k) as u32);
            }
            // The same report in the gateway's document: every other
            // metric of it must be there too. gmond's host keeps the older
            // value of each metric whose packet of this report it lost.
            let theirs = reference.and_then(|r| r.hosts.get(&ip));
            if let (Some(host), Some(theirs), Some(partial)) = (host, theirs, f.partial.as_mut())
                && self.report(s, Some(theirs)) == Some(Ok(k))
            {
                let off = theirs
                    .values
                    .iter()
                    .filter(|(name, val)| host.values.get(*name) != Some(*val))
                    .count();
                if off > 0 {
                    *partial += 1;
                    f.values_off += off;
                }
            }
        }
        f
    }
}
