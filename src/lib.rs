//! xrd2ganglia: XRootD summary monitoring (`xrd.report`) into Ganglia.
//!
//! # Layout
//!
//! The data path reads top-down, one module per step:
//!
//! ```text
//! UDP datagram ──> summary ──> mapping ──> gateway ──> ganglia::channel ──> gmond
//!   (gateway)     (flat vars)  (metrics,   (packets,     (unicast and
//!                               catalog)    queue, pace)  multicast UDP)
//! ```
//!
//! * [`summary`]: one xrd.report record (XML, or xrootd 5.9's JSON) ->
//!   flat, mpxstats-named variables. Pure, borrows from the datagram.
//!   [`summary::shape`]: a record's text with the digits of its numbers
//!   cut out, to recognise the next report.
//! * [`gstream`]: XCache's g-stream (`xrootd.mongstream pfc`): the bytes
//!   its closed files were served from the cache, from the origin and past
//!   it, which its summary records leave at 0. Pure.
//! * [`catalog`]: what every known variable is: Ganglia type, slope, units,
//!   title, description.
//! * [`mapping`]: variables + catalog + naming settings -> Ganglia metrics for
//!   one spoofed host (names, values, sanitising). Pure.
//! * [`ganglia`]: the Ganglia side: [`ganglia::xdr`] encodes and decodes gmond
//!   packets, [`ganglia::xml`] writes gmond's XML document, [`ganglia::channel`] sends them, [`ganglia::gmond_conf`] reads
//!   `udp_send_channel`s from gmond.conf, [`ganglia::sanitize`] makes strings
//!   safe for gmond's XML.
//! * [`gateway`]: the `serve` daemon, one file per step: a receive task
//!   per socket (`gateway/receive.rs`) runs each datagram through its
//!   pipeline (`gateway/pipeline.rs`: the template fast path of
//!   `gateway/template.rs`, or parse and map; per-source state in
//!   `gateway/source.rs`; counter continuity and changed-only sending in
//!   `gateway/series.rs`; every packet built in [`gateway::packets`]) and
//!   queues the packets for each send channel (`gateway/queue.rs`: one
//!   pending metadata and value per host and metric); a sender thread per
//!   channel paces them to gmond (`gateway/sender.rs`: following the
//!   receive queue of a gmond on this host, `gateway/follow.rs`, or by a
//!   token bucket).
//!   [`gateway::state`] keeps counters across gateway restarts;
//!   [`gateway::requests`] hears gmond's metadata requests (136). With
//!   `xml_listen`, the same packets also go into [`gateway::table`] (what
//!   a gmond would hold), which [`gateway::xml_port`] writes for gmetad as
//!   gmond's XML ([`ganglia::xml`]).
//! * [`gmetric`]: `xrd2ganglia gmetric`, a drop-in for Ganglia's gmetric on
//!   the same encoder, channels and gmond.conf reader.
//! * [`mpxstats`]: `xrd2ganglia mpxstats`, XRootD's mpxstats on our parser.
//! * [`dump`]: `xrd2ganglia dump`, what `serve` would send, sent nowhere.
//! * [`gweb`]: `xrd2ganglia gweb`, ganglia-web reports and a site view for
//!   the metrics `serve` sends, named as the mapping names them.
//! * [`config`]: config file + CLI overrides -> validated [`config::Settings`].
//! * [`events`]: every counted and logged internal event, defined once.
//! * [`fnv`]: the crate's one non-keyed hash (name keys, catalog index).
//! * [`sock_diag`] and [`proc_udp`]: what the kernel says of UDP sockets
//!   (a gmond's receive queue, for the senders that follow it
//!   (`gateway/follow.rs`); the drops at our own sockets).
//! * [`selfmon`]: those counters (and kernel drops) as the gateway's own
//!   Ganglia metrics.

pub mod catalog;
pub mod config;
pub mod daemon;
pub mod dump;
pub mod engine;
pub mod events;
pub mod fnv;
pub mod ganglia;
pub mod gmetric;
pub mod gstream;
pub mod gweb;
pub mod mapping;
pub mod mpxstats;
pub mod proc_udp;
pub mod sock_diag;
pub mod summary;
