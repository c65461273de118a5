//! What gmond is told of each metric, and the bounds and intervals of the gateway itself.
//!
//! A piece of the file's key table: `file_keys.rs` says how the pieces
//! join, and the names its entries use are that file's.

/// The entries gathered so far, and this piece's, handed to the next.
macro_rules! limits_keys {
    ($($before:tt)*) => {
        sending_keys! {
            $($before)*
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
        }
    };
}
