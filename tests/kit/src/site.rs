//! A site as the gmetad tests run it: the gateway and the real gmetads
//! that poll it (its own XML port, its rules' ports, or other gmetads: a
//! federation, docs/clusters.md), each on loopback ports of its own and
//! stopped by its pid when the site drops.

use super::{Gateway, Gmetad, free_port};

/// What an address of a site's gmetad's `data_source` is.
#[derive(Clone, Copy, Debug)]
pub enum Polls {
    /// The gateway's own XML port (`--xml-listen`).
    Gateway,
    /// A port the gateway's config names (a `[[cluster]]` rule's
    /// `xml_listen`), chosen by the test with `free_port`.
    Port(u16),
    /// The `xml_port` of the site's gmetad number `i`, one started before
    /// this one: a gmetad above others.
    Gmetad(usize),
}

/// One gmetad of a site: its `data_source`s, each a name and what its
/// addresses poll, and more gmetad.conf lines (`gridname`, `authority`,
/// `scalable`).
pub struct GmetadOf<'a> {
    pub sources: Vec<(&'a str, &'a [Polls])>,
    pub extra: &'a str,
}

impl<'a> GmetadOf<'a> {
    /// A gmetad of one data source, named as [`Gmetad::start`] names it,
    /// polling `polls`.
    pub fn polling(polls: &'a [Polls]) -> GmetadOf<'a> {
        GmetadOf {
            sources: vec![(super::gmetad::SOURCE, polls)],
            extra: "",
        }
    }
}

/// The gateway (`--no-send`, an XML port) and its gmetads, in the order
/// they were asked for; all stopped, by pid, when dropped.
pub struct Site {
    pub gateway: Gateway,
    pub gmetads: Vec<Gmetad>,
}

impl Site {
    /// The gateway with `config`, and one gmetad polling its XML port
    /// every `step` seconds (its RRDs' step).
    pub fn start(step: u64, config: &str) -> Site {
        Self::start_with(step, config, &[GmetadOf::polling(&[Polls::Gateway])])
    }

    /// The gmetads of `gmetads`, each polling every `step` seconds, then
    /// the gateway with `config`: a gmetad that finds nothing to poll yet
    /// polls again at its next step.
    pub fn start_with(step: u64, config: &str, gmetads: &[GmetadOf]) -> Site {
        let xml_port = free_port();
        let mut started: Vec<Gmetad> = Vec::new();
        for g in gmetads {
            let ports: Vec<Vec<u16>> = g
                .sources
                .iter()
                .map(|(_, polls)| {
                    polls
                        .iter()
                        .map(|p| match *p {
                            Polls::Gateway => xml_port,
                            Polls::Port(port) => port,
                            Polls::Gmetad(i) => started[i].xml_port,
                        })
                        .collect()
                })
                .collect();
            let sources: Vec<(&str, &[u16])> = g
                .sources
                .iter()
                .zip(&ports)
                .map(|((name, _), ports)| (*name, ports.as_slice()))
                .collect();
            started.push(Gmetad::start_grid(&sources, step, g.extra));
        }
        Site {
            gateway: Gateway::start_xml(free_port(), xml_port, None, config),
            gmetads: started,
        }
    }

    /// The first gmetad (the one [`Site::start`] starts).
    pub fn gmetad(&self) -> &Gmetad {
        &self.gmetads[0]
    }
}
