//! What every test and benchmark process needs: free loopback ports and
//! scratch directories.

use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A free loopback port (UDP and TCP, IPv4 and IPv6), never the same one
/// twice in one process. Taken from the 12,000 ports below the kernel's
/// ephemeral range (`ip_local_port_range`), where the kernel never picks a
/// port by itself: between this probe and a daemon's bind, no socket bound
/// to port 0 and no outgoing connection (ours, gmond's, xrootd's) can take
/// it. Each process starts at its own place in that range, so two test
/// runs at once stay apart too.
pub fn free_port() -> u16 {
    use std::net::{Ipv4Addr, Ipv6Addr, TcpListener};
    use std::sync::atomic::AtomicU32;
    const SPAN: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .filter(|&low| low > SPAN + 1024)
        .unwrap_or(32_768);
    let first = low - SPAN;
    let _ = NEXT.compare_exchange(
        u32::MAX,
        std::process::id().wrapping_mul(7919) % SPAN,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    let v6 = UdpSocket::bind((Ipv6Addr::LOCALHOST, 0)).is_ok();
    for _ in 0..SPAN {
        let port = (first + NEXT.fetch_add(1, Ordering::Relaxed) % SPAN) as u16;
        let free = UdpSocket::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
            && TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
            && (!v6
                || (UdpSocket::bind((Ipv6Addr::LOCALHOST, port)).is_ok()
                    && TcpListener::bind((Ipv6Addr::LOCALHOST, port)).is_ok()));
        if free {
            return port;
        }
    }
    panic!("no free loopback port in {first}..{low}");
}

/// A scratch directory removed on drop, unless `X2G_KEEP_SCRATCH` is set
/// (to look at a failed test's daemons' files and logs afterwards).
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "x2g-{tag}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        Scratch(dir)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::env::var_os("X2G_KEEP_SCRATCH").is_some() {
            eprintln!("kept {}", self.0.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
