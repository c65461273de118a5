//! Every packet the gateway sends, built in one place.
//!
//! Per spoofed host: the heartbeat (its metadata as `gmetric -S HOST -H`
//! sends it, and a 132 uint value that gmond shows as GMOND_STARTED), then
//! per metric its metadata (128) and its value (133, `%s`). Each packet is
//! tagged with the (host, metric) it is about and whether it is metadata
//! or a value: the send queue (`daemon/queue.rs`) keeps one of each per
//! (host, metric). Beside the bytes, a batch says what they are, typed
//! ([`Item`]): the host and its cluster once, and per packet its metadata's
//! fields or its value, which the XML table takes without decoding.

use std::borrow::Cow::Borrowed;
use std::sync::Arc;

use super::clusters::ClusterRef;
use crate::ganglia::xdr::{self, Metadata, MetricId, Packet};
use crate::mapping::{Metric, name_key};

/// The (host, metric) a packet is about: hashes of the spoof string and of
/// the metric's name ([`name_key`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlotKey {
    pub host: u64,
    pub metric: u64,
}

/// A host whose source the engine forgot (`max_sources`): the daemon takes
/// its pending packets out of the send queues and the host out of the XML
/// table, so what a flood of new sources leaves behind is bounded by
/// `max_sources` however far the senders are behind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForgottenHost {
    /// The host's key in the send queues ([`SlotKey::host`]).
    pub host: u64,
    /// Its cluster's key ([`super::clusters::key_of`]).
    pub cluster: u64,
}

impl ForgottenHost {
    /// Its key in the XML table (a host per cluster).
    pub fn table_key(self) -> u64 {
        self.host ^ self.cluster
    }
}

impl SlotKey {
    pub fn of(host: &str, metric: &str) -> SlotKey {
        SlotKey {
            host: name_key(host),
            metric: name_key(metric),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketKind {
    Metadata,
    Value,
}

/// The metric name key of every host's heartbeat.
pub fn heartbeat_key() -> u64 {
    name_key(HEARTBEAT)
}

pub const HEARTBEAT: &str = "heartbeat";

/// The host a batch's packets are about, as gmond names it: the two parts
/// of the spoof string (`ip:name`), kept apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostId {
    /// The address part (IPv6 with '-' for ':', [`crate::mapping::ip_text`]).
    pub ip: Box<str>,
    /// The NAME gmond shows.
    pub name: Box<str>,
    /// Sent with SPOOF_HOST (every host of the gateway's is; an unspoofed
    /// one is the sending machine itself, started with the table).
    pub spoofed: bool,
}

impl HostId {
    /// A spoofed host from its two parts.
    pub fn spoofed(ip: &str, name: &str) -> Arc<HostId> {
        Arc::new(HostId {
            ip: ip.into(),
            name: name.into(),
            spoofed: true,
        })
    }
}

/// Encoded packets of one record, back to back, each with its slot key
/// and what it is ([`Item`]: its metadata's fields, or where its value
/// lies), so the XML table takes them without decoding the packets.
#[derive(Default)]
pub struct PacketBatch {
    data: Vec<u8>,
    entries: Vec<Entry>,
    /// The metadata packets' fields, in order; their text in `text`.
    metas: Vec<StoredMeta>,
    text: String,
    /// Scratch for a metadata's title.
    title: String,
    /// The host the packets are about (one host per batch), said once.
    pub host: Option<Arc<HostId>>,
    /// The cluster of the host the packets are about.
    pub cluster: ClusterRef,
    /// The key of the cluster the host was in until this batch, when it
    /// moved ([`super::clusters::key_of`]): its metrics leave that one.
    pub moved_from: Option<u64>,
}

#[derive(Clone, Copy)]
struct Entry {
    end: u32,
    /// A value packet's value: its string's bytes (a 133) or its 4 bytes
    /// (the heartbeat's 132); for metadata, its place in `metas` (first).
    value: (u32, u32),
    key: SlotKey,
    kind: PacketKind,
}

/// A metric's metadata as its packet says it (its text in the batch's).
#[derive(Clone, Copy)]
struct StoredMeta {
    /// Where in `text` its name starts, and where name, type, units,
    /// group, desc and title end, back to back.
    start: u32,
    ends: [u32; 6],
    slope: xdr::Slope,
    tmax: u32,
    dmax: u32,
}

/// What one packet of a batch is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item<'b> {
    /// The host's heartbeat metadata (gmond shows nothing of it).
    HostMetadata,
    /// The heartbeat's value: the program's start, unix seconds.
    Started(u32),
    /// A metric's metadata.
    Metadata(MetaFields<'b>),
    /// A metric's value, its string's bytes.
    Value(&'b [u8]),
}

/// A metric's metadata: what a 128 packet carries, by field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetaFields<'b> {
    pub name: &'b str,
    pub value_type: &'b str,
    pub units: &'b str,
    pub slope: xdr::Slope,
    pub tmax: u32,
    pub dmax: u32,
    pub group: &'b str,
    pub desc: &'b str,
    pub title: &'b str,
}

/// A metric's metadata packet (128), as [`PacketBatch::metadata_of`]
/// builds it: spoofed (`SPOOF_HOST` first) or not, then GROUP, DESC and
/// TITLE, as `gmetric -S -g -D -T` sends them.
pub struct MetadataOf<'a> {
    pub key: SlotKey,
    pub host: &'a str,
    pub spoof: bool,
    pub fields: MetaFields<'a>,
}

impl PacketBatch {
    pub fn clear(&mut self) {
        self.data.clear();
        self.entries.clear();
        self.metas.clear();
        self.text.clear();
        self.host = None;
        self.cluster = None;
        self.moved_from = None;
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Appends one packet that `encode` writes; a packet over
    /// [`xdr::MAX_PACKET`] is never sent (the sanitiser's caps make that
    /// impossible; this keeps it so).
    pub fn push(&mut self, key: SlotKey, kind: PacketKind, encode: impl FnOnce(&mut Vec<u8>)) {
        self.push_with_value(key, kind, 0, |out| {
            encode(out);
            0
        });
    }

    /// [`push`](Self::push) for a value packet whose value is its last
    /// part: `encode` returns the value's length in bytes, which `pad`
    /// XDR padding bytes follow.
    fn push_with_value(
        &mut self,
        key: SlotKey,
        kind: PacketKind,
        pad: u32,
        encode: impl FnOnce(&mut Vec<u8>) -> u32,
    ) {
        let start = self.data.len();
        let value_len = encode(&mut self.data);
        if self.data.len() - start > xdr::MAX_PACKET {
            tracing::error!(
                bytes = self.data.len() - start,
                "packet over 1464 bytes not sent"
            );
            self.data.truncate(start);
            return;
        }
        let end = self.data.len() as u32;
        let value_start = end.saturating_sub(value_len + pad);
        self.entries.push(Entry {
            end,
            value: (value_start, value_start + value_len),
            key,
            kind,
        });
    }

    /// The packets, in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        self.entries().map(|(_, _, p)| p)
    }

    /// The packets with their keys, in order.
    pub fn entries(&self) -> impl Iterator<Item = (SlotKey, PacketKind, &[u8])> {
        let mut start = 0;
        self.entries.iter().map(move |e| {
            let p = &self.data[start..e.end as usize];
            start = e.end as usize;
            (e.key, e.kind, p)
        })
    }

    /// The packets with their keys and what each is, in order: what the
    /// XML table takes (no packet decoded).
    #[inline]
    pub fn items(&self) -> impl Iterator<Item = (SlotKey, Item<'_>)> {
        let heartbeat = heartbeat_key();
        self.entries.iter().map(move |e| {
            let item = match e.kind {
                PacketKind::Metadata => match self.metas.get(e.value.0 as usize) {
                    Some(m) => Item::Metadata(self.fields(m)),
                    None => Item::HostMetadata,
                },
                PacketKind::Value => {
                    let v = self.data.get(e.value.0 as usize..e.value.1 as usize);
                    let v = v.unwrap_or_default();
                    match <[u8; 4]>::try_from(v) {
                        Ok(started) if e.key.metric == heartbeat => {
                            Item::Started(u32::from_be_bytes(started))
                        }
                        _ => Item::Value(v),
                    }
                }
            };
            (e.key, item)
        })
    }

    #[inline]
    fn fields(&self, m: &StoredMeta) -> MetaFields<'_> {
        let mut start = m.start;
        let [name, value_type, units, group, desc, title] = m.ends.map(|end| {
            let s = self.text.get(start as usize..end as usize).unwrap_or("");
            start = end;
            s
        });
        MetaFields {
            name,
            value_type,
            units,
            slope: m.slope,
            tmax: m.tmax,
            dmax: m.dmax,
            group,
            desc,
            title,
        }
    }

    /// The heartbeat's metadata, as `gmetric -S HOST -H` sends it.
    pub fn heartbeat_metadata(&mut self, host: &str, host_key: u64) {
        let extra = [
            (Borrowed("SPOOF_HOST"), Borrowed(host)),
            (Borrowed("SPOOF_HEARTBEAT"), Borrowed("yes")),
        ];
        let packet = Packet::Metadata {
            id: heartbeat_id(host),
            meta: Metadata {
                value_type: Borrowed("uint32"),
                units: Borrowed(""),
                slope: xdr::Slope::Zero,
                tmax: 0,
                dmax: 0,
                extra: Borrowed(&extra),
            },
        };
        let key = SlotKey {
            host: host_key,
            metric: heartbeat_key(),
        };
        // No fields: its place is past every metadata's.
        self.push_with_value(key, PacketKind::Metadata, 0, |out| {
            xdr::encode(out, &packet);
            0
        });
        if let Some(e) = self.entries.last_mut() {
            e.value = (u32::MAX, u32::MAX);
        }
    }

    /// The heartbeat's value: a 132 uint (gmond reads a heartbeat's value
    /// as u32 whatever the packet; a 133 string shows garbage) valued with
    /// the program's start time, which gmond shows as GMOND_STARTED.
    pub fn heartbeat_value(&mut self, host: &str, host_key: u64, started: u32) {
        let key = SlotKey {
            host: host_key,
            metric: heartbeat_key(),
        };
        let packet = Packet::uint_value(heartbeat_id(host), started);
        self.push_with_value(key, PacketKind::Value, 0, |out| {
            xdr::encode(out, &packet);
            4
        });
    }

    /// A mapped metric's metadata (128) for a spoofed host.
    pub fn metadata(
        &mut self,
        host: &str,
        host_key: u64,
        m: &Metric<'_>,
        program: &str,
        tmax: u32,
        dmax: u32,
    ) {
        let mut title = std::mem::take(&mut self.title);
        title.clear();
        m.write_title(&mut title, program);
        self.metadata_of(MetadataOf {
            key: SlotKey {
                host: host_key,
                metric: m.name_key,
            },
            host,
            spoof: true,
            fields: MetaFields {
                name: m.name,
                value_type: m.value_type(),
                units: m.units(),
                slope: m.slope(),
                tmax,
                dmax,
                group: m.group,
                desc: m.desc(),
                title: &title,
            },
        });
        self.title = title;
    }

    /// Any metric's metadata (128).
    pub fn metadata_of(&mut self, of: MetadataOf<'_>) {
        let (m, host) = (of.fields, of.host);
        let extra = [
            (Borrowed("SPOOF_HOST"), Borrowed(host)),
            (Borrowed("GROUP"), Borrowed(m.group)),
            (Borrowed("DESC"), Borrowed(m.desc)),
            (Borrowed("TITLE"), Borrowed(m.title)),
        ];
        let packet = Packet::Metadata {
            id: MetricId::new(host, m.name, of.spoof),
            meta: Metadata {
                value_type: Borrowed(m.value_type),
                units: Borrowed(m.units),
                slope: m.slope,
                tmax: m.tmax,
                dmax: m.dmax,
                extra: Borrowed(if of.spoof { &extra } else { &extra[1..] }),
            },
        };
        let before = self.entries.len();
        self.push(of.key, PacketKind::Metadata, |out| {
            xdr::encode(out, &packet)
        });
        if self.entries.len() == before {
            return;
        }
        let start = self.text.len() as u32;
        let mut ends = [0u32; 6];
        let fields = [m.name, m.value_type, m.units, m.group, m.desc, m.title];
        for (end, field) in ends.iter_mut().zip(fields) {
            self.text.push_str(field);
            *end = self.text.len() as u32;
        }
        let at = self.metas.len() as u32;
        self.metas.push(StoredMeta {
            start,
            ends,
            slope: m.slope,
            tmax: m.tmax,
            dmax: m.dmax,
        });
        if let Some(e) = self.entries.last_mut() {
            e.value = (at, at);
        }
    }

    /// A mapped metric's value (133 `%s`) for a spoofed host.
    pub fn value(&mut self, host: &str, key: SlotKey, name: &str, text: &[u8]) {
        self.value_of(key, host, true, name, text);
    }

    /// Any metric's value (133 `%s`).
    pub fn value_of(&mut self, key: SlotKey, host: &str, spoof: bool, name: &str, text: &[u8]) {
        self.push_with_value(key, PacketKind::Value, pad(text), |out| {
            xdr::encode_string_value_prefix(out, &MetricId::new(host, name, spoof));
            xdr::append_string(out, text);
            text.len() as u32
        });
    }

    /// A value packet from the parts the template caches (the fast path):
    /// the host's `head` ([`value_head`]), the metric's `name` as an XDR
    /// string ([`value_name`]), then `text`.
    pub fn value_from_parts(&mut self, key: SlotKey, head: &[u8], name: &[u8], text: &[u8]) {
        self.push_with_value(key, PacketKind::Value, pad(text), |out| {
            out.extend_from_slice(head);
            out.extend_from_slice(name);
            // The tail and the value's length, one fixed-size piece (stores,
            // not a copy of a computed length), then the value and its
            // padding: what [`xdr::append_string`] writes.
            let mut mid = [0u8; 16];
            mid[..12].copy_from_slice(&xdr::STRING_VALUE_TAIL);
            mid[12..].copy_from_slice(&(text.len() as u32).to_be_bytes());
            out.extend_from_slice(&mid);
            out.extend_from_slice(text);
            let end = out.len() + pad(text) as usize;
            out.extend_from_slice(&[0; 3]);
            out.truncate(end);
            text.len() as u32
        });
    }

    /// The heartbeat value from its cached prefix (all but the last 4 bytes).
    pub fn heartbeat_from_prefix(&mut self, host_key: u64, prefix: &[u8], started: u32) {
        let key = SlotKey {
            host: host_key,
            metric: heartbeat_key(),
        };
        self.push_with_value(key, PacketKind::Value, 0, |out| {
            out.extend_from_slice(prefix);
            out.extend_from_slice(&started.to_be_bytes());
            4
        });
    }

    /// Room for `bytes` more bytes and `packets` more packets.
    pub fn reserve(&mut self, bytes: usize, packets: usize) {
        self.data.reserve(bytes);
        self.entries.reserve(packets);
    }
}

/// XDR's padding after a string of `text`'s length.
fn pad(text: &[u8]) -> u32 {
    (4 - text.len() as u32 % 4) % 4
}

fn metric_id<'a>(host: &'a str, name: &'a str) -> MetricId<'a> {
    MetricId::new(host, name, true)
}

fn heartbeat_id(host: &str) -> MetricId<'_> {
    metric_id(host, HEARTBEAT)
}

/// The first part of a host's value packets (what the template caches once
/// per source): [`PacketBatch::value_from_parts`].
pub fn value_head(out: &mut Vec<u8>, host: &str) {
    xdr::string_value_head(out, host);
}

/// A metric's part of its value packets (what the template caches per
/// metric): its name, as an XDR string.
pub fn value_name(out: &mut Vec<u8>, name: &str) {
    xdr::append_string(out, name.as_bytes());
}

/// The heartbeat's value packet up to its value (what the template caches).
pub fn heartbeat_prefix(out: &mut Vec<u8>, host: &str) {
    let start = out.len();
    xdr::encode(out, &Packet::uint_value(heartbeat_id(host), 0));
    out.truncate(out.len() - 4);
    debug_assert!(out.len() > start);
}
