//! The names derived from a site ([`Names`]): each report's, the view's,
//! every metric's (by the naming settings, per program and instance) and
//! each series' legend label.

use super::Site;
use super::reports::Pgm;
use crate::mapping::HeaderParts;

/// Names derived from the site: reports, view, metrics.
pub(super) struct Names<'s> {
    site: &'s Site,
    headers: Vec<(Pgm, HeaderParts)>,
    /// `` or `ds_pfc_`: between `xrootd_` and the report key.
    tag: String,
    pub(super) view: String,
}

impl<'s> Names<'s> {
    pub(super) fn new(site: &'s Site) -> Result<Names<'s>, String> {
        if site.instances.is_empty() {
            return Err(
                "no instance name: give --instance NAME (anon for servers without -n)".into(),
            );
        }
        if site.naming.uses_site() && site.site.is_none() {
            return Err(format!(
                "metric_name {:?} uses {{site}}: give --site (xrootd's all.sitename)",
                site.naming.as_str()
            ));
        }
        // `conf/cluster_NAME.json`, for a cluster the gateway can publish:
        // its name keeps the rule of every name gmetad makes a path of.
        if let Err(why) = crate::ganglia::path_name::check(&site.cluster) {
            return Err(format!("cluster name {:?}: {why}", site.cluster));
        }
        let mut headers = Vec::new();
        let mut ids = Vec::new();
        for ins in &site.instances {
            for pgm in [Pgm::Xrootd, Pgm::Cmsd] {
                let h = HeaderParts::new(Some(pgm.as_str()), Some(ins), site.site.as_deref());
                if headers.iter().any(|(p, o)| *p == pgm && *o == h) {
                    return Err(format!("instance {ins:?} given twice"));
                }
                headers.push((pgm, h));
            }
            // A PHP function name: letters, digits, '_'.
            let id = HeaderParts::new(None, Some(ins), None)
                .ins
                .replace('-', "_");
            if !id.is_empty() {
                ids.push(id);
            }
        }
        let tag = if ids.is_empty() {
            String::new()
        } else {
            format!("{}_", ids.join("_"))
        };
        let view = format!(
            "xrootd{}",
            tag.strip_suffix('_')
                .map(|t| format!("_{t}"))
                .unwrap_or_default()
        );
        Ok(Names {
            site,
            headers,
            tag,
            view,
        })
    }

    pub(super) fn report(&self, key: &str) -> String {
        format!("xrootd_{}{key}_report", self.tag)
    }

    pub(super) fn instances(&self, pgm: Pgm) -> impl Iterator<Item = &HeaderParts> {
        self.headers
            .iter()
            .filter(move |(p, _)| *p == pgm)
            .map(|(_, h)| h)
    }

    pub(super) fn metric(&self, h: &HeaderParts, var: &str) -> String {
        self.site.naming.name_of(h, var)
    }

    /// The legend: the label, after the program when a report shows two
    /// and after the instance when the site has several.
    pub(super) fn label(&self, pgms: usize, pgm: Pgm, h: &HeaderParts, label: &str) -> String {
        let mut out = String::new();
        if self.site.instances.len() > 1 {
            out.push_str(if h.ins.is_empty() { "anon" } else { &h.ins });
            out.push(' ');
        }
        if pgms > 1 {
            out.push_str(pgm.as_str());
            out.push(' ');
        }
        out.push_str(label);
        out
    }
}
