//! The keys of the file's tables: `[[channel]]` (and `[[cluster.channel]]`)
//! and `[[metric]]`, each a [`Key`] as the file's own are.

use super::{Absent, Key, OnSighup};

/// The keys of a `[[channel]]` table, in [`ChannelConfig`](crate::config::ChannelConfig)'s order. A
/// reload applies them all (it opens the channels again).
pub const CHANNEL_KEYS: &[Key] = &[
    Key {
        name: "host",
        value: "name or address",
        absent: Absent::Required,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "A host name or unicast address, or a multicast group (`239.2.11.71`): \
            letters, digits, `.`, `-`, `_`, `:`, at most 253 characters. One that does not \
            resolve (yet) stops the start with exit 3; an empty or malformed one is a \
            config error (exit 2).",
    },
    Key {
        name: "port",
        value: "port",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "gmond's UDP port (not 0).",
    },
    Key {
        name: "ttl",
        value: "hops",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "Multicast TTL: how many routers a packet to a group may cross.",
    },
    Key {
        name: "mcast_if",
        value: "interface name or address",
        absent: Absent::Means(|| "the kernel's choice".into()),
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "The interface multicast packets leave by.",
    },
    Key {
        name: "bind",
        value: "IP address",
        absent: Absent::Means(|| "the kernel's choice".into()),
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "The local address to send from.",
    },
];

/// The keys of a `[[metric]]` table, in [`MetricConfig`](crate::config::MetricConfig)'s order. A
/// reload applies them all.
pub const METRIC_KEYS: &[Key] = &[
    Key {
        name: "match",
        value: "pattern",
        absent: Absent::Required,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "The variables described: a pattern as `include` and `exclude` take \
            (`myplug.*_total`; the set's `<stats id>` is the first component). Two tables \
            with the same `match` are an error.",
    },
    Key {
        name: "type",
        value: "`\"double\"`, `\"uint32\"` or `\"string\"`",
        absent: Absent::Means(|| "`\"double\"`".into()),
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "The Ganglia type. A counter is always a double (kept continuous past \
            32 bits); text takes no `slope`.",
    },
    Key {
        name: "slope",
        value: "`\"counter\"` or `\"gauge\"`",
        absent: Absent::Means(|| "`\"gauge\"`".into()),
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "`\"counter\"`: a running total, sent with slope positive (gmetad \
            stores an RRD COUNTER and graphs the rate; give `units` as a rate, \
            `\"requests/s\"`); only whole numbers are sent (`12.000000` as `12`; another \
            value is refused and counted). `\"gauge\"`: slope both.",
    },
    Key {
        name: "units",
        value: "text",
        absent: Absent::Means(|| "none".into()),
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "UNITS, at most 32 bytes of printable text without quotes, backslashes \
            or `<>&`.",
    },
    Key {
        name: "title",
        value: "text",
        absent: Absent::Means(|| "the variable's name".into()),
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "The graph title (TITLE), after the program's name as for every metric.",
    },
    Key {
        name: "description",
        value: "text",
        absent: Absent::Means(|| "which `[[metric]]` described it".into()),
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "DESC: one sentence.",
    },
];
