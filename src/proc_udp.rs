//! The kernel's table of UDP sockets: `/proc/self/net/udp` and `udp6`.
//!
//! One row per socket of this process's network namespace, whoever owns
//! it: its local address, how many bytes wait in its receive queue, its
//! inode and how many datagrams the kernel dropped because that queue was
//! full. The gateway reads it for two things: the drops at its own
//! listening sockets ([`crate::daemon::self_metrics`]), and how full the receive queue
//! of a gmond on its own host is ([`crate::daemon::follow`]).
//!
//! `/proc/self/net` rather than `/proc/net`: the same table (per network
//! namespace), but visible under systemd's `ProcSubset=pid`, which the
//! shipped unit sets and which hides `/proc/net`.
//!
//! The format (`net/ipv4/udp.c`, `udp4_format_sock`; `net/ipv6/datagram.c`,
//! `__ip6_dgram_sock_seq_show`): a header line, then per socket
//! `sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt
//! uid timeout inode ref pointer drops`. Addresses are the raw network-order
//! words printed as native-endian hex (`0100007F:0D05` is 127.0.0.1:3333 on
//! a little-endian machine), the port is plain hex, `rx_queue` is the bytes
//! the queued datagrams take in the socket's buffer (their `truesize`, not
//! their length: about 830 bytes for a small datagram).
//!
//! Parsed here rather than with `procfs` (issue 46): its UDP rows
//! (`UdpNetEntry`, procfs-core's `net.rs`) stop at the inode and have no
//! `drops` column, the figure [`crate::daemon::self_metrics`] reads
//! them for; it makes a `String` per line and a `Vec` of every row where
//! this reads into one reused buffer and yields rows as it goes; and
//! one row it cannot parse fails the whole table, where here a bad line
//! loses only itself. Decided on what the crate offers, read in its
//! source; not measured, since it cannot do the job.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The two tables, IPv4 then IPv6.
pub const TABLES: [&str; 2] = ["/proc/self/net/udp", "/proc/self/net/udp6"];

/// One socket's row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpRow {
    pub local: SocketAddr,
    /// Whether the socket is connected (has a remote address).
    pub connected: bool,
    /// Bytes waiting in its receive queue.
    pub rx_queue: u64,
    pub inode: u64,
    /// Datagrams dropped because the receive queue was full.
    pub drops: u64,
}

/// The rows of one table's text; lines that do not parse are skipped.
pub fn rows(table: &str) -> impl Iterator<Item = UdpRow> + '_ {
    table.lines().skip(1).filter_map(row)
}

fn row(line: &str) -> Option<UdpRow> {
    let mut cols = line.split_ascii_whitespace();
    let _sl = cols.next()?;
    let local = address(cols.next()?)?;
    let (remote_ip, remote_port) = cols.next()?.split_once(':')?;
    let _state = cols.next()?;
    let (_tx, rx) = cols.next()?.split_once(':')?;
    let mut rest = cols.skip(4);
    let inode = rest.next()?.parse().ok()?;
    let drops = rest.last()?.parse().ok()?;
    Some(UdpRow {
        local,
        connected: remote_port != "0000" || remote_ip.bytes().any(|b| b != b'0'),
        rx_queue: u64::from_str_radix(rx, 16).ok()?,
        inode,
        drops,
    })
}

/// `0100007F:0D05` (IPv4) or 32 hex digits and a port (IPv6).
fn address(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |hex: &str| u32::from_str_radix(hex, 16).ok().map(u32::to_ne_bytes);
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(ip)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for (i, chunk) in bytes.chunks_mut(4).enumerate() {
                chunk.copy_from_slice(&word(ip.get(i * 8..i * 8 + 8)?)?);
            }
            IpAddr::V6(Ipv6Addr::from(bytes))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// One table, kept open and read again from the start on each call (a
/// proc file's contents are made at each read; no reopening).
pub struct TableReader {
    file: File,
    text: String,
}

impl TableReader {
    pub fn open(path: &str) -> std::io::Result<TableReader> {
        Ok(TableReader {
            file: File::open(path)?,
            text: String::new(),
        })
    }

    /// The table as it is now.
    pub fn read(&mut self) -> std::io::Result<&str> {
        self.text.clear();
        self.file.seek(SeekFrom::Start(0))?;
        self.file.read_to_string(&mut self.text)?;
        Ok(&self.text)
    }
}

/// `/proc/net/udp` as Linux 6.1 printed it here: its header line, then
/// `rows`, for tests.
#[cfg(test)]
pub(crate) fn v4_table(rows: &[&str]) -> String {
    let mut table = String::from(
        "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n",
    );
    for row in rows {
        table.push_str(row);
        table.push('\n');
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    #[test]
    fn parses_rows_as_the_kernel_prints_them() {
        // Rows as Linux 6.1 printed them here (x86_64, little-endian).
        let v4 = v4_table(&[
            "   1: 0100007F:21C9 00000000:0000 07 00000000:00033CC0 00:00000000 00000000     0        0 4242 2 0000000000000000 5985",
            "   2: 00000000:0D05 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 4343 2 0000000000000000 0",
            "not a row",
        ]);
        let got: Vec<UdpRow> = rows(&v4).collect();
        assert_eq!(got.len(), 2);
        if cfg!(target_endian = "little") {
            assert_eq!(got[0].local, "127.0.0.1:8649".parse().unwrap());
            assert_eq!(got[1].local, "0.0.0.0:3333".parse().unwrap());
        }
        assert_eq!(got[0].rx_queue, 212_160);
        assert_eq!((got[0].inode, got[0].drops), (4242, 5985));
        assert!(!got[0].connected);
        assert!(got[1].connected);
        let v6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
          0: 00000000000000000000000001000000:21C9 00000000000000000000000000000000:0000 07 00000000:00000340 00:00000000 00000000     0        0 77 2 0000000000000000 3\n";
        let got: Vec<UdpRow> = rows(v6).collect();
        assert_eq!(got.len(), 1);
        if cfg!(target_endian = "little") {
            assert_eq!(got[0].local, "[::1]:8649".parse().unwrap());
        }
        assert_eq!((got[0].rx_queue, got[0].drops), (0x340, 3));
    }

    /// Against the kernel itself: a socket nobody reads, with datagrams
    /// waiting, is found by its address with its queue.
    #[test]
    fn finds_a_real_socket_and_its_queue() {
        let deaf = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = deaf.local_addr().unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..10 {
            tx.send_to(&[0u8; 60], addr).unwrap();
        }
        let mut reader = TableReader::open(TABLES[0]).unwrap();
        let row = rows(reader.read().unwrap())
            .find(|r| r.local == addr)
            .expect("our socket in /proc/self/net/udp");
        // Ten small datagrams take between 10 x 60 bytes and the kernel's
        // buffer (212,992 by default) in truesize: 8,320 here.
        assert!(row.rx_queue > 600 && row.rx_queue < 200_000, "{row:?}");
        assert_eq!(row.drops, 0);
        // Read again from the same open file: the queue has emptied.
        let mut buf = [0u8; 100];
        for _ in 0..10 {
            deaf.recv(&mut buf).unwrap();
        }
        let row = rows(reader.read().unwrap())
            .find(|r| r.local == addr)
            .unwrap();
        assert_eq!(row.rx_queue, 0);
    }
}
