//! Where records come from, where packets go, and how metrics are named and chosen.
//!
//! A piece of the file's key table: `file_keys.rs` says how the pieces
//! join, and the names its entries use are that file's.

/// The entries gathered so far, and this piece's, handed to the next.
macro_rules! receiving_keys {
    ($($before:tt)*) => {
        limits_keys! {
            $($before)*
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
        }
    };
}
