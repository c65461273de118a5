//! Metric and group names: the templates (`metric_name`, `group_name`)
//! and the list keys that stand for a list index in a name.

use std::collections::HashSet;
use std::hash::{BuildHasher, Hash, Hasher};

use foldhash::fast::RandomState;

use super::{Span, span_from};
use crate::catalog;
use crate::ganglia::sanitize::{self, MAX_NAME};
use crate::summary::{ListEntry, SummaryRecord};

/// The default metric name template.
pub const DEFAULT_NAME_TEMPLATE: &str = "{pgm}.{ins}.{var}";
/// The default GROUP template.
pub const DEFAULT_GROUP_TEMPLATE: &str = "{pgm}.{ins}.{section}";

/// A compiled name template: dot-separated components of placeholders and text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameTemplate {
    components: Vec<Vec<Token>>,
    source: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Text(String),
    Pgm,
    Ins,
    Site,
    Section,
    Var,
}

impl NameTemplate {
    /// Placeholders: `{pgm}`, `{ins}`, `{site}`, `{section}`, `{var}`.
    pub fn parse(source: &str) -> Result<NameTemplate, String> {
        let mut components = Vec::new();
        for part in source.split('.') {
            let mut tokens = Vec::new();
            let mut rest = part;
            while !rest.is_empty() {
                if let Some(after) = rest.strip_prefix('{') {
                    let Some((name, tail)) = after.split_once('}') else {
                        return Err(format!("unclosed '{{' in {source:?}"));
                    };
                    tokens.push(match name {
                        "pgm" => Token::Pgm,
                        "ins" => Token::Ins,
                        "site" => Token::Site,
                        "section" => Token::Section,
                        "var" => Token::Var,
                        other => {
                            return Err(format!(
                                "unknown placeholder {{{other}}} in {source:?} (known: {{pgm}} {{ins}} {{site}} {{section}} {{var}})"
                            ));
                        }
                    });
                    rest = tail;
                } else {
                    let end = rest.find('{').unwrap_or(rest.len());
                    let text = &rest[..end];
                    if !sanitize::is_clean_name(text) {
                        return Err(format!(
                            "{text:?} in {source:?}: only letters, digits, '_' and '-' may stand between placeholders"
                        ));
                    }
                    tokens.push(Token::Text(text.to_string()));
                    rest = &rest[end..];
                }
            }
            components.push(tokens);
        }
        Ok(NameTemplate {
            components,
            source: source.to_string(),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.source
    }

    pub fn uses_var(&self) -> bool {
        self.has(&Token::Var)
    }

    pub fn uses_site(&self) -> bool {
        self.has(&Token::Site)
    }

    pub fn uses_pgm_and_ins(&self) -> bool {
        self.has(&Token::Pgm) && self.has(&Token::Ins)
    }

    fn has(&self, t: &Token) -> bool {
        self.components.iter().flatten().any(|x| x == t)
    }

    /// Appends the expansion to `out`, dropping components that expand to nothing.
    pub(super) fn expand(&self, out: &mut String, parts: &Parts<'_>) {
        let start = out.len();
        for component in &self.components {
            let before = out.len();
            if before > start {
                out.push('.');
            }
            let content = out.len();
            for token in component {
                match token {
                    Token::Text(t) => out.push_str(t),
                    Token::Pgm => out.push_str(parts.pgm),
                    Token::Ins => out.push_str(parts.ins),
                    Token::Site => out.push_str(parts.site),
                    Token::Section => out.push_str(parts.section),
                    Token::Var => out.push_str(parts.var),
                }
            }
            if out.len() == content {
                out.truncate(before);
            }
        }
    }
}

/// A record header's placeholder values, sanitised as names use them: a
/// record without pgm is xrootd's, and the instance `anon` is no instance
/// (its component drops out of `{pgm}.{ins}.{var}`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeaderParts {
    pub pgm: String,
    pub ins: String,
    pub site: String,
}

impl HeaderParts {
    pub fn new(pgm: Option<&str>, ins: Option<&str>, site: Option<&str>) -> HeaderParts {
        let mut h = HeaderParts::default();
        h.set(pgm, ins, site);
        h
    }

    /// Replaces the values, reusing the buffers.
    pub fn set(&mut self, pgm: Option<&str>, ins: Option<&str>, site: Option<&str>) {
        self.pgm.clear();
        push_key(&mut self.pgm, pgm.unwrap_or("xrootd"));
        self.ins.clear();
        if let Some(ins) = ins.filter(|i| *i != "anon") {
            push_key(&mut self.ins, ins);
        }
        self.site.clear();
        push_key(&mut self.site, site.unwrap_or(""));
    }

    /// The program as sources are told apart: `pgm`, or `pgm ins`.
    pub fn write_program(&self, out: &mut String) {
        out.clear();
        out.push_str(&self.pgm);
        if !self.ins.is_empty() {
            out.push(' ');
            out.push_str(&self.ins);
        }
    }

    pub(super) fn parts<'p>(&'p self, section: &'p str, var: &'p str) -> Parts<'p> {
        Parts {
            pgm: &self.pgm,
            ins: &self.ins,
            site: &self.site,
            section,
            var,
        }
    }
}

impl NameTemplate {
    /// The name this template gives variable `var` (as sent: list entries
    /// by their key, `oss.paths._data.free`) of a record with `header`.
    /// The mapper builds every metric name this way.
    pub fn name_of(&self, header: &HeaderParts, var: &str) -> String {
        let mut out = String::new();
        self.expand_name(&mut out, &header.parts(crate::catalog::section(var), var));
        out
    }

    /// Appends a metric name: the expansion, cut to gmond's MAX_NAME bytes.
    /// True if it was cut.
    pub(super) fn expand_name(&self, out: &mut String, parts: &Parts<'_>) -> bool {
        let start = out.len();
        self.expand(out, parts);
        if out.len() - start <= MAX_NAME {
            return false;
        }
        let mut end = start + MAX_NAME;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
        true
    }
}

/// Sanitised values for the placeholders.
pub(super) struct Parts<'p> {
    pub pgm: &'p str,
    pub ins: &'p str,
    pub site: &'p str,
    pub section: &'p str,
    pub var: &'p str,
}

/// A list key or name component: `[A-Za-z0-9_-]`, '.' and '/' become '_'.
pub(super) fn push_key(out: &mut String, s: &str) {
    let start = out.len();
    sanitize::push_name(out, s, 64);
    // SAFETY of the byte edit: sanitised text is ASCII.
    let replaced: String = out[start..]
        .chars()
        .map(|c| if c == '.' { '_' } else { c })
        .collect();
    out.truncate(start);
    out.push_str(&replaced);
}

/// The list entries' keys of one record: the entry's key field (the oss
/// path's `lp`, the space's name, the cmsm node's host), else its id; a key
/// two entries of a list share gets `-<id>`.
#[derive(Default)]
pub(super) struct EntryKeys {
    /// Per entry, as a name component, into `arena`.
    keys: Vec<Option<Span>>,
    /// The same keys as sent (text-sanitised), for titles.
    texts: Vec<Option<Span>>,
    arena: String,
    seen: HashSet<u64>,
}

impl EntryKeys {
    /// First pass over a record: the key of every list entry, sanitised,
    /// ties broken by index.
    #[inline]
    pub(super) fn collect(&mut self, record: &SummaryRecord<'_>, hasher: &RandomState) {
        self.keys.clear();
        self.texts.clear();
        self.arena.clear();
        self.seen.clear();
        let n = record.entry_count();
        self.keys.resize(n, None);
        self.texts.resize(n, None);
        // Key field values first (order-insensitive: the key may come last).
        for v in record.vars() {
            let Some(e) = v.entry else { continue };
            if self.keys[e.index].is_none()
                && !v.value.is_empty()
                && catalog::list_key(e.list) == Some(e.field)
            {
                let start = self.arena.len();
                push_key(&mut self.arena, v.value);
                self.keys[e.index] = Some(span_from(&self.arena, start));
                let start = self.arena.len();
                sanitize::push_text(&mut self.arena, v.value, 64);
                self.texts[e.index] = Some(span_from(&self.arena, start));
            }
        }
        // Entries without a key field are named by their id; ties get `-id`.
        let mut seen_entries = 0;
        for v in record.vars() {
            let Some(e) = v.entry else { continue };
            if e.index < seen_entries {
                continue;
            }
            seen_entries = e.index + 1;
            let key = match self.keys[e.index] {
                Some(k) => k,
                None => {
                    let start = self.arena.len();
                    push_key(&mut self.arena, e.id);
                    span_from(&self.arena, start)
                }
            };
            let mut h = hasher.build_hasher();
            e.list.hash(&mut h);
            key.of(&self.arena).hash(&mut h);
            let mut key = key;
            if !self.seen.insert(h.finish()) {
                let start = self.arena.len();
                self.arena
                    .extend_from_within(key.start as usize..key.end as usize);
                self.arena.push('-');
                push_key(&mut self.arena, e.id);
                key = span_from(&self.arena, start);
            }
            self.keys[e.index] = Some(key);
        }
    }

    /// The keys of entries given as they are (not read from a record):
    /// entry `i`'s key is `keys[i]`, sanitised as a record's keys are.
    pub(super) fn set(&mut self, keys: &[&str]) {
        self.keys.clear();
        self.texts.clear();
        self.arena.clear();
        for k in keys {
            let start = self.arena.len();
            push_key(&mut self.arena, k);
            self.keys.push(Some(span_from(&self.arena, start)));
            let start = self.arena.len();
            sanitize::push_text(&mut self.arena, k, 64);
            self.texts.push(Some(span_from(&self.arena, start)));
        }
    }

    /// The key of the entry a variable is in, as a name component and as
    /// shown in titles.
    #[inline]
    pub(super) fn of(&self, entry: Option<ListEntry<'_>>) -> (Span, Option<Span>) {
        let Some(e) = entry else {
            return (Span::default(), None);
        };
        let k = self
            .keys
            .get(e.index)
            .copied()
            .flatten()
            .unwrap_or_default();
        let t = self.texts.get(e.index).copied().flatten().unwrap_or(k);
        (k, Some(t))
    }

    /// The text of a key [`of`](Self::of) gave.
    #[inline]
    pub(super) fn text(&self, key: Span) -> &str {
        key.of(&self.arena)
    }
}
