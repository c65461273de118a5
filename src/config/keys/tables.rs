//! The keys of the file's tables: `[[channel]]` (and `[[cluster.channel]]`)
//! and `[[metric]]`, each a [`key_table!`] as the file's own are.

use super::Absent;
use super::ranges::count;

key_table! {
    /// One `[[channel]]` table. A reload applies its keys (it opens the
    /// channels again).
    #[serde(deny_unknown_fields)]
    pub struct ChannelConfig; pub const CHANNEL_KEYS;
    host: String = String::new() => {
        value: "name or address",
        absent: Absent::Required,
        meaning: "A host name or unicast address, or a multicast group (`239.2.11.71`): \
            letters, digits, `.`, `-`, `_`, `:`, at most 253 characters. One that does not \
            resolve (yet) stops the start with exit 3; an empty or malformed one is a \
            config error (exit 2).",
    },
    #[serde(default = "default_port")]
    port: u16 = 8649 => {
        range: Some(count(1, u16::MAX as u64)),
        value: "port",
        meaning: "gmond's UDP port (not 0).",
    },
    #[serde(default = "default_ttl")]
    ttl: u32 = 1 => {
        // IP_MULTICAST_TTL takes 0 to 255 (ip(7)); more is EINVAL at open.
        range: Some(count(0, 255)),
        value: "hops",
        meaning: "Multicast TTL: how many routers a packet to a group may cross.",
    },
    mcast_if: Option<String> = None => {
        value: "interface name or address",
        absent: Absent::Means(|| "the kernel's choice".into()),
        meaning: "The interface multicast packets leave by.",
    },
    bind: Option<String> = None => {
        value: "IP address",
        absent: Absent::Means(|| "the kernel's choice".into()),
        meaning: "The local address to send from.",
    },
}

/// `port`'s default, for serde: the table's.
fn default_port() -> u16 {
    ChannelConfig::default().port
}

/// `ttl`'s default, for serde: the table's.
fn default_ttl() -> u32 {
    ChannelConfig::default().ttl
}

key_table! {
    /// One `[[metric]]` table. A reload applies its keys.
    #[serde(deny_unknown_fields)]
    pub struct MetricConfig; pub const METRIC_KEYS;
    #[serde(rename = "match")]
    pattern: String = String::new() => {
        name: "match",
        value: "pattern",
        absent: Absent::Required,
        meaning: "The variables described: a pattern as `include` and `exclude` take \
            (`myplug.*_total`; the set's `<stats id>` is the first component). Two tables \
            with the same `match` are an error.",
    },
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    value_type: Option<String> = None => {
        name: "type",
        value: "`\"double\"`, `\"uint32\"` or `\"string\"`",
        absent: Absent::Means(|| "`\"double\"`".into()),
        meaning: "The Ganglia type. A counter is always a double (kept continuous past \
            32 bits); text takes no `slope`.",
    },
    #[serde(skip_serializing_if = "Option::is_none")]
    slope: Option<String> = None => {
        value: "`\"counter\"` or `\"gauge\"`",
        absent: Absent::Means(|| "`\"gauge\"`".into()),
        meaning: "`\"counter\"`: a running total, sent with slope positive (gmetad \
            stores an RRD COUNTER and graphs the rate; give `units` as a rate, \
            `\"requests/s\"`); only whole numbers are sent (`12.000000` as `12`; another \
            value is refused and counted). `\"gauge\"`: slope both.",
    },
    #[serde(skip_serializing_if = "Option::is_none")]
    units: Option<String> = None => {
        value: "text",
        absent: Absent::Means(|| "none".into()),
        meaning: "UNITS, at most 32 bytes of printable text without quotes, backslashes \
            or `<>&`.",
    },
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<String> = None => {
        value: "text",
        absent: Absent::Means(|| "the variable's name".into()),
        meaning: "The graph title (TITLE), after the program's name as for every metric.",
    },
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String> = None => {
        value: "text",
        absent: Absent::Means(|| "which `[[metric]]` described it".into()),
        meaning: "DESC: one sentence.",
    },
}
