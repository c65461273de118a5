//! A gmond on the gateway's own host: how full its receive queue is.
//!
//! gmond reads its UDP socket in one thread and stops reading while it
//! writes its XML for gmetad: at a site's load (37 MB of XML) that is a
//! second or more every poll, while the socket's stock buffer holds about
//! 250 small datagrams. Whatever the average rate, packets sent then are
//! dropped. The kernel says how full that socket is, so a sender to a
//! gmond on this host can hold its packets while gmond does not read, and
//! send them as soon as it does: [`super::sender`] keeps the queue below
//! [`hold_at`] its buffer.
//!
//! The kernel is asked by netlink ([`crate::sock_diag`]: one lookup by
//! address, whatever the number of sockets on the host, and the buffer's
//! real size), or where that is not answered (a kernel without UDP
//! sock_diag), by reading `/proc/self/net/udp` and `udp6`
//! ([`crate::proc_udp`]: a line per socket of the host, the buffer taken
//! to be Linux's default). Either works where the target is an address of
//! this host in the gateway's network namespace. Elsewhere (a gmond on
//! another host, a multicast group, a container of its own) the sender
//! paces by its token bucket alone.

use std::net::{IpAddr, SocketAddr, UdpSocket};

use crate::proc_udp::{self, TableReader, UdpRow};
use crate::sock_diag::SockDiag;

/// The sender keeps gmond's receive queue below this share of its buffer
/// (in bytes): of a stock gmond's 212,992, 127,794, leaving about 100
/// small datagrams of room for what other senders (gmond's own metrics,
/// other gmonds) put there between two readings.
pub fn hold_at(capacity: u64) -> u64 {
    capacity / 5 * 3
}

/// Linux's default receive buffer (`net.core.rmem_default`), which a gmond
/// without `buffer` keeps: taken as gmond's where /proc is read (it does
/// not show the size).
pub const DEFAULT_RCVBUF: u64 = 212_992;

/// Bytes one token (a value packet) takes in a receive queue: a small
/// datagram's truesize is 832 bytes on Linux 6.x x86_64, a metadata
/// packet's (200-600 bytes long, two tokens) 1,280.
pub const BYTES_PER_TOKEN: u64 = 1024;

/// Fewer tokens of room than this is "full": the sender waits for gmond to
/// read rather than send a handful of packets per question to the kernel
/// (fewer for a buffer too small to hold this many).
pub const MIN_ROOM: usize = 16;

/// How full gmond's receive queue is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Level {
    /// Bytes waiting.
    pub queued: u64,
    /// The buffer's size.
    pub capacity: u64,
}

impl Level {
    /// Tokens that may go now without filling gmond's queue past
    /// [`hold_at`] its buffer (at most `chunk`), or None: gmond's queue is
    /// full, wait for it to read. An unknown buffer size (0) is taken as
    /// Linux's default; a tiny one still lets one packet through at a time.
    pub fn room(&self, chunk: usize) -> Option<usize> {
        let capacity = if self.capacity > 0 {
            self.capacity
        } else {
            DEFAULT_RCVBUF
        };
        let hold = hold_at(capacity).max(BYTES_PER_TOKEN);
        let room = (hold.saturating_sub(self.queued) / BYTES_PER_TOKEN) as usize;
        let enough = MIN_ROOM.min((hold / BYTES_PER_TOKEN) as usize);
        (room >= enough).then_some(room.min(chunk))
    }
}

/// The receive queue of the gmond at one address of this host.
pub struct GmondQueue {
    target: SocketAddr,
    reader: Reader,
}

enum Reader {
    Netlink(SockDiag),
    Proc {
        /// The tables its socket can be in: a v4 address's gmond may hold
        /// a dual-stack IPv6 socket.
        tables: Vec<TableReader>,
        /// The table that had it last time (read alone while it still does).
        last: Option<usize>,
    },
}

impl GmondQueue {
    /// For a channel's target: the queue to follow, or why there is none
    /// (the sender then paces by its token bucket).
    pub fn for_target(target: SocketAddr) -> Result<GmondQueue, String> {
        let ip = target.ip();
        if ip.is_multicast() {
            return Err("a multicast group: every gmond of the group hears it".into());
        }
        if !is_local(ip) {
            return Err("gmond on another host: its receive queue cannot be seen".into());
        }
        if let Some(diag) = netlink_that_answers() {
            return Ok(GmondQueue {
                target,
                reader: Reader::Netlink(diag),
            });
        }
        let paths: &[&str] = match ip {
            IpAddr::V4(_) => &proc_udp::TABLES,
            IpAddr::V6(_) => &proc_udp::TABLES[1..],
        };
        let mut tables = Vec::new();
        for path in paths {
            match TableReader::open(path) {
                Ok(t) => tables.push(t),
                Err(e) => return Err(format!("cannot read {path}: {e}")),
            }
        }
        Ok(GmondQueue {
            target,
            reader: Reader::Proc { tables, last: None },
        })
    }

    /// How it is read, for the log.
    pub fn source(&self) -> &'static str {
        match (&self.reader, self.target) {
            (Reader::Netlink(_), _) => "asked of the kernel by netlink sock_diag",
            (Reader::Proc { .. }, SocketAddr::V4(_)) => "read in /proc/self/net/udp and udp6",
            (Reader::Proc { .. }, SocketAddr::V6(_)) => "read in /proc/self/net/udp6",
        }
    }

    /// How full gmond's receive queue is now, or None when no socket
    /// listens at the target (gmond is down or restarting) or the kernel
    /// could not be asked.
    pub fn level(&mut self) -> Option<Level> {
        let target = self.target;
        match &mut self.reader {
            Reader::Netlink(diag) => {
                let q = diag.udp_receiver(target).ok()??;
                Some(Level {
                    queued: q.queued,
                    capacity: q.capacity,
                })
            }
            Reader::Proc { tables, last } => {
                let queued = proc_level(tables, last, target)?;
                Some(Level {
                    queued,
                    capacity: DEFAULT_RCVBUF,
                })
            }
        }
    }
}

/// A netlink socket, if the kernel answers UDP sock_diag here (asked of a
/// socket of our own).
fn netlink_that_answers() -> Option<SockDiag> {
    let mut diag = SockDiag::open().ok()?;
    let probe = UdpSocket::bind("127.0.0.1:0").ok()?;
    let at = probe.local_addr().ok()?;
    diag.udp_receiver(at).ok()?.map(|_| diag)
}

/// The bytes queued at the target's socket in the tables, the one that had
/// it last time first.
fn proc_level(
    tables: &mut [TableReader],
    last: &mut Option<usize>,
    target: SocketAddr,
) -> Option<u64> {
    if let Some(i) = *last
        && let Some(level) = level_in(&mut tables[i], target)
    {
        return Some(level);
    }
    *last = None;
    for (i, table) in tables.iter_mut().enumerate() {
        if let Some(level) = level_in(table, target) {
            *last = Some(i);
            return Some(level);
        }
    }
    None
}

/// The fullest socket that would receive the target's datagrams in a
/// table (with SO_REUSEPORT there can be several).
fn level_in(table: &mut TableReader, target: SocketAddr) -> Option<u64> {
    let text = table.read().ok()?;
    proc_udp::rows(text)
        .filter(|r| receives(r, target))
        .map(|r| r.rx_queue)
        .max()
}

/// Whether an address is this host's: loopback, or one of its interfaces'.
fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback() || if_addrs::get_if_addrs().is_ok_and(|ifs| ifs.iter().any(|i| i.ip() == ip))
}

/// Whether the socket of a row receives datagrams sent to `target`: an
/// unconnected socket on its port, bound to its address or to the
/// wildcard (a v4 target: also an IPv6 socket bound to `::` or to the
/// v4-mapped address).
fn receives(row: &UdpRow, target: SocketAddr) -> bool {
    if row.connected || row.local.port() != target.port() {
        return false;
    }
    let local = row.local.ip();
    match (local, target.ip()) {
        (IpAddr::V4(l), IpAddr::V4(t)) => l == t || l.is_unspecified(),
        (IpAddr::V6(l), IpAddr::V6(t)) => l == t || l.is_unspecified(),
        (IpAddr::V6(l), IpAddr::V4(t)) => l.is_unspecified() || l.to_ipv4_mapped() == Some(t),
        (IpAddr::V4(_), IpAddr::V6(_)) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    fn row(local: &str, connected: bool) -> UdpRow {
        UdpRow {
            local: local.parse().unwrap(),
            connected,
            rx_queue: 0,
            inode: 1,
            drops: 0,
        }
    }

    #[test]
    fn the_sockets_that_receive_a_target() {
        let t: SocketAddr = "127.0.0.1:8649".parse().unwrap();
        assert!(receives(&row("127.0.0.1:8649", false), t));
        assert!(receives(&row("0.0.0.0:8649", false), t));
        assert!(receives(&row("[::]:8649", false), t));
        assert!(receives(&row("[::ffff:127.0.0.1]:8649", false), t));
        assert!(!receives(&row("127.0.0.2:8649", false), t));
        assert!(!receives(&row("127.0.0.1:8650", false), t));
        assert!(!receives(&row("127.0.0.1:8649", true), t));
        let t6: SocketAddr = "[::1]:8649".parse().unwrap();
        assert!(receives(&row("[::1]:8649", false), t6));
        assert!(receives(&row("[::]:8649", false), t6));
        assert!(!receives(&row("0.0.0.0:8649", false), t6));
    }

    #[test]
    fn room_keeps_the_queue_below_60_percent_of_the_buffer() {
        let level = |queued, capacity| Level { queued, capacity };
        // A stock gmond's buffer: 127,794 bytes may be queued, 124 tokens.
        assert_eq!(level(0, DEFAULT_RCVBUF).room(256), Some(124));
        assert_eq!(level(0, DEFAULT_RCVBUF).room(100), Some(100));
        assert_eq!(level(100 * 1024, DEFAULT_RCVBUF).room(256), Some(24));
        assert_eq!(level(110 * 1024, DEFAULT_RCVBUF).room(256), None);
        assert_eq!(level(212_992, DEFAULT_RCVBUF).room(256), None);
        // No size known: the default's.
        assert_eq!(level(0, 0).room(256), Some(124));
        // A tiny buffer (4 KiB): two at a time, never stuck.
        assert_eq!(level(0, 4096).room(256), Some(2));
        assert_eq!(level(2048, 4096).room(256), None);
        assert_eq!(level(0, 2304).room(256), Some(1));
        // A big one (buffer = 4194304 gives 8 MiB): a chunk at a time.
        assert_eq!(level(1 << 20, 8 << 20).room(256), Some(256));
    }

    #[test]
    fn only_a_gmond_of_this_host_is_followed() {
        assert!(GmondQueue::for_target("127.0.0.1:8649".parse().unwrap()).is_ok());
        assert!(GmondQueue::for_target("[::1]:8649".parse().unwrap()).is_ok());
        let remote = GmondQueue::for_target("198.51.100.1:8649".parse().unwrap());
        assert_eq!(
            remote.err().unwrap(),
            "gmond on another host: its receive queue cannot be seen"
        );
        let group = GmondQueue::for_target("239.2.11.71:8649".parse().unwrap());
        assert!(group.err().unwrap().starts_with("a multicast group"));
    }

    /// A real socket nobody reads stands for a deaf gmond: its level rises
    /// with what is sent, falls when it reads, and is None once it closes;
    /// by netlink (what this kernel answers) and by /proc alike.
    #[test]
    fn follows_a_real_socket() {
        let gmond = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = gmond.local_addr().unwrap();
        let netlink = GmondQueue::for_target(addr).unwrap();
        assert_eq!(netlink.source(), "asked of the kernel by netlink sock_diag");
        let proc = GmondQueue {
            target: addr,
            reader: Reader::Proc {
                tables: proc_udp::TABLES
                    .iter()
                    .map(|p| TableReader::open(p).unwrap())
                    .collect(),
                last: None,
            },
        };
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut buf = [0u8; 100];
        for mut q in [netlink, proc] {
            assert_eq!(q.level().unwrap().queued, 0);
            for _ in 0..20 {
                tx.send_to(&[0u8; 80], addr).unwrap();
            }
            let full = q.level().unwrap();
            // 20 small datagrams: more than 20 x 80 bytes, at most 20 tokens.
            assert!(
                full.queued > 1600 && full.queued <= 20 * BYTES_PER_TOKEN,
                "{full:?}"
            );
            assert_eq!(full.capacity, DEFAULT_RCVBUF);
            for _ in 0..20 {
                gmond.recv(&mut buf).unwrap();
            }
            assert_eq!(q.level().unwrap().queued, 0);
        }
        let mut q = GmondQueue::for_target(addr).unwrap();
        drop(gmond);
        assert_eq!(q.level(), None);
    }
}
