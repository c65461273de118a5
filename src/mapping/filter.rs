//! Which variables become metrics: `exclude` and `include` patterns on
//! variable names (config keys of the same names).
//!
//! A pattern is matched against a variable's name as metric names carry
//! it (`oss.paths._data_.free`, list entries by key) and as the catalog
//! names it (`oss.paths.i.free`); `*` stands for any run of characters,
//! `?` for one. A variable is left out when an `exclude` pattern matches
//! it and no `include` pattern does. Derived metrics (`proc.cpu.*`,
//! `uptime`) are made from variables whether those are sent or not, and
//! are always sent.
//!
//! The default leaves out what only identifies a report or a program run
//! and would be graphed as a meaningless number, or what only its
//! derived metric makes sense of: see [`DEFAULT_EXCLUDE`].

/// Left out unless `exclude` says otherwise:
/// `tod`, `toe`, `sgen.toe`: when this report was made (every report a
/// new number; gmond's TN says how fresh a metric is);
/// `proc.*.s`, `proc.*.u`: the seconds and microseconds halves of the
/// CPU time, graphed as a sawtooth; `proc.cpu.usr`, `.sys`, `.total`
/// (derived from them) are the CPU use; and the variables XRootD sends
/// but never fills (always 0) or fills wrongly: each catalog entry with a
/// [`left_out`](crate::catalog::MetricSpec::left_out) reason, and only
/// those (a test holds the two together).
pub const DEFAULT_EXCLUDE: &[&str] = &[
    "tod",
    "toe",
    "sgen.toe",
    "proc.usr.s",
    "proc.usr.u",
    "proc.sys.s",
    "proc.sys.u",
    // Always 0 or wrong upstream (catalog `left_out`).
    "xrootd.aio.num",
    "xrootd.aio.max",
    "ofs.ser",
    "poll.int",
    "http_plugin.response.100",
    "cache.pass.cnt",
    "cache.opcl.defero",
    "cache.files.*",
    "cache.store.used",
    "cache.store.min",
    "cache.store.max",
    "cmsm.frq.lf",
    "cmsm.frq.ls",
    "cmsm.frq.rf",
    "cmsm.frq.rs",
];

/// A compiled `*`/`?` pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Glob(String);

impl Glob {
    /// Letters, digits and `.`, `_`, `-`, `*`, `?` only.
    pub fn parse(pattern: &str) -> Result<Glob, String> {
        if pattern.is_empty() {
            return Err("an empty pattern matches nothing".into());
        }
        match pattern
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '*' | '?')))
        {
            Some(c) => Err(format!(
                "{c:?} cannot stand in a variable name pattern (letters, digits, '.', '_', '-', and '*' or '?' as wildcards)"
            )),
            None => Ok(Glob(pattern.to_string())),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn matches(&self, name: &str) -> bool {
        // Iterative wildcard match: the last `*` is where to backtrack to.
        let (p, n) = (self.0.as_bytes(), name.as_bytes());
        let (mut i, mut j) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while j < n.len() {
            if i < p.len() && (p[i] == b'?' || p[i] == n[j]) {
                i += 1;
                j += 1;
            } else if i < p.len() && p[i] == b'*' {
                star = Some((i, j));
                i += 1;
            } else if let Some((si, sj)) = star {
                i = si + 1;
                j = sj + 1;
                star = Some((si, sj + 1));
            } else {
                return false;
            }
        }
        p[i..].iter().all(|&c| c == b'*')
    }
}

/// `include` and `exclude`, compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VarFilter {
    pub include: Vec<Glob>,
    pub exclude: Vec<Glob>,
}

impl Default for VarFilter {
    fn default() -> VarFilter {
        VarFilter {
            include: Vec::new(),
            exclude: DEFAULT_EXCLUDE
                .iter()
                .map(|p| Glob(p.to_string()))
                .collect(),
        }
    }
}

impl VarFilter {
    /// Whether the variable named `var` (catalog name `catalog_name`) is
    /// left out.
    pub fn excludes(&self, var: &str, catalog_name: &str) -> bool {
        let hit = |globs: &[Glob]| {
            globs
                .iter()
                .any(|g| g.matches(var) || g.matches(catalog_name))
        };
        hit(&self.exclude) && !hit(&self.include)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_as_in_a_shell() {
        let g = |p: &str| Glob::parse(p).unwrap();
        assert!(g("proc.*").matches("proc.usr.s"));
        assert!(g("proc.*.s").matches("proc.sys.s"));
        assert!(!g("proc.*.s").matches("proc.sys.u"));
        assert!(g("oss.paths.*.free").matches("oss.paths._data_.free"));
        assert!(g("link.?n").matches("link.in"));
        assert!(!g("link.?n").matches("link.out"));
        assert!(g("*").matches(""));
        assert!(g("a*b*c").matches("axxbyyc") && !g("a*b*c").matches("axxbyy"));
        assert!(!g("tod").matches("tod2") && !g("tod").matches("xtod"));
        assert!(Glob::parse("a b").unwrap_err().contains("' '"));
        assert!(Glob::parse("").is_err());
    }

    #[test]
    fn include_wins_over_exclude() {
        let f = VarFilter::default();
        assert!(f.excludes("tod", "tod"));
        assert!(f.excludes("proc.usr.u", "proc.usr.u"));
        assert!(!f.excludes("proc.cpu.usr", "proc.cpu.usr"));
        assert!(!f.excludes("link.in", "link.in"));
        let f = VarFilter {
            include: vec![Glob::parse("proc.*").unwrap()],
            exclude: vec![
                Glob::parse("proc.*").unwrap(),
                Glob::parse("oss.paths.i.*").unwrap(),
            ],
        };
        assert!(!f.excludes("proc.usr.s", "proc.usr.s"));
        // By the catalog's name of a list entry, or by its key.
        assert!(f.excludes("oss.paths._data_.free", "oss.paths.i.free"));
    }
}
