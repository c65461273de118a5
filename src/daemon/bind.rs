//! Binding the daemon's sockets, in one place: IPv6 sockets are v6-only so
//! `0.0.0.0:P` and `[::]:P` can both be bound, as separate sockets.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use socket2::{Domain, Protocol, Socket, Type};

/// A socket of `kind` for `addr`'s family (v6-only for IPv6).
fn socket(addr: SocketAddr, kind: Type, protocol: Protocol) -> io::Result<Socket> {
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let socket = Socket::new(domain, kind, Some(protocol))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    Ok(socket)
}

/// Where xrd.report datagrams arrive: SO_RCVBUF is raised to absorb
/// bursts (best effort: the kernel caps it at net.core.rmem_max).
pub fn reports(addr: SocketAddr, recv_buffer: usize) -> io::Result<std::net::UdpSocket> {
    let socket = socket(addr, Type::DGRAM, Protocol::UDP)?;
    let _ = socket.set_recv_buffer_size(recv_buffer);
    socket.bind(&addr.into())?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// The receive buffer `socket` got, in the bytes `SO_RCVBUF` was asked
/// for: Linux reports twice what it grants (the other half is its
/// bookkeeping, socket(7)), and grants at most net.core.rmem_max.
pub fn recv_buffer_got(socket: &std::net::UdpSocket) -> io::Result<usize> {
    let reported = socket2::SockRef::from(socket).recv_buffer_size()?;
    Ok(if cfg!(target_os = "linux") {
        reported / 2
    } else {
        reported
    })
}

/// Where gmond's metadata requests arrive (`metadata_requests`): a
/// multicast group is joined (on the kernel's default interface) with the
/// address and port shared, as gmond itself binds it; any other address is
/// bound as it is.
pub fn requests(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    let socket = socket(addr, Type::DGRAM, Protocol::UDP)?;
    match addr.ip() {
        IpAddr::V4(group) if group.is_multicast() => {
            socket.set_reuse_address(true)?;
            socket.set_reuse_port(true)?;
            socket.join_multicast_v4(&group, &Ipv4Addr::UNSPECIFIED)?;
            socket.bind(&addr.into())?;
        }
        IpAddr::V6(group) if group.is_multicast() => {
            socket.set_reuse_address(true)?;
            socket.set_reuse_port(true)?;
            socket.join_multicast_v6(&group, 0)?;
            socket.bind(&SocketAddr::from((Ipv6Addr::UNSPECIFIED, addr.port())).into())?;
        }
        _ => socket.bind(&addr.into())?,
    }
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Where gmetad polls for gmond's XML (`xml_listen`).
pub fn xml(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let socket = socket(addr, Type::STREAM, Protocol::TCP)?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(128)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}
