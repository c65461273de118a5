//! `xrd2ganglia poll`: what a gmond-style XML port (a gmond's 8649, the
//! gateway's `xml_listen`, gmetad's 8651) holds, read as gmetad reads it,
//! without `nc`.
//!
//! [`read`] takes the document and keeps what a reader asks about: each
//! cluster, its hosts (name, IP, seconds since last reported) and each
//! host's metrics (name, value, units). It reads any nesting of GRID,
//! CLUSTER and HOST, so gmetad's document reads too.

use std::borrow::Cow;
use std::fmt::Write as _;

use quick_xml::XmlVersion;
use quick_xml::events::{BytesStart, Event};

/// One cluster of the document.
#[derive(Debug, Default, PartialEq)]
pub struct Cluster {
    pub name: String,
    pub hosts: Vec<Host>,
}

/// One host, as gmetad would store it.
#[derive(Debug, Default, PartialEq)]
pub struct Host {
    pub name: String,
    pub ip: String,
    /// Seconds since the host last reported (`TN`).
    pub tn: String,
    pub metrics: Vec<Metric>,
}

/// One metric of a host.
#[derive(Debug, Default, PartialEq)]
pub struct Metric {
    pub name: String,
    pub value: String,
    pub units: String,
}

/// The clusters of a gmond or gmetad XML document, or why it is not one.
pub fn read(xml: &str) -> Result<Vec<Cluster>, String> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut clusters: Vec<Cluster> = Vec::new();
    let mut seen_root = false;
    loop {
        let event = reader
            .read_event()
            .map_err(|e| format!("not XML at byte {}: {e}", reader.buffer_position()))?;
        let element = match &event {
            Event::Start(e) | Event::Empty(e) => e,
            Event::Eof => break,
            _ => continue,
        };
        match element.name().into_inner() {
            "GANGLIA_XML" => seen_root = true,
            "CLUSTER" => clusters.push(Cluster {
                name: attr(element, "NAME")?.into_owned(),
                hosts: Vec::new(),
            }),
            "HOST" => {
                let cluster = current(&mut clusters);
                cluster.hosts.push(Host {
                    name: attr(element, "NAME")?.into_owned(),
                    ip: attr(element, "IP")?.into_owned(),
                    tn: attr(element, "TN")?.into_owned(),
                    metrics: Vec::new(),
                });
            }
            "METRIC" => {
                let cluster = current(&mut clusters);
                let Some(host) = cluster.hosts.last_mut() else {
                    return Err("a METRIC outside any HOST".into());
                };
                host.metrics.push(Metric {
                    name: attr(element, "NAME")?.into_owned(),
                    value: attr(element, "VAL")?.into_owned(),
                    units: attr(element, "UNITS")?.into_owned(),
                });
            }
            _ => {}
        }
    }
    if !seen_root {
        return Err("no GANGLIA_XML element: not a gmond or gmetad XML port".into());
    }
    Ok(clusters)
}

/// The cluster hosts go into (one with no name when a document has hosts
/// outside any CLUSTER).
fn current(clusters: &mut Vec<Cluster>) -> &mut Cluster {
    if clusters.is_empty() {
        clusters.push(Cluster::default());
    }
    let last = clusters.len() - 1;
    &mut clusters[last]
}

/// The value of attribute `name` ("" when absent: gmond leaves out none
/// of these, an older writer may).
fn attr<'a>(element: &'a BytesStart<'_>, name: &str) -> Result<Cow<'a, str>, String> {
    for a in element.attributes() {
        let a = a.map_err(|e| format!("a bad attribute: {e}"))?;
        if a.key.into_inner() == name {
            return a
                .normalized_value(XmlVersion::Implicit1_0)
                .map_err(|e| format!("a bad attribute value: {e}"));
        }
    }
    Ok(Cow::Borrowed(""))
}

/// The clusters as text: a line per host (name, IP, seconds since it
/// reported, how many metrics), and with `metrics` a line per metric
/// under it (name, value, units), sorted by name.
pub fn show(clusters: &[Cluster], metrics: bool) -> String {
    let mut out = String::new();
    for c in clusters {
        let n = c.hosts.len();
        let hosts = if n == 1 { "host" } else { "hosts" };
        let _ = writeln!(out, "cluster {:?}: {n} {hosts}", c.name);
        let wn = c
            .hosts
            .iter()
            .map(|h| h.name.len())
            .max()
            .unwrap_or(0)
            .max(4);
        let wi = c.hosts.iter().map(|h| h.ip.len()).max().unwrap_or(0).max(2);
        let _ = writeln!(out, "  {:wn$}  {:wi$}  {:>5}  METRICS", "HOST", "IP", "AGE");
        let mut hosts: Vec<&Host> = c.hosts.iter().collect();
        hosts.sort_by(|a, b| a.name.cmp(&b.name));
        for h in hosts {
            let _ = writeln!(
                out,
                "  {:wn$}  {:wi$}  {:>4}s  {}",
                h.name,
                h.ip,
                h.tn,
                h.metrics.len()
            );
            if metrics {
                let mut list: Vec<&Metric> = h.metrics.iter().collect();
                list.sort_by(|a, b| a.name.cmp(&b.name));
                let wm = list.iter().map(|m| m.name.len()).max().unwrap_or(0);
                for m in list {
                    let _ = writeln!(out, "      {:wm$}  {} {}", m.name, m.value, m.units);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written as gmond 3.7.2 writes its port (attribute order and all).
    const GMOND: &str = r#"<?xml version="1.0" encoding="ISO-8859-1" standalone="yes"?>
<!DOCTYPE GANGLIA_XML [
   <!ELEMENT GANGLIA_XML (GRID|CLUSTER|HOST)*>
]>
<GANGLIA_XML VERSION="3.7.2" SOURCE="gmond">
<CLUSTER NAME="unspecified" LOCALTIME="1795303800" OWNER="unspecified" LATLONG="unspecified" URL="unspecified">
<HOST NAME="vm" IP="127.0.0.1" TAGS="" REPORTED="1795303790" TN="10" TMAX="20" DMAX="0" LOCATION="unspecified" GMOND_STARTED="0">
<METRIC NAME="xrootd.link.in" VAL="81 &amp; more" TYPE="double" UNITS="bytes/s" TN="10" TMAX="20" DMAX="0" SLOPE="positive" SOURCE="gmetric">
<EXTRA_DATA>
<EXTRA_ELEMENT NAME="GROUP" VAL="xrootd.link"/>
</EXTRA_DATA>
</METRIC>
</HOST>
</CLUSTER>
</GANGLIA_XML>
"#;

    #[test]
    fn a_gmond_document_reads_as_its_hosts_and_metrics() {
        let clusters = read(GMOND).unwrap();
        assert_eq!(
            clusters,
            vec![Cluster {
                name: "unspecified".into(),
                hosts: vec![Host {
                    name: "vm".into(),
                    ip: "127.0.0.1".into(),
                    tn: "10".into(),
                    metrics: vec![Metric {
                        name: "xrootd.link.in".into(),
                        value: "81 & more".into(),
                        units: "bytes/s".into(),
                    }],
                }],
            }]
        );
    }

    #[test]
    fn what_is_not_a_port_s_document_is_said() {
        assert!(read("hello").is_err());
        assert!(read("<a><b/></a>").is_err());
    }
}
