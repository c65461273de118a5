//! The steady-state fast path: a source's last record kept as a template.
//!
//! A server sends the same record every interval with new numbers. The
//! template is that record's text with the digits of its numeric values cut
//! out (the holes), plus the pieces of the packets the record became: the
//! host's packet head once, and per value packet its metric's name and,
//! for what cannot change (text values, list keys, names), the value. A
//! new datagram that matches the template's text between holes, with plain
//! digits in every hole, becomes packets without parsing or mapping: each
//! is the head, the name, the tail all value packets share
//! ([`xdr::STRING_VALUE_TAIL`]) and the hole's digits. (The head in front
//! of every name took 30-60 bytes more per metric of every source.)
//!
//! Anything else goes the full way, which builds a new template: a changed
//! name, text or list key, a value that is not plain digits (negative,
//! leading zero, too long for its type), a restart (tos or pid changed), a
//! new TMAX, or any metric's metadata falling due. The fast path's packets
//! are byte for byte the full path's (a property test in `tests.rs` replays
//! record sequences both ways).

use std::collections::HashSet;
use std::ops::Range;

use crate::catalog::{self, Kind};
use crate::ganglia::xdr;
use crate::mapping::{Derived, MappedRecord, Metric, Role};
use crate::summary::shape::{Hole, Shape, ShapeBuilder};
use crate::summary::{self, Stamp, SummaryRecord};

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
    /// Cached pieces of packets, back to back.
    bytes: Vec<u8>,
    /// The first part of every value packet: its id and the host
    /// ([`packets::value_head`]). Kept once, not in front of each metric's
    /// name: with the tail every packet shares, that is 32-64 bytes per
    /// metric a template does not hold.
    head: Range<u32>,
    heartbeat: Range<u32>,
    values: Vec<CachedValue>,
    /// Inputs of the derived metrics, in record order.
    roles: Vec<(Role, Input)>,
    /// The derived metrics the record gave, in send order.
    derived: Vec<&'static str>,
    tos: Input,
    pid: Input,
    tod: Input,
    /// The TMAX every metadata of the source was sent with.
    pub(super) tmax: u32,
    /// No metric's metadata is due before this (pipeline seconds).
    pub(super) due_at: u32,
    /// A packet came near gmond's size limit while building.
    oversize: bool,
    /// Variables of the record left out by `exclude` (counted per report).
    pub(super) excluded: u32,
}

/// A variable left out by `exclude`: no packet, but its digits are a hole
/// (a report time changes every report) and it may be an input of a
/// derived metric.
fn excluded_input(shape: &mut ShapeBuilder<'_>, span: Option<Range<usize>>, value: &str) -> Input {
    let hole = Hole {
        max: MAX_DIGITS_64,
        plain: true,
    };
    match span.filter(|span| shape.can_cut(span, hole)) {
        Some(span) => Input::Hole(shape.cut(span, hole)),
        None => Input::Literal(value.into()),
    }
}

/// One value packet of the record, in send order (after the heartbeat):
/// its metric's name (the packet between the head and the shared tail),
/// the value's source, and the metric's place in the source's states
/// (counter continuity, changed-only sending).
struct CachedValue {
    name: Range<u32>,
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
    /// Set when a counter's offset moved (a reset or wrap).
    pub moved: &'s mut bool,
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
            head: 0..0,
            heartbeat: 0..0,
            values: Vec::with_capacity(mapped.len()),
            roles: Vec::new(),
            derived: Vec::new(),
            tos: Input::Absent,
            pid: Input::Absent,
            tod: Input::Absent,
            tmax: state.tmax,
            due_at: state.heartbeat_meta_at.saturating_add(state.interval_s),
            oversize: false,
            excluded: mapped.excluded.len() as u32,
        };
        t.head = t.push(|out| packets::value_head(out, state.spoof));
        t.heartbeat = t.push(|out| packets::heartbeat_prefix(out, state.spoof));

        let header_len = record.header_len();
        // A name repeated in the record is sent once (the full path's rule):
        // such a record gets no template.
        let mut seen = HashSet::with_capacity(mapped.len());
        let mut derived = Derived::default();
        let mut metrics = mapped.metrics();
        let mut excluded = mapped.excluded.iter().copied().peekable();
        for (j, v) in record.vars().enumerate() {
            let span = summary::offset_in(datagram, v.value);
            let names_something = (j < header_len
                && !matches!(v.name, "tod" | "tos" | "pid" | "toe"))
                || matches!(v.name, "host" | "info.host")
                || v.entry
                    .is_some_and(|e| catalog::list_key(e.list) == Some(e.field));
            // Digits that name something (a host, a list key) stay literal.
            let span = span.filter(|_| !names_something);
            let input = if excluded.next_if_eq(&(j as u32)).is_some() {
                excluded_input(&mut shape, span, v.value)
            } else {
                let m = metrics.next()?;
                t.metric_input(&mut shape, span, v.value, &m, state, &mut seen)?
            };
            t.note_input(
                j < header_len,
                v.name,
                v.entry.is_none(),
                v.value,
                input,
                &mut derived,
            );
        }
        t.shape = shape.finish();
        t.append_derived(metrics.collect(), &derived, state, &mut seen)?;
        if t.oversize {
            return None;
        }
        // Kept for as long as its source reports, one per source: no room
        // to grow (the bytes grew by doubling).
        t.bytes.shrink_to_fit();
        t.values.shrink_to_fit();
        t.roles.shrink_to_fit();
        t.derived.shrink_to_fit();
        Some(t)
    }

    /// A variable sent as metric `m`: its value packet's prefix, and its
    /// digits a hole where they can be (else its text, literal). None if
    /// the record cannot have a template (an unknown or repeated metric).
    fn metric_input(
        &mut self,
        shape: &mut ShapeBuilder<'_>,
        span: Option<Range<usize>>,
        value: &str,
        m: &Metric<'_>,
        state: &SourceState<'_>,
        seen: &mut HashSet<u32>,
    ) -> Option<Input> {
        let (slot, meta_at) = (state.metric)(m.name_key)?;
        if !seen.insert(slot) {
            return None;
        }
        self.due_at = self.due_at.min(meta_at.saturating_add(state.interval_s));
        let kib = m.kind == Kind::SizeKiB;
        let hole = Hole {
            max: match m.kind {
                Kind::Counter8 | Kind::Counter32 | Kind::Gauge32 => MAX_DIGITS_32,
                Kind::SizeKiB => MAX_DIGITS_KIB,
                _ => MAX_DIGITS_64,
            },
            plain: true,
        };
        // A text value that is plain digits (a pid, a port) is a hole like
        // a number: sent as it came either way. A size in KiB is sent times
        // 1024. Values a JSON record made (not in the datagram) stay
        // literal: they follow from the literal text around them.
        let span = span.filter(|span| (kib || m.value == value) && shape.can_cut(span, hole));
        let name = self.push_name(m.name);
        let (input, out_value) = if let Some(span) = span {
            let hole = shape.cut(span, hole);
            let out_value = if kib {
                OutValue::KiBHole(hole)
            } else {
                OutValue::Hole(hole)
            };
            (Input::Hole(hole), out_value)
        } else {
            let fixed = self.push(|out| out.extend_from_slice(m.value.as_bytes()));
            (Input::Literal(value.into()), OutValue::Fixed(fixed))
        };
        self.values.push(CachedValue {
            name,
            value: out_value,
            state: slot,
            counting: Counting::of(m.kind),
        });
        Some(input)
    }

    /// Notes where the start time, pid and derived metrics' inputs of the
    /// record come from.
    fn note_input(
        &mut self,
        in_header: bool,
        name: &str,
        plain: bool,
        value: &str,
        input: Input,
        derived: &mut Derived,
    ) {
        if in_header {
            if name == "tos" && matches!(self.tos, Input::Absent) {
                self.tos = input.clone();
            }
            if name == "pid" && matches!(self.pid, Input::Absent) {
                self.pid = input.clone();
            }
            if name == "tod" && matches!(self.tod, Input::Absent) {
                self.tod = input.clone();
            }
        }
        if plain {
            let role = Role::of(name);
            if role != Role::None {
                derived.note(role, value);
                self.roles.push((role, input));
            }
        }
    }

    /// The derived metrics come last, as the mapping made them: `rest` must
    /// be exactly those `derived` computes.
    fn append_derived(
        &mut self,
        rest: Vec<Metric<'_>>,
        derived: &Derived,
        state: &SourceState<'_>,
        seen: &mut HashSet<u32>,
    ) -> Option<()> {
        let expected: Vec<&'static str> = derived.computed().map(|(n, _)| n).collect();
        if rest.len() != expected.len() {
            return None;
        }
        for (m, var) in rest.iter().zip(expected) {
            if m.var != var {
                return None;
            }
            let (at, meta_at) = (state.metric)(m.name_key)?;
            if !seen.insert(at) {
                return None;
            }
            self.due_at = self.due_at.min(meta_at.saturating_add(state.interval_s));
            let name = self.push_name(m.name);
            self.values.push(CachedValue {
                name,
                value: OutValue::Derived,
                state: at,
                counting: Counting::of(m.kind),
            });
            self.derived.push(var);
        }
        Some(())
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

    /// A metric's name, whose packets are the head, it, the tail and a
    /// value (at most 20 digits: 24 bytes).
    fn push_name(&mut self, name: &str) -> Range<u32> {
        let at = self.push(|out| packets::value_name(out, name));
        let packet = self.head.len() + at.len() + xdr::STRING_VALUE_TAIL.len();
        if packet > xdr::MAX_PACKET - 24 {
            self.oversize = true;
        }
        at
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

    /// The header numbers of a matched datagram, read as the full path
    /// reads them ([`Stamp::read`]).
    pub(super) fn stamp(&self, datagram: &[u8], holes: &[Range<u32>]) -> Stamp {
        let text = |i| self.input(i, datagram, holes);
        Stamp::read(text(&self.tos), text(&self.pid), text(&self.tod))
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
    /// metrics would not be the template's. Kept out of its caller: inlined
    /// there, it left the per-value counter and changed-only steps out of
    /// line (+7.7% instructions per fast-path record under callgrind).
    #[inline(never)]
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
        let head = slice(&self.head);
        // Every value packet is the head, its cached name (or fixed value:
        // all of them are in `bytes`), the tail and at most a 20-digit value.
        let per_packet = head.len() + xdr::STRING_VALUE_TAIL.len() + 24;
        batch.reserve(
            bytes.len() + per_packet * self.values.len(),
            self.values.len() + 1,
        );
        batch.heartbeat_from_prefix(values.host_key, slice(&self.heartbeat), tos);
        let mut sent = 1;
        let mut next_derived = 0;
        let (mut number, mut counted, mut scaled) = ([0u8; 20], [0u8; 20], [0u8; 20]);
        for o in &self.values {
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
            let text = series::counter_text(state, text, o.counting, &mut counted, values.moved);
            if !state.admit(text, values.now_s, values.heartbeat, false) {
                continue;
            }
            let key = SlotKey {
                host: values.host_key,
                metric: state.key,
            };
            batch.value_from_parts(key, head, slice(&o.name), text);
            sent += 1;
        }
        Some(sent)
    }
}
