//! A `[[cluster]]` rule's own XML port (`xml_listen`, `xml_allow` in the
//! rule; docs/clusters.md): parsed, and checked against the gateway's
//! other TCP ports and the rules before it.
//!
//! A rule port serves the rule's clusters only (a gmetad polling it
//! writes only their RRDs), with the limits of the gateway's port
//! (`daemon/xml_port.rs`). Its addresses must differ from every other TCP
//! port the gateway binds: the same port twice (the same address, or one
//! of them the wildcard) would fail the start (exit 3, which the unit
//! retries for ever), and `check-config` says it first.

use std::net::SocketAddr;

use ipnet::IpNet;

use super::clusters::ClusterRule;
use super::file::{ClusterConfig, FileConfig};
use super::values::networks;
use super::{ConfigError, bad};

/// A rule's `xml_listen` and `xml_allow`, parsed; `key` names them.
pub(super) fn parse(
    key: &dyn Fn(&str) -> String,
    c: &ClusterConfig,
) -> Result<(Vec<SocketAddr>, Option<Vec<IpNet>>), ConfigError> {
    let xml_listen = c
        .xml_listen
        .iter()
        .map(|a| {
            a.parse().map_err(|_| {
                bad(
                    &key("xml_listen"),
                    a,
                    "not an ADDRESS:PORT (write IPv6 as [::1]:8661)",
                )
            })
        })
        .collect::<Result<Vec<SocketAddr>, _>>()?;
    let xml_allow = match &c.xml_allow {
        None => None,
        Some(list) if list.is_empty() => {
            return Err(bad(
                &key("xml_allow"),
                list,
                "no client could poll; leave it out for the gateway's xml_allow",
            ));
        }
        Some(list) => Some(networks(&key("xml_allow"), list)?),
    };
    if xml_allow.is_some() && xml_listen.is_empty() {
        return Err(ConfigError(format!(
            "{}: without a port of its own (the rule's xml_listen) it allows nothing",
            key("xml_allow")
        )));
    }
    Ok((xml_listen, xml_allow))
}

/// Whether binding `a` and `b` (TCP both) would clash: one port (not 0,
/// which the kernel chooses), on one address or the wildcard.
fn clash(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() != 0
        && a.port() == b.port()
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

/// A rule with an `xml_listen` (`at` names it), against the gateway's
/// `xml_listen`, its other TCP ports (`taken`) and the rules before it.
pub(super) fn check(
    at: &str,
    rule: &ClusterRule,
    file: &FileConfig,
    xml_listen: &[SocketAddr],
    taken: &[(&str, SocketAddr)],
    before: &[ClusterRule],
) -> Result<(), ConfigError> {
    if xml_listen.is_empty() {
        return Err(ConfigError(format!(
            "{at}: xml_listen: needs the gateway's xml_listen too (the port that serves every cluster, cluster_name's among them)"
        )));
    }
    if !rule.by_site && rule.name == file.cluster_name {
        return Err(ConfigError(format!(
            "{at}: xml_listen: the rule names cluster_name's cluster, which the gateway's xml_listen serves"
        )));
    }
    let mut others: Vec<(String, SocketAddr)> = Vec::new();
    others.extend(xml_listen.iter().map(|a| ("xml_listen".to_string(), *a)));
    others.extend(taken.iter().map(|(k, a)| (k.to_string(), *a)));
    for (i, r) in before.iter().enumerate() {
        let name = format!("cluster[{i}] {:?}'s xml_listen", r.name);
        others.extend(r.xml_listen.iter().map(|a| (name.clone(), *a)));
    }
    for (i, a) in rule.xml_listen.iter().enumerate() {
        let earlier = rule.xml_listen[..i]
            .iter()
            .map(|b| ("its own xml_listen".to_string(), *b));
        if let Some((whose, b)) = others
            .iter()
            .cloned()
            .chain(earlier)
            .find(|(_, b)| clash(*a, *b))
        {
            return Err(bad(
                &format!("{at}: xml_listen"),
                a.to_string(),
                format!("the same port as {whose} {b}: give each port once"),
            ));
        }
    }
    Ok(())
}

impl super::Settings {
    /// Who may poll XML port `port` (a rule's; None: the gateway's): its
    /// rule's `xml_allow`, else the gateway's.
    pub fn xml_allow_for(&self, port: Option<u32>) -> &[IpNet] {
        let rule = port.and_then(|p| self.grouping.rules.iter().find(|r| r.port == Some(p)));
        match rule.and_then(|r| r.xml_allow.as_deref()) {
            Some(allow) => allow,
            None => &self.xml_allow,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::clusters::Choice;
    use crate::config::{FileConfig, Overrides, Settings, validate};

    fn from(text: &str) -> Result<Settings, String> {
        let file = FileConfig::parse(text, Path::new("t.toml")).map_err(|e| e.to_string())?;
        validate(file, "t.toml".into(), &Overrides::default()).map_err(|e| e.to_string())
    }

    fn err(text: &str) -> String {
        from(text).unwrap_err()
    }

    const TOP: &str = "xml_listen = [\"127.0.0.1:8659\"]\nsend = false\n";

    /// `{site}` rules and rule ports, as docs/clusters.md says them.
    #[test]
    fn site_rules_and_rule_ports_are_checked_naming_the_rule() {
        let rule = |body: &str| err(&format!("{TOP}[[cluster]]\n{body}"));
        assert!(
            rule("name = \"T2_{site}\"\nsites = [\"*\"]").contains("{site} must be the whole name"),
        );
        for key in ["owner = \"x\"", "latlong = \"x\"", "url = \"x\""] {
            let e = rule(&format!("name = \"{{site}}\"\nsites = [\"*\"]\n{key}"));
            assert!(e.starts_with("cluster[0] \"{site}\": "), "{e}");
            assert!(e.contains("describes one"), "{e}");
        }
        assert!(rule("name = \"{site}\"").contains("matches nothing"));
        // Ports that clash: with the gateway's, with another rule's (the
        // wildcard included), twice in one rule, with peer_listen.
        assert_eq!(
            rule("name = \"a\"\nsites = [\"A\"]\nxml_listen = [\"127.0.0.1:8659\"]"),
            "cluster[0] \"a\": xml_listen = \"127.0.0.1:8659\": the same port as xml_listen 127.0.0.1:8659: give each port once"
        );
        let two = "name = \"a\"\nsites = [\"A\"]\nxml_listen = [\"0.0.0.0:8661\"]\n[[cluster]]\nname = \"{site}\"\nsites = [\"*\"]\nxml_listen = [\"127.0.0.1:8661\"]";
        assert!(
            rule(two).starts_with("cluster[1] \"{site}\": xml_listen = \"127.0.0.1:8661\": the same port as cluster[0] \"a\"'s xml_listen 0.0.0.0:8661"),
            "{}",
            rule(two)
        );
        assert!(
            rule("name = \"a\"\nsites = [\"A\"]\nxml_listen = [\"127.0.0.1:8661\", \"[::]:8661\"]")
                .contains("the same port as its own xml_listen 127.0.0.1:8661")
        );
        assert!(
            err(&format!("{TOP}peer = \"127.0.0.2:8660\"\npeer_listen = [\"0.0.0.0:8660\"]\n[[cluster]]\nname = \"a\"\nsites = [\"A\"]\nxml_listen = [\"127.0.0.1:8660\"]"))
                .contains("the same port as peer_listen 0.0.0.0:8660")
        );
        assert!(
            rule("name = \"a\"\nsites = [\"A\"]\nxml_listen = [\"8661\"]")
                .starts_with("cluster[0] \"a\": xml_listen = \"8661\": not an ADDRESS:PORT")
        );
        assert!(
            rule(
                "name = \"a\"\nsites = [\"A\"]\nxml_listen = [\"127.0.0.1:8661\"]\nxml_allow = []"
            )
            .starts_with("cluster[0] \"a\": xml_allow = []: no client could poll")
        );
        assert!(
            rule("name = \"a\"\nsites = [\"A\"]\nxml_allow = [\"10.0.0.1\"]")
                .contains("without a port of its own")
        );
        assert!(
            rule("name = \"XRootD\"\nsites = [\"A\"]\nxml_listen = [\"127.0.0.1:8661\"]")
                .contains("names cluster_name's cluster")
        );
        // A rule port needs the gateway's.
        assert!(
            err("[[cluster]]\nname = \"a\"\nsites = [\"A\"]\nxml_listen = [\"127.0.0.1:8661\"]")
                .contains("needs the gateway's xml_listen too")
        );
        // Port 0 (the kernel chooses) clashes with nothing.
        let s = from(&format!(
            "{TOP}[[cluster]]\nname = \"{{site}}\"\nsites = [\"T1_*\"]\nxml_listen = [\"127.0.0.1:0\"]\nxml_allow = [\"10.0.0.1\"]\n[[cluster]]\nname = \"b\"\nsites = [\"B\"]\n[[cluster]]\nname = \"{{site}}\"\nsites = [\"*\"]\nxml_listen = [\"127.0.0.1:0\"]\n"
        ))
        .unwrap();
        let rules = &s.grouping.rules;
        assert_eq!(
            rules.iter().map(|r| r.port).collect::<Vec<_>>(),
            [Some(0), None, Some(1)]
        );
        assert!(rules[0].by_site && !rules[1].by_site);
        assert_eq!(rules[0].xml_allow.as_ref().map(Vec::len), Some(1));
        assert_eq!(rules[2].xml_allow, None);
        assert_eq!(s.grouping.ports().len(), 2);
        // A `{site}` rule takes only a server that names a site; it says
        // the site, to be named by.
        let ip = "10.0.0.1".parse().unwrap();
        assert_eq!(
            s.grouping.choose(Some("T1_X"), ip, "h"),
            Choice::RuleSite(0, "T1_X")
        );
        assert_eq!(s.grouping.choose(Some("B"), ip, "h"), Choice::Rule(1));
        assert_eq!(
            s.grouping.choose(Some("C"), ip, "h"),
            Choice::RuleSite(2, "C")
        );
        assert_eq!(s.grouping.choose(None, ip, "h"), Choice::Default);
        assert_eq!(s.grouping.choose(Some(""), ip, "h"), Choice::Default);
    }

    /// A reload keeps the ports bound at the start: each rule gets the
    /// running port with its addresses, whatever its place; a rule with
    /// new addresses none (until a restart), and says so.
    #[test]
    fn a_reload_keeps_the_running_ports() {
        let rule = |name: &str, port: u16| {
            format!(
                "[[cluster]]\nname = \"{name}\"\nsites = [\"{name}\"]\nxml_listen = [\"127.0.0.1:{port}\"]\n"
            )
        };
        let started = from(&format!("{TOP}{}{}", rule("a", 8661), rule("b", 8662))).unwrap();
        let running: Vec<Vec<std::net::SocketAddr>> = started
            .grouping
            .ports()
            .iter()
            .map(|a| a.to_vec())
            .collect();
        // b first now, a on a new port, c new.
        let mut reloaded = from(&format!(
            "{TOP}{}{}{}",
            rule("b", 8662),
            rule("a", 8663),
            rule("c", 8661)
        ))
        .unwrap();
        let waiting = reloaded.grouping.keep_ports(&running);
        let ports: Vec<_> = reloaded.grouping.rules.iter().map(|r| r.port).collect();
        assert_eq!(ports, [Some(1), None, Some(0)]);
        assert_eq!(waiting, ["cluster[1] \"a\""]);
    }
}
