//! Making strings from the network safe for gmond and gmetad.
//!
//! gmond 3.7 copies metric names, units, host names, TYPE and extra data into
//! its XML without escaping; one `"`, `<` or `&` makes the XML ill-formed and
//! gmetad then drops the whole data source. It escapes string VALs, but badly
//! (bytes >= 0x7f are mangled) and the escapes can push a METRIC element past
//! gmond's 1023-byte line buffer, which also breaks the XML. gmetad builds RRD
//! file paths from cluster, host and metric names: what it may take is
//! the rule of `ganglia/path_name.rs`. gmond cuts a spoofed metric name at ':'.
//!
//! So: names keep only `[A-Za-z0-9._-]`, free text keeps printable ASCII
//! minus the XML specials, and everything is length-capped. Replacements are
//! `_`. Each function appends to `out` and reports whether it changed anything,
//! so callers can show sanitised names distinctly.

/// Longest metric name we send (gmetad adds `.rrd` under a 255-byte file name limit).
pub const MAX_NAME: usize = 128;
/// Longest host name part of a spoof string.
pub const MAX_HOST: usize = 128;
/// Longest string value: with name, type, units and the rest of the METRIC
/// element it stays well under gmond's 1023-byte line.
pub const MAX_VALUE: usize = 256;
/// Longest title, group or description (extra data lines are separate in gmond's XML).
pub const MAX_TEXT: usize = 256;

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

fn is_text_char(c: char) -> bool {
    (' '..='~').contains(&c) && !matches!(c, '"' | '\'' | '<' | '>' | '&' | '\\')
}

/// Appends `s` with every character outside `keep` replaced by `_`, stopping
/// at `max` bytes. Returns true if anything was replaced or cut.
fn push_filtered(out: &mut String, s: &str, max: usize, keep: fn(char) -> bool) -> bool {
    let start = out.len();
    let mut changed = false;
    for c in s.chars() {
        if out.len() - start >= max {
            return true;
        }
        if keep(c) {
            out.push(c);
        } else {
            out.push('_');
            changed = true;
        }
    }
    changed
}

/// A metric name (or one component of it).
pub fn push_name(out: &mut String, s: &str, max: usize) -> bool {
    push_filtered(out, s, max, is_name_char)
}

/// A host name for the NAME part of a spoof string, made to keep the
/// rule of [`super::path_name`] (a HOST NAME is a directory of gmetad's):
/// returns what was changed (nothing appended: nothing usable was sent).
pub fn push_host(out: &mut String, s: &str) -> Option<super::path_name::Change> {
    super::path_name::push_safe(out, s, MAX_HOST)
}

/// Free text: string values, titles, descriptions, groups.
pub fn push_text(out: &mut String, s: &str, max: usize) -> bool {
    push_filtered(out, s, max, is_text_char)
}

/// True if `s` can go to gmond as it is in a name.
pub fn is_clean_name(s: &str) -> bool {
    s.len() <= MAX_NAME && s.chars().all(is_name_char)
}

/// True if `s` can go to gmond as it is as text.
pub fn is_clean_text(s: &str, max: usize) -> bool {
    s.len() <= max && s.chars().all(is_text_char)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_a_safe_set() {
        let mut out = String::new();
        assert!(!push_name(&mut out, "xrootd.ops-rd_1", MAX_NAME));
        assert_eq!(out, "xrootd.ops-rd_1");
        out.clear();
        assert!(push_name(&mut out, "a/b c:d\"<&>\u{e9}\0", MAX_NAME));
        assert_eq!(out, "a_b_c_d______");
        out.clear();
        assert!(push_name(&mut out, &"x".repeat(500), MAX_NAME));
        assert_eq!(out.len(), MAX_NAME);
    }

    #[test]
    fn text_drops_xml_specials_and_non_ascii() {
        let mut out = String::new();
        assert!(!push_text(&mut out, "meta manager (v5)", MAX_TEXT));
        assert_eq!(out, "meta manager (v5)");
        out.clear();
        assert!(push_text(
            &mut out,
            "<a href=\"x\">&amp;</a>\u{7f}\u{fffd}\n",
            MAX_TEXT
        ));
        assert_eq!(out, "_a href=_x___amp;_/a____");
        assert!(is_clean_text("ok text", 10));
        assert!(!is_clean_text("too long text", 4));
        assert!(!is_clean_name("a/b"));
    }
}
