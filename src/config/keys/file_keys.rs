//! The file's own keys: one entry each, in the order docs/configuration.md,
//! the man page and `check-config` show them ([`key_table!`]).

use std::path::PathBuf;

use super::ranges::{DAY, count, seconds};
use super::tables::{ChannelConfig, MetricConfig};
use super::{Absent, OnSighup};
use crate::config::ClusterConfig;
use crate::config::file::{
    DEFAULT_CONTROL_SOCKET, DEFAULT_GMOND_CONF, DEFAULT_LISTEN, DEFAULT_MAX_CLUSTERS,
    DEFAULT_RESEND_AFTER, DEFAULT_SEND_BURST, DEFAULT_SEND_RATE, DEFAULT_STATE_FILE,
    DEFAULT_VALUE_HEARTBEAT, DEFAULT_WARMUP_MAX, DEFAULT_XML_ALLOW, MAX_RESEND_AFTER,
};
use crate::mapping::{DEFAULT_EXCLUDE, DEFAULT_GROUP_TEMPLATE, DEFAULT_NAME_TEMPLATE};

/// Why a listening address waits for a restart.
const BOUND: &str = "its sockets stay bound";
/// Why the peer exchange's keys wait for a restart.
const PEER: &str = "the peer exchange is set up at the start";
/// Why a timer's interval waits for a restart.
const TIMER: &str = "its timer is set at the start";

/// A default list of strings.
fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

key_table! {
    /// The file as written; every key has its default (serde fills in
    /// what the file leaves out from `impl Default`), and a key the table
    /// does not have is refused, named.
    #[serde(deny_unknown_fields, default)]
    pub struct FileConfig; pub const KEYS;
    listen: Vec<String> = strings(DEFAULT_LISTEN) => {
        value: "list of ADDRESS:PORT",
        on_sighup: OnSighup::Restart(BOUND),
        option: Some("`--listen ADDR:PORT` (repeatable) replaces the list"),
        meaning: "UDP addresses where xrd.report datagrams arrive; IPv6 in brackets \
            (`[::]:3333`). IPv6 sockets are v6-only, so both wildcards can be bound. \
            An empty list is an error.",
        shipped: "\n\
            # Where to receive xrd.report datagrams (ADDRESS:PORT, IPv6 in brackets).\n\
            # Both wildcards are bound (the IPv6 socket is v6-only).\n\
            # Command line: --listen ADDR:PORT (repeatable) replaces this list. An\n\
            # empty list is an error.\n",
    },
    allow: Vec<String> = Vec::new() => {
        value: "list of networks or addresses",
        meaning: "Senders whose datagrams are accepted: networks (`10.0.0.0/8`, \
            `2001:db8::/32`) or single addresses. A datagram from anywhere else is \
            dropped, counted (`denied`) and logged once per `log_interval` (whoever sends: \
            the next line says how many more, from which addresses). \
            Empty: every sender is accepted.",
        shipped: "\n\
            # Senders whose datagrams are accepted (networks in CIDR form, or single\n\
            # addresses). Datagrams from anywhere else are dropped, counted, and logged\n\
            # once per sender per log_interval. An empty list accepts every sender.\n\
            # Not the default: the default, when the key is absent, is\n\
            #   allow = []\n\
            # (every sender). This file sets it to loopback and the private ranges:\n\
            # add your servers' public networks.\n\
            allow = [\n\
            \x20 \"127.0.0.0/8\", \"::1/128\",                          # loopback\n\
            \x20 \"10.0.0.0/8\", \"172.16.0.0/12\", \"192.168.0.0/16\",   # RFC 1918\n\
            \x20 \"fc00::/7\",                                        # IPv6 unique local\n\
            ]\n",
    },
    gmond_conf: Option<PathBuf> = None => {
        value: "path",
        absent: Absent::Means(|| {
            let (host, port) = crate::config::DEFAULT_SEND;
            format!("`{DEFAULT_GMOND_CONF}` if it exists, else unicast to {host}:{port}")
        }),
        meaning: "A gmond.conf whose `udp_send_channel` sections are the send channels \
            when neither `--send` nor `[[channel]]` gives any, the way gmetric finds gmond \
            (libconfuse syntax: comments, `include`, `host` or `mcast_join`, `port`, \
            `ttl`, `mcast_if`, `bind`). Left out, the default file is read if it exists. \
            Named here, the file must exist when it is read (neither `--send` nor \
            `[[channel]]`): a missing one is an error. A file without \
            `udp_send_channel` is an error either way.",
        shipped: "\n\
            # Where packets go. First match wins:\n\
            #  1. --send HOST:PORT on the command line (repeatable, unicast);\n\
            #  2. [[channel]] tables below;\n\
            #  3. the udp_send_channel sections of gmond_conf, when that file exists\n\
            #     (the way gmetric finds gmond);\n\
            #  4. unicast to 127.0.0.1:8649 (gmetric, and `xrd2ganglia gmetric`, send\n\
            #     to gmond's default multicast channel instead, 239.2.11.71:8649).\n\
            # Left out, gmond_conf is /etc/ganglia/gmond.conf if that file exists.\n\
            # Named, it must exist when it is read (no --send, no [[channel]]):\n\
            #   gmond_conf = \"/etc/ganglia/gmond.conf\"\n\
            # [[channel]] tables (host is a name, a unicast address or a multicast\n\
            # group) go at the end of this file: a key after a [[channel]] line\n\
            # belongs to that channel.\n",
    },
    channel: Vec<ChannelConfig> = Vec::new() => {
        value: "array of tables (`[[channel]]`, keys below)",
        option: Some("`--send HOST:PORT` (repeatable, unicast) replaces the channels"),
        meaning: "Send channels to gmond, one `[[channel]]` table each, unicast or \
            multicast. Given, `gmond_conf` is not read.",
        shipped: "\n\
            # ---- send channels (the end of the file) ---------------------------------\n\
            # One [[channel]] table per gmond channel; given, gmond_conf is not read.\n\
            # host is required: a host name, a unicast address, or a multicast group.\n\
            # The other lines show their defaults. mcast_if (the interface multicast\n\
            # leaves by, name or address) and bind (the local address to send from)\n\
            # are left to the kernel unless given, e.g.\n\
            #   mcast_if = \"eth0\"\n\
            #   bind = \"10.0.0.5\"\n\
            # [[channel]]\n\
            # host = \"239.2.11.71\"\n",
        shipped_after: Some("cluster"),
    },
    metric_name: String = DEFAULT_NAME_TEMPLATE.into() => {
        value: "template",
        meaning: "The Ganglia metric name. Placeholders: `{pgm}` (xrootd or cmsd), \
            `{ins}` (the instance name, `-n`; empty for `anon`), `{site}` \
            (all.sitename), `{section}` (`link`, `oss`, ...), `{var}` (the variable: \
            `link.in`, `oss.paths._data_.free`). A dot-separated part that expands to \
            nothing is dropped. It must contain `{var}`; without `{pgm}` and `{ins}`, an \
            xrootd and a cmsd (or two instances) on one host overwrite each other's \
            metrics (a warning says so). Names keep letters, digits, `.`, `_` and `-` \
            (anything else becomes `_`) and are cut at 128 bytes. In `{var}`, a list \
            entry is named by its key (the oss path's `lp`, the space's `name`, the cmsm \
            node's `host`; else its index), cut at 64 bytes, with `.` and `/` made `_`; \
            two entries with the same key get `-` and their index.",
        shipped: "\n\
            # Ganglia metric name. Placeholders: {pgm} (xrootd or cmsd), {ins} (the -n\n\
            # instance name; nothing for \"anon\"), {site}, {section} (link, oss, ...),\n\
            # {var} (the variable, e.g. link.in or oss.paths._data_.free). A\n\
            # dot-separated part that expands to nothing is dropped. Keep {pgm} and {ins}\n\
            # so an xrootd and a cmsd on one host do not overwrite each other.\n",
    },
    group_name: String = DEFAULT_GROUP_TEMPLATE.into() => {
        value: "template",
        meaning: "The metric's group (gmond's GROUP extra data: how ganglia-web groups \
            metrics), with `metric_name`'s placeholders.",
        shipped: "\n\
            # Ganglia group (the GROUP extra data), same placeholders.\n",
    },
    exclude: Vec<String> = strings(DEFAULT_EXCLUDE) => {
        value: "list of patterns",
        meaning: "Variables left out: patterns on variable names as metric names carry \
            them (`oss.paths._data_.free`) or as the catalog names them \
            (`oss.paths.i.free`); `*` stands for any run of characters, `?` for one. The \
            default leaves out the report times (a new number every report) and the \
            seconds and microseconds halves of the CPU time (a sawtooth; \
            `proc.cpu.usr`, `.sys` and `.total`, derived from them, are sent), and the \
            variables XRootD sends but never fills or fills wrongly (`xrootd.aio.num`, \
            `cache.files.*`, `cmsm.frq.lf`...: docs/metrics.md lists each and why; \
            `include` gets one back). Left-out \
            variables are counted (`variables_excluded`). `[]` sends everything.",
        shipped: "\n\
            # Variables left out: patterns on variable names as metric names carry\n\
            # them (oss.paths._data_.free) or as the catalog names them\n\
            # (oss.paths.i.free); '*' stands for any run of characters, '?' for one.\n\
            # The default leaves out the report times (tod, toe, sgen.toe: a new number\n\
            # every report), the seconds/microseconds halves of the CPU time\n\
            # (proc.usr.s/u, proc.sys.s/u: a sawtooth; proc.cpu.usr, .sys and .total,\n\
            # derived from them, are sent), and what XRootD never fills or inflates\n\
            # (docs/metrics.md says why, each). Left-out variables are counted\n\
            # (xrd2ganglia.variables_excluded). exclude = [] sends everything.\n",
    },
    include: Vec<String> = Vec::new() => {
        value: "list of patterns",
        meaning: "Variables sent although `exclude` matches them (`[\"proc.*\"]`).",
        shipped: "\n\
            # Variables sent although exclude matches them, e.g.\n\
            #   include = [\"proc.*\"]\n",
    },
    metric: Vec<MetricConfig> = Vec::new() => {
        value: "array of tables (`[[metric]]`, keys below)",
        meaning: "What the site says of variables the catalog does not know (a 5.9+ \
            plug-in's set, a newer xrootd's variable), which otherwise go as a double \
            with slope both and no units: one `[[metric]]` table each, first match wins. \
            A declared counter is graphed as a rate and kept continuous through restarts \
            like the catalog's. A catalogued variable keeps the catalog's description.",
        shipped: "\n\
            # Variables the catalog does not know (a 5.9+ plug-in's set, a newer\n\
            # xrootd's) go as a double with slope both and no units. A [[metric]]\n\
            # table says what they are; first match wins; type \"double\" (default),\n\
            # \"uint32\" or \"string\"; slope \"counter\" (a running total: graphed as a\n\
            # rate) or \"gauge\" (default). check-config refuses a bad one. Tables go\n\
            # after every plain key (a key below a table belongs to it), e.g.\n\
            #   [[metric]]\n\
            #   match = \"myplug.requests\"\n\
            #   slope = \"counter\"\n\
            #   units = \"requests/s\"\n\
            #   title = \"My plug-in's requests\"\n",
    },
    metadata_interval: u64 = 60 => {
        range: Some(seconds(1, DAY, None)),
        value: "seconds",
        meaning: "Seconds between metadata resends for each metric (at least 1). gmond \
            forgets a metric `dmax` seconds after its last metadata, and shows nothing \
            for a metric whose metadata it lost (a gmond restart) until the next resend \
            (or an answer to its request: `metadata_requests`).",
        shipped: "\n\
            # Seconds between metadata resends for each metric. gmond forgets a metric\n\
            # dmax seconds after its last metadata, and shows nothing for a metric whose\n\
            # metadata it lost (a gmond restart), until the next resend.\n",
    },
    tmax: u32 = 60 => {
        range: Some(seconds(1, DAY, None)),
        value: "seconds",
        meaning: "TMAX announced before a source's report interval is known (at least \
            1). Once two reports have arrived, TMAX is 1.5 times the interval seen.",
        shipped: "\n\
            # TMAX announced before a source's report interval is known, seconds. Once\n\
            # two reports have arrived, TMAX is 1.5 times the observed interval.\n",
    },
    dmax: u32 = 3600 => {
        // A year: gmond keeps a metric that long after its last metadata.
        range: Some(seconds(0, 365 * DAY, Some("never expire"))),
        value: "seconds",
        meaning: "DMAX: gmond drops a metric this long after its last metadata, so a \
            server that stops reporting disappears. 0 keeps metrics forever; otherwise \
            it must be longer than `metadata_interval`.",
        shipped: "\n\
            # DMAX, seconds: gmond drops a metric this long after its last metadata, so\n\
            # a server that stops reporting disappears. 0 keeps metrics forever. Must be\n\
            # 0 or longer than metadata_interval.\n",
    },
    max_sources: usize = 10_000 => {
        range: Some(count(1, 10_000_000)),
        value: "count",
        meaning: "Sources (sender address, program and instance) remembered at most; \
            past it a tenth is forgotten, counted (`sources_evicted`) and logged: \
            those that sent a single record first (a flood of new senders), the \
            least recently seen first, established servers only when no others \
            are left, and their counters are kept (as many as `max_sources`) for \
            their return. Also the most hosts the `xml_listen` document holds, \
            besides the gateway's own. At least 1.",
        shipped: "\n\
            # Sources (sender IP + program + instance) remembered at most. Past this the\n\
            # least recently seen tenth is forgotten, with a warning.\n",
    },
    max_metrics_per_source: usize = 5_000 => {
        range: Some(count(1, 10_000_000)),
        value: "count",
        meaning: "Metrics per source at most: further new metrics are not sent, counted \
            (`metrics_dropped_cap`) and logged. At least 1.",
        shipped: "\n\
            # Metrics per source at most; further new metrics are not sent (counted and\n\
            # logged).\n",
    },
    recv_buffer: usize = 4 << 20 => {
        // 1 GiB: the kernel caps SO_RCVBUF at net.core.rmem_max anyway, and
        // takes an int.
        range: Some(count(1, 1 << 30)),
        value: "bytes",
        on_sighup: OnSighup::Restart(BOUND),
        meaning: "SO_RCVBUF of the `listen` sockets (at least 1); the kernel caps it at \
            `net.core.rmem_max`: then the log says so once, at warn, with the size asked, \
            the size got and the `sysctl` to raise the cap.",
        shipped: "\n\
            # Receive socket buffer, bytes (SO_RCVBUF; the kernel caps it at\n\
            # net.core.rmem_max: the log says so, with the sysctl to raise it).\n",
    },
    log_interval: u64 = 60 => {
        range: Some(seconds(0, DAY, Some("counts as 1"))),
        value: "seconds",
        on_sighup: OnSighup::Restart(
            "the XML port and the metadata-request listener keep the value they started \
             with; the receive tasks and the senders take the new one",
        ),
        meaning: "At most one log line per reason (a refused sender, a rejected datagram, \
            ...) per this many seconds, whoever sends (each listening socket, the XML \
            port and the control socket limit their own lines); the next says how many \
            were left out and a few of their addresses (0 counts as 1).",
        shipped: "\n\
            # Seconds between two log lines about the same sender and reason.\n",
    },
    stats_interval: u64 = 300 => {
        range: Some(seconds(0, DAY, Some("never"))),
        value: "seconds",
        on_sighup: OnSighup::Restart(TIMER),
        meaning: "The gateway's counters are logged this often (0: never).",
        shipped: "\n\
            # Seconds between log lines with the gateway's counters; 0 disables them.\n",
    },
    self_metrics_interval: u64 = 60 => {
        range: Some(seconds(0, DAY, Some("never"))),
        value: "seconds",
        on_sighup: OnSighup::Restart(TIMER),
        meaning: "The gateway's counters are sent to Ganglia this often, each as its rate \
            per second over the interval (gauges as they are), as metrics of the gateway's \
            own host `xrd2ganglia@NAME` (NAME: this machine's host name) in group \
            `xrd2ganglia` (0: never).",
        shipped: "\n\
            # Seconds between reports of the gateway's own counters (datagrams, records,\n\
            # rejections by reason, packets, send errors, sources, kernel drops) to\n\
            # Ganglia, each as its rate per second over the interval, as metrics of the\n\
            # gateway's own host xrd2ganglia@NAME (group xrd2ganglia); 0 disables them.\n",
    },
    send_burst: usize = DEFAULT_SEND_BURST => {
        range: Some(count(1, 10_000_000)),
        value: "packets",
        meaning: "Per send channel that does not follow its gmond's queue: packets sent \
            back to back at most (the token bucket's size; at least 1).",
        shipped: "#\n\
            # A gmond on another host (or follow_gmond_queue = false): a token bucket,\n\
            # at most send_burst packets back to back and max_send_rate value packets\n\
            # per second on average (a metadata packet counts as three, a host's\n\
            # heartbeat metadata as four: what they cost gmond; 0: unpaced). The\n\
            # rate is below what a stock gmond took here with no drop; a gmond with a\n\
            # bigger buffer (udp_recv_channel { buffer = 4194304 }) absorbs more of\n\
            # its pauses. Drops at gmond show in the last column of /proc/net/udp on\n\
            # gmond's host.\n",
        shipped_after: Some("follow_gmond_queue"),
    },
    max_send_rate: u64 = DEFAULT_SEND_RATE => {
        range: Some(count(0, 100_000_000)),
        value: "packets per second",
        meaning: "Per send channel that does not follow its gmond's queue: value packets \
            per second on average; a metadata packet counts as three, a host's \
            heartbeat metadata as four, what they cost gmond (0: unpaced). \
            docs/gmond.md has the measurements.",
        shipped_after: Some("send_burst"),
    },
    follow_gmond_queue: bool = true => {
        value: "boolean",
        meaning: "A channel whose gmond is on this host follows that gmond's receive \
            queue (read in `/proc/self/net/udp`) instead of `max_send_rate` and \
            `send_burst`: it holds its packets while gmond does not read (while gmetad \
            polls it) and sends as fast as gmond reads. The log says, per channel, which \
            way it sends.",
        shipped: "\n\
            # Pacing into gmond. gmond reads one datagram at a time from a socket with\n\
            # the system's default buffer (about 250 small datagrams) and stops reading\n\
            # while it writes its XML for gmetad (a second or more at a site's load):\n\
            # whatever arrives then is dropped. So each send channel has a sender with\n\
            # a queue (one pending value and one pending metadata per host and metric:\n\
            # a newer value replaces a queued one); the receive path never waits for it.\n\
            #\n\
            # A gmond on this host: the sender follows its receive queue, read from\n\
            # /proc/self/net/udp. It holds its packets while gmond does not read and\n\
            # sends them, as fast as gmond reads, once it does; send_burst and\n\
            # max_send_rate do not apply. The log says, per channel, which way it sends.\n",
    },
    resend_after: u64 = DEFAULT_RESEND_AFTER => {
        range: Some(seconds(0, MAX_RESEND_AFTER, Some("never"))),
        value: "seconds",
        meaning: "For a unicast channel that does not follow its gmond's queue (a gmond \
            on another host): seconds after which each packet is sent a second time, \
            when the token bucket has room, never after a newer one of its metric, so \
            that a gmond deaf during a poll hears the copy (0: never; at most 60). \
            Multicast channels send no copies.",
        shipped: "#\n\
            # For a gmond on another host, sent to by unicast: seconds after which each\n\
            # packet is sent a second time, when the token bucket has room, never after\n\
            # a newer one of its metric, so that a gmond deaf during a poll hears the\n\
            # copy (0: never; at most 60). Multicast groups get no copies.\n",
    },
    drain_timeout: u64 = 5 => {
        // An hour: systemd's stop timeout (90 s by default) ends it sooner.
        range: Some(seconds(0, 3600, None)),
        value: "seconds",
        meaning: "At stop, queued packets are sent, paced, for at most this many \
            seconds; the rest is counted (`packets_unsent`) and logged. Also how long \
            the senders a reload replaced may drain.",
        shipped: "\n\
            # At stop (SIGTERM), queued packets are sent, paced, for at most this many\n\
            # seconds; the rest is counted (packets_unsent) and logged.\n",
    },
    send_values: String = "all".into() => {
        value: "`\"all\"` or `\"changed\"`",
        meaning: "`\"all\"`: every value of every report. `\"changed\"`: a value goes out \
            when its text changed, an unchanged one again every `value_heartbeat` \
            seconds, and TMAX is announced as much larger, so gmond's TN stays below it. \
            gmetad writes every metric at each poll either way, so the graphs are the \
            same; `\"changed\"` sends fewer packets for an idle server.",
        shipped: "\n\
            # Which values go out with each report. \"all\": every value of every report\n\
            # (gmond's TN for each metric stays under one report interval). \"changed\":\n\
            # a value goes out when its text changed, and an unchanged one again every\n\
            # value_heartbeat seconds; TMAX is announced value_heartbeat seconds larger,\n\
            # so gmond's TN stays below TMAX. gmetad writes every metric at each poll\n\
            # either way, so graphs are the same; \"changed\" cuts the packets of an idle\n\
            # server. value_heartbeat applies only with \"changed\" (with \"all\" it is an\n\
            # error); left out, it is 60 then. For example:\n\
            #   send_values = \"changed\"\n\
            #   value_heartbeat = 60\n",
    },
    value_heartbeat: Option<u32> = None => {
        range: Some(seconds(1, DAY, None)),
        value: "seconds",
        absent: Absent::Means(|| {
            format!("{DEFAULT_VALUE_HEARTBEAT} with `send_values = \"changed\"`")
        }),
        meaning: "With `send_values = \"changed\"`: seconds before an unchanged value is \
            sent again (at least 1). Given with `send_values = \"all\"`, an error.",
    },
    state_file: PathBuf = DEFAULT_STATE_FILE.into() => {
        value: "path",
        on_sighup: OnSighup::Restart("the running gateway owns the file it started with"),
        option: Some("`--state-file FILE` replaces it (`\"\"`: none)"),
        meaning: "Counter continuity across restarts: cumulative counters are sent as \
            reading + offset and never go down when an xrootd restarts; the offsets and \
            last readings are written here every `state_interval` and at exit, and read \
            at start. `\"\"` keeps nothing. The directory is made if missing; a \
            directory (or a FIFO, socket or device) as the value is an error. Left out (nor `--state-file`), a file \
            that cannot be made (a user who cannot write `/var/lib`) is passed over with \
            a warning, and the gateway runs without one; one that is named must be usable. One gateway owns the file while it runs \
            (an flock on `<state_file>.lock`, with its pid): another one given the same \
            file cannot start.",
        shipped: "\n\
            # Cumulative counters are sent as reading + offset and never go down: when\n\
            # an xrootd restarts (new start time or pid) they continue from what was\n\
            # sent, so gmetad's COUNTER RRDs draw no spike. The offsets and last\n\
            # readings are written to this file every state_interval seconds and at\n\
            # exit, and read at start, so a gateway restart (even one during which an\n\
            # xrootd restarted) keeps them too. \"\" keeps nothing (a restarted gateway\n\
            # then sends readings as they are). The directory is created if missing.\n\
            # One gateway owns the file for as long as it runs (an flock on\n\
            # <state_file>.lock, next to it): a second one given the same file is\n\
            # refused at start. Command line: --state-file FILE replaces this.\n\
            # Left out, a state file that cannot be made (a user who cannot write\n\
            # /var/lib) is passed over with a warning; one named here must be usable.\n",
    },
    state_interval: u64 = 60 => {
        range: Some(seconds(1, DAY, None)),
        value: "seconds",
        on_sighup: OnSighup::Restart(TIMER),
        meaning: "Seconds between writes of `state_file` (and at exit; at least 1).",
    },
    metadata_requests: Vec<String> = Vec::new() => {
        value: "list of ADDRESS:PORT",
        on_sighup: OnSighup::Restart(BOUND),
        meaning: "Where to hear gmond's metadata requests (136). A gmond that restarted \
            asks for each value it cannot show; the gateway answers at once with every \
            metadata of that host (at most once per host per 5 s), instead of the \
            metrics staying invisible until the next `metadata_interval`. A multicast \
            group is joined (`239.2.11.71:8649`, the port shared with gmond), a unicast \
            address is bound (`0.0.0.0:8650`, for gmonds whose `udp_send_channel` points \
            at the gateway); each needs its port. With `send = false`, an error.",
        shipped: "\n\
            # Where to hear gmond's metadata requests (gmetadata_request, 136). A gmond\n\
            # that restarts has lost every metric's metadata; it asks on its\n\
            # udp_send_channels for each value it cannot show. Listed here, the gateway\n\
            # answers at once with every metadata of that host (at most once per host\n\
            # per 5 s), instead of the metrics staying invisible until the next\n\
            # metadata_interval. A multicast group is joined (port shared with gmond),\n\
            # e.g. [\"239.2.11.71:8649\"] for gmond's default channel; a unicast address\n\
            # ([\"0.0.0.0:8650\"]) is bound, for gmonds whose udp_send_channel points at\n\
            # the gateway. With send = false it must be empty: check-config and the\n\
            # start refuse it.\n",
    },
    send: bool = true => {
        value: "boolean",
        option: Some("`--no-send` makes it false"),
        meaning: "Whether packets go to gmond. `false`: only the XML port has the data; \
            `xml_listen` is then required and `metadata_requests` must be empty. A \
            reload to `false` is refused while the running gateway has no XML port.",
        shipped: "\n\
            # Whether packets go to gmond (the channels: gmond_conf, [[channel]]). false: only the XML port\n\
            # has the data (xml_listen is then required, and metadata_requests must be\n\
            # empty). Both together are fine: gmond gets the packets as before and\n\
            # gmetad may poll either. Command line: --no-send.\n",
        shipped_after: Some("cluster_name"),
    },
    xml_listen: Vec<String> = Vec::new() => {
        value: "list of ADDRESS:PORT",
        on_sighup: OnSighup::Restart(BOUND),
        option: Some("`--xml-listen ADDR:PORT` (repeatable) replaces the list"),
        meaning: "TCP addresses where gmetad polls the gateway as it polls a gmond's \
            `tcp_accept_channel`: each connection gets the whole XML document (every \
            host and metric, with their last values) and is closed. A gmond on the same \
            host holds 8649 already: the docs use 8659, the port firewalld's service \
            `xrd2ganglia` opens.",
        shipped: "\n\
            # ---- gmetad polls the gateway --------------------------------------------\n\
            # The gateway can answer gmetad itself, as a gmond does on its\n\
            # tcp_accept_channel: each connection gets the whole XML document (every\n\
            # host and metric the gateway sends, with their last values) and is closed.\n\
            # Point a gmetad data_source at it:\n\
            #   data_source \"XRootD\" 15 gateway.example.org:8659\n\
            # No UDP and no gmond on the way: nothing lost to gmond's receive buffer,\n\
            # and many times more servers per gateway (docs/gmetad.md). Command line:\n\
            # --xml-listen ADDR:PORT (repeatable) replaces this. A gmond on this host\n\
            # holds 8649 (its tcp_accept_channel): 8659 is free, and is the port of the\n\
            # firewalld service xrd2ganglia. For example:\n\
            #   xml_listen = [\"0.0.0.0:8659\"]\n",
    },
    xml_allow: Vec<String> = strings(DEFAULT_XML_ALLOW) => {
        value: "list of networks or addresses",
        meaning: "Who may poll `xml_listen`; others are closed at once, counted \
            (`xml_denied`) and logged once per `log_interval`. An empty list is an error \
            (no one could poll): leave the key out for this host only.",
        shipped: "\n\
            # Who may poll xml_listen: networks or addresses. Others are closed at once\n\
            # (counted as xml_denied, logged once per log_interval). An empty list is\n\
            # an error. The default is this host only; with a gmetad elsewhere:\n\
            #   xml_allow = [\"127.0.0.0/8\", \"::1/128\", \"192.0.2.10\"]\n",
    },
    cluster_name: String = "XRootD".into() => {
        value: "text",
        meaning: "The CLUSTER NAME of that XML: the cluster gmetad and ganglia-web show, \
            and the directory of its RRDs, so it keeps the rule of every name gmetad \
            makes a path of ([gmetad.md](gmetad.md#names-gmetad-makes-paths-of)): 1 to \
            128 bytes, not blank nor with white space at an end, without `/` or control \
            characters, not `.` or `..` (as no record's site can make one) nor \
            `__SummaryInfo__` in any case (gmetad's summary directory).",
        shipped: "\n\
            # The CLUSTER NAME of that document: the cluster gmetad and ganglia-web\n\
            # show, and the directory of its RRDs.\n",
    },
    control_socket: PathBuf = DEFAULT_CONTROL_SOCKET.into() => {
        value: "path",
        on_sighup: OnSighup::Restart("its socket stays bound"),
        meaning: "The Unix socket where `xrd2ganglia status` asks the running gateway for \
            its sources, refused senders and counters; made mode 0660 (root and the \
            service's group), its directory 0750 by the unit's `RuntimeDirectory=`. \
            `\"\"`: none. At the default path (left out or written), a socket that \
            cannot be made (no /run/xrd2ganglia for a non-root quick look, or another \
            gateway answering there) is logged once and the gateway runs without it; \
            another path that cannot be bound stops the start (exit 2). A stale socket left by a gateway \
            that did not stop cleanly is replaced; the socket is removed at stop.",
        shipped: "\n\
            # ---- xrd2ganglia status ----------------------------------------------------\n\
            # The Unix socket where `xrd2ganglia status` asks the running gateway for its\n\
            # sources, refused senders and counters (mode 0660: root and the service's\n\
            # group; the unit's RuntimeDirectory= makes /run/xrd2ganglia, 0750). At the\n\
            # default path, a socket that cannot be made (a non-root run) is logged once\n\
            # and the gateway runs without it; another path that cannot be bound stops\n\
            # the start. \"\" turns it off.\n",
    },
    // ---- a pair of gateways (docs/pair.md): keep these together ----
    peer: Option<String> = None => {
        value: "HOST:PORT",
        absent: Absent::Means(|| "no peer: the gateway runs alone".into()),
        on_sighup: OnSighup::Restart(PEER),
        meaning: "The other gateway of a pair (its `peer_listen`). The two exchange their \
            counter state (each source's run and counter offsets) at start, within about \
            a second of a restart, reset or wrap either one sees, and in full every 30 s, \
            so both publish the same value for every metric whatever either missed. At \
            start the gateway pulls its peer's state and last records before its XML \
            port listens, and answers gmetad's first poll whole. Needs `peer_listen`. \
            The name is resolved at each exchange; `check-config` and the start refuse one \
            that is this gateway's own `peer_listen` (0.0.0.0 or :: there: any address of \
            this host), one that is no host name nor IP address, and one that does not \
            resolve (exit 3). What of the peer's word is taken: docs/pair.md.",
        shipped: "\n\
            # ---- a pair of gateways (docs/pair.md) -----------------------------------\n\
            # Two gateways every xrootd reports to (xrd.report gw1:3333,gw2:3333 ...)\n\
            # exchange their counter state, so both publish the same values whatever\n\
            # either missed, and gmetad may fail over between them. On gw1:\n\
            #   peer = \"gw2.example.org:8660\"\n\
            #   peer_listen = [\"0.0.0.0:8660\"]\n\
            # and the same on gw2, naming gw1. Left out: no peer.\n",
    },
    peer_listen: Vec<String> = Vec::new() => {
        value: "list of ADDRESS:PORT",
        on_sighup: OnSighup::Restart(BOUND),
        meaning: "TCP addresses where the peer's exchanges are answered (the docs use \
            8660). Needs `peer`, and `peer` needs it.",
    },
    peer_allow: Vec<String> = Vec::new() => {
        value: "list of networks or addresses",
        on_sighup: OnSighup::Restart(PEER),
        meaning: "Who may exchange state on `peer_listen` (empty: the addresses `peer` \
            resolves to at start); a connection from elsewhere is \
            closed at once, counted (`peer_denied`) and logged once per `log_interval`.",
        shipped: "\n\
            # Who may exchange state on peer_listen; left out: the addresses peer\n\
            # resolves to at start.\n",
    },
    peer_standby: bool = false => {
        value: "boolean",
        on_sighup: OnSighup::Restart(PEER),
        meaning: "For a pair that both send to one gmond: `true` on one of the two. That \
            one stands by: it hears, counts and merges, answers gmetad on its XML port, \
            and sends nothing to gmond while its peer has completed an exchange within \
            the last 3 s and gmond shows the peer's own host heard from within 5 s \
            (read in gmond's XML, `peer_gmond_xml`); it sends when either fails. Both \
            or neither with `true`: both warn, and the one that drew the larger number \
            at its start stands by.",
        shipped: "\n\
            # Both sending to one gmond: true on one of the two, which then sends\n\
            # unless its peer has completed an exchange within 3 s and gmond's XML\n\
            # shows the peer's own host heard from within 5 s.\n",
    },
    peer_gmond_xml: Option<String> = None => {
        value: "HOST:PORT",
        absent: Absent::Means(|| {
            "the first send channel's address (gmond's stock config has its tcp_accept_channel on the udp_recv_channel's port)".into()
        }),
        on_sighup: OnSighup::Restart(PEER),
        meaning: "With `peer_standby`: the XML port (`tcp_accept_channel`) of the gmond the \
            pair sends to. A gateway that would stand by reads it there (at once, then \
            every 10 s, at most 64 MiB and 2 s, up to the peer's own host) and stands by \
            only while gmond shows the peer's own host heard from within 5 s: a peer \
            that says it sends but does not cannot silence the gmond path. Where it \
            cannot be read, the peer's word is taken, as the log and `status` say.",
        shipped: "\n\
            # Where that one reads gmond's XML (its tcp_accept_channel, HOST:PORT);\n\
            # left out: the first send channel's address. For example:\n\
            #   peer_gmond_xml = \"gmond.example.org:8649\"\n",
    },
    warmup_max: u64 = DEFAULT_WARMUP_MAX => {
        // An hour: gmetad's RRD heartbeat at its default step is 120 s.
        range: Some(seconds(0, 3600, Some("at once"))),
        value: "seconds",
        on_sighup: OnSighup::Restart("it applies at the start only"),
        meaning: "Without a `peer`: after a start with a state file, the XML port listens \
            once every source the file named has reported again, or after this many \
            seconds, whichever comes first; until then gmetad's connections are refused, \
            so it polls the next address of its `data_source` (a part of the cluster \
            would read as a drop of its summed counters).",
        shipped: "\n\
            # Without a peer: after a start with a state file, the XML port listens once\n\
            # every source the file named has reported again, or after this many\n\
            # seconds; until then gmetad's connections are refused (it polls its next\n\
            # address).\n",
    },
    recover_from: Vec<String> = Vec::new() => {
        value: "list of HOST:PORT",
        on_sighup: OnSighup::Restart("it applies at the start only"),
        meaning: "gmond-style XML ports (gmetad's `xml_port`, 8651, or a gmond's \
            `tcp_accept_channel`) read once at start for the last values published of \
            the gateway's own clusters: no counter of a server whose history the gateway \
            lacks (no state file, a fresh machine, both gateways of a pair lost) is \
            published below what gmetad last stored, and the XML port listens once every \
            host read has reported again (or after `warmup_max`). Each port: 10 s to \
            answer, at most 256 MiB; a value that is not a counter reading is skipped \
            alone (docs/pair.md).",
        shipped: "\n\
            # gmond-style XML ports read once at start for the last values published\n\
            # (gmetad's xml_port, or a gmond's tcp_accept_channel): a counter of a server\n\
            # whose history this gateway lacks (no state file, a fresh machine, both\n\
            # gateways of a pair lost) is never published below what gmetad stored, and\n\
            # the XML port waits until every host read has reported again (docs/pair.md).\n\
            # E.g. [\"gmetad.example.org:8651\"].\n",
    },
    // ---- the detailed stream (docs/detailed.md): keep these together ----
    detailed_vo_paths: Vec<String> = Vec::new() => {
        value: "list of \"PATH_PREFIX=VO\"",
        meaning: "The detailed stream's VO of a file whose user's login names neither an \
            organisation (`o=`) nor a group (`g=`): the VO of the longest prefix of its \
            path here (`[\"/store/=cms\", \"/atlas/=atlas\"]`); none matching: `other`. \
            Paths come with `xrootd.monitor ... fstat lfn`. A reload applies it to files \
            opened after it.",
        shipped: "\n\
            # ---- the detailed stream (docs/detailed.md) ------------------------------\n\
            # xrootd's detailed monitoring (xrootd.monitor ... fstat ... user) becomes\n\
            # metrics per VO, protocol and client domain of each server. The VO of a\n\
            # file whose login names no organisation (o=) or group (g=): the longest\n\
            # matching path prefix here, e.g. [\"/store/=cms\", \"/atlas/=atlas\"].\n",
    },
    detailed_max_vos: usize = 10 => {
        range: Some(count(0, 1000)),
        value: "count",
        meaning: "At most this many VOs per server named in the detailed stream's \
            metrics (`detailed.vo.NAME.*`); the rest count as `other` (docs/detailed.md \
            says which are named). 0: only `other`. The `detailed_max_*` keys are taken \
            by each xrootd run when first heard from: a reload applies them to runs \
            after it.",
        shipped: "\n\
            # At most this many names per list and server; the rest count as \"other\".\n",
    },
    detailed_max_protocols: usize = 4 => {
        range: Some(count(0, 1000)),
        value: "count",
        meaning: "At most this many transfer protocols (`xroot`, `http`, ...) per server \
            named in the detailed stream's metrics; the rest count as `other`.",
    },
    detailed_max_domains: usize = 10 => {
        range: Some(count(0, 1000)),
        value: "count",
        meaning: "At most this many client domains per server named in the detailed \
            stream's metrics, those that move the most bytes; the rest count as `other`.",
    },
    detailed_per_user: bool = false => {
        value: "true or false",
        meaning: "Sends the detailed stream's metrics per user too (`detailed.user.NAME.*`, \
            at most `detailed_max_users` names). User names are personal data, and \
            ganglia-web pages are often public: off unless a site turns it on.",
        shipped: "\n\
            # Per-user metrics (user names are personal data; off by default), and at\n\
            # most this many users named per server.\n",
    },
    detailed_max_users: usize = 10 => {
        range: Some(count(0, 1000)),
        value: "count",
        meaning: "With `detailed_per_user`: at most this many users per server named, those \
            that move the most bytes; the rest count as `other`.",
    },
    detailed_max_logins: usize = 100_000 => {
        range: Some(count(1, 10_000_000)),
        value: "count",
        meaning: "At most this many logins, and as many open files, kept per xrootd run \
            from its detailed stream; beyond, the oldest is forgotten (counted: \
            `detailed_evicted`), so lost disconnects or a flood of logins cannot grow \
            the gateway.",
        shipped: "\n\
            # Logins, and open files, kept per xrootd run at most (the oldest go first).\n",
    },
    // ---- clusters (docs/clusters.md): keep these together ----
    cluster_by_site: bool = false => {
        value: "true or false",
        meaning: "Each distinct `site` (all.sitename) that no `[[cluster]]` rule takes \
            becomes a Ganglia cluster of its own, named by it (sanitised: letters, digits, \
            `.`, `_`, `-`; docs/clusters.md). A record without a site, or whose site \
            sanitises to nothing, goes to `cluster_name`.",
        shipped: "\n\
            # ---- clusters (docs/clusters.md) -----------------------------------------\n\
            # One gateway, many Ganglia clusters: each distinct site (all.sitename)\n\
            # its own cluster, named by it (sanitised: letters, digits, '.', '_', '-').\n\
            # Servers without a site go to cluster_name.\n",
    },
    max_clusters: usize = DEFAULT_MAX_CLUSTERS => {
        range: Some(count(1, 10_000_000)),
        value: "count",
        meaning: "At most this many clusters named by records' sites at once (by \
            `cluster_by_site` and `{site}` rules; literal rules' clusters and \
            `cluster_name` are not counted). A site beyond it goes to `cluster_name`, \
            counted (`clusters_refused`) and logged once per `log_interval`, and to its \
            own cluster with its first record after a place is free; a cluster no source \
            is in any more frees its place.",
        shipped: "\n\
            # At most this many clusters named by sites at once; a site beyond them\n\
            # goes to cluster_name (counted as clusters_refused).\n",
    },
    cluster: Vec<ClusterConfig> = Vec::new() => {
        value: "array of tables (`[[cluster]]`: `name`, `sites`, `networks`, `hosts`, \
            `owner`, `latlong`, `url`, `xml_listen`, `xml_allow`, `[[cluster.channel]]`)",
        meaning: "Rules that put servers in a named cluster, first match wins: `name` \
            (required), and one or more of `sites` (patterns of `site`, `*` and `?` as \
            wildcards), `networks` (the sender's address: networks or addresses), `hosts` \
            (patterns of the host name); a rule matches when each list it gives has a \
            match. `name = \"{site}\"` makes each matched server's site a cluster of its \
            own (sanitised as by `cluster_by_site`, counted against `max_clusters`; a \
            server without a site is not matched). `owner`, `latlong` and `url` are written \
            in the XML port's `CLUSTER`. `xml_listen` (ADDRESS:PORT list) serves the rule's \
            clusters, and only them, on ports of their own, to the hosts of the rule's \
            `xml_allow` (default: the gateway's); `xml_listen` at the top still serves \
            every cluster, and is required with it. A change of a rule's `xml_listen` \
            waits for a restart. `[[cluster.channel]]` tables (keys as `[[channel]]`) send \
            the cluster's packets to its own gmonds instead of the default channels. A \
            `{site}` rule takes no `owner`, `latlong`, `url` or channels (they describe one \
            cluster). Servers no rule takes go by site (`cluster_by_site`) or to \
            `cluster_name`.",
        shipped: "\n\
            # Rules, first match wins, before cluster_by_site: a named cluster for the\n\
            # servers whose site (sites, patterns), sender address (networks) or host\n\
            # name (hosts, patterns) match; every list given must match. owner,\n\
            # latlong and url go in the XML port's CLUSTER; [[cluster.channel]] tables\n\
            # (keys as [[channel]]) send the cluster's packets to its own gmond. Tables\n\
            # go after every plain key (a key below a table belongs to it), e.g.\n\
            #   [[cluster]]\n\
            #   name = \"SITEA-xcache\"\n\
            #   networks = [\"10.1.2.0/24\"]\n\
            #   owner = \"SITEA storage team\"\n\
            #   url = \"https://sitea.example/\"\n\
            # A rule named \"{site}\" makes a cluster per site it takes (as by\n\
            # cluster_by_site); xml_listen in a rule serves its clusters, and only\n\
            # them, on a port of their own (a shard's gmetad polls it), to its own\n\
            # xml_allow (default: the one above), e.g.\n\
            #   [[cluster]]\n\
            #   name = \"{site}\"\n\
            #   sites = [\"T2_*\"]\n\
            #   xml_listen = [\"0.0.0.0:8661\"]\n",
    },    ; not keys:
    /// Whether the file names `state_file` (not a key: known from the
    /// text, for `serve`: a state file the file names must be usable, the
    /// built-in default may be passed over where it cannot be made).
    #[serde(skip)]
    state_file_given: bool = false,
}
