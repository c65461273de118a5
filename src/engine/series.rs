//! What the gateway remembers of each metric of a source, and the two
//! decisions taken per value: what number a cumulative counter is sent as,
//! and whether an unchanged value is sent at all.
//!
//! **Counters stay continuous.** gmetad stores positive-slope metrics as
//! RRD COUNTERs (`gmetad/rrd_helpers.c`) and takes any drop as a 32-bit
//! wrap: one xrootd restart draws a spike of about 4.3e9 per step in the
//! host's graph and in the cluster summary (`__SummaryInfo__`, where gmetad
//! sums the hosts' values, `gmetad/process_xml.c`). So a counter is sent as
//! `reading + offset`, never lower than what was sent before:
//!
//! * the program restarted (new `tos` or `pid`): every counter of the
//!   source continues from what was last sent (`offset += last reading`);
//! * one counter went down without a restart: a C `int` counter whose
//!   forward distance modulo 2^32 is under 2^31 wrapped (`offset += 2^32`:
//!   the rate across the wrap is right), and likewise a C `char` counter
//!   (`cmsm.node.i.shr.use`) modulo 2^8; anything else was reset
//!   (`offset += last reading`).
//!
//! The increase across a restart or reset is the new reading: what was
//! counted since. Offsets (and the last readings) survive a gateway restart
//! in the state file ([`super::saved`]).
//!
//! **Changed values only** (`send_values = "changed"`): a value whose text
//! equals the one last sent is not sent again until `value_heartbeat`
//! seconds have passed; metadata going out always takes its value along.

/// Seconds value meaning "never" (a restored metric whose metadata was
/// not sent by this process yet).
pub(super) const NEVER: u32 = u32::MAX;

/// The counter arithmetic a metric needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Counting {
    /// Not a counter: the value is sent as it came.
    None,
    /// A C `int` counter: a drop may be a 32-bit wrap.
    Wraps32,
    /// A C `char` counter: a drop may be an 8-bit wrap.
    Wraps8,
    /// A 64-bit counter: a drop is a reset.
    Resets,
}

impl Counting {
    pub(super) fn of(kind: crate::catalog::Kind) -> Counting {
        use crate::catalog::Kind;
        match kind {
            Kind::Counter8 => Counting::Wraps8,
            Kind::Counter32 => Counting::Wraps32,
            Kind::Counter64 => Counting::Resets,
            _ => Counting::None,
        }
    }
}

/// One metric of one source.
#[derive(Clone, Debug)]
pub(super) struct MetricState {
    /// Keyed name hash ([`crate::mapping::Metric::name_key`]): stable across
    /// processes, so the state file can name the metric by it.
    pub key: u64,
    /// Counter: the last reading, as xrootd sent it.
    pub last_raw: u64,
    /// Counter: what is added to the reading.
    pub offset: u64,
    /// When its metadata was last sent (pipeline seconds; [`NEVER`]).
    pub meta_at: u32,
    /// When its value was last sent.
    pub value_at: u32,
    /// FNV-1a of the value text last sent (changed-only sending).
    pub value_hash: u32,
    /// When it was last in a record (for pruning).
    pub seen_at: u32,
}

// Every metric of every source has one, for as long as it reports: 40
// bytes, no padding (a field more would make it 48).
const _: () = assert!(std::mem::size_of::<MetricState>() == 40);

impl MetricState {
    pub fn new(key: u64, now_s: u32) -> MetricState {
        MetricState {
            key,
            last_raw: 0,
            offset: 0,
            meta_at: NEVER,
            value_at: NEVER,
            value_hash: 0,
            seen_at: now_s,
        }
    }

    /// The number to send for counter reading `raw`.
    pub fn count(&mut self, raw: u64, counting: Counting) -> u64 {
        if raw < self.last_raw {
            // The counter's modulus: a drop by less than half of it is a wrap.
            let modulus: u64 = match counting {
                Counting::Wraps32 => 1 << 32,
                Counting::Wraps8 => 1 << 8,
                _ => 0,
            };
            if modulus != 0
                && self.last_raw < modulus
                && raw.wrapping_add(modulus).wrapping_sub(self.last_raw) < modulus / 2
            {
                self.offset = self.offset.saturating_add(modulus);
            } else {
                self.offset = self.offset.saturating_add(self.last_raw);
            }
        }
        self.last_raw = raw;
        raw.saturating_add(self.offset)
    }

    /// A floor: the counter, as its last reading sends it, is never below
    /// `floor` (the last value published for it, read at start from
    /// `recover_from`: what gmetad stored). Raises the offset as far as
    /// needed, at most; true when it did. What the counter gained while
    /// no gateway counted it is not known, and not made up: it continues
    /// from the floor.
    pub fn floor(&mut self, floor: u64) -> bool {
        let sent = self.last_raw.saturating_add(self.offset);
        if sent >= floor {
            return false;
        }
        self.offset = self.offset.saturating_add(floor - sent);
        true
    }

    /// The program restarted: its counters count from zero again.
    pub fn restart(&mut self) {
        self.offset = self.offset.saturating_add(self.last_raw);
        self.last_raw = 0;
    }

    /// Whether the value `text` goes out now. `heartbeat` is None when every
    /// value is sent; `force` when its metadata goes out with it.
    pub fn admit(&mut self, text: &[u8], now_s: u32, heartbeat: Option<u32>, force: bool) -> bool {
        self.seen_at = now_s;
        if let Some(h) = heartbeat {
            let hash = fnv32(text);
            let fresh = self.value_at != NEVER && now_s.saturating_sub(self.value_at) < h;
            if !force && fresh && hash == self.value_hash {
                return false;
            }
            self.value_hash = hash;
        }
        self.value_at = now_s;
        true
    }
}

/// Counter text -> the text to send, in `buf` when it differs. `text` is
/// what the mapping made of the value: plain decimal digits. `moved` is
/// set when the offset changed (a reset or wrap: the peer is told).
pub(super) fn counter_text<'t>(
    state: &mut MetricState,
    text: &'t [u8],
    counting: Counting,
    buf: &'t mut [u8; 20],
    moved: &mut bool,
) -> &'t [u8] {
    if counting == Counting::None {
        return text;
    }
    let Some(raw) = parse_u64(text) else {
        return text;
    };
    let before = state.offset;
    let sent = state.count(raw, counting);
    if state.offset != before {
        *moved = true;
    }
    if sent == raw {
        text
    } else {
        format_u64(buf, sent)
    }
}

/// Counter text -> the text last sent for it, when the reading is the one
/// last counted (gmond's metadata request is answered from the last
/// record): [`counter_text`] without touching the state.
pub(super) fn sent_text<'t>(
    state: &MetricState,
    text: &'t [u8],
    counting: Counting,
    buf: &'t mut [u8; 20],
) -> &'t [u8] {
    match (counting, parse_u64(text)) {
        (Counting::None, _) | (_, None) => text,
        (_, Some(_)) if state.offset == 0 => text,
        (_, Some(raw)) => format_u64(buf, raw.saturating_add(state.offset)),
    }
}

/// Plain decimal digits (at most 19) as a number.
pub(super) fn parse_u64(text: &[u8]) -> Option<u64> {
    if text.is_empty() || text.len() > 19 {
        return None;
    }
    let mut v: u64 = 0;
    for b in text {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u64::from(b - b'0');
    }
    Some(v)
}

pub(super) use crate::ganglia::format_u64;

/// The fingerprint of a value text: FNV-1a ([`crate::fnv`]), folded to 32 bits.
fn fnv32(bytes: &[u8]) -> u32 {
    let h = crate::fnv::hash(bytes);
    (h ^ (h >> 32)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(state: &mut MetricState, raw: u64, c: Counting) -> u64 {
        state.count(raw, c)
    }

    #[test]
    fn counters_never_go_down() {
        let mut s = MetricState::new(1, 0);
        assert_eq!(sent(&mut s, 1000, Counting::Resets), 1000);
        assert_eq!(sent(&mut s, 5000, Counting::Resets), 5000);
        // Restart: continues from 5000, counting what came since.
        s.restart();
        assert_eq!(sent(&mut s, 70, Counting::Resets), 5070);
        assert_eq!(sent(&mut s, 170, Counting::Resets), 5170);
        // A reset without a restart: the same.
        assert_eq!(sent(&mut s, 20, Counting::Resets), 5190);
        // Offsets carry over further restarts.
        s.restart();
        assert_eq!(sent(&mut s, 0, Counting::Resets), 5190);
        assert_eq!(sent(&mut s, 10, Counting::Resets), 5200);
    }

    #[test]
    fn int_counters_wrap_at_two_to_the_32() {
        let mut s = MetricState::new(1, 0);
        let top = u64::from(u32::MAX) - 99;
        assert_eq!(sent(&mut s, top, Counting::Wraps32), top);
        // 100 to the wrap, then 50 more: +150.
        assert_eq!(sent(&mut s, 50, Counting::Wraps32), top + 150);
        assert_eq!(sent(&mut s, 60, Counting::Wraps32), top + 160);
        // A drop that is no plausible wrap (forward distance over 2^31) is a reset.
        let mut r = MetricState::new(1, 0);
        sent(&mut r, 1_000_000, Counting::Wraps32);
        assert_eq!(sent(&mut r, 10, Counting::Wraps32), 1_000_010);
        // 64-bit counters never wrap: a drop is a reset.
        let mut c = MetricState::new(1, 0);
        sent(&mut c, top, Counting::Resets);
        assert_eq!(sent(&mut c, 50, Counting::Resets), top + 50);
    }

    #[test]
    fn char_counters_wrap_at_two_to_the_8() {
        // The readings as the value reader makes them (-128 -> 128).
        let mut s = MetricState::new(1, 0);
        assert_eq!(sent(&mut s, 200, Counting::Wraps8), 200);
        // 56 to the wrap, then 10 more: +66.
        assert_eq!(sent(&mut s, 10, Counting::Wraps8), 266);
        assert_eq!(sent(&mut s, 11, Counting::Wraps8), 267);
        // A drop whose forward distance is 128 or more is no plausible
        // wrap: a reset (100 -> 10 is 166 forward).
        let mut r = MetricState::new(1, 0);
        sent(&mut r, 100, Counting::Wraps8);
        assert_eq!(sent(&mut r, 10, Counting::Wraps8), 110);
        // So is any drop from above 255 (an int field, releases up to 5.3.4).
        let mut o = MetricState::new(1, 0);
        sent(&mut o, 300, Counting::Wraps8);
        assert_eq!(sent(&mut o, 250, Counting::Wraps8), 550);
    }

    #[test]
    fn counter_text_keeps_the_text_until_an_offset_exists() {
        let mut s = MetricState::new(1, 0);
        let mut buf = [0u8; 20];
        assert_eq!(
            counter_text(&mut s, b"42", Counting::Resets, &mut buf, &mut false),
            b"42"
        );
        s.restart();
        assert_eq!(
            counter_text(&mut s, b"8", Counting::Resets, &mut buf, &mut false),
            b"50"
        );
        // What was last sent, again, and the state stays as it was.
        let before = (s.last_raw, s.offset);
        assert_eq!(sent_text(&s, b"8", Counting::Resets, &mut buf), b"50");
        assert_eq!((s.last_raw, s.offset), before);
        assert_eq!(
            counter_text(&mut s, b"x", Counting::Resets, &mut buf, &mut false),
            b"x"
        );
        assert_eq!(
            counter_text(&mut s, b"7", Counting::None, &mut buf, &mut false),
            b"7"
        );
        assert_eq!(sent_text(&s, b"7", Counting::None, &mut buf), b"7");
        let fresh = MetricState::new(1, 0);
        assert_eq!(sent_text(&fresh, b"42", Counting::Wraps32, &mut buf), b"42");
        assert_eq!(format_u64(&mut buf, u64::MAX), b"18446744073709551615");
        assert_eq!(parse_u64(b"18446744073709551615"), None);
        assert_eq!(
            parse_u64(b"1844674407370955161"),
            Some(1_844_674_407_370_955_161)
        );
    }

    #[test]
    fn unchanged_values_wait_for_the_heartbeat() {
        let mut s = MetricState::new(1, 0);
        let hb = Some(60);
        assert!(s.admit(b"5", 0, hb, false));
        assert!(!s.admit(b"5", 15, hb, false));
        assert!(s.admit(b"6", 30, hb, false));
        assert!(!s.admit(b"6", 45, hb, false));
        assert!(!s.admit(b"6", 89, hb, false));
        assert!(s.admit(b"6", 90, hb, false));
        // Metadata going out takes its value along.
        assert!(s.admit(b"6", 91, hb, true));
        // Every value when not in changed-only mode.
        assert!(s.admit(b"6", 92, None, false));
    }
}
