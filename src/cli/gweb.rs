//! `xrd2ganglia gweb`: ganglia-web reports, a site view and a cluster file
//! for the metrics `serve` sends.

use std::path::{Path, PathBuf};

use xrd2ganglia::gweb;

use super::{Failed, Outcome, StartError, settings_for_naming};

/// Writes the files for `instances` (of `site`, in `cluster` or the
/// config's) into `out` and prints their paths.
pub fn run(
    config: Option<PathBuf>,
    instances: Vec<String>,
    site: Option<String>,
    cluster: Option<String>,
    keep_standard_reports: bool,
    out: &Path,
) -> Outcome {
    let settings = settings_for_naming(config.as_deref())?;
    // Clusters by site or by rule: the reports go on every cluster's
    // pages, unless --cluster names one.
    let every_cluster = cluster.is_none() && !settings.grouping.is_single();
    let files = gweb::generate(&gweb::Site {
        every_cluster,
        naming: settings.metric_name,
        filter: settings.filter,
        instances,
        site,
        cluster: cluster.unwrap_or(settings.cluster_name),
        keep_standard_reports,
    })
    .map_err(StartError::Gweb)?;
    gweb::write(out, &files).map_err(|error| Failed::GwebWrite {
        dir: out.to_owned(),
        error,
    })?;
    for f in &files {
        println!("{}", out.join(&f.path).display());
    }
    Ok(())
}
