//! A real gmond (3.7.2, Debian's ganglia-monitor) and its XML, parsed.

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use super::gmond_conf::gmond_conf;
use super::{Proc, Scratch, free_port, read_xml, require, spawn};

/// A real gmond: receives on udp `port`, serves XML on tcp `xml_port`.
pub struct Gmond {
    pub proc: Proc,
    pub port: u16,
    pub xml_port: u16,
    pub conf: PathBuf,
    _dir: Scratch,
}

impl Gmond {
    pub fn start() -> Gmond {
        Self::start_with(free_port(), free_port(), "")
    }

    /// `extra_globals` goes into the globals section (e.g. cleanup_threshold).
    pub fn start_with(port: u16, xml_port: u16, extra_globals: &str) -> Gmond {
        let recv = format!("udp_recv_channel {{ port = {port}  bind = 127.0.0.1 }}");
        Self::start_conf(port, xml_port, extra_globals, &recv)
    }

    /// Like `start_with`, plus `extra_sections` appended verbatim to the
    /// file (e.g. a `udp_send_channel`, to capture gmond's 136 requests).
    /// Note: gmond 3.7.2 runs its cleanup only on a "collection tick": every
    /// 60 s while mute (or without any udp_send_channel, which forces mute),
    /// every second when `mute = no` with a send channel and no collection
    /// groups. A test of dmax expiry needs `mute = no` plus a send channel.
    pub fn start_full(
        port: u16,
        xml_port: u16,
        extra_globals: &str,
        extra_sections: &str,
    ) -> Gmond {
        let sections =
            format!("udp_recv_channel {{ port = {port}  bind = 127.0.0.1 }}\n{extra_sections}");
        Self::start_conf(port, xml_port, extra_globals, &sections)
    }

    /// A gmond that joins multicast `group` on the loopback interface.
    pub fn start_multicast(group: &str, port: u16) -> Gmond {
        let recv = format!(
            "udp_recv_channel {{ mcast_join = {group}  port = {port}  bind = {group}  mcast_if = lo }}"
        );
        Self::start_conf(port, free_port(), "", &recv)
    }

    fn start_conf(port: u16, xml_port: u16, extra_globals: &str, recv: &str) -> Gmond {
        let gmond = require("gmond", "ganglia-monitor");
        let dir = Scratch::new("gmond");
        let conf = dir.path().join("gmond.conf");
        let sections =
            format!("{recv}\ntcp_accept_channel {{ port = {xml_port}  bind = 127.0.0.1 }}");
        std::fs::write(
            &conf,
            gmond_conf("xrd2ganglia-test", extra_globals, &sections),
        )
        .unwrap();
        let mut cmd = Command::new(gmond);
        cmd.arg("-c").arg(&conf).arg("-f");
        let proc = spawn("gmond", cmd, &dir.path().join("gmond.log"));
        let g = Gmond {
            proc,
            port,
            xml_port,
            conf,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", xml_port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "gmond did not start: {}",
                g.proc.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        g
    }

    /// gmond's XML, as text.
    pub fn xml_text(&self) -> String {
        read_xml(self.xml_port)
    }

    /// gmond's XML, parsed (panics if it is not well-formed).
    pub fn xml(&self) -> GangliaXml {
        GangliaXml::parse(&self.xml_text())
    }

    /// Polls the XML until `ok` holds or `timeout` passes.
    pub fn wait_for(
        &self,
        timeout: Duration,
        what: &str,
        ok: impl Fn(&GangliaXml) -> bool,
    ) -> GangliaXml {
        let deadline = Instant::now() + timeout;
        loop {
            let x = self.xml();
            if ok(&x) {
                return x;
            }
            if Instant::now() > deadline {
                panic!(
                    "timed out waiting for {what}; gmond has hosts {:?}",
                    x.hosts.keys().collect::<Vec<_>>()
                );
            }
            // gmond does not read its UDP socket while it writes this XML:
            // poll gently.
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// One METRIC element.
#[derive(Clone, Debug, Default)]
pub struct XmlMetric {
    pub attrs: BTreeMap<String, String>,
    pub extra: BTreeMap<String, String>,
}

impl XmlMetric {
    pub fn get(&self, k: &str) -> &str {
        self.attrs.get(k).map(String::as_str).unwrap_or("")
    }
}

/// One HOST element.
#[derive(Clone, Debug, Default)]
pub struct XmlHost {
    pub attrs: BTreeMap<String, String>,
    pub metrics: BTreeMap<String, XmlMetric>,
}

/// gmond's XML, hosts by NAME (`NAME@IP` for a second host of the same NAME).
#[derive(Clone, Debug, Default)]
pub struct GangliaXml {
    pub hosts: BTreeMap<String, XmlHost>,
}

impl GangliaXml {
    /// Parses with a strict XML parser: ill-formed XML fails the test.
    pub fn parse(text: &str) -> GangliaXml {
        // gmond's XML has a DOCTYPE with an internal subset; roxmltree needs DTDs allowed.
        let opts = roxmltree::ParsingOptions {
            allow_dtd: true,
            ..Default::default()
        };
        let doc = roxmltree::Document::parse_with_options(text, opts).unwrap_or_else(|e| {
            panic!(
                "gmond XML is not well-formed: {e}\n{}",
                &text[..text.len().min(4000)]
            )
        });
        let mut out = GangliaXml::default();
        for h in doc.descendants().filter(|n| n.has_tag_name("HOST")) {
            let mut host = XmlHost {
                attrs: h
                    .attributes()
                    .map(|a| (a.name().to_string(), a.value().to_string()))
                    .collect(),
                ..Default::default()
            };
            for m in h.children().filter(|n| n.has_tag_name("METRIC")) {
                let mut metric = XmlMetric {
                    attrs: m
                        .attributes()
                        .map(|a| (a.name().to_string(), a.value().to_string()))
                        .collect(),
                    ..Default::default()
                };
                for e in m.descendants().filter(|n| n.has_tag_name("EXTRA_ELEMENT")) {
                    metric.extra.insert(
                        e.attribute("NAME").unwrap_or("").to_string(),
                        e.attribute("VAL").unwrap_or("").to_string(),
                    );
                }
                host.metrics.insert(metric.get("NAME").to_string(), metric);
            }
            // gmond keys hosts by IP; two can share a NAME: keep both.
            let name = host.attrs.get("NAME").cloned().unwrap_or_default();
            let key = if out.hosts.contains_key(&name) {
                format!(
                    "{name}@{}",
                    host.attrs.get("IP").cloned().unwrap_or_default()
                )
            } else {
                name
            };
            out.hosts.insert(key, host);
        }
        out
    }

    /// True if `host` has every one of `metrics`. A record's packets land
    /// one by one; the derived `uptime` is always its last.
    pub fn has(&self, host: &str, metrics: &[&str]) -> bool {
        self.hosts
            .get(host)
            .is_some_and(|h| metrics.iter().all(|m| h.metrics.contains_key(*m)))
    }

    pub fn host(&self, name: &str) -> &XmlHost {
        self.hosts.get(name).unwrap_or_else(|| {
            panic!(
                "no host {name:?} in gmond; hosts: {:?}",
                self.hosts.keys().collect::<Vec<_>>()
            )
        })
    }

    pub fn metric(&self, host: &str, name: &str) -> &XmlMetric {
        let h = self.host(host);
        h.metrics.get(name).unwrap_or_else(|| {
            panic!(
                "no metric {name:?} on {host:?}; it has {:?}",
                h.metrics.keys().collect::<Vec<_>>()
            )
        })
    }
}
