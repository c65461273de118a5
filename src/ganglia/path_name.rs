//! The one rule for every name that becomes a directory or file name on
//! gmetad's side: cluster names, host names and metric names.
//!
//! gmetad 3.7 writes `rrd_rootdir/CLUSTER/HOST/METRIC.rrd` and, per
//! cluster, `rrd_rootdir/CLUSTER/__SummaryInfo__/METRIC.rrd` (the grid's
//! own sums: `rrd_rootdir/__SummaryInfo__`), joining the names from the
//! XML it polls as they are (`gmetad/rrd_helpers.c`, `write_data_to_rrd`;
//! `process_xml.c` copies the NAME attributes unchecked). So a HOST NAME
//! `..` wrote a cluster's RRDs into `rrd_rootdir` itself, `.` into the
//! cluster's directory, and `__SummaryInfo__` mixed a host's one-DS RRDs
//! with the cluster's two-DS summary ("found extra data" on every
//! update). With `case_sensitive_hostnames 0` it lowercases the host part
//! of the path (never the cluster's), and a case-insensitive file system
//! folds both: `__summaryinfo__` is the summary directory too. A `mkdir`
//! that fails (a name over the file system's 255 bytes) ends gmetad
//! (`err_sys`, exit 1).
//!
//! **The rule** ([`check`]): a name is not empty nor only white space,
//! has no white space at either end, is not `.`, `..` or
//! `__SummaryInfo__` (any case), holds no `/`, NUL or other control
//! character, and is at most [`MAX_COMPONENT`] bytes (gmetad adds `.rrd`
//! to a metric's). Configured names that break it are refused
//! (`check-config`, exit 2, naming the key).
//!
//! **Names from the network** are made to keep it ([`push_safe`]): only
//! `[A-Za-z0-9._-]` is kept (anything else becomes `_`), everything
//! before the first letter or digit is dropped (so no `.`, `..`, hidden
//! name or `__SummaryInfo__` can be left), and the name is cut at the
//! bound. Nothing left: the caller's fallback (a host's address, a site's
//! `cluster_name`; a metric whose name is nothing is not sent). What is
//! changed is counted (`names_changed`) and logged once per reason.

use std::fmt;

/// Longest name the rule allows, in bytes: well under the 255 bytes of
/// a file name with gmetad's `.rrd`, and of gmond's XML lines.
pub const MAX_COMPONENT: usize = 128;

/// The directory gmetad keeps a cluster's (and the grid's) summary RRDs in.
pub const SUMMARY_DIR: &str = "__SummaryInfo__";

/// Why a name breaks the rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unsafe {
    Empty,
    /// Only white space, or white space at an end.
    Blank,
    /// `.` or `..`.
    Dots,
    /// `__SummaryInfo__`, in any case.
    Summary,
    Slash,
    /// NUL or another control character.
    Control,
    TooLong,
}

impl Unsafe {
    /// Why, as `check-config` says it.
    pub fn as_str(self) -> &'static str {
        match self {
            Unsafe::Empty => "must not be empty",
            Unsafe::Blank => "must not be blank or begin or end with white space",
            Unsafe::Dots => {
                "must not be '.' or '..' (it is a directory under gmetad's rrd_rootdir)"
            }
            Unsafe::Summary => "__SummaryInfo__ is gmetad's summary directory (in any case)",
            Unsafe::Slash | Unsafe::Control => {
                "must not contain '/' or control characters (it is a directory under gmetad's rrd_rootdir)"
            }
            Unsafe::TooLong => "must be at most 128 bytes",
        }
    }
}

impl fmt::Display for Unsafe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The rule: Ok if gmetad may take `name` as a directory or file name.
pub fn check(name: &str) -> Result<(), Unsafe> {
    if name.is_empty() {
        Err(Unsafe::Empty)
    } else if name.trim() != name || name.trim().is_empty() {
        Err(Unsafe::Blank)
    } else if name == "." || name == ".." {
        Err(Unsafe::Dots)
    } else if name.eq_ignore_ascii_case(SUMMARY_DIR) {
        Err(Unsafe::Summary)
    } else if name.contains('/') {
        Err(Unsafe::Slash)
    } else if name.chars().any(char::is_control) {
        Err(Unsafe::Control)
    } else if name.len() > MAX_COMPONENT {
        Err(Unsafe::TooLong)
    } else {
        Ok(())
    }
}

/// What [`push_safe`] changed in a name (the first that applies, in
/// this order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// Nothing was left: the caller's fallback stands in.
    Unusable,
    /// What came before its first letter or digit was dropped.
    Leading,
    /// Characters outside `[A-Za-z0-9._-]` became `_`.
    Replaced,
    /// Cut at the bound.
    Cut,
}

impl Change {
    /// Why, in the log line; also its rate-limit reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Unusable => "nothing usable is left of it",
            Change::Leading => "what came before its first letter or digit was dropped",
            Change::Replaced => {
                "characters other than letters, digits, '.', '_' and '-' became '_'"
            }
            Change::Cut => "it was cut at its longest",
        }
    }
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// Appends `s` made to keep the rule (see the module's docs), at most
/// `max` bytes (at most [`MAX_COMPONENT`]). Returns what was changed
/// (None: `s` as it is). An empty `s` appends nothing and is no change.
pub fn push_safe(out: &mut String, s: &str, max: usize) -> Option<Change> {
    debug_assert!(max <= MAX_COMPONENT);
    let start = out.len();
    let (mut leading, mut replaced, mut cut) = (false, false, false);
    for c in s.chars() {
        if out.len() == start && !c.is_ascii_alphanumeric() {
            leading = true;
            continue;
        }
        if out.len() - start >= max {
            cut = true;
            break;
        }
        if is_name_char(c) {
            out.push(c);
        } else {
            out.push('_');
            replaced = true;
        }
    }
    debug_assert!(out.len() == start || check(&out[start..]).is_ok());
    if out.len() == start {
        (!s.is_empty()).then_some(Change::Unusable)
    } else if leading {
        Some(Change::Leading)
    } else if replaced {
        Some(Change::Replaced)
    } else if cut {
        Some(Change::Cut)
    } else {
        None
    }
}

/// `s` as a log line may quote it: at most 64 characters, its control
/// characters escaped by `{:?}` where it is written.
pub fn shown(s: &str) -> &str {
    match s.char_indices().nth(64) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 42, item 1: the rule, case by case.
    #[test]
    fn the_rule_refuses_what_gmetad_would_misplace() {
        let long = "x".repeat(MAX_COMPONENT + 1);
        for (name, want) in [
            ("srv1.example.org", Ok(())),
            ("SITEA xcache", Ok(())),
            ("Zürich", Ok(())),
            ("...", Ok(())),
            (".hidden", Ok(())),
            ("", Err(Unsafe::Empty)),
            (" ", Err(Unsafe::Blank)),
            ("\t", Err(Unsafe::Blank)),
            (" prod", Err(Unsafe::Blank)),
            ("prod ", Err(Unsafe::Blank)),
            (".", Err(Unsafe::Dots)),
            ("..", Err(Unsafe::Dots)),
            ("__SummaryInfo__", Err(Unsafe::Summary)),
            ("__summaryinfo__", Err(Unsafe::Summary)),
            ("__SUMMARYINFO__", Err(Unsafe::Summary)),
            ("a/b", Err(Unsafe::Slash)),
            ("../x", Err(Unsafe::Slash)),
            ("a\0b", Err(Unsafe::Control)),
            ("a\nb", Err(Unsafe::Control)),
            ("a\u{7f}b", Err(Unsafe::Control)),
            (&long, Err(Unsafe::TooLong)),
            (&long[1..], Ok(())),
        ] {
            assert_eq!(check(name), want, "{name:?}");
        }
    }

    /// Issue 42, item 1: what a name from the network becomes, and why.
    #[test]
    fn names_from_the_network_are_made_to_keep_the_rule() {
        let long = "y".repeat(300);
        let cut = "y".repeat(MAX_COMPONENT);
        for (sent, want, change) in [
            ("srv1.example.org", "srv1.example.org", None),
            ("SRV-1_a.b", "SRV-1_a.b", None),
            ("", "", None),
            ("..", "", Some(Change::Unusable)),
            (".", "", Some(Change::Unusable)),
            ("...", "", Some(Change::Unusable)),
            ("/", "", Some(Change::Unusable)),
            ("\0\n\t", "", Some(Change::Unusable)),
            (" ", "", Some(Change::Unusable)),
            ("日本", "", Some(Change::Unusable)),
            ("__SummaryInfo__", "SummaryInfo__", Some(Change::Leading)),
            ("__summaryinfo__", "summaryinfo__", Some(Change::Leading)),
            ("../../x", "x", Some(Change::Leading)),
            (".hidden", "hidden", Some(Change::Leading)),
            ("-rf", "rf", Some(Change::Leading)),
            ("a/b", "a_b", Some(Change::Replaced)),
            ("a\0b\nc", "a_b_c", Some(Change::Replaced)),
            ("a b\"<&>", "a_b____", Some(Change::Replaced)),
            ("Zürich", "Z_rich", Some(Change::Replaced)),
            ("x/..", "x_..", Some(Change::Replaced)),
            (&long, &cut, Some(Change::Cut)),
        ] {
            let mut out = String::from("kept:");
            assert_eq!(push_safe(&mut out, sent, MAX_COMPONENT), change, "{sent:?}");
            assert_eq!(&out["kept:".len()..], want, "{sent:?}");
            if !want.is_empty() {
                assert_eq!(check(want), Ok(()), "{sent:?} -> {want:?}");
            }
        }
        let mut out = String::new();
        assert_eq!(push_safe(&mut out, "abcdef", 3), Some(Change::Cut));
        assert_eq!(out, "abc");
    }

    #[test]
    fn log_lines_quote_a_bounded_part() {
        assert_eq!(shown("short"), "short");
        let long = "é".repeat(100);
        assert_eq!(shown(&long).chars().count(), 64);
    }
}
