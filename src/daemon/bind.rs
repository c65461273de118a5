//! Binding the daemon's sockets, in one place: IPv6 sockets are v6-only so
//! `0.0.0.0:P` and `[::]:P` can both be bound, as separate sockets; the
//! control socket is made readable by the service's group.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

use socket2::{Domain, Protocol, Socket, Type};

use super::control::ControlListener;

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

/// Where gmetad polls for gmond's XML (`xml_listen`): bound, not listening
/// yet (connections are refused until the port can answer: the XML port
/// listens, [`super::xml_port::Warmup`], with [`XML_BACKLOG`]).
pub fn xml(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let socket = socket(addr, Type::STREAM, Protocol::TCP)?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// The XML port's accept queue, once it listens. A long one: a burst of
/// other connections (a thousand that connect at once) must not fill it,
/// or the kernel drops gmetad's SYN and its connect waits for a
/// retransmission, seconds (capped by `net.core.somaxconn`, 4096 by
/// default since Linux 5.4).
pub const XML_BACKLOG: i32 = 4096;

/// Where the peer gateway exchanges state (`peer_listen`).
pub fn peer(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let socket = socket(addr, Type::STREAM, Protocol::TCP)?;
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(16)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// Where `xrd2ganglia status` asks (`control_socket`): a Unix socket at
/// `path`, mode 0660 (root and the service's group; the unit's umask
/// would leave 0600). A socket left at `path` by a gateway that did not
/// stop cleanly (nothing answers on it) is replaced; one another gateway
/// answers on, or anything but a socket, is not. `make_dir`: its
/// directory is made (0750) if missing, as the unit's
/// `RuntimeDirectory=` would.
pub fn control(path: &Path, make_dir: bool) -> io::Result<ControlListener> {
    if make_dir && let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o750)
            .create(dir)?;
        ours(dir)?;
    }
    let listener = match UnixListener::bind(path) {
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => {
            replace_stale(path, e)?;
            UnixListener::bind(path)?
        }
        r => r?,
    };
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o660))?;
    listener.set_nonblocking(true)?;
    let m = std::fs::symlink_metadata(path)?;
    Ok(ControlListener {
        listener: Some(listener),
        path: path.to_path_buf(),
        id: (m.dev(), m.ino()),
    })
}

/// A control socket's directory the gateway made, or found made (under
/// /tmp anyone may have): a directory, not a link, of this user's or
/// root's (or this user is root), that no other user may write to (a
/// directory another user could write to would let them put their own
/// socket where `status` asks).
fn ours(dir: &Path) -> io::Result<()> {
    let m = std::fs::symlink_metadata(dir)?;
    // SAFETY: geteuid(2) only reads the calling process's credentials.
    let me = unsafe { libc::geteuid() };
    let why = if !m.is_dir() {
        "not a directory"
    } else if m.uid() != me && m.uid() != 0 && me != 0 {
        "another user's directory"
    } else if m.mode() & 0o002 != 0 {
        "a directory any user may write to"
    } else {
        return Ok(());
    };
    Err(io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("{}: {why}", dir.display()),
    ))
}

/// Removes the socket at `path` if nothing answers on it; else `in_use`,
/// or why not.
fn replace_stale(path: &Path, in_use: io::Error) -> io::Result<()> {
    let is_socket = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket());
    if !is_socket {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "the path exists and is not a socket",
        ));
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            "another gateway answers on it",
        )),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => std::fs::remove_file(path),
        Err(_) => Err(in_use),
    }
}
