//! gmond's metadata requests (gmetadata_request, packet 136).
//!
//! A gmond that gets a value for a metric it has no metadata for (it was
//! restarted, or dropped the metric) keeps the value unshown and sends a
//! 136 naming the metric on its own send channels (`gmond/gmond.c`). Stock
//! Ganglia answers them only for gmond's own metrics; a gmetric-style
//! sender is left alone until its next metadata, a `metadata_interval`
//! later. The gateway listens where those requests go (`metadata_requests`:
//! a unicast address, or the multicast group gmond sends to, joined with
//! the port shared) and answers with every metadata of the host asked
//! about at once, at most once per source per [`ANSWER_HOLDOFF`].
//!
//! Everything else arriving there (other gmonds' metric packets on a
//! multicast channel, garbage) is ignored; only a well-formed 136 counts.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};

use crate::events::{Counters, Events};
use crate::ganglia::xdr::{self, Packet};

/// A source answers at most one request in this long: a restarted gmond
/// asks once per value it cannot show, and one answer covers them all.
pub const ANSWER_HOLDOFF: Duration = Duration::from_secs(5);

/// Requests waiting for a receive task; past this, new ones are dropped
/// (one answer covers a whole host, so nothing is lost that matters).
pub const QUEUE: usize = 1024;

/// A gmond that asks after this long without a request was (re)started:
/// it has lost every metric's metadata, not only the one it names.
pub const QUIET: Duration = Duration::from_secs(10);

/// What the receive tasks are asked to answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ask {
    /// One metric gmond asked about (its whole host is answered).
    Metric(Request),
    /// Every host: gmond asked after a quiet spell, so it was restarted
    /// and lost them all. Hosts that have not reported since cannot make
    /// it ask; without this they would stay invisible until their next
    /// report (with their last values) or metadata (without).
    Everything,
}

/// One request: the metric_id gmond asked about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The spoof string (`ip:name`) the value came with.
    pub host: String,
    pub name: String,
}

/// Binds a socket where requests arrive: a multicast group is joined (on
/// the kernel's default interface) with the address and port shared, as
/// gmond itself binds it; any other address is bound as it is.
pub fn bind(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let socket = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    if addr.ip().is_multicast() {
        socket.set_reuse_address(true)?;
        socket.set_reuse_port(true)?;
        match addr.ip() {
            IpAddr::V4(group) => {
                socket.join_multicast_v4(&group, &Ipv4Addr::UNSPECIFIED)?;
                socket.bind(&SocketAddr::from((group, addr.port())).into())?;
            }
            IpAddr::V6(group) => {
                socket.set_only_v6(true)?;
                socket.join_multicast_v6(&group, 0)?;
                socket.bind(&SocketAddr::from((Ipv6Addr::UNSPECIFIED, addr.port())).into())?;
            }
        }
    } else {
        if addr.is_ipv6() {
            socket.set_only_v6(true)?;
        }
        socket.bind(&addr.into())?;
    }
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Reads requests from `socket` and hands each to every receive task (each
/// owns some sources; the one that knows the host answers).
pub async fn listen(
    socket: std::net::UdpSocket,
    tasks: Vec<mpsc::Sender<Ask>>,
    counters: Arc<Counters>,
    log_interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let Ok(socket) = UdpSocket::from_std(socket) else {
        return;
    };
    let mut events = Events::new(&counters, log_interval);
    let mut buf = vec![0u8; 2048];
    let mut last_request: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            r = socket.recv_from(&mut buf) => match r {
                Ok((n, from)) => match parse(&buf[..n]) {
                    Some(request) => {
                        // Only a spoofed host can be one of ours.
                        let ours = spoof_ip(&request.host).is_some();
                        let now = Instant::now();
                        let quiet = ours && last_request.is_none_or(|t| now.duration_since(t) >= QUIET);
                        if ours {
                            last_request = Some(now);
                        }
                        for t in &tasks {
                            if quiet {
                                let _ = t.try_send(Ask::Everything);
                            }
                            let _ = t.try_send(Ask::Metric(request.clone()));
                        }
                    }
                    None => events.not_a_request(from, n),
                },
                Err(e) => events.receive_failed(socket.local_addr().unwrap_or(from_unknown()), &e),
            },
        }
    }
}

fn from_unknown() -> SocketAddr {
    SocketAddr::from(([0, 0, 0, 0], 0))
}

/// A well-formed 136 for a spoofed host, else None.
pub fn parse(datagram: &[u8]) -> Option<Request> {
    if datagram.get(..4) != Some(&[0, 0, 0, 136]) {
        return None;
    }
    match xdr::decode(datagram).ok()? {
        Packet::Request { id } => Some(Request {
            host: id.host.into_owned(),
            name: id.name.into_owned(),
        }),
        _ => None,
    }
}

/// The sender address a spoof string's IP part stands for (see
/// [`crate::mapping::ip_text`]: IPv6 is written with `-` for `:`).
pub fn spoof_ip(host: &str) -> Option<IpAddr> {
    let ip = host.split_once(':').map_or(host, |(ip, _)| ip);
    if let Ok(v4) = ip.parse::<Ipv4Addr>() {
        return Some(IpAddr::V4(v4));
    }
    ip.replace('-', ":")
        .parse::<Ipv6Addr>()
        .ok()
        .map(IpAddr::V6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ganglia::xdr::MetricId;

    #[test]
    fn reads_requests_and_nothing_else() {
        let mut out = Vec::new();
        let id = MetricId::new("10.0.0.1:ds1.example.org", "xrootd.link.in", true);
        xdr::encode(&mut out, &Packet::Request { id: id.clone() });
        assert_eq!(
            parse(&out),
            Some(Request {
                host: "10.0.0.1:ds1.example.org".into(),
                name: "xrootd.link.in".into()
            })
        );
        assert_eq!(parse(&out[..out.len() - 1]), None);
        let mut value = Vec::new();
        xdr::encode(&mut value, &Packet::string_value(id, "5"));
        assert_eq!(parse(&value), None);
        assert_eq!(parse(b""), None);
    }

    #[test]
    fn spoof_ips_map_back_to_senders() {
        assert_eq!(spoof_ip("10.0.0.1:h"), Some("10.0.0.1".parse().unwrap()));
        assert_eq!(
            spoof_ip("2001-db8--7:h.example.org"),
            Some("2001:db8::7".parse().unwrap())
        );
        assert_eq!(spoof_ip("myhost"), None);
    }
}
