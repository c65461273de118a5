//! Everything said of each key of the configuration file but its value's
//! type and default (those are its field of [`FileConfig`](super::FileConfig) and `impl
//! Default`, in `file.rs`): what it means, what its value looks like,
//! whether a reload applies it, which option overrides it. One [`Key`] per
//! field, in [`KEYS`] (and [`CHANNEL_KEYS`], [`METRIC_KEYS`] for the
//! tables, in `keys/tables.rs`); what a number key takes, in [`RANGES`]
//! (`keys/ranges.rs`). docs/configuration.md, the man page xrd2ganglia.toml(5)
//! ([`super::docs`]) and the reload's warnings are made from them; tests
//! hold the tables to the structs' fields, both ways and in order.

use super::file::{DEFAULT_GMOND_CONF, DEFAULT_VALUE_HEARTBEAT};

mod ranges;
mod tables;

pub use ranges::{CHANNEL_RANGES, DAY, RANGES, Range, range_of};
pub use tables::{CHANNEL_KEYS, METRIC_KEYS};

/// One key of the file: everything said of it but its value's type and
/// default (its field and `impl Default`). The docs page, the man page and
/// the reload's warnings are made from these.
#[derive(Clone, Copy, Debug)]
pub struct Key {
    /// As written in the file (the field's name).
    pub name: &'static str,
    /// What its value looks like, for a reader ("list of ADDRESS:PORT").
    pub value: &'static str,
    /// What leaving it out means.
    pub absent: Absent,
    /// Whether a reload (SIGHUP) applies it.
    pub on_sighup: OnSighup,
    /// The command-line option that overrides it, and how.
    pub option: Option<&'static str>,
    /// What it does: one paragraph, `code` in backticks.
    pub meaning: &'static str,
}

/// What leaving a key out of the file means.
#[derive(Clone, Copy, Debug)]
pub enum Absent {
    /// Its default value, as serialising the default shows it
    /// (`FileConfig::default()`; a channel with only its `host`).
    Default,
    /// It has no value; what the gateway does then (a function: the text
    /// names constants).
    Means(fn() -> String),
    /// It must be given.
    Required,
}

/// Whether a reload (SIGHUP) applies a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnSighup {
    /// The reload applies it.
    AtOnce,
    /// It waits for the next restart: a reload that changes it logs it by
    /// name and keeps the running value. Why.
    Restart(&'static str),
}

/// Why a listening address waits for a restart.
const BOUND: &str = "its sockets stay bound";
/// Why the peer exchange's keys wait for a restart.
const PEER: &str = "the peer exchange is set up at the start";
/// Why a timer's interval waits for a restart.
const TIMER: &str = "its timer is set at the start";

/// Every key of [`FileConfig`](super::FileConfig), in its order (a test holds the two to
/// each other).
pub const KEYS: &[Key] = &[
    Key {
        name: "listen",
        value: "list of ADDRESS:PORT",
        absent: Absent::Default,
        on_sighup: OnSighup::Restart(BOUND),
        option: Some("`--listen ADDR:PORT` (repeatable) replaces the list"),
        meaning: "UDP addresses where xrd.report datagrams arrive; IPv6 in brackets \
            (`[::]:3333`). IPv6 sockets are v6-only, so both wildcards can be bound. \
            An empty list is an error.",
    },
    Key {
        name: "allow",
        value: "list of networks or addresses",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "Senders whose datagrams are accepted: networks (`10.0.0.0/8`, \
            `2001:db8::/32`) or single addresses. A datagram from anywhere else is \
            dropped, counted (`denied`) and logged once per `log_interval` (whoever sends: \
            the next line says how many more, from which addresses). \
            Empty: every sender is accepted.",
    },
    Key {
        name: "gmond_conf",
        value: "path",
        absent: Absent::Means(|| {
            let (host, port) = super::DEFAULT_SEND;
            format!("`{DEFAULT_GMOND_CONF}` if it exists, else unicast to {host}:{port}")
        }),
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "A gmond.conf whose `udp_send_channel` sections are the send channels \
            when neither `--send` nor `[[channel]]` gives any, the way gmetric finds gmond \
            (libconfuse syntax: comments, `include`, `host` or `mcast_join`, `port`, \
            `ttl`, `mcast_if`, `bind`). Left out, the default file is read if it exists. \
            Named here, the file must exist when it is read (neither `--send` nor \
            `[[channel]]`): a missing one is an error. A file without \
            `udp_send_channel` is an error either way.",
    },
    Key {
        name: "channel",
        value: "array of tables (`[[channel]]`, keys below)",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: Some("`--send HOST:PORT` (repeatable, unicast) replaces the channels"),
        meaning: "Send channels to gmond, one `[[channel]]` table each, unicast or \
            multicast. Given, `gmond_conf` is not read.",
    },
    Key {
        name: "metric_name",
        value: "template",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
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
    },
    Key {
        name: "group_name",
        value: "template",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "The metric's group (gmond's GROUP extra data: how ganglia-web groups \
            metrics), with `metric_name`'s placeholders.",
    },
    Key {
        name: "exclude",
        value: "list of patterns",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
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
    },
    Key {
        name: "include",
        value: "list of patterns",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "Variables sent although `exclude` matches them (`[\"proc.*\"]`).",
    },
    Key {
        name: "metric",
        value: "array of tables (`[[metric]]`, keys below)",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "What the site says of variables the catalog does not know (a 5.9+ \
            plug-in's set, a newer xrootd's variable), which otherwise go as a double \
            with slope both and no units: one `[[metric]]` table each, first match wins. \
            A declared counter is graphed as a rate and kept continuous through restarts \
            like the catalog's. A catalogued variable keeps the catalog's description.",
    },
    Key {
        name: "metadata_interval",
        value: "seconds",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "Seconds between metadata resends for each metric (at least 1). gmond \
            forgets a metric `dmax` seconds after its last metadata, and shows nothing \
            for a metric whose metadata it lost (a gmond restart) until the next resend \
            (or an answer to its request: `metadata_requests`).",
    },
    Key {
        name: "tmax",
        value: "seconds",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "TMAX announced before a source's report interval is known (at least \
            1). Once two reports have arrived, TMAX is 1.5 times the interval seen.",
    },
    Key {
        name: "dmax",
        value: "seconds",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "DMAX: gmond drops a metric this long after its last metadata, so a \
            server that stops reporting disappears. 0 keeps metrics forever; otherwise \
            it must be longer than `metadata_interval`.",
    },
    Key {
        name: "max_sources",
        value: "count",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "Sources (sender address, program and instance) remembered at most; \
            past it a tenth is forgotten, counted (`sources_evicted`) and logged: \
            those that sent a single record first (a flood of new senders), the \
            least recently seen first, established servers only when no others \
            are left, and their counters are kept (as many as `max_sources`) for \
            their return. Also the most hosts the `xml_listen` document holds, \
            besides the gateway's own. At least 1.",
    },
    Key {
        name: "max_metrics_per_source",
        value: "count",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "Metrics per source at most: further new metrics are not sent, counted \
            (`metrics_dropped_cap`) and logged. At least 1.",
    },
    Key {
        name: "recv_buffer",
        value: "bytes",
        absent: Absent::Default,
        on_sighup: OnSighup::Restart(BOUND),
        option: None,
        meaning: "SO_RCVBUF of the `listen` sockets (at least 1); the kernel caps it at \
            `net.core.rmem_max`: then the log says so once, at warn, with the size asked, \
            the size got and the `sysctl` to raise the cap.",
    },
    Key {
        name: "log_interval",
        value: "seconds",
        absent: Absent::Default,
        on_sighup: OnSighup::Restart(
            "the XML port and the metadata-request listener keep the value they started \
             with; the receive tasks and the senders take the new one",
        ),
        option: None,
        meaning: "At most one log line per reason (a refused sender, a rejected datagram, \
            ...) per this many seconds, whoever sends (each listening socket, the XML \
            port and the control socket limit their own lines); the next says how many \
            were left out and a few of their addresses (0 counts as 1).",
    },
    Key {
        name: "stats_interval",
        value: "seconds",
        absent: Absent::Default,
        on_sighup: OnSighup::Restart(TIMER),
        option: None,
        meaning: "The gateway's counters are logged this often (0: never).",
    },
    Key {
        name: "self_metrics_interval",
        value: "seconds",
        absent: Absent::Default,
        on_sighup: OnSighup::Restart(TIMER),
        option: None,
        meaning: "The gateway's counters are sent to Ganglia this often, each as its rate \
            per second over the interval (gauges as they are), as metrics of the gateway's \
            own host `xrd2ganglia@NAME` (NAME: this machine's host name) in group \
            `xrd2ganglia` (0: never).",
    },
    Key {
        name: "send_burst",
        value: "packets",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "Per send channel that does not follow its gmond's queue: packets sent \
            back to back at most (the token bucket's size; at least 1).",
    },
    Key {
        name: "max_send_rate",
        value: "packets per second",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "Per send channel that does not follow its gmond's queue: value packets \
            per second on average; a metadata packet counts as three, a host's \
            heartbeat metadata as four, what they cost gmond (0: unpaced). \
            docs/gmond.md has the measurements.",
    },
    Key {
        name: "follow_gmond_queue",
        value: "boolean",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "A channel whose gmond is on this host follows that gmond's receive \
            queue (read in `/proc/self/net/udp`) instead of `max_send_rate` and \
            `send_burst`: it holds its packets while gmond does not read (while gmetad \
            polls it) and sends as fast as gmond reads. The log says, per channel, which \
            way it sends.",
    },
    Key {
        name: "resend_after",
        value: "seconds",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "For a unicast channel that does not follow its gmond's queue (a gmond \
            on another host): seconds after which each packet is sent a second time, \
            when the token bucket has room, never after a newer one of its metric, so \
            that a gmond deaf during a poll hears the copy (0: never; at most 60). \
            Multicast channels send no copies.",
    },
    Key {
        name: "drain_timeout",
        value: "seconds",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "At stop, queued packets are sent, paced, for at most this many \
            seconds; the rest is counted (`packets_unsent`) and logged. Also how long \
            the senders a reload replaced may drain.",
    },
    Key {
        name: "send_values",
        value: "`\"all\"` or `\"changed\"`",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "`\"all\"`: every value of every report. `\"changed\"`: a value goes out \
            when its text changed, an unchanged one again every `value_heartbeat` \
            seconds, and TMAX is announced as much larger, so gmond's TN stays below it. \
            gmetad writes every metric at each poll either way, so the graphs are the \
            same; `\"changed\"` sends fewer packets for an idle server.",
    },
    Key {
        name: "value_heartbeat",
        value: "seconds",
        absent: Absent::Means(|| {
            format!("{DEFAULT_VALUE_HEARTBEAT} with `send_values = \"changed\"`")
        }),
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "With `send_values = \"changed\"`: seconds before an unchanged value is \
            sent again (at least 1). Given with `send_values = \"all\"`, an error.",
    },
    Key {
        name: "state_file",
        value: "path",
        absent: Absent::Default,
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
    },
    Key {
        name: "state_interval",
        value: "seconds",
        absent: Absent::Default,
        on_sighup: OnSighup::Restart(TIMER),
        option: None,
        meaning: "Seconds between writes of `state_file` (and at exit; at least 1).",
    },
    Key {
        name: "metadata_requests",
        value: "list of ADDRESS:PORT",
        absent: Absent::Default,
        on_sighup: OnSighup::Restart(BOUND),
        option: None,
        meaning: "Where to hear gmond's metadata requests (136). A gmond that restarted \
            asks for each value it cannot show; the gateway answers at once with every \
            metadata of that host (at most once per host per 5 s), instead of the \
            metrics staying invisible until the next `metadata_interval`. A multicast \
            group is joined (`239.2.11.71:8649`, the port shared with gmond), a unicast \
            address is bound (`0.0.0.0:8650`, for gmonds whose `udp_send_channel` points \
            at the gateway); each needs its port. With `send = false`, an error.",
    },
    Key {
        name: "send",
        value: "boolean",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: Some("`--no-send` makes it false"),
        meaning: "Whether packets go to gmond. `false`: only the XML port has the data; \
            `xml_listen` is then required and `metadata_requests` must be empty. A \
            reload to `false` is refused while the running gateway has no XML port.",
    },
    Key {
        name: "xml_listen",
        value: "list of ADDRESS:PORT",
        absent: Absent::Default,
        on_sighup: OnSighup::Restart(BOUND),
        option: Some("`--xml-listen ADDR:PORT` (repeatable) replaces the list"),
        meaning: "TCP addresses where gmetad polls the gateway as it polls a gmond's \
            `tcp_accept_channel`: each connection gets the whole XML document (every \
            host and metric, with their last values) and is closed. A gmond on the same \
            host holds 8649 already: the docs use 8659, the port firewalld's service \
            `xrd2ganglia` opens.",
    },
    Key {
        name: "xml_allow",
        value: "list of networks or addresses",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "Who may poll `xml_listen`; others are closed at once, counted \
            (`xml_denied`) and logged once per `log_interval`. An empty list is an error \
            (no one could poll): leave the key out for this host only.",
    },
    Key {
        name: "cluster_name",
        value: "text",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "The CLUSTER NAME of that XML: the cluster gmetad and ganglia-web show, \
            and the directory of its RRDs, so it keeps the rule of every name gmetad \
            makes a path of ([gmetad.md](gmetad.md#names-gmetad-makes-paths-of)): 1 to \
            128 bytes, not blank nor with white space at an end, without `/` or control \
            characters, not `.` or `..` (as no record's site can make one) nor \
            `__SummaryInfo__` in any case (gmetad's summary directory).",
    },
    Key {
        name: "control_socket",
        value: "path",
        absent: Absent::Default,
        on_sighup: OnSighup::Restart("its socket stays bound"),
        option: None,
        meaning: "The Unix socket where `xrd2ganglia status` asks the running gateway for \
            its sources, refused senders and counters; made mode 0660 (root and the \
            service's group), its directory 0750 by the unit's `RuntimeDirectory=`. \
            `\"\"`: none. At the default path (left out or written), a socket that \
            cannot be made (no /run/xrd2ganglia for a non-root quick look, or another \
            gateway answering there) is logged once and the gateway runs without it; \
            another path that cannot be bound stops the start (exit 2). A stale socket left by a gateway \
            that did not stop cleanly is replaced; the socket is removed at stop.",
    },
    // ---- a pair of gateways (docs/pair.md): keep these together ----
    Key {
        name: "peer",
        value: "HOST:PORT",
        absent: Absent::Means(|| "no peer: the gateway runs alone".into()),
        on_sighup: OnSighup::Restart(PEER),
        option: None,
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
    },
    Key {
        name: "peer_listen",
        value: "list of ADDRESS:PORT",
        absent: Absent::Default,
        on_sighup: OnSighup::Restart(BOUND),
        option: None,
        meaning: "TCP addresses where the peer's exchanges are answered (the docs use \
            8660). Needs `peer`, and `peer` needs it.",
    },
    Key {
        name: "peer_allow",
        value: "list of networks or addresses",
        absent: Absent::Default,
        on_sighup: OnSighup::Restart(PEER),
        option: None,
        meaning: "Who may exchange state on `peer_listen` (empty: the addresses `peer` \
            resolves to at start); a connection from elsewhere is \
            closed at once, counted (`peer_denied`) and logged once per `log_interval`.",
    },
    Key {
        name: "peer_standby",
        value: "boolean",
        absent: Absent::Default,
        on_sighup: OnSighup::Restart(PEER),
        option: None,
        meaning: "For a pair that both send to one gmond: `true` on one of the two. That \
            one stands by: it hears, counts and merges, answers gmetad on its XML port, \
            and sends nothing to gmond while its peer has completed an exchange within \
            the last 3 s and gmond shows the peer's own host heard from within 5 s \
            (read in gmond's XML, `peer_gmond_xml`); it sends when either fails. Both \
            or neither with `true`: both warn, and the one that drew the larger number \
            at its start stands by.",
    },
    Key {
        name: "peer_gmond_xml",
        value: "HOST:PORT",
        absent: Absent::Means(|| {
            "the first send channel's address (gmond's stock config has its tcp_accept_channel on the udp_recv_channel's port)".into()
        }),
        on_sighup: OnSighup::Restart(PEER),
        option: None,
        meaning: "With `peer_standby`: the XML port (`tcp_accept_channel`) of the gmond the \
            pair sends to. A gateway that would stand by reads it there (at once, then \
            every 10 s, at most 64 MiB and 2 s, up to the peer's own host) and stands by \
            only while gmond shows the peer's own host heard from within 5 s: a peer \
            that says it sends but does not cannot silence the gmond path. Where it \
            cannot be read, the peer's word is taken, as the log and `status` say.",
    },
    Key {
        name: "warmup_max",
        value: "seconds",
        absent: Absent::Default,
        on_sighup: OnSighup::Restart("it applies at the start only"),
        option: None,
        meaning: "Without a `peer`: after a start with a state file, the XML port listens \
            once every source the file named has reported again, or after this many \
            seconds, whichever comes first; until then gmetad's connections are refused, \
            so it polls the next address of its `data_source` (a part of the cluster \
            would read as a drop of its summed counters).",
    },
    Key {
        name: "recover_from",
        value: "list of HOST:PORT",
        absent: Absent::Default,
        on_sighup: OnSighup::Restart("it applies at the start only"),
        option: None,
        meaning: "gmond-style XML ports (gmetad's `xml_port`, 8651, or a gmond's \
            `tcp_accept_channel`) read once at start for the last values published of \
            the gateway's own clusters: no counter of a server whose history the gateway \
            lacks (no state file, a fresh machine, both gateways of a pair lost) is \
            published below what gmetad last stored, and the XML port listens once every \
            host read has reported again (or after `warmup_max`). Each port: 10 s to \
            answer, at most 256 MiB; a value that is not a counter reading is skipped \
            alone (docs/pair.md).",
    },
    // ---- the detailed stream (docs/detailed.md): keep these together ----
    Key {
        name: "detailed_vo_paths",
        value: "list of \"PATH_PREFIX=VO\"",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "The detailed stream's VO of a file whose user's login names neither an \
            organisation (`o=`) nor a group (`g=`): the VO of the longest prefix of its \
            path here (`[\"/store/=cms\", \"/atlas/=atlas\"]`); none matching: `other`. \
            Paths come with `xrootd.monitor ... fstat lfn`. A reload applies it to files \
            opened after it.",
    },
    Key {
        name: "detailed_max_vos",
        value: "count",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "At most this many VOs per server named in the detailed stream's \
            metrics (`detailed.vo.NAME.*`); the rest count as `other` (docs/detailed.md \
            says which are named). 0: only `other`. The `detailed_max_*` keys are taken \
            by each xrootd run when first heard from: a reload applies them to runs \
            after it.",
    },
    Key {
        name: "detailed_max_protocols",
        value: "count",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "At most this many transfer protocols (`xroot`, `http`, ...) per server \
            named in the detailed stream's metrics; the rest count as `other`.",
    },
    Key {
        name: "detailed_max_domains",
        value: "count",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "At most this many client domains per server named in the detailed \
            stream's metrics, those that move the most bytes; the rest count as `other`.",
    },
    Key {
        name: "detailed_per_user",
        value: "true or false",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "Sends the detailed stream's metrics per user too (`detailed.user.NAME.*`, \
            at most `detailed_max_users` names). User names are personal data, and \
            ganglia-web pages are often public: off unless a site turns it on.",
    },
    Key {
        name: "detailed_max_users",
        value: "count",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "With `detailed_per_user`: at most this many users per server named, those \
            that move the most bytes; the rest count as `other`.",
    },
    Key {
        name: "detailed_max_logins",
        value: "count",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "At most this many logins, and as many open files, kept per xrootd run \
            from its detailed stream; beyond, the oldest is forgotten (counted: \
            `detailed_evicted`), so lost disconnects or a flood of logins cannot grow \
            the gateway.",
    },
    // ---- clusters (docs/clusters.md): keep these together ----
    Key {
        name: "cluster_by_site",
        value: "true or false",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "Each distinct `site` (all.sitename) that no `[[cluster]]` rule takes \
            becomes a Ganglia cluster of its own, named by it (sanitised: letters, digits, \
            `.`, `_`, `-`; docs/clusters.md). A record without a site, or whose site \
            sanitises to nothing, goes to `cluster_name`.",
    },
    Key {
        name: "max_clusters",
        value: "count",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
        meaning: "At most this many clusters named by records' sites at once (by \
            `cluster_by_site` and `{site}` rules; literal rules' clusters and \
            `cluster_name` are not counted). A site beyond it goes to `cluster_name`, \
            counted (`clusters_refused`) and logged once per `log_interval`, and to its \
            own cluster with its first record after a place is free; a cluster no source \
            is in any more frees its place.",
    },
    Key {
        name: "cluster",
        value: "array of tables (`[[cluster]]`: `name`, `sites`, `networks`, `hosts`, \
            `owner`, `latlong`, `url`, `xml_listen`, `xml_allow`, `[[cluster.channel]]`)",
        absent: Absent::Default,
        on_sighup: OnSighup::AtOnce,
        option: None,
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
    },
];

/// Whether a change of `key` waits for a restart ([`OnSighup::Restart`]).
pub fn waits_for_restart(key: &str) -> bool {
    KEYS.iter()
        .any(|k| k.name == key && matches!(k.on_sighup, OnSighup::Restart(_)))
}

/// The keys whose change waits for a restart, in definition order.
pub fn restart_keys() -> impl Iterator<Item = &'static str> {
    KEYS.iter()
        .filter(|k| matches!(k.on_sighup, OnSighup::Restart(_)))
        .map(|k| k.name)
}
