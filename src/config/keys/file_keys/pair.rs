//! A pair of gateways, and what a start reads from elsewhere (docs/pair.md).
//!
//! A piece of the file's key table: `file_keys.rs` says how the pieces
//! join, and the names its entries use are that file's.

/// The entries gathered so far, and this piece's, handed to the next.
macro_rules! pair_keys {
    ($($before:tt)*) => {
        detailed_keys! {
            $($before)*
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
        }
    };
}
