//! Where packets go: UDP send channels to gmond, unicast or multicast.
//!
//! Each channel is a non-blocking UDP socket connected to its target, so a
//! send never waits: a gmond that is down (ECONNREFUSED on the next send),
//! a full socket buffer (EAGAIN) or an unreachable network is an error the
//! caller counts, never a stall of the receive path.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs, UdpSocket};

use socket2::{Domain, Protocol, Socket, Type};

use super::gmond_conf::UdpSendChannel;

/// A send channel as configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelSpec {
    /// Host name or address (unicast) or multicast group.
    pub host: String,
    pub port: u16,
    /// Multicast TTL (hops); ignored for unicast.
    pub ttl: u32,
    /// Multicast interface: a name (`eth0`) or an address.
    pub mcast_if: Option<String>,
    /// Local address to send from.
    pub bind: Option<IpAddr>,
}

impl ChannelSpec {
    pub fn unicast(host: &str, port: u16) -> ChannelSpec {
        ChannelSpec {
            host: host.to_string(),
            port,
            ttl: 1,
            mcast_if: None,
            bind: None,
        }
    }

    /// From gmond.conf's `udp_send_channel`, as gmond and gmetric read it:
    /// `mcast_join` is the destination group (nothing is joined), else
    /// `host`, else loopback; `bind` or `bind_hostname` (this host's name,
    /// resolved) is the source address; both together are an error.
    pub fn from_gmond(ch: &UdpSendChannel) -> Result<ChannelSpec, String> {
        let host = ch
            .mcast_join
            .clone()
            .or_else(|| ch.host.clone())
            .unwrap_or_else(|| "127.0.0.1".to_string());
        if ch.bind.is_some() && ch.bind_hostname {
            return Err("udp_send_channel: bind and bind_hostname are mutually exclusive, both parameters can't be specified for the same udp_send_channel".into());
        }
        let bind = match &ch.bind {
            Some(b) => Some(
                b.parse()
                    .map_err(|_| format!("udp_send_channel bind {b:?} is not an IP address"))?,
            ),
            None if ch.bind_hostname => {
                let name = super::local_hostname();
                let addr = (name.as_str(), 0)
                    .to_socket_addrs()
                    .ok()
                    .and_then(|mut a| a.next())
                    .ok_or_else(|| format!("udp_send_channel bind_hostname: cannot resolve this host's name {name:?}"))?;
                Some(addr.ip())
            }
            None => None,
        };
        Ok(ChannelSpec {
            host,
            port: ch.port,
            ttl: ch.ttl,
            mcast_if: ch.mcast_if.clone(),
            bind,
        })
    }

    /// "HOST:PORT" as given on the command line.
    pub fn parse_host_port(s: &str) -> Result<ChannelSpec, String> {
        let (host, port) = s
            .rsplit_once(':')
            .ok_or_else(|| format!("{s:?} is not HOST:PORT"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port: u16 = port
            .parse()
            .map_err(|_| format!("{s:?}: {port:?} is not a port number"))?;
        if host.is_empty() || port == 0 {
            return Err(format!("{s:?} is not HOST:PORT"));
        }
        Ok(ChannelSpec::unicast(host, port))
    }
}

impl fmt::Display for ChannelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)?;
        } else {
            write!(f, "{}:{}", self.host, self.port)?;
        }
        if let Ok(ip) = self.host.parse::<IpAddr>()
            && ip.is_multicast()
        {
            write!(f, " (multicast, ttl {}", self.ttl)?;
            if let Some(i) = &self.mcast_if {
                write!(f, ", interface {i}")?;
            }
            write!(f, ")")?;
        }
        Ok(())
    }
}

/// How a datagram went out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    Ok,
    /// Handed to the kernel, but an earlier datagram was refused: nothing
    /// listens at the target (yet).
    AfterRefusal,
}

/// An open channel.
#[derive(Debug)]
pub struct SendChannel {
    socket: UdpSocket,
    target: SocketAddr,
    label: String,
}

impl SendChannel {
    /// Resolves the target and opens a connected non-blocking socket.
    pub fn open(spec: &ChannelSpec) -> io::Result<SendChannel> {
        let target = (spec.host.as_str(), spec.port)
            .to_socket_addrs()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot resolve {}: {e}", spec.host)))?
            .next()
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{} has no address", spec.host),
                )
            })?;
        let domain = if target.is_ipv4() {
            Domain::IPV4
        } else {
            Domain::IPV6
        };
        let socket = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
        if let Some(bind) = spec.bind {
            socket.bind(&SocketAddr::new(bind, 0).into())?;
        }
        match target.ip() {
            IpAddr::V4(group) if group.is_multicast() => {
                socket.set_multicast_ttl_v4(spec.ttl)?;
                if let Some(name) = &spec.mcast_if {
                    socket.set_multicast_if_v4(&interface_v4(name)?)?;
                }
            }
            IpAddr::V6(group) if group.is_multicast() => {
                socket.set_multicast_hops_v6(spec.ttl)?;
                if let Some(name) = &spec.mcast_if {
                    socket.set_multicast_if_v6(interface_index(name)?)?;
                }
            }
            _ => {}
        }
        socket.connect(&target.into())?;
        socket.set_nonblocking(true)?;
        Ok(SendChannel {
            socket: socket.into(),
            target,
            label: spec.to_string(),
        })
    }

    /// Sends one datagram without waiting.
    ///
    /// On a connected UDP socket an ICMP "port unreachable" for an earlier
    /// datagram (gmond not listening) fails the *next* send with
    /// ECONNREFUSED, and that datagram is not sent. It is retried once, so a
    /// datagram is lost only if the kernel refuses it twice; the refusal is
    /// still reported, as [`Sent::AfterRefusal`].
    pub fn send(&self, packet: &[u8]) -> io::Result<Sent> {
        match self.socket.send(packet) {
            Ok(_) => Ok(Sent::Ok),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                self.socket.send(packet).map(|_| Sent::AfterRefusal)
            }
            Err(e) => Err(e),
        }
    }

    /// Sends every packet, [`SENDMMSG_BATCH`] per system call (sendmmsg),
    /// with the same retry as [`send`](Self::send). `report` hears every
    /// packet that was refused once or not sent, in order.
    pub fn send_all(&self, packets: &[&[u8]], mut report: impl FnMut(io::Result<Sent>)) {
        let mut rest = packets;
        while !rest.is_empty() {
            match send_mmsg(&self.socket, rest) {
                Ok(n) if n > 0 => rest = &rest[n..],
                Ok(_) => {
                    report(Err(io::Error::other("sendmmsg sent nothing")));
                    rest = &rest[1..];
                }
                // The refusal was for an earlier datagram: retry this one once.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    report(self.socket.send(rest[0]).map(|_| Sent::AfterRefusal));
                    rest = &rest[1..];
                }
                Err(e) => {
                    report(Err(e));
                    rest = &rest[1..];
                }
            }
        }
    }

    pub fn target(&self) -> SocketAddr {
        self.target
    }

    pub fn label(&self) -> &str {
        &self.label
    }
}

/// Packets per sendmmsg call: a record's values in one or two calls.
pub const SENDMMSG_BATCH: usize = 64;

/// One sendmmsg(2) of up to [`SENDMMSG_BATCH`] packets on a connected
/// socket: how many were sent (the first `n`), or the error of the first.
fn send_mmsg(socket: &UdpSocket, packets: &[&[u8]]) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    let n = packets.len().min(SENDMMSG_BATCH);
    // SAFETY: all-zero iovec and mmsghdr are valid values (null pointers,
    // zero lengths, no address, no control data).
    let mut iov: [libc::iovec; SENDMMSG_BATCH] = unsafe { std::mem::zeroed() };
    let mut msgs: [libc::mmsghdr; SENDMMSG_BATCH] = unsafe { std::mem::zeroed() };
    for (i, p) in packets.iter().take(n).enumerate() {
        iov[i].iov_base = p.as_ptr() as *mut libc::c_void;
        iov[i].iov_len = p.len();
        msgs[i].msg_hdr.msg_iov = &mut iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    // SAFETY: the first `n` headers each point to one iovec that borrows a
    // packet; iov, msgs and packets outlive the call, which only reads them
    // (and writes msg_len).
    let sent = unsafe {
        libc::sendmmsg(
            socket.as_raw_fd(),
            msgs.as_mut_ptr(),
            n as u32,
            libc::MSG_DONTWAIT,
        )
    };
    if sent < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(sent as usize)
    }
}

/// IPv4 address of a multicast interface given by address or name.
fn interface_v4(name: &str) -> io::Result<Ipv4Addr> {
    if let Ok(ip) = name.parse::<Ipv4Addr>() {
        return Ok(ip);
    }
    if_addrs::get_if_addrs()?
        .into_iter()
        .find_map(|i| match i.ip() {
            IpAddr::V4(v4) if i.name == name => Some(v4),
            _ => None,
        })
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no IPv4 interface named {name:?}"),
            )
        })
}

/// Index of an interface given by name (or by number).
fn interface_index(name: &str) -> io::Result<u32> {
    if let Ok(i) = name.parse::<u32>() {
        return Ok(i);
    }
    if let Ok(ip) = name.parse::<Ipv6Addr>() {
        return if_addrs::get_if_addrs()?
            .into_iter()
            .find(|i| i.ip() == IpAddr::V6(ip))
            .and_then(|i| i.index)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("no interface with address {name}"),
                )
            });
    }
    if_addrs::get_if_addrs()?
        .into_iter()
        .find(|i| i.name == name)
        .and_then(|i| i.index)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("no interface named {name:?}"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_host_port() {
        assert_eq!(
            ChannelSpec::parse_host_port("127.0.0.1:8649").unwrap(),
            ChannelSpec::unicast("127.0.0.1", 8649)
        );
        assert_eq!(
            ChannelSpec::parse_host_port("[::1]:8650").unwrap(),
            ChannelSpec::unicast("::1", 8650)
        );
        assert_eq!(
            ChannelSpec::parse_host_port("gmond:1").unwrap().host,
            "gmond"
        );
        for bad in ["nohost", "h:", "h:x", ":1", "h:0", "h:70000"] {
            assert!(ChannelSpec::parse_host_port(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sends_to_a_unicast_listener_and_survives_none() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = rx.local_addr().unwrap().port();
        let ch = SendChannel::open(&ChannelSpec::unicast("127.0.0.1", port)).unwrap();
        ch.send(b"hello").unwrap();
        let mut buf = [0u8; 16];
        let (n, _) = rx.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello");
        assert_eq!(ch.send(b"again").unwrap(), Sent::Ok);
        let (n, _) = rx.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"again");
        // No listener: the refusal is reported, every datagram still goes out.
        let port = rx.local_addr().unwrap().port();
        drop(rx);
        let mut refused = 0;
        for _ in 0..5 {
            if ch.send(b"x").unwrap() == Sent::AfterRefusal {
                refused += 1;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(refused >= 1, "ECONNREFUSED never reported");
        // A listener that comes back gets the very next datagram.
        let rx = UdpSocket::bind(("127.0.0.1", port)).unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        ch.send(b"back").unwrap();
        let (n, _) = rx.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"back");
    }

    #[test]
    fn send_all_batches_in_order_and_retries_a_refusal() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        let port = rx.local_addr().unwrap().port();
        let ch = SendChannel::open(&ChannelSpec::unicast("127.0.0.1", port)).unwrap();
        // More than two sendmmsg batches, each packet a different length.
        let packets: Vec<Vec<u8>> = (0..SENDMMSG_BATCH * 2 + 7)
            .map(|i| vec![i as u8; 1 + i % 300])
            .collect();
        let refs: Vec<&[u8]> = packets.iter().map(Vec::as_slice).collect();
        let mut problems = 0;
        ch.send_all(&refs, |_| problems += 1);
        assert_eq!(problems, 0);
        let mut buf = [0u8; 512];
        for p in &packets {
            let n = rx.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], p.as_slice());
        }
        // Nobody listening: refusals are reported, and every packet a
        // refusal hit was sent again (none is reported lost).
        drop(rx);
        let (mut refused, mut failed) = (0, 0);
        for _ in 0..5 {
            ch.send_all(&refs[..3], |r| match r {
                Ok(Sent::AfterRefusal) => refused += 1,
                Ok(Sent::Ok) => {}
                Err(_) => failed += 1,
            });
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(refused >= 1, "ECONNREFUSED never reported");
        assert_eq!(failed, 0);
    }

    #[test]
    fn multicast_channel_sets_ttl_and_interface() {
        let spec = ChannelSpec {
            host: "239.2.11.71".into(),
            port: 8649,
            ttl: 3,
            mcast_if: Some("lo".into()),
            bind: None,
        };
        // Opening does not send anything.
        let ch = SendChannel::open(&spec).unwrap();
        assert_eq!(ch.target(), "239.2.11.71:8649".parse().unwrap());
        assert_eq!(
            ch.label(),
            "239.2.11.71:8649 (multicast, ttl 3, interface lo)"
        );
        // What the kernel holds for the socket, not what the label says.
        let sock = socket2::SockRef::from(&ch.socket);
        assert_eq!(sock.multicast_ttl_v4().unwrap(), 3);
        assert_eq!(
            sock.multicast_if_v4().unwrap(),
            std::net::Ipv4Addr::LOCALHOST
        );
        let default = SendChannel::open(&ChannelSpec {
            ttl: 1,
            mcast_if: None,
            ..spec.clone()
        })
        .unwrap();
        let sock = socket2::SockRef::from(&default.socket);
        assert_eq!(sock.multicast_ttl_v4().unwrap(), 1);
        assert_eq!(
            sock.multicast_if_v4().unwrap(),
            std::net::Ipv4Addr::UNSPECIFIED
        );
        assert!(
            SendChannel::open(&ChannelSpec {
                mcast_if: Some("no-such-if0".into()),
                ..spec
            })
            .is_err()
        );
    }
}
