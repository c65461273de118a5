//! The numbers a number key takes ([`Range`], each key's `range` in its
//! table), checked before any other check and shown on the docs page.

/// The numbers a number key takes, both ends included. Checked for every
/// key that has one, before anything else ([`crate::config::validate`]: `check-config`
/// and `serve` alike), so that no value reaches an overflow (an interval
/// added to the clock, a socket option); shown with the key's value on
/// the docs page and the man page. A test holds every number key of
/// [`KEYS`](super::KEYS) (and [`CHANNEL_KEYS`](super::CHANNEL_KEYS)) to
/// having one.
#[derive(Clone, Copy, Debug)]
pub struct Range {
    pub min: u64,
    pub max: u64,
    /// `"second"` for a duration (said in the error), else `""`.
    pub unit: &'static str,
    /// What 0 means, where 0 is taken and means more than none (said in
    /// the error).
    pub zero: Option<&'static str>,
}

/// The longest interval a key takes: a day. Longer ones mean nothing to
/// a gateway whose sources report every minute, and every interval is
/// added to the clock somewhere.
pub const DAY: u64 = 86_400;

/// A duration's range, in seconds; `zero`: what 0 means, where it means
/// more than none.
pub(super) const fn seconds(min: u64, max: u64, zero: Option<&'static str>) -> Range {
    Range {
        min,
        max,
        unit: "second",
        zero,
    }
}

/// A count's range.
pub(super) const fn count(min: u64, max: u64) -> Range {
    Range {
        min,
        max,
        unit: "",
        zero: None,
    }
}

impl Range {
    /// Whether `v` is in it; else why not, as the error says it.
    pub fn check(&self, v: u64) -> Result<(), String> {
        let unit = |n: u64| match (self.unit, n) {
            ("", _) => String::new(),
            (u, 1) => format!(" {u}"),
            (u, _) => format!(" {u}s"),
        };
        if v < self.min {
            return Err(format!("must be at least {}{}", self.min, unit(self.min)));
        }
        if v > self.max {
            let mut why = format!("must be at most {}", self.max);
            let notes: Vec<String> = [
                (!self.unit.is_empty()).then(|| format!("{}s", self.unit)),
                self.zero.map(|z| format!("0: {z}")),
            ]
            .into_iter()
            .flatten()
            .collect();
            if !notes.is_empty() {
                why.push_str(&format!(" ({})", notes.join("; ")));
            }
            return Err(why);
        }
        Ok(())
    }

    /// How the docs say it: "1 to 86400".
    pub fn text(&self) -> String {
        format!("{} to {}", self.min, self.max)
    }
}
