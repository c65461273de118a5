//! One UDP socket's receive queue, asked of the kernel by netlink
//! (`NETLINK_SOCK_DIAG`, `ss`'s interface): the socket that would receive
//! a datagram sent to an address, how many bytes wait in its queue, its
//! buffer's size and its drops.
//!
//! The kernel looks the socket up by address (`udp_dump_one` in
//! `net/ipv4/udp_diag.c`: the same lookup as for an arriving datagram, so a
//! socket bound to the wildcard or a dual-stack IPv6 socket is found for a
//! v4 address), so one question costs the same whatever the number of
//! sockets on the host; reading `/proc/self/net/udp` ([`crate::proc_udp`])
//! costs a line of text per socket (a millisecond with a thousand). It is
//! per network namespace, like /proc/self/net, and needs no privilege.
//!
//! The request is an `inet_diag_req_v2` (`linux/inet_diag.h`) without the
//! dump flag, asking for `INET_DIAG_SKMEMINFO`; the kernel answers with an
//! `inet_diag_msg` and that attribute (`SK_MEMINFO_*` words), or with an
//! error (ENOENT: no socket there).
//!
//! Built here rather than with `netlink-packet-sock-diag` and
//! `netlink-sys` (issue 46): that crate reads `INET_DIAG_SKMEMINFO` only
//! when it has all nine words (its `MemInfo` has `drops` as a plain
//! `u32`, and a shorter attribute, an older kernel's, is a parse error),
//! where here `drops` is None on such a kernel and the queue is still
//! read; and it decodes every attribute of the reply into owned values
//! (a `Vec` of `Nla`s, strings), where here the one attribute wanted is
//! read in place from a reused buffer, before every send of a sender
//! following its gmond. Decided on what the crate offers, read in its
//! source (`src/inet/nlas.rs`); not measured.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

const NETLINK_SOCK_DIAG: libc::c_int = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLMSG_ERROR: u16 = 2;
const NLMSG_HDRLEN: usize = 16;
/// `sizeof(struct inet_diag_req_v2)`.
const REQ_LEN: usize = 56;
/// `sizeof(struct inet_diag_msg)`.
const MSG_LEN: usize = 72;
const INET_DIAG_SKMEMINFO: u16 = 7;
/// Words of `INET_DIAG_SKMEMINFO`: bytes queued, the buffer's size, ...
const SK_MEMINFO_RMEM_ALLOC: usize = 0;
const SK_MEMINFO_RCVBUF: usize = 1;
const SK_MEMINFO_DROPS: usize = 8;

/// What the kernel says of one socket's receive side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvQueue {
    /// Bytes its queued datagrams take (their truesize).
    pub queued: u64,
    /// The buffer's size (SO_RCVBUF as the kernel keeps it: doubled).
    pub capacity: u64,
    pub inode: u64,
    /// Datagrams dropped for a full buffer (None: an older kernel).
    pub drops: Option<u64>,
}

/// A netlink socket to ask on.
pub struct SockDiag {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
}

impl SockDiag {
    pub fn open() -> io::Result<SockDiag> {
        // SAFETY: plain socket(2); the result is checked before use.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                NETLINK_SOCK_DIAG,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let socket = socket2::SockRef::from(&fd);
        // The kernel answers at once; a bound keeps a sender from hanging.
        socket.set_read_timeout(Some(Duration::from_millis(200)))?;
        Ok(SockDiag {
            fd,
            seq: 0,
            buf: vec![0; 8192],
        })
    }

    /// The UDP socket that receives datagrams sent to `to`, or None when
    /// none does (ENOENT).
    pub fn udp_receiver(&mut self, to: SocketAddr) -> io::Result<Option<RecvQueue>> {
        self.seq = self.seq.wrapping_add(1);
        let request = request(to, self.seq);
        // SAFETY: the pointer and length are those of `request`.
        let sent = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                request.as_ptr().cast(),
                request.len(),
                0,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        loop {
            // SAFETY: the pointer and length are those of `self.buf`.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                    0,
                )
            };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            match answer(&self.buf[..n as usize], self.seq) {
                Answer::Other => continue,
                Answer::Found(q) => return Ok(Some(q)),
                Answer::Error(libc::ENOENT) => return Ok(None),
                Answer::Error(e) => return Err(io::Error::from_raw_os_error(e)),
                Answer::Malformed => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "sock_diag: an answer too short to read",
                    ));
                }
            }
        }
    }
}

/// The request: a netlink header and an `inet_diag_req_v2` naming the
/// destination (`idiag_dst`, `idiag_dport`: the lookup takes the request's
/// destination as the receiving socket's address), any source, any state,
/// no cookie.
fn request(to: SocketAddr, seq: u32) -> [u8; NLMSG_HDRLEN + REQ_LEN] {
    let mut r = [0u8; NLMSG_HDRLEN + REQ_LEN];
    r[0..4].copy_from_slice(&((NLMSG_HDRLEN + REQ_LEN) as u32).to_ne_bytes());
    r[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    r[6..8].copy_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    r[8..12].copy_from_slice(&seq.to_ne_bytes());
    let q = &mut r[NLMSG_HDRLEN..];
    let (family, ip) = match to.ip() {
        IpAddr::V4(v4) => {
            let mut b = [0u8; 16];
            b[..4].copy_from_slice(&v4.octets());
            (libc::AF_INET, b)
        }
        IpAddr::V6(v6) => (libc::AF_INET6, v6.octets()),
    };
    q[0] = family as u8;
    q[1] = libc::IPPROTO_UDP as u8;
    q[2] = 1 << (INET_DIAG_SKMEMINFO - 1);
    q[4..8].copy_from_slice(&u32::MAX.to_ne_bytes()); // every state
    // inet_diag_sockid: sport, dport (network order), src, dst, if, cookie.
    q[10..12].copy_from_slice(&to.port().to_be_bytes());
    q[28..44].copy_from_slice(&ip);
    q[48..56].copy_from_slice(&[0xff; 8]); // INET_DIAG_NOCOOKIE
    r
}

enum Answer {
    Found(RecvQueue),
    Error(i32),
    /// Not the answer to this request (an earlier one's, late).
    Other,
    Malformed,
}

fn answer(buf: &[u8], seq: u32) -> Answer {
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(buf.get(at..at + 4)?.try_into().ok()?))
    };
    let half = |at: usize| -> Option<u16> {
        Some(u16::from_ne_bytes(buf.get(at..at + 2)?.try_into().ok()?))
    };
    let (Some(len), Some(kind), Some(got_seq)) = (word(0), half(4), word(8)) else {
        return Answer::Malformed;
    };
    if got_seq != seq {
        return Answer::Other;
    }
    let len = (len as usize).min(buf.len());
    if kind == NLMSG_ERROR {
        return match word(NLMSG_HDRLEN) {
            Some(e) => Answer::Error(-(e as i32)),
            None => Answer::Malformed,
        };
    }
    if kind != SOCK_DIAG_BY_FAMILY {
        return Answer::Other;
    }
    let msg = NLMSG_HDRLEN;
    let (Some(rqueue), Some(inode)) = (word(msg + 56), word(msg + 68)) else {
        return Answer::Malformed;
    };
    let mut q = RecvQueue {
        queued: u64::from(rqueue),
        capacity: 0,
        inode: u64::from(inode),
        drops: None,
    };
    // Attributes: (length, type), payload, padded to 4 bytes.
    let mut at = msg + MSG_LEN;
    while let (Some(alen), Some(atype)) = (half(at), half(at + 2)) {
        let alen = alen as usize;
        if alen < 4 || at + alen > len {
            break;
        }
        if atype == INET_DIAG_SKMEMINFO {
            let mem = |i: usize| {
                (4 + 4 * i + 4 <= alen)
                    .then(|| word(at + 4 + 4 * i))
                    .flatten()
            };
            if let Some(v) = mem(SK_MEMINFO_RMEM_ALLOC) {
                q.queued = u64::from(v);
            }
            q.capacity = mem(SK_MEMINFO_RCVBUF).map_or(0, u64::from);
            q.drops = mem(SK_MEMINFO_DROPS).map(u64::from);
        }
        at += (alen + 3) & !3;
    }
    Answer::Found(q)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    #[test]
    fn finds_a_real_socket_its_queue_and_buffer() {
        let mut diag = SockDiag::open().unwrap();
        let deaf = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = deaf.local_addr().unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..7 {
            tx.send_to(&[0u8; 60], addr).unwrap();
        }
        let q = diag.udp_receiver(addr).unwrap().expect("our socket");
        // Seven small datagrams: 7 x 832 bytes of truesize on Linux 6.x
        // x86_64 (more than 7 x 60 in any case, less than the buffer).
        assert!(q.queued > 420 && q.queued < 20_000, "{q:?}");
        // The kernel's default buffer (net.core.rmem_default), as /proc
        // says it here.
        let default: u64 = std::fs::read_to_string("/proc/sys/net/core/rmem_default")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(q.capacity, default);
        assert_eq!(q.drops, Some(0));
        // The same socket as /proc/self/net/udp lists at that address.
        let text = std::fs::read_to_string(crate::proc_udp::TABLES[0]).unwrap();
        let row = crate::proc_udp::rows(&text)
            .find(|r| r.local == addr)
            .unwrap();
        assert_eq!((q.inode, q.queued), (row.inode, row.rx_queue));
        let mut buf = [0u8; 100];
        for _ in 0..7 {
            deaf.recv(&mut buf).unwrap();
        }
        assert_eq!(diag.udp_receiver(addr).unwrap().unwrap().queued, 0);
        drop(deaf);
        assert_eq!(diag.udp_receiver(addr).unwrap(), None);
    }

    #[test]
    fn finds_the_socket_that_receives_a_v4_address() {
        let mut diag = SockDiag::open().unwrap();
        // Bound to the wildcard.
        let wild = UdpSocket::bind("0.0.0.0:0").unwrap();
        let port = wild.local_addr().unwrap().port();
        let to: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        assert!(diag.udp_receiver(to).unwrap().is_some());
        // A dual-stack IPv6 socket on [::] receives v4 too.
        let dual = socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::DGRAM, None).unwrap();
        dual.set_only_v6(false).unwrap();
        dual.bind(&"[::]:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        let port = dual.local_addr().unwrap().as_socket().unwrap().port();
        for to in [format!("127.0.0.1:{port}"), format!("[::1]:{port}")] {
            let to: SocketAddr = to.parse().unwrap();
            assert!(diag.udp_receiver(to).unwrap().is_some(), "{to}");
        }
    }

    #[test]
    fn short_or_foreign_answers_are_not_read_as_sockets() {
        assert!(matches!(answer(&[1, 2, 3], 1), Answer::Malformed));
        let mut err = [0u8; 20];
        err[0..4].copy_from_slice(&20u32.to_ne_bytes());
        err[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        err[8..12].copy_from_slice(&7u32.to_ne_bytes());
        err[16..20].copy_from_slice(&(-libc::ENOENT).to_ne_bytes());
        assert!(matches!(answer(&err, 7), Answer::Error(libc::ENOENT)));
        assert!(matches!(answer(&err, 8), Answer::Other));
        // A found socket cut short of its inet_diag_msg.
        let mut short = [0u8; 40];
        short[0..4].copy_from_slice(&40u32.to_ne_bytes());
        short[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        short[8..12].copy_from_slice(&9u32.to_ne_bytes());
        assert!(matches!(answer(&short, 9), Answer::Malformed));
    }
}
