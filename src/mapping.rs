//! Summary variables + catalog + naming settings -> Ganglia metrics of one host.
//!
//! Pure: a [`SummaryRecord`] and the sender's IP in, a [`MappedRecord`] out.
//! Everything that reaches gmond is decided here: the spoofed host, every
//! metric name (template, list keys, sanitising), its value text and its
//! type/slope/units. Buffers are reused between records.
//!
//! * Host: `ip:name`, name from the record's `src` (else dCache's `host`
//!   attribute, else `info.host`, else the ip), ip from the datagram.
//! * Metric name: the template (default `{pgm}.{ins}.{var}`); a component
//!   that expands to nothing is dropped, and `ins` expands to nothing for
//!   `anon`. `{var}` is the flat variable name with a list index replaced by
//!   the entry's key (oss path lp, space name, cmsm node host; `-<index>` is
//!   added only when two entries share a key).
//! * Values: `int` counters that wrapped negative are sent unsigned, 64-bit
//!   values as integer text, positive-slope values only as integers.
//!   Unknown numeric variables are sent as double/both, unknown text as
//!   string/zero, unless the site describes them (`[[metric]]`, `site.rs`);
//!   `nan` and `inf` are refused.
//! * The cache section's `type` (`pfc`, `rmc`) goes after `cache` in its
//!   names (`cache.rmc.rd.hits`); the catalog name stays `cache.rd.hits`.
//!
//! One file per concern: `naming.rs` (the name templates, list keys),
//! `host.rs` (the spoofed host), `value.rs` (value checks and conversion),
//! `derived.rs` (CPU time and uptime, also used by the gateway's template),
//! `cache.rs` (what each variable name maps to, kept); here, the mapping.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
use std::net::IpAddr;

use crate::catalog::{self, Kind, MetricSpec};
use crate::ganglia::path_name;
use crate::ganglia::sanitize::{self, MAX_NAME, MAX_TEXT};
use crate::ganglia::xdr::Slope;
use crate::summary::{ListEntry, Span, SummaryRecord, Variable};

fn span_from(out: &str, start: usize) -> Span {
    Span::new(start, out.len())
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    name: Span,
    value: Span,
    var: Span,
    group: Span,
    key: Span,
    kind: Kind,
    spec: Option<&'static MetricSpec>,
    sanitized: bool,
    /// The variable's name as sent, kept only when it had to be changed.
    original: Span,
    /// Keyed hash of the metric name (see [`Metric::name_key`]).
    name_key: u64,
}

/// One metric ready to send.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Metric<'m> {
    /// Ganglia metric name (`xrootd.link.in`).
    pub name: &'m str,
    /// Value text to send with `%s`.
    pub value: &'m str,
    /// The variable it came from, with list keys (`oss.paths._data_.free`).
    pub var: &'m str,
    /// GROUP extra data.
    pub group: &'m str,
    /// The list entry's key as sent (`/data/`), for list variables; the
    /// entry's id where the list has no key field.
    pub key: Option<&'m str>,
    pub kind: Kind,
    /// None for a variable the catalog does not know.
    pub spec: Option<&'static MetricSpec>,
    /// The name had to be changed to be safe for gmond.
    pub sanitized: bool,
    /// The variable's name as the record had it, when it had to be changed.
    pub original: Option<&'m str>,
    /// A 64-bit hash of `name` ([`name_key`]), computed once per name.
    pub name_key: u64,
}

impl Metric<'_> {
    pub fn value_type(&self) -> &'static str {
        self.kind.value_type()
    }

    pub fn slope(&self) -> Slope {
        self.kind.slope()
    }

    pub fn units(&self) -> &'static str {
        self.spec.map(|s| s.units).unwrap_or(catalog::UNKNOWN_UNITS)
    }

    pub fn is_unknown(&self) -> bool {
        self.spec.is_none()
    }

    /// TITLE extra data: catalog title, with the list key and program.
    pub fn write_title(&self, out: &mut String, pgm_ins: &str) {
        let start = out.len();
        out.push_str(pgm_ins);
        out.push_str(": ");
        match self.spec {
            // A site's [[metric]] without a title: the variable's name.
            Some(spec) if !spec.title.is_empty() => out.push_str(spec.title),
            _ => out.push_str(self.var),
        }
        if let Some(key) = self.key {
            out.push_str(" - ");
            out.push_str(key);
        }
        // ganglia-web shows parentheses in titles as `\(` and `\)` (and
        // the sanitiser keeps no quotes or backslashes): none stays.
        let title = out.split_off(start).replace(['(', ')'], "_");
        sanitize::push_text(out, &title, MAX_TEXT);
    }

    /// DESC extra data.
    pub fn desc(&self) -> &'static str {
        match self.spec {
            Some(spec) => spec.desc,
            None => match self.kind {
                Kind::Text => "Not in the xrd2ganglia catalog: sent as text.",
                _ => "Not in the xrd2ganglia catalog: sent as a double that goes up and down.",
            },
        }
    }
}

/// Changed metric names a [`Mapper`] keeps for the engine to take.
const MAX_RENAMED: usize = 64;

/// The metrics of one record.
#[derive(Default)]
pub struct MappedRecord {
    pub host: HostIdentity,
    /// `pgm` or `pgm ins`, for titles.
    pub program: String,
    arena: String,
    slots: Vec<Slot>,
    /// Variables whose value could not be sent, with the reason (first few kept).
    pub rejected: Vec<(String, String, BadValue)>,
    /// How many variables were rejected in all.
    pub rejected_count: usize,
    /// The variables left out by `exclude`: their places in the record's
    /// variables, in order.
    pub excluded: Vec<u32>,
}

/// How many rejected variables are kept with their text for the log.
const KEEP_REJECTED: usize = 4;

impl MappedRecord {
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub fn metrics(&self) -> impl ExactSizeIterator<Item = Metric<'_>> + '_ {
        self.slots.iter().map(|s| self.metric(s))
    }

    fn metric(&self, s: &Slot) -> Metric<'_> {
        let a = self.arena.as_str();
        let key = s.key.of(a);
        Metric {
            name: s.name.of(a),
            value: s.value.of(a),
            var: s.var.of(a),
            group: s.group.of(a),
            key: (!key.is_empty()).then_some(key),
            kind: s.kind,
            spec: s.spec,
            sanitized: s.sanitized,
            original: s.sanitized.then(|| s.original.of(a)),
            name_key: s.name_key,
        }
    }

    /// Empty, the buffers kept.
    fn clear(&mut self) {
        self.arena.clear();
        self.slots.clear();
        self.rejected.clear();
        self.rejected_count = 0;
        self.excluded.clear();
    }

    /// Adds the metric of `v`, whose names are `names`; a value that cannot
    /// be sent is counted (and the first few kept) instead.
    #[inline(always)]
    fn push_variable(&mut self, names: &CachedNames, v: Variable<'_>, keyed: bool) {
        let kind = names.spec.map(|s| s.kind);
        self.push_value(
            names,
            v.name,
            keyed,
            |a| convert(a, kind, v.value),
            || v.value.chars().take(64).collect(),
        );
    }

    /// Adds the metric `name` of a count (XCache's totals), whose names
    /// are `names`: the number written as the value, as the same digits
    /// in a record would be.
    fn push_count(&mut self, names: &CachedNames, name: &str, n: u64) {
        self.push_count_keyed(names, name, n, false);
    }

    /// [`push_count`](Self::push_count), of a list entry when `keyed` (its
    /// key then goes in the title).
    fn push_count_keyed(&mut self, names: &CachedNames, name: &str, n: u64, keyed: bool) {
        let kind = names.spec.map(|s| s.kind);
        self.push_value(
            names,
            name,
            keyed,
            |a| convert_count(a, kind, n),
            || n.to_string(),
        );
    }

    /// Adds a metric whose value `convert` writes; a value that cannot be
    /// sent is counted (and the first few kept, as `shown` says it) instead.
    #[inline(always)]
    fn push_value(
        &mut self,
        names: &CachedNames,
        name: &str,
        keyed: bool,
        convert: impl FnOnce(&mut String) -> Result<Kind, value::BadValue>,
        shown: impl FnOnce() -> String,
    ) {
        let a = &mut self.arena;
        let value_start = a.len();
        let kind = match convert(a) {
            Ok(kind) => kind,
            Err(bad) => {
                a.truncate(value_start);
                self.rejected_count += 1;
                if self.rejected.len() < KEEP_REJECTED {
                    self.rejected.push((name.to_string(), shown(), bad));
                }
                return;
            }
        };
        let value = span_from(a, value_start);
        let mut slot = push_cached(a, names, value, kind, keyed);
        if slot.sanitized {
            let start = a.len();
            a.push_str(name);
            slot.original = span_from(a, start);
        }
        self.slots.push(slot);
    }
}

/// Maps records; holds the settings and the reusable buffers.
pub struct Mapper {
    name: NameTemplate,
    group: NameTemplate,
    /// Which variables become metrics (`include`, `exclude`).
    filter: VarFilter,
    /// What the site says of variables the catalog does not know (`[[metric]]`).
    site: SiteMetrics,
    /// Placeholder values of the current record, sanitised.
    header: HeaderParts,
    /// Its cache section's type (`pfc`, `rmc`; empty if none): the cache
    /// section's names carry it (`cache.rmc.rd.hits`). Part of the context.
    cache_type: String,
    /// The variable name being mapped, with list keys (`oss.paths._data_.free`).
    var: String,
    /// Its catalog name (`oss.paths.i.free`).
    catalog_name: String,
    /// The list entries' keys of the current record.
    entry_keys: EntryKeys,
    hasher: foldhash::fast::RandomState,
    derived_text: String,
    /// Per-record placeholder values, hashed: part of every cache key.
    context: u64,
    /// Everything a variable's name decides, by (context, name, list key):
    /// shared by all sources, so each name is expanded and sanitised once.
    names: HashMap<u64, CachedNames, BuildHasherDefault<KeyHasher>>,
    /// Scratch for filling the cache.
    name_buf: String,
    group_buf: String,
    /// Metric names changed for gmetad since the engine last took them
    /// ([`Mapper::take_renamed`]): what, the variable as sent, the name.
    renamed: Vec<(path_name::Change, String, String)>,
}

impl Mapper {
    pub fn new(name: NameTemplate, group: NameTemplate) -> Mapper {
        Mapper {
            name,
            group,
            filter: VarFilter::default(),
            site: SiteMetrics::default(),
            header: HeaderParts::default(),
            cache_type: String::new(),
            var: String::new(),
            catalog_name: String::new(),
            entry_keys: EntryKeys::default(),
            hasher: foldhash::fast::RandomState::default(),
            derived_text: String::new(),
            context: 0,
            names: HashMap::default(),
            name_buf: String::new(),
            group_buf: String::new(),
            renamed: Vec::new(),
        }
    }

    /// A metric name changed for gmetad (`ganglia/path_name.rs`) when
    /// its name was cached, for the engine to count and log: what was
    /// changed, the variable as sent, the name (empty: not sent).
    pub fn take_renamed(&mut self) -> Option<(path_name::Change, String, String)> {
        self.renamed.pop()
    }

    /// Leaves out what `filter` excludes (default: [`DEFAULT_EXCLUDE`]).
    pub fn with_filter(mut self, filter: VarFilter) -> Mapper {
        self.filter = filter;
        self.names.clear();
        self
    }

    /// Describes the variables the catalog does not know as `site` says
    /// (`[[metric]]`).
    pub fn with_site_metrics(mut self, site: SiteMetrics) -> Mapper {
        self.site = site;
        self.names.clear();
        self
    }

    /// Maps `record`, sent from `source`, into `out` (cleared first).
    pub fn map(&mut self, record: &SummaryRecord<'_>, source: IpAddr, out: &mut MappedRecord) {
        out.clear();
        let header = record.header();
        host_identity(&header, record, source, &mut out.host);
        self.set_cache_type(record.cache_type());
        self.set_header(header.pgm, header.ins, header.site, out);
        self.entry_keys.collect(record, &self.hasher);

        let mut derived = Derived::default();
        // Counted by hand: `enumerate()`'s `next` was left out of line
        // (10,000 instructions a loaded record under callgrind).
        let mut next = 0u32;
        #[allow(clippy::explicit_counter_loop)]
        for v in record.vars() {
            let j = next;
            next += 1;
            let (key, key_text) = self.entry_keys.of(v.entry);
            let at = self.names_of(v.name, v.entry, key, key_text);
            let Some(names) = self.names.get(&at) else {
                continue;
            };
            derived.note(names.role, v.value);
            if names.excluded {
                out.excluded.push(j);
            } else {
                out.push_variable(names, v, key_text.is_some());
            }
        }
        self.map_derived(&derived, out);
    }

    /// Maps counts a server sent apart from its records but that are its
    /// own (an XCache's g-stream totals, `pfc.*`), as `(flat name, count)`:
    /// named, typed and left out exactly as the same numbers in a record
    /// with this `pgm`, `ins` and `site` would be. `out` holds only these
    /// (no host, nothing derived).
    pub fn map_counts(
        &mut self,
        (pgm, ins, site): (Option<&str>, Option<&str>, Option<&str>),
        counts: &[(&str, u64)],
        out: &mut MappedRecord,
    ) {
        out.clear();
        self.set_cache_type(None);
        self.set_header(pgm, ins, site, out);
        for (j, &(name, n)) in counts.iter().enumerate() {
            let at = self.names_of(name, None, Span::default(), None);
            let Some(names) = self.names.get(&at) else {
                continue;
            };
            if names.excluded {
                out.excluded.push(j as u32);
            } else {
                out.push_count(names, name, n);
            }
        }
    }

    /// Maps counts of list entries a server sent apart from its records
    /// (the detailed stream's totals per VO, protocol, client domain), as
    /// [`map_counts`](Self::map_counts) does: `keys[i]` is entry `i`'s key
    /// (sanitised as an oss path's `lp` is), each count is (entry, catalog
    /// name `list.i.field`, count).
    pub fn map_keyed_counts(
        &mut self,
        (pgm, ins, site): (Option<&str>, Option<&str>, Option<&str>),
        keys: &[&str],
        counts: &[(usize, &'static str, u64)],
        out: &mut MappedRecord,
    ) {
        out.clear();
        self.set_cache_type(None);
        self.set_header(pgm, ins, site, out);
        self.entry_keys.set(keys);
        for (j, &(index, catalog_name, n)) in counts.iter().enumerate() {
            let Some((list, field)) = catalog_name.split_once(".i.") else {
                continue;
            };
            let entry = ListEntry {
                index,
                list,
                id: "",
                field,
            };
            let (key, key_text) = self.entry_keys.of(Some(entry));
            let at = self.names_of(catalog_name, Some(entry), key, key_text);
            let Some(names) = self.names.get(&at) else {
                continue;
            };
            if names.excluded {
                out.excluded.push(j as u32);
            } else {
                out.push_count_keyed(names, catalog_name, n, true);
            }
        }
    }

    /// The placeholder values of the header being mapped, sanitised once
    /// per record (a record without `pgm` predates nothing we know of; call
    /// it xrootd), and the program they name.
    fn set_header(
        &mut self,
        pgm: Option<&str>,
        ins: Option<&str>,
        site: Option<&str>,
        out: &mut MappedRecord,
    ) {
        self.header.set(pgm, ins, site);
        let h = &self.header;
        h.write_program(&mut out.program);
        self.context = self.hasher.hash_one((
            h.pgm.as_str(),
            h.ins.as_str(),
            h.site.as_str(),
            self.cache_type.as_str(),
        ));
    }

    /// The record's cache type (`pfc`, `rmc`), which its cache section's
    /// metric names carry: only letters and digits, at most 16, are taken
    /// (anything else leaves the names as they were).
    #[inline]
    fn set_cache_type(&mut self, cache_type: Option<&str>) {
        let t = cache_type
            .filter(|t| t.len() <= 16 && t.bytes().all(|b| b.is_ascii_alphanumeric()))
            .unwrap_or("");
        if self.cache_type != t {
            self.cache_type.clear();
            self.cache_type.push_str(t);
        }
    }

    /// Derived variables go the same way as sent ones.
    fn map_derived(&mut self, derived: &Derived, out: &mut MappedRecord) {
        let mut text = std::mem::take(&mut self.derived_text);
        for (name, value) in derived.values(&mut text) {
            let at = self.names_of(name, None, Span::default(), None);
            let Some(names) = self.names.get(&at).filter(|n| n.spec.is_some()) else {
                continue;
            };
            let a = &mut out.arena;
            let value_start = a.len();
            a.push_str(value);
            let value = span_from(a, value_start);
            let kind = names.spec.map(|s| s.kind).unwrap_or(Kind::Gauge64);
            out.slots.push(push_cached(a, names, value, kind, false));
        }
        self.derived_text = text;
    }

    /// The cache slot of a variable's names, filled if new. `key` is the
    /// entry's key as a name component, `key_text` as shown in titles.
    #[inline(always)]
    fn names_of(
        &mut self,
        raw: &str,
        entry: Option<ListEntry<'_>>,
        key: Span,
        key_text: Option<Span>,
    ) -> u64 {
        let key_str = self.entry_keys.text(key);
        let key_text_str = key_text.map(|t| self.entry_keys.text(t)).unwrap_or("");
        // Hashed field by field rather than as a tuple (`hash_one`): the
        // tuple's `Hash` was left out of line, a call per variable.
        let mut h = self.hasher.build_hasher();
        h.write_u64(self.context);
        raw.hash(&mut h);
        key_str.hash(&mut h);
        key_text_str.hash(&mut h);
        let at = h.finish();
        if !self
            .names
            .get(&at)
            .is_some_and(|n| n.matches(self.context, raw, key_str, key_text_str))
        {
            self.fill_names(at, raw, entry, key, key_text);
        }
        at
    }

    /// Expands, sanitises and caches (at `at`) a variable's names. Once
    /// per name: kept out of the per-variable path.
    #[cold]
    fn fill_names(
        &mut self,
        at: u64,
        raw: &str,
        entry: Option<ListEntry<'_>>,
        key: Span,
        key_text: Option<Span>,
    ) {
        let key_str = self.entry_keys.text(key);
        let key_text_str = key_text.map(|t| self.entry_keys.text(t)).unwrap_or("");
        let replaced = var_names(&mut self.var, &mut self.catalog_name, raw, entry, key_str);
        // The cache's type after its section (`cache.rd.hits` of a memory
        // cache: `cache.rmc.rd.hits`); the catalog name stays.
        if !self.cache_type.is_empty() && self.var.starts_with("cache.") {
            self.var.insert_str("cache".len(), &self.cache_type);
            self.var.insert("cache".len(), '.');
        }
        // The site's descriptions only for what the catalog does not know;
        // once per name (this is the name cache's fill).
        let spec = catalog::lookup(&self.catalog_name)
            .or_else(|| self.site.lookup(&self.var, &self.catalog_name));
        let parts = self.header.parts(catalog::section(&self.var), &self.var);
        self.name_buf.clear();
        let cut = self.name.expand_name(&mut self.name_buf, &parts);
        // gmetad writes HOST/NAME.rrd: the name keeps the one rule
        // (`ganglia/path_name.rs`); nothing usable left, it is not sent.
        // (A list key's '/' and '.' becoming '_' is how keys are named,
        // not a change.)
        let expanded = std::mem::take(&mut self.name_buf);
        let change = path_name::push_safe(&mut self.name_buf, &expanded, MAX_NAME).or(
            match (replaced, cut) {
                (true, _) => Some(path_name::Change::Replaced),
                (false, true) => Some(path_name::Change::Cut),
                (false, false) => None,
            },
        );
        let unusable = self.name_buf.is_empty();
        let sanitized = change.is_some();
        if let Some(change) = change {
            // Bounded for a user that never takes them (dump's).
            if self.renamed.len() < MAX_RENAMED {
                self.renamed
                    .push((change, raw.to_string(), self.name_buf.clone()));
            }
        }
        self.group_buf.clear();
        self.group.expand(&mut self.group_buf, &parts);

        let (text, ends) = CachedNames::pack([
            raw,
            key_str,
            key_text_str,
            &self.var,
            &self.name_buf,
            &self.group_buf,
        ]);
        if self.names.len() >= MAX_CACHED_NAMES {
            self.names.clear();
        }
        self.names.insert(
            at,
            CachedNames {
                context: self.context,
                name_key: name_key(&self.name_buf),
                role: Role::of(&self.catalog_name),
                excluded: unusable
                    || (self.filter.excludes(&self.var, &self.catalog_name)
                        && !catalog::is_derived(&self.catalog_name)),
                text,
                ends,
                spec,
                sanitized,
            },
        );
    }
}

/// Writes a variable's name with its list key (`var`, sanitised: true if
/// that changed it) and its catalog name, with `i` for the key.
fn var_names(
    var: &mut String,
    catalog_name: &mut String,
    raw: &str,
    entry: Option<ListEntry<'_>>,
    key: &str,
) -> bool {
    var.clear();
    catalog_name.clear();
    let Some(e) = entry else {
        catalog_name.push_str(raw);
        return sanitize::push_name(var, raw, MAX_NAME);
    };
    let mut sanitized = sanitize::push_name(var, e.list, MAX_NAME);
    var.push('.');
    var.push_str(key);
    catalog_name.push_str(e.list);
    catalog_name.push_str(".i");
    if !e.field.is_empty() {
        var.push('.');
        sanitized |= sanitize::push_name(var, e.field, MAX_NAME);
        catalog_name.push('.');
        catalog_name.push_str(e.field);
    }
    sanitized
}

/// Appends a cached variable's names (and key, for list variables) to the
/// arena and returns its slot.
fn push_cached(a: &mut String, n: &CachedNames, value: Span, kind: Kind, keyed: bool) -> Slot {
    let mut copy = |i: usize| {
        let start = a.len();
        a.push_str(n.part(i));
        span_from(a, start)
    };
    let key = if keyed { copy(2) } else { Span::default() };
    Slot {
        name: copy(4),
        value,
        var: copy(3),
        group: copy(5),
        key,
        kind,
        spec: n.spec,
        sanitized: n.sanitized,
        original: Span::default(),
        name_key: n.name_key,
    }
}

mod cache;
mod derived;
mod filter;
mod host;
mod naming;
mod site;
mod value;

pub(crate) use derived::{Derived, Role};
pub use filter::{DEFAULT_EXCLUDE, Glob, VarFilter};
pub use host::{HostIdentity, host_identity, ip_text};
pub use naming::{DEFAULT_GROUP_TEMPLATE, DEFAULT_NAME_TEMPLATE, HeaderParts, NameTemplate};
pub use site::{Description, SiteMetrics};
pub use value::BadValue;
pub(crate) use value::kib_to_bytes;

pub(crate) use cache::KeyHasher;
pub use cache::name_key;
use cache::{CachedNames, MAX_CACHED_NAMES};
use naming::EntryKeys;
use value::{convert, convert_count};

#[cfg(test)]
mod tests;
