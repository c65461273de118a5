//! xrd2ganglia: XRootD summary monitoring (`xrd.report`) into Ganglia.
//!
//! # Layout
//!
//! The data path reads top-down, one module per step:
//!
//! ```text
//! UDP datagram ──> summary ──> mapping ──> ganglia::xdr ──> ganglia::channel ──> gmond
//!   (gateway)     (flat vars)  (metrics,   (128/133/132      (unicast and
//!                               catalog)     packets)          multicast UDP)
//! ```
//!
//! * [`summary`]: one xrd.report record (XML, or xrootd 5.9's JSON) ->
//!   flat, mpxstats-named variables. Pure, borrows from the datagram.
//!   [`summary::shape`]: a record's text with the digits of its numbers
//!   cut out, to recognise the next report.
//! * [`catalog`]: what every known variable is: Ganglia type, slope, units,
//!   title, description.
//! * [`mapping`]: variables + catalog + naming settings -> Ganglia metrics for
//!   one spoofed host (names, values, sanitising). Pure.
//! * [`ganglia`]: the Ganglia side: [`ganglia::xdr`] encodes and decodes gmond
//!   packets, [`ganglia::channel`] sends them, [`ganglia::gmond_conf`] reads
//!   `udp_send_channel`s from gmond.conf, [`ganglia::sanitize`] makes strings
//!   safe for gmond's XML.
//! * [`gateway`]: the `serve` daemon: sockets, per-source state, metadata
//!   schedule, heartbeats; `gateway/template.rs` turns a source's steady
//!   reports into packets straight from its last record's;
//!   `gateway/series.rs` keeps counters continuous across restarts, resets
//!   and wraps and decides what changed-only sending sends;
//!   [`gateway::state`] keeps that across gateway restarts;
//!   [`gateway::requests`] hears gmond's metadata requests (136).
//! * [`gmetric`]: `xrd2ganglia gmetric`, a drop-in for Ganglia's gmetric on
//!   the same encoder, channels and gmond.conf reader.
//! * [`mpxstats`]: `xrd2ganglia mpxstats`, XRootD's mpxstats on our parser.
//! * [`dump`]: `xrd2ganglia dump`, what `serve` would send, sent nowhere.
//! * [`config`]: config file + CLI overrides -> validated [`config::Settings`].
//! * [`events`]: every counted and logged internal event, defined once.
//! * [`selfmon`]: those counters (and kernel drops) as the gateway's own
//!   Ganglia metrics.

pub mod catalog;
pub mod config;
pub mod dump;
pub mod events;
pub mod ganglia;
pub mod gateway;
pub mod gmetric;
pub mod mapping;
pub mod mpxstats;
pub mod selfmon;
pub mod summary;
