//! The steady-state fast path: a source's last record kept as a template.
//!
//! A server sends the same record every interval with new numbers. The
//! template is that record's text with the digits of its numeric values cut
//! out (the holes), plus the packets the record became: whole value packets
//! for what cannot change (text values, list keys, names) and, for each
//! hole, its metric's value packet up to the value. A new datagram that
//! matches the template's text between holes, with plain digits in every
//! hole, becomes packets without parsing or mapping: each hole's digits are
//! appended to its cached prefix.
//!
//! Anything else goes the full way, which builds a new template: a changed
//! name, text or list key, a value that is not plain digits (negative,
//! leading zero, too long for its type), a restart (tos or pid changed), a
//! new TMAX, or any metric's metadata falling due. The fast path's packets
//! are byte for byte the full path's (a property test in `tests.rs` replays
//! record sequences both ways).

use std::ops::Range;

use crate::catalog::{self, Kind};
use crate::ganglia::xdr::{self, MetricId};
use crate::mapping::{Derived, MappedRecord, Role};
use crate::summary::shape::{Hole, Shape};
use crate::summary::{self, SummaryRecord};

use super::PacketBatch;

/// Holes longer than this are left literal: 18 digits always fit an i64.
const MAX_DIGITS_64: u8 = 18;
/// For 32-bit kinds: 9 digits always fit a u32.
const MAX_DIGITS_32: u8 = 9;

pub(super) struct Template {
    /// The record's text, with the holes.
    shape: Shape,
    /// Cached packets and prefixes, back to back.
    bytes: Vec<u8>,
    heartbeat: Range<u32>,
    outs: Vec<Out>,
    /// Inputs of the derived metrics, in record order.
    roles: Vec<(Role, Input)>,
    /// The derived metrics the record gave, in send order.
    derived: Vec<&'static str>,
    tos: Input,
    pid: Input,
    /// The TMAX every metadata of the source was sent with.
    pub(super) tmax: u32,
    /// No metric's metadata is due before this (pipeline seconds).
    pub(super) due_at: u32,
    /// A packet came near gmond's size limit while building.
    oversize: bool,
}

/// One packet of the record, in send order (after the heartbeat).
enum Out {
    /// A whole value packet.
    Fixed(Range<u32>),
    /// A value packet up to its value, which is hole `hole`.
    Hole { hole: u32, prefix: Range<u32> },
    /// A derived metric's packet up to its value.
    Derived { prefix: Range<u32> },
}

#[derive(Clone, Debug)]
enum Input {
    Absent,
    Hole(u32),
    Literal(Box<str>),
}

/// What building needs to know of the source after the full path ran.
pub(super) struct SourceState<'a> {
    pub spoof: &'a str,
    pub tmax: u32,
    /// When a metric (by name key) last had its metadata sent.
    pub metadata_sent: &'a dyn Fn(u64) -> Option<u32>,
    pub interval_s: u32,
}

impl Template {
    /// The template of a record the full path just handled, if it can have
    /// one: the record is the datagram's own UTF-8 text and every variable
    /// became a metric (none rejected or over the cap). A JSON record's
    /// made values (unescaped strings, list lengths) are never holes: they
    /// follow from literal text, so a matching datagram makes them again.
    pub(super) fn build(
        datagram: &[u8],
        record: &SummaryRecord<'_>,
        mapped: &MappedRecord,
        state: &SourceState<'_>,
    ) -> Option<Template> {
        let text = record.text();
        if text.as_ptr() != datagram.as_ptr() || text.len() != datagram.len() {
            return None;
        }
        if mapped.rejected_count > 0 || mapped.len() < record.len() {
            return None;
        }
        let mut shape = Shape::builder(datagram);
        let mut t = Template {
            shape: Shape::default(),
            bytes: Vec::new(),
            heartbeat: 0..0,
            outs: Vec::with_capacity(mapped.len()),
            roles: Vec::new(),
            derived: Vec::new(),
            tos: Input::Absent,
            pid: Input::Absent,
            tmax: state.tmax,
            due_at: u32::MAX,
            oversize: false,
        };
        let id = |name| MetricId {
            host: state.spoof,
            name,
            spoof: true,
        };
        let start = t.bytes.len();
        xdr::encode_uint_value(&mut t.bytes, &id("heartbeat"), 0);
        t.heartbeat = start as u32..(t.bytes.len() - 4) as u32;

        let header_len = record.header_len();
        let mut derived = Derived::default();
        let mut metrics = mapped.metrics();
        for (j, v) in record.vars().enumerate() {
            let m = metrics.next()?;
            let due = (state.metadata_sent)(m.name_key)?.saturating_add(state.interval_s);
            t.due_at = t.due_at.min(due);
            // Values a JSON record made (not in the datagram) stay literal:
            // they follow from the literal text around them.
            let span = summary::offset_in(datagram, v.value);
            let names_something = (j < header_len
                && !matches!(v.name, "tod" | "tos" | "pid" | "toe"))
                || matches!(v.name, "host" | "info.host")
                || v.entry
                    .is_some_and(|e| catalog::list_key(e.list) == Some(e.field));
            let hole = Hole {
                max: match m.kind {
                    Kind::Counter32 | Kind::Gauge32 => MAX_DIGITS_32,
                    _ => MAX_DIGITS_64,
                },
                plain: true,
            };
            let span = span.filter(|span| {
                !names_something
                    && m.kind != Kind::Text
                    && m.value == v.value
                    && shape.can_cut(span, hole)
            });
            let input = if let Some(span) = span {
                let hole = shape.cut(span, hole);
                let prefix = t.push(|out| xdr::encode_string_value_prefix(out, &id(m.name)));
                t.outs.push(Out::Hole { hole, prefix });
                Input::Hole(hole)
            } else {
                let packet = t.push(|out| xdr::encode_string_value(out, &id(m.name), m.value));
                t.outs.push(Out::Fixed(packet));
                Input::Literal(v.value.into())
            };
            if j < header_len {
                if v.name == "tos" && matches!(t.tos, Input::Absent) {
                    t.tos = input.clone();
                }
                if v.name == "pid" && matches!(t.pid, Input::Absent) {
                    t.pid = input.clone();
                }
            }
            if v.entry.is_none() {
                let role = Role::of(v.name);
                if role != Role::None {
                    derived.note(role, v.value);
                    t.roles.push((role, input));
                }
            }
        }
        t.shape = shape.finish();

        // The derived metrics come last, as the mapping made them.
        let rest: Vec<_> = metrics.collect();
        let expected: Vec<&'static str> = derived.computed().map(|(n, _)| n).collect();
        if rest.len() != expected.len() {
            return None;
        }
        for (m, name) in rest.iter().zip(expected) {
            if m.var != name {
                return None;
            }
            let due = (state.metadata_sent)(m.name_key)?.saturating_add(state.interval_s);
            t.due_at = t.due_at.min(due);
            let prefix = t.push(|out| xdr::encode_string_value_prefix(out, &id(m.name)));
            t.outs.push(Out::Derived { prefix });
            t.derived.push(name);
        }
        (!t.oversize).then_some(t)
    }

    fn push(&mut self, encode: impl FnOnce(&mut Vec<u8>)) -> Range<u32> {
        let start = self.bytes.len();
        encode(&mut self.bytes);
        // The full path never sends a packet over the limit (the sanitiser
        // makes one impossible): a template with one is not used.
        if self.bytes.len() - start > xdr::MAX_PACKET - 24 {
            self.oversize = true;
        }
        start as u32..self.bytes.len() as u32
    }

    /// Matches `datagram` against the template: on success `holes` holds
    /// the byte range of each hole's digits.
    pub(super) fn matches(&self, datagram: &[u8], holes: &mut Vec<Range<u32>>) -> bool {
        self.shape.matches(datagram, holes)
    }

    fn input<'d>(
        &'d self,
        input: &'d Input,
        datagram: &'d [u8],
        holes: &[Range<u32>],
    ) -> Option<&'d str> {
        match input {
            Input::Absent => None,
            Input::Literal(text) => Some(text),
            Input::Hole(i) => {
                let r = holes.get(*i as usize)?;
                // Digits only: always UTF-8.
                std::str::from_utf8(datagram.get(r.start as usize..r.end as usize)?).ok()
            }
        }
    }

    /// (tos, pid) of a matched datagram, read as the full path reads them.
    pub(super) fn start(&self, datagram: &[u8], holes: &[Range<u32>]) -> (u32, u32) {
        let number = |i: &Input| {
            self.input(i, datagram, holes)
                .and_then(|t| t.trim().parse::<u32>().ok())
                .unwrap_or(0)
        };
        (number(&self.tos), number(&self.pid))
    }

    /// The derived metrics' inputs in a matched datagram.
    fn derived_inputs(&self, datagram: &[u8], holes: &[Range<u32>]) -> Option<Derived> {
        let mut d = Derived::default();
        for (role, input) in &self.roles {
            d.note(*role, self.input(input, datagram, holes)?);
        }
        Some(d)
    }

    /// Appends the packets of a matched datagram to `batch`; returns how
    /// many, or None (nothing appended) when its derived metrics would not
    /// be the template's.
    pub(super) fn emit(
        &self,
        datagram: &[u8],
        holes: &[Range<u32>],
        tos: u32,
        batch: &mut PacketBatch,
    ) -> Option<u64> {
        let derived = self.derived_inputs(datagram, holes)?;
        let mut values = [0u64; 4];
        let mut n = 0;
        for (name, v) in derived.computed() {
            if self.derived.get(n) != Some(&name) {
                return None;
            }
            values[n] = v;
            n += 1;
        }
        if n != self.derived.len() {
            return None;
        }
        let bytes = &self.bytes;
        let slice = |r: &Range<u32>| &bytes[r.start as usize..r.end as usize];
        // Every packet is a cached piece plus at most a 20-digit value.
        let out = &mut batch.data;
        out.reserve(bytes.len() + 28 * (holes.len() + n));
        out.extend_from_slice(slice(&self.heartbeat));
        out.extend_from_slice(&tos.to_be_bytes());
        batch.ends.push(out.len());
        let mut next_derived = 0;
        let mut number = [0u8; 20];
        for o in &self.outs {
            match o {
                Out::Fixed(r) => out.extend_from_slice(slice(r)),
                Out::Hole { hole, prefix } => {
                    let r = &holes[*hole as usize];
                    out.extend_from_slice(slice(prefix));
                    xdr::append_string(out, &datagram[r.start as usize..r.end as usize]);
                }
                Out::Derived { prefix } => {
                    let text = format_u64(&mut number, values[next_derived]);
                    next_derived += 1;
                    out.extend_from_slice(slice(prefix));
                    xdr::append_string(out, text);
                }
            }
            batch.ends.push(out.len());
        }
        Some(1 + self.outs.len() as u64)
    }
}

fn format_u64(buf: &mut [u8; 20], mut v: u64) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    &buf[i..]
}
