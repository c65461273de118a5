//! The numbers each number key takes ([`RANGES`], [`CHANNEL_RANGES`]),
//! checked before any other check and shown on the docs page.

/// The numbers a number key takes, both ends included. Checked for every
/// key listed, before anything else ([`crate::config::validate`]: `check-config`
/// and `serve` alike), so that no value reaches an overflow (an interval
/// added to the clock, a socket option); shown with the key's value on
/// the docs page and the man page. A test holds every number key of
/// [`KEYS`](super::KEYS) (and [`CHANNEL_KEYS`](super::CHANNEL_KEYS)) to a row here.
#[derive(Clone, Copy, Debug)]
pub struct Range {
    /// The key, as in its table ([`KEYS`](super::KEYS) or [`CHANNEL_KEYS`](super::CHANNEL_KEYS)).
    pub key: &'static str,
    pub min: u64,
    pub max: u64,
    /// `"second"` for a duration (said in the error), else `""`.
    pub unit: &'static str,
    /// What 0 means, where 0 is taken and means more than none (said in
    /// the error).
    pub zero: Option<&'static str>,
}

/// The longest interval a key takes: a day. Longer ones mean nothing to
/// a gateway whose sources report every minute, and every interval is
/// added to the clock somewhere.
pub const DAY: u64 = 86_400;

const fn seconds(key: &'static str, min: u64, max: u64, zero: Option<&'static str>) -> Range {
    Range {
        key,
        min,
        max,
        unit: "second",
        zero,
    }
}

const fn count(key: &'static str, min: u64, max: u64) -> Range {
    Range {
        key,
        min,
        max,
        unit: "",
        zero: None,
    }
}

/// The range of every number key of [`KEYS`](super::KEYS).
pub const RANGES: &[Range] = &[
    seconds("metadata_interval", 1, DAY, None),
    seconds("tmax", 1, DAY, None),
    // A year: gmond keeps a metric that long after its last metadata.
    seconds("dmax", 0, 365 * DAY, Some("never expire")),
    count("max_sources", 1, 10_000_000),
    count("max_metrics_per_source", 1, 10_000_000),
    // 1 GiB: the kernel caps SO_RCVBUF at net.core.rmem_max anyway, and
    // takes an int.
    count("recv_buffer", 1, 1 << 30),
    seconds("log_interval", 0, DAY, Some("counts as 1")),
    seconds("stats_interval", 0, DAY, Some("never")),
    seconds("self_metrics_interval", 0, DAY, Some("never")),
    count("send_burst", 1, 10_000_000),
    count("max_send_rate", 0, 100_000_000),
    seconds(
        "resend_after",
        0,
        crate::config::file::MAX_RESEND_AFTER,
        Some("never"),
    ),
    // An hour: systemd's stop timeout (90 s by default) ends it sooner.
    seconds("drain_timeout", 0, 3600, None),
    seconds("value_heartbeat", 1, DAY, None),
    seconds("state_interval", 1, DAY, None),
    // An hour: gmetad's RRD heartbeat at its default step is 120 s.
    seconds("warmup_max", 0, 3600, Some("at once")),
    count("max_clusters", 1, 10_000_000),
    count("detailed_max_vos", 0, 1000),
    count("detailed_max_protocols", 0, 1000),
    count("detailed_max_domains", 0, 1000),
    count("detailed_max_users", 0, 1000),
    count("detailed_max_logins", 1, 10_000_000),
];

/// The range of every number key of [`CHANNEL_KEYS`](super::CHANNEL_KEYS) (`[[channel]]` and
/// `[[cluster.channel]]`).
pub const CHANNEL_RANGES: &[Range] = &[
    count("port", 1, u16::MAX as u64),
    // IP_MULTICAST_TTL takes 0 to 255 (ip(7)); more is EINVAL at open.
    count("ttl", 0, 255),
];

/// The range of `key` in `ranges`.
pub fn range_of(ranges: &[Range], key: &str) -> Option<Range> {
    ranges.iter().find(|r| r.key == key).copied()
}

impl Range {
    /// Whether `v` is in it; else why not, as the error says it.
    pub fn check(&self, v: u64) -> Result<(), String> {
        let unit = |n: u64| match (self.unit, n) {
            ("", _) => String::new(),
            (u, 1) => format!(" {u}"),
            (u, _) => format!(" {u}s"),
        };
        if v < self.min {
            return Err(format!("must be at least {}{}", self.min, unit(self.min)));
        }
        if v > self.max {
            let mut why = format!("must be at most {}", self.max);
            let notes: Vec<String> = [
                (!self.unit.is_empty()).then(|| format!("{}s", self.unit)),
                self.zero.map(|z| format!("0: {z}")),
            ]
            .into_iter()
            .flatten()
            .collect();
            if !notes.is_empty() {
                why.push_str(&format!(" ({})", notes.join("; ")));
            }
            return Err(why);
        }
        Ok(())
    }

    /// How the docs say it: "1 to 86400".
    pub fn text(&self) -> String {
        format!("{} to {}", self.min, self.max)
    }
}
