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
use crate::ganglia::xdr;
use crate::mapping::{Derived, MappedRecord, Role};
use crate::summary::shape::{Hole, Shape};
use crate::summary::{self, SummaryRecord};

use super::packets::{self, PacketBatch, SlotKey};
use super::series::{self, Counting, MetricState};

/// Holes longer than this are left literal: 18 digits always fit an i64.
const MAX_DIGITS_64: u8 = 18;
/// For 32-bit kinds: 9 digits always fit a u32.
const MAX_DIGITS_32: u8 = 9;
/// For sizes in KiB: 15 digits times 1024 always fit a u64.
const MAX_DIGITS_KIB: u8 = 15;

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
    /// Variables of the record left out by `exclude` (counted per report).
    pub(super) excluded: u32,
}

/// One value packet of the record, in send order (after the heartbeat):
/// the packet up to its value, the value's source, and the metric's place
/// in the source's states (counter continuity, changed-only sending).
struct Out {
    prefix: Range<u32>,
    value: OutValue,
    state: u32,
    counting: Counting,
}

enum OutValue {
    /// Text that cannot change (kept in `bytes`).
    Fixed(Range<u32>),
    /// Hole `n`'s digits.
    Hole(u32),
    /// Hole `n`'s digits, a size in KiB, sent in bytes.
    KiBHole(u32),
    /// The next derived value.
    Derived,
}

/// What the values of a matched record are checked against.
pub(super) struct Values<'s> {
    pub states: &'s mut [MetricState],
    /// The source's host key ([`SlotKey::host`]).
    pub host_key: u64,
    pub now_s: u32,
    pub heartbeat: Option<u32>,
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
    /// When the heartbeat's metadata was last sent.
    pub heartbeat_meta_at: u32,
    /// A metric's (by name key) place in the source's states and when its
    /// metadata was last sent.
    pub metric: &'a dyn Fn(u64) -> Option<(u32, u32)>,
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
        if mapped.rejected_count > 0 || mapped.len() + mapped.excluded.len() < record.len() {
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
            due_at: state.heartbeat_meta_at.saturating_add(state.interval_s),
            oversize: false,
            excluded: mapped.excluded.len() as u32,
        };
        t.heartbeat = t.push(|out| packets::heartbeat_prefix(out, state.spoof));

        let header_len = record.header_len();
        // A name repeated in the record is sent once (the full path's rule):
        // such a record gets no template.
        let mut seen = std::collections::HashSet::with_capacity(mapped.len());
        let mut derived = Derived::default();
        let mut metrics = mapped.metrics();
        let mut excluded = mapped.excluded.iter().copied().peekable();
        for (j, v) in record.vars().enumerate() {
            // Left out by `exclude`: no packet, but its digits are a hole
            // (a report time changes every report) and it may be an input
            // of a derived metric.
            let is_excluded = excluded.next_if_eq(&(j as u32)).is_some();
            let span = summary::offset_in(datagram, v.value);
            let names_something = (j < header_len
                && !matches!(v.name, "tod" | "tos" | "pid" | "toe"))
                || matches!(v.name, "host" | "info.host")
                || v.entry
                    .is_some_and(|e| catalog::list_key(e.list) == Some(e.field));
            let input = if is_excluded {
                let hole = Hole {
                    max: MAX_DIGITS_64,
                    plain: true,
                };
                match span.filter(|span| !names_something && shape.can_cut(span, hole)) {
                    Some(span) => Input::Hole(shape.cut(span, hole)),
                    None => Input::Literal(v.value.into()),
                }
            } else {
                let m = metrics.next()?;
                let (slot, meta_at) = (state.metric)(m.name_key)?;
                if !seen.insert(slot) {
                    return None;
                }
                let due = meta_at.saturating_add(state.interval_s);
                t.due_at = t.due_at.min(due);
                // Values a JSON record made (not in the datagram) stay literal:
                // they follow from the literal text around them.
                let kib = m.kind == Kind::SizeKiB;
                let hole = Hole {
                    max: match m.kind {
                        Kind::Counter32 | Kind::Gauge32 => MAX_DIGITS_32,
                        Kind::SizeKiB => MAX_DIGITS_KIB,
                        _ => MAX_DIGITS_64,
                    },
                    plain: true,
                };
                // A text value that is plain digits (a pid, a port) is a
                // hole like a number: sent as it came either way. A size in
                // KiB is sent times 1024.
                let span = span.filter(|span| {
                    !names_something && (kib || m.value == v.value) && shape.can_cut(span, hole)
                });
                let prefix = t.push(|out| packets::value_prefix(out, state.spoof, m.name));
                let (input, value) = if let Some(span) = span {
                    let hole = shape.cut(span, hole);
                    let value = if kib {
                        OutValue::KiBHole(hole)
                    } else {
                        OutValue::Hole(hole)
                    };
                    (Input::Hole(hole), value)
                } else {
                    let value = t.push(|out| out.extend_from_slice(m.value.as_bytes()));
                    (Input::Literal(v.value.into()), OutValue::Fixed(value))
                };
                t.outs.push(Out {
                    prefix,
                    value,
                    state: slot,
                    counting: Counting::of(m.kind),
                });
                input
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
            let (at, meta_at) = (state.metric)(m.name_key)?;
            if !seen.insert(at) {
                return None;
            }
            t.due_at = t.due_at.min(meta_at.saturating_add(state.interval_s));
            let prefix = t.push(|out| packets::value_prefix(out, state.spoof, m.name));
            t.outs.push(Out {
                prefix,
                value: OutValue::Derived,
                state: at,
                counting: Counting::of(m.kind),
            });
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
    /// many, or None (nothing appended, no state changed) when its derived
    /// metrics would not be the template's.
    pub(super) fn emit(
        &self,
        datagram: &[u8],
        holes: &[Range<u32>],
        tos: u32,
        values: Values<'_>,
        batch: &mut PacketBatch,
    ) -> Option<u64> {
        let derived = self.derived_inputs(datagram, holes)?;
        let mut computed = [0u64; 4];
        let mut n = 0;
        for (name, v) in derived.computed() {
            if self.derived.get(n) != Some(&name) {
                return None;
            }
            computed[n] = v;
            n += 1;
        }
        if n != self.derived.len() {
            return None;
        }
        let bytes = &self.bytes;
        let slice = |r: &Range<u32>| &bytes[r.start as usize..r.end as usize];
        // Every packet is a cached piece plus at most a 20-digit value.
        batch.reserve(bytes.len() + 28 * (holes.len() + n), self.outs.len() + 1);
        batch.heartbeat_from_prefix(values.host_key, slice(&self.heartbeat), tos);
        let mut sent = 1;
        let mut next_derived = 0;
        let (mut number, mut counted, mut scaled) = ([0u8; 20], [0u8; 20], [0u8; 20]);
        for o in &self.outs {
            let text = match &o.value {
                OutValue::Fixed(r) => slice(r),
                OutValue::Hole(i) => {
                    let r = &holes[*i as usize];
                    &datagram[r.start as usize..r.end as usize]
                }
                OutValue::KiBHole(i) => {
                    let r = &holes[*i as usize];
                    let digits = &datagram[r.start as usize..r.end as usize];
                    // At most MAX_DIGITS_KIB plain digits: they parse.
                    let kib = series::parse_u64(digits).unwrap_or(0);
                    series::format_u64(&mut scaled, crate::mapping::kib_to_bytes(kib))
                }
                OutValue::Derived => {
                    next_derived += 1;
                    series::format_u64(&mut number, computed[next_derived - 1])
                }
            };
            // The build gave every packet its metric's state.
            let Some(state) = values.states.get_mut(o.state as usize) else {
                continue;
            };
            let text = series::counter_text(state, text, o.counting, &mut counted);
            if !state.admit(text, values.now_s, values.heartbeat, false) {
                continue;
            }
            let key = SlotKey {
                host: values.host_key,
                metric: state.key,
            };
            batch.value_from_prefix(key, slice(&o.prefix), text);
            sent += 1;
        }
        Some(sent)
    }
}
