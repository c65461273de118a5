//! Counter state, gmond's requests, the XML port and the control socket.
//!
//! A piece of the file's key table: `file_keys.rs` says how the pieces
//! join, and the names its entries use are that file's.

/// The entries gathered so far, and this piece's, handed to the next.
macro_rules! serving_keys {
    ($($before:tt)*) => {
        pair_keys! {
            $($before)*
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
        }
    };
}
