//! Metrics a site describes itself (`[[metric]]` in the config): a
//! plug-in set's counters (5.9+) and any other variable the catalog does
//! not know, which would otherwise go as a double with slope "both" and no
//! units (a counter graphed as a gauge).
//!
//! A description applies only to variables the catalog does not know (the
//! catalog's entries come from XRootD's source); it is looked up once per
//! metric name, when the name is first seen (the mapping's name cache), so
//! it costs the per-datagram path nothing.
//!
//! Descriptions become [`MetricSpec`]s like the catalog's, which are
//! `'static`: each distinct one is kept for the life of the process and
//! shared by every reload that describes the same metric the same way, so
//! reloading the same file does not grow memory.

use std::sync::Mutex;

use super::filter::Glob;
use crate::catalog::{Kind, MetricSpec};
use crate::ganglia::sanitize;

/// The `[[metric]]` tables in effect, in file order (first match wins).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SiteMetrics {
    entries: Vec<(Glob, &'static MetricSpec)>,
}

/// One `[[metric]]` table as written (the config's `MetricConfig`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Description<'a> {
    pub pattern: &'a str,
    pub value_type: Option<&'a str>,
    pub slope: Option<&'a str>,
    pub units: Option<&'a str>,
    pub title: Option<&'a str>,
    pub description: Option<&'a str>,
}

/// Longest units text (gmond keeps UNITS short; ganglia-web shows it on
/// the axis).
const MAX_UNITS: usize = 32;

impl SiteMetrics {
    /// Checks and compiles the tables; an error says which entry (its
    /// `match`) and what is wrong with it.
    pub fn new(list: &[Description<'_>]) -> Result<SiteMetrics, String> {
        let mut entries: Vec<(Glob, &'static MetricSpec)> = Vec::with_capacity(list.len());
        for (i, d) in list.iter().enumerate() {
            let at = format!("[[metric]] #{} (match = {:?})", i + 1, d.pattern);
            let glob = Glob::parse(d.pattern).map_err(|e| format!("{at}: match: {e}"))?;
            if entries.iter().any(|(g, _)| g == &glob) {
                return Err(format!(
                    "{at}: a [[metric]] with the same match comes before it (first match wins: this one would never apply)"
                ));
            }
            let kind = kind(d.value_type, d.slope).map_err(|e| format!("{at}: {e}"))?;
            let text = |key: &str, v: Option<&str>, max: usize| -> Result<String, String> {
                let v = v.unwrap_or("");
                if sanitize::is_clean_text(v, max) {
                    Ok(v.to_string())
                } else {
                    Err(format!(
                        "{at}: {key} = {v:?}: at most {max} bytes of printable text without quotes, backslashes or <>&"
                    ))
                }
            };
            let units = text("units", d.units, MAX_UNITS)?;
            let title = text("title", d.title, sanitize::MAX_TEXT)?;
            let desc = match d.description {
                Some(_) => text("description", d.description, sanitize::MAX_TEXT)?,
                None => format!("Described by the site: [[metric]] match = {}.", d.pattern),
            };
            entries.push((
                glob,
                intern(Owned {
                    var: d.pattern.to_string(),
                    kind,
                    units,
                    title,
                    desc,
                }),
            ));
        }
        Ok(SiteMetrics { entries })
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The description of a variable the catalog does not know, by its
    /// name as metric names carry it or as the catalog would name it.
    pub fn lookup(&self, var: &str, catalog_name: &str) -> Option<&'static MetricSpec> {
        self.entries
            .iter()
            .find(|(g, _)| g.matches(var) || g.matches(catalog_name))
            .map(|(_, spec)| *spec)
    }

    /// The entries in effect: (pattern, spec), for `dump` and check-config.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &'static MetricSpec)> + '_ {
        self.entries.iter().map(|(g, s)| (g.as_str(), *s))
    }
}

/// The kind `type` and `slope` say: a counter is sent as a double with
/// integer text and slope positive (kept continuous through restarts and
/// wraps like the catalog's counters); a gauge as a double or uint32 with
/// slope both; text as a string with slope zero.
fn kind(value_type: Option<&str>, slope: Option<&str>) -> Result<Kind, String> {
    match (value_type.unwrap_or("double"), slope) {
        (_, Some(s)) if s != "counter" && s != "gauge" => Err(format!(
            "slope = {s:?}: must be \"counter\" (a running total: graphed as a rate) or \"gauge\""
        )),
        ("double", Some("counter")) => Ok(Kind::Counter64),
        ("double", _) => Ok(Kind::Gauge64),
        ("uint32", Some("counter")) => Err(
            "type = \"uint32\" with slope = \"counter\": a counter is sent as a double (it is kept continuous past 32 bits); leave type out"
                .into(),
        ),
        ("uint32", _) => Ok(Kind::Gauge32),
        ("string", None) => Ok(Kind::Text),
        ("string", Some(s)) => Err(format!(
            "type = \"string\" with slope = {s:?}: text has no slope (leave slope out)"
        )),
        (t, _) => Err(format!(
            "type = {t:?}: must be \"double\", \"uint32\" or \"string\""
        )),
    }
}

/// A description's text, owned until interned.
struct Owned {
    var: String,
    kind: Kind,
    units: String,
    title: String,
    desc: String,
}

/// Every distinct description made so far (a handful: one per
/// `[[metric]]` table ever loaded).
static INTERNED: Mutex<Vec<&'static MetricSpec>> = Mutex::new(Vec::new());

/// The `'static` spec of a description: the one made before for the same
/// text, else a new one kept for the life of the process.
fn intern(o: Owned) -> &'static MetricSpec {
    let mut all = INTERNED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = all.iter().find(|s| {
        s.var == o.var
            && s.kind == o.kind
            && s.units == o.units
            && s.title == o.title
            && s.desc == o.desc
    }) {
        return s;
    }
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let spec: &'static MetricSpec = Box::leak(Box::new(MetricSpec {
        var: leak(o.var),
        kind: o.kind,
        units: leak(o.units),
        title: leak(o.title),
        desc: leak(o.desc),
        until: None,
        old_width: None,
        left_out: None,
    }));
    all.push(spec);
    spec
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(d: Description<'_>) -> Result<SiteMetrics, String> {
        SiteMetrics::new(&[d])
    }

    #[test]
    fn type_and_slope_make_the_kind() {
        let d = |t, s| Description {
            pattern: "p.*",
            value_type: t,
            slope: s,
            ..Default::default()
        };
        let k = |t, s| one(d(t, s)).map(|m| m.entries[0].1.kind);
        assert_eq!(k(None, Some("counter")), Ok(Kind::Counter64));
        assert_eq!(k(Some("double"), Some("counter")), Ok(Kind::Counter64));
        assert_eq!(k(None, None), Ok(Kind::Gauge64));
        assert_eq!(k(Some("uint32"), Some("gauge")), Ok(Kind::Gauge32));
        assert_eq!(k(Some("string"), None), Ok(Kind::Text));
        assert!(
            k(Some("float"), None)
                .unwrap_err()
                .contains("type = \"float\"")
        );
        assert!(
            k(None, Some("positive"))
                .unwrap_err()
                .contains("slope = \"positive\"")
        );
        assert!(k(Some("uint32"), Some("counter")).is_err());
        assert!(k(Some("string"), Some("gauge")).is_err());
    }

    #[test]
    fn errors_name_the_entry() {
        let a = Description {
            pattern: "a.*",
            ..Default::default()
        };
        let bad = Description {
            pattern: "b c",
            ..Default::default()
        };
        let e = SiteMetrics::new(&[a, bad]).unwrap_err();
        assert!(
            e.starts_with("[[metric]] #2 (match = \"b c\"): match:"),
            "{e}"
        );
        let e = SiteMetrics::new(&[a, a]).unwrap_err();
        assert!(
            e.starts_with("[[metric]] #2 (match = \"a.*\")") && e.contains("same match"),
            "{e}"
        );
        let quote = Description {
            units: Some("a\"b"),
            ..a
        };
        assert!(one(quote).unwrap_err().contains("units = "));
    }

    #[test]
    fn first_match_wins_and_reloads_share_specs() {
        let list = [
            Description {
                pattern: "myplug.bytes_*",
                slope: Some("counter"),
                units: Some("bytes/s"),
                ..Default::default()
            },
            Description {
                pattern: "myplug.*",
                ..Default::default()
            },
        ];
        let m = SiteMetrics::new(&list).unwrap();
        let spec = m.lookup("myplug.bytes_in", "myplug.bytes_in").unwrap();
        assert_eq!((spec.kind, spec.units), (Kind::Counter64, "bytes/s"));
        assert_eq!(
            m.lookup("myplug.x", "myplug.x").unwrap().kind,
            Kind::Gauge64
        );
        assert!(m.lookup("other.x", "other.x").is_none());
        let again = SiteMetrics::new(&list).unwrap();
        assert!(std::ptr::eq(
            spec,
            again.lookup("myplug.bytes_in", "myplug.bytes_in").unwrap()
        ));
    }
}
