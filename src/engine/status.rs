//! What an engine tells `xrd2ganglia status`: its sources, the addresses
//! whose datagrams it rejected, the senders it refused. Read between two
//! datagrams by the receive task that owns the engine, on request: the
//! per-datagram path only notes refused and rejected senders
//! ([`AddressTally`](crate::status::AddressTally)), which it logs anyway.

use std::time::{Instant, SystemTime};

use crate::status::{AddressStatus, DetailedStatus, Heard, SourceStatus, Status};

use super::Engine;

impl Engine {
    /// Its part of the gateway's status at `now` (`wall`: the system
    /// clock then); `cluster`: the cluster of the sources that no rule or
    /// site puts in one of their own, where the gateway names it.
    pub fn status(&self, now: Instant, wall: SystemTime, cluster: Option<&str>) -> Status {
        let heard = |at| Heard::at(at, now, wall);
        let mut sources = Vec::with_capacity(self.sources.len());
        for (ip, s) in self.sources.iter() {
            {
                let (pgm, ins, _) = s.naming().map(|n| n.parts()).unwrap_or_default();
                let (program, instance) = match pgm {
                    Some(p) => (Some(p.to_string()), ins.map(str::to_string)),
                    // A source made by its program's name only.
                    None => split_program(s.program()),
                };
                sources.push(SourceStatus {
                    address: ip,
                    host: Some(s.host().to_string()),
                    program,
                    instance,
                    cluster: s
                        .cluster()
                        .as_ref()
                        .map(|c| c.name.to_string())
                        .or_else(|| cluster.map(str::to_string)),
                    last_heard: heard(s.last_seen()),
                    records: u64::from(s.reports()),
                    errors: self.rejected.count(ip),
                });
            }
        }
        for (ip, count, at) in self.rejected.iter() {
            if !self.sources.has_ip(ip) {
                sources.push(SourceStatus {
                    address: ip,
                    host: None,
                    program: None,
                    instance: None,
                    cluster: None,
                    last_heard: heard(at),
                    records: 0,
                    errors: count,
                });
            }
        }
        let refused = self
            .refused
            .iter()
            .map(|(address, count, at)| AddressStatus {
                address,
                count,
                last_heard: heard(at),
            })
            .collect();
        // Each detailed-stream run, with the host of its summary records
        // (the source its detailed metrics go out with).
        let detailed = self
            .detailed
            .iter()
            .map(|(ip, started, server)| DetailedStatus {
                address: ip,
                started,
                host: self
                    .sources
                    .of_ip(ip)
                    .find(|s| {
                        s.started().is_some_and(|(tos, _)| tos == started)
                            && super::is_xrootd(s.program())
                    })
                    .map(|s| s.host().to_string()),
                last_heard: heard(server.last_heard()),
                logins: server.logins() as u64,
                files_open: server.open_files() as u64,
                lost: server.lost,
            })
            .collect();
        Status {
            sources,
            refused,
            detailed,
            refused_unlisted: self.refused.unlisted,
            ..Status::default()
        }
    }
}

/// `pgm ins` as its two parts.
fn split_program(program: &str) -> (Option<String>, Option<String>) {
    match program.split_once(' ') {
        Some((p, i)) => (Some(p.to_string()), Some(i.to_string())),
        None => (Some(program.to_string()), None),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Instant, SystemTime};

    use crate::engine::tests::Harness;

    fn record(host: &str, site: &str) -> String {
        format!(
            r#"<statistics tod="1700000100" ver="v5.5.3" src="{host}:1094" tos="1" pgm="xrootd" ins="anon" pid="7"{site}><stats id="link"><num>3</num></stats></statistics>"#
        )
    }

    #[test]
    fn each_source_says_its_own_cluster() {
        let mut h = Harness::new("cluster_by_site = true\n");
        h.feed(record("a", r#" site="SITEA""#), "10.0.0.1:1", 0);
        h.feed(record("b", ""), "10.0.0.2:1", 0);
        let status = h
            .engine
            .status(Instant::now(), SystemTime::now(), Some("XRootD"));
        let mut clusters: Vec<(String, Option<String>)> = status
            .sources
            .iter()
            .map(|s| (s.address.to_string(), s.cluster.clone()))
            .collect();
        clusters.sort();
        assert_eq!(
            clusters,
            [
                ("10.0.0.1".to_string(), Some("SITEA".to_string())),
                ("10.0.0.2".to_string(), Some("XRootD".to_string())),
            ]
        );
        // Where the gateway names no cluster (no XML port), a site's is
        // still said.
        let status = h.engine.status(Instant::now(), SystemTime::now(), None);
        let mut named: Vec<Option<String>> =
            status.sources.iter().map(|s| s.cluster.clone()).collect();
        named.sort();
        assert_eq!(named, [None, Some("SITEA".to_string())]);
    }
}
