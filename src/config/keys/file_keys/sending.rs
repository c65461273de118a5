//! How packets are paced and which values are sent.
//!
//! A piece of the file's key table: `file_keys.rs` says how the pieces
//! join, and the names its entries use are that file's.

/// The entries gathered so far, and this piece's, handed to the next.
macro_rules! sending_keys {
    ($($before:tt)*) => {
        serving_keys! {
            $($before)*
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
        }
    };
}
