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
    /// `SLOPE` as the document gives it: `positive` marks a counter (a
    /// running total, which gmetad stores as a COUNTER and graphs as the
    /// rate `units` names); else `both`, `zero`, `negative`, or empty
    /// where the document leaves it out.
    pub slope: String,
}

impl Metric {
    /// Whether the value is a counter's running total (`SLOPE="positive"`),
    /// not the rate its units name.
    pub fn is_counter(&self) -> bool {
        self.slope == "positive"
    }
}

/// The clusters of a gmond or gmetad XML document, or why it is not one.
/// A document cut before its `</GANGLIA_XML>` (a writer that stopped, a
/// connection closed early) is not one: what it lacks is unknown.
pub fn read(xml: &str) -> Result<Vec<Cluster>, String> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut clusters: Vec<Cluster> = Vec::new();
    let mut seen_root = false;
    let mut closed = false;
    loop {
        let event = reader
            .read_event()
            .map_err(|e| format!("not XML at byte {}: {e}", reader.buffer_position()))?;
        let element = match &event {
            Event::Start(e) | Event::Empty(e) => e,
            Event::End(e) if e.name().into_inner() == "GANGLIA_XML" => {
                closed = true;
                continue;
            }
            Event::Eof => break,
            _ => continue,
        };
        match element.name().into_inner() {
            "GANGLIA_XML" => {
                seen_root = true;
                // `<GANGLIA_XML/>`: a whole document with nothing in it.
                closed = matches!(event, Event::Empty(_));
            }
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
                    slope: attr(element, "SLOPE")?.into_owned(),
                });
            }
            _ => {}
        }
    }
    if !seen_root {
        return Err("no GANGLIA_XML element: not a gmond or gmetad XML port".into());
    }
    if !closed {
        return Err(format!(
            "the document ends at byte {} without its </GANGLIA_XML>: cut short (the port \
             stopped writing, or closed the connection early)",
            xml.len()
        ));
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
                    // A counter's value is its running total; gmetad graphs
                    // its rate, in the units given.
                    let _ = if m.is_counter() {
                        writeln!(
                            out,
                            "      {:wm$}  {} (counter: total so far; graphed as its rate, {})",
                            m.name, m.value, m.units
                        )
                    } else {
                        writeln!(out, "      {:wm$}  {} {}", m.name, m.value, m.units)
                    };
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
                        slope: "positive".into(),
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

    /// Issue 42, item 8: a document cut anywhere before its end is an
    /// error, not the hosts read so far.
    #[test]
    fn a_document_cut_short_is_an_error() {
        let end = GMOND.find("</GANGLIA_XML>").unwrap();
        // At a tag's boundary: the XML so far is well formed.
        for cut in [
            end,
            GMOND.find("</HOST>").unwrap(),
            GMOND.find("<CLUSTER").unwrap(),
        ] {
            let e = read(&GMOND[..cut]).unwrap_err();
            assert!(
                e.contains("without its </GANGLIA_XML>"),
                "cut at {cut}: {e}"
            );
        }
        // Anywhere.
        for cut in 0..end {
            assert!(read(&GMOND[..cut]).is_err(), "cut at {cut}");
        }
        assert!(read(GMOND).is_ok());
        assert_eq!(read("<GANGLIA_XML/>"), Ok(vec![]));
    }

    /// Issue 45, item 6: a counter's value is said to be a running total,
    /// not a rate in its units.
    #[test]
    fn a_counter_is_shown_as_a_total_not_a_rate() {
        let text = show(&read(GMOND).unwrap(), true);
        assert!(
            text.contains(
                "xrootd.link.in  81 & more (counter: total so far; graphed as its rate, bytes/s)\n"
            ),
            "{text}"
        );
        let gauge = GMOND.replace("SLOPE=\"positive\"", "SLOPE=\"both\"");
        let text = show(&read(&gauge).unwrap(), true);
        assert!(
            text.contains("xrootd.link.in  81 & more bytes/s\n"),
            "{text}"
        );
    }
}
