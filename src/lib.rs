//! xrd2ganglia: XRootD summary monitoring (`xrd.report`) into Ganglia.
//!
//! # Layout
//!
//! Three layers, each using only the ones below it:
//!
//! * **commands** (`src/main.rs` and the binary's `src/cli/`; [`dump`],
//!   [`gweb`], [`gmetric`], [`mpxstats`], [`poll`] (a gmond-style XML
//!   port, read), [`recording`] (`dump --record`'s files, which
//!   `replay` sends) and [`lines`] (lines of a stated length at most, as
//!   `dump` and `replay` read them) here): what an admin runs.
//! * **[`daemon`]**: `serve`'s sockets, tasks and threads around the
//!   engines: receive tasks, send queues and senders, the XML port,
//!   gmond's metadata requests, the state file, self-metrics.
//! * **[`engine`]**: the protocol core, no I/O and no clock of its own:
//!   a datagram (and the time) in, Ganglia packets out, typed (a batch
//!   says its host, ip and name apart, and its cluster once, and per
//!   packet its metadata's fields or its value, beside the bytes for
//!   gmond); answers to gmond's requests; counter state to save. Built on the pure parts:
//!   [`summary`] (a record -> flat variables), [`gstream`] (XCache's
//!   g-stream), [`detailed`] (the detailed stream's packets), [`mapping`] (variables -> named, typed metrics, with the
//!   [`catalog`] of known variables), [`ganglia`] (gmond's packets and
//!   XML, channels, gmond.conf), [`config`] and [`events`].
//!
//! # The data path, socket to gmond, in eight files
//!
//! ```text
//! daemon/receive.rs ─> engine.rs ─> summary/xml.rs (or summary/json.rs)
//!   ─> mapping.rs ─> engine/source.rs ─> engine/packets.rs
//!   ─> daemon/queue.rs ─> daemon/sender.rs ─> gmond
//! ```
//!
//! 1. `daemon/receive.rs`: a task per socket hands each datagram, with the
//!    time, to its engine and delivers the packets that come back (send
//!    queues, XML table). Never waits for a send.
//! 2. `engine.rs`: the allow list, what the datagram is, the template fast
//!    path (`engine/template.rs`) or the full path below.
//! 3. `summary/xml.rs`: the record's variables, borrowed from the datagram.
//! 4. `mapping.rs`: each variable's metric name, type, units and value.
//! 5. `engine/source.rs`: the sender's state, private to it: restarts,
//!    TMAX, metadata schedule (counter continuity in `engine/series.rs`);
//!    `engine/source/sending.rs` appends its packets from that state.
//! 6. `engine/packets.rs`: every packet built, each with its queue key and
//!    what it is ([`engine::packets::Item`]).
//! 7. `daemon/queue.rs`: per channel, one pending packet per (host, metric,
//!    kind); newer replaces older.
//! 8. `daemon/sender.rs`: a thread per channel sends as fast as the gmond
//!    on this host reads (`daemon/follow.rs`), else paced by a token
//!    bucket; when and how much is `daemon/pacer.rs`'s decision, a function
//!    of the time, gmond's queue level and the send queue (no socket, no
//!    clock), and the thread only waits and sends. It holds the lane's
//!    lock (which the receive tasks queue under) only to take packets: a
//!    drained burst's memory is freed and the heap trimmed after it lets
//!    go (`daemon/lock_wait.rs` notes the longest wait of a receive task).
//!
//! With `xml_listen`, step 1 also hands the batch to `daemon/table.rs`,
//! which takes what the batch says of each packet (no packet decoded) and
//! which `daemon/xml_port.rs` writes as gmond's XML for gmetad.
//!
//! Beside the layers: [`status`], what `xrd2ganglia status` shows of a
//! running gateway (written by `daemon/control.rs` from what each engine
//! says of its sources, read by the `status` command); [`fnv`], the
//! crate's one non-keyed hash; [`key_index`], the positions of a list's
//! entries by their hashed keys (every source's and every host's metrics);
//! [`sock_diag`] and [`proc_udp`], what the kernel says of UDP sockets
//! (a gmond's receive queue; the drops at our own sockets).

pub mod catalog;
pub mod config;
pub mod daemon;
pub mod detailed;
pub mod dump;
pub mod engine;
pub mod events;
pub mod fnv;
pub mod ganglia;
pub mod gmetric;
pub mod gstream;
pub mod gweb;
pub mod key_index;
pub mod lines;
pub mod mapping;
pub mod mpxstats;
pub mod poll;
pub mod proc_udp;
pub mod recording;
pub mod sock_diag;
pub mod status;
pub mod summary;
