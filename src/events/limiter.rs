//! The rate limit of log lines: one per reason per `log_interval`,
//! whoever sends, the next one saying how many were left out and from
//! which addresses ([`LogLimiter`], [`Suppressed`]).

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// Limits log lines to one per reason per interval, whoever sends: a
/// flood from 5,000 addresses is one line, not 5,000 (it was, when the
/// limit was per sender). The next line of a reason says how many were
/// left out since, and from which addresses (the first few).
pub struct LogLimiter {
    interval: Duration,
    /// Per reason (a handful of `&'static str`s: bounded by the code).
    pub(super) last: HashMap<&'static str, Window>,
}

/// One reason's interval: when its last line was, what was left out since.
pub(super) struct Window {
    pub(super) at: Instant,
    pub(super) left_out: Suppressed,
}

/// Lines left out since the last of their reason: how many, and the
/// first few distinct addresses they were about. Displays as the `suppressed`
/// field of the next line: `0`, or `12 (from 10.0.0.1, 10.0.0.2, 10.0.0.3, ...)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Suppressed {
    pub count: u64,
    pub examples: [Option<IpAddr>; EXAMPLES],
}

/// Addresses a suppressed count names at most.
pub const EXAMPLES: usize = 3;

impl Suppressed {
    fn note(&mut self, from: IpAddr) {
        self.count += 1;
        // Lines about no sender (the control socket's) name none.
        if from.is_unspecified() {
            return;
        }
        if let Some(free) = self
            .examples
            .iter()
            .position(|e| e.is_none_or(|e| e == from))
        {
            self.examples[free] = Some(from);
        }
    }

    /// The addresses named, in the order first seen.
    pub fn addresses(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.examples.iter().flatten().copied()
    }
}

impl std::fmt::Display for Suppressed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.count)?;
        for (i, ip) in self.addresses().enumerate() {
            f.write_str(if i == 0 { " (from " } else { ", " })?;
            write!(f, "{ip}")?;
        }
        let named = self.addresses().count() as u64;
        if named > 0 {
            f.write_str(if self.count > named { ", ...)" } else { ")" })?;
        }
        Ok(())
    }
}

impl LogLimiter {
    pub fn new(interval: Duration) -> LogLimiter {
        LogLimiter {
            interval,
            last: HashMap::new(),
        }
    }

    /// Some(what was left out since the last line of `reason`) if a line
    /// may be logged now; else None, and `from` is counted among those
    /// left out.
    pub fn allow(
        &mut self,
        reason: &'static str,
        from: IpAddr,
        now: Instant,
    ) -> Option<Suppressed> {
        match self.last.get_mut(reason) {
            Some(w) if now.saturating_duration_since(w.at) < self.interval => {
                w.left_out.note(from);
                None
            }
            Some(w) => {
                w.at = now;
                Some(std::mem::take(&mut w.left_out))
            }
            None => {
                self.last.insert(
                    reason,
                    Window {
                        at: now,
                        left_out: Suppressed::default(),
                    },
                );
                Some(Suppressed::default())
            }
        }
    }
}
