//! Hostile clients on the XML port (issue 34): gmetad's polls of a
//! gateway holding `servers` hosts (one real record each), first alone,
//! then while `hostile` other connections from gmetad's own address
//! (loopback) sit on the port: half never read, half read a byte a second
//! and connect again when closed. Per phase: each poll's time from
//! connect to the document's last byte (min, median, max), whether it got
//! every host, the gateway's RSS (and its peak), the kernel's TCP memory
//! (/proc/net/sockstat, every socket of the machine: the hostile clients'
//! receive buffers too) and the connections the gateway closed to make
//! room (`xml_evicted`). A third phase (issue 42, item 6): two other
//! loopback addresses (127.0.0.2 and 127.0.0.3) connect and close as fast
//! as `churn` a second, while gmetad's polls come from 127.0.0.1.

use std::io::Read;
use std::net::TcpStream;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use crate::e2e::{self, Fleet};
use crate::gmond::Xml;
use crate::{Records, free_port};

/// A poll of a 500-host document must take at most this long with the
/// hostile clients on the port (docs/gmetad.md).
pub const POLL_TARGET: f64 = 2.0;

#[derive(Clone, Debug, Default)]
pub struct Phase {
    pub hostile: usize,
    /// Connect-and-close from two other addresses, per second (what
    /// the churning threads did).
    pub churn: f64,
    /// Seconds from connect to the last byte, per poll that got the
    /// whole document.
    pub polls: Vec<f64>,
    /// Polls that failed or missed hosts.
    pub failed: usize,
    pub rss_kib: u64,
    pub hwm_kib: u64,
    /// The kernel's TCP memory (every socket), KiB.
    pub tcp_kib: u64,
    pub evicted: Option<u64>,
}

#[derive(Clone, Debug, Default)]
pub struct HostileRun {
    pub servers: usize,
    pub doc_bytes: usize,
    pub phases: Vec<Phase>,
    pub errors: Vec<String>,
}

/// What the kernel's TCP sockets hold, KiB (`mem` of /proc/net/sockstat
/// is in pages).
fn tcp_kib() -> u64 {
    let text = std::fs::read_to_string("/proc/net/sockstat").unwrap_or_default();
    let pages = text
        .lines()
        .find(|l| l.starts_with("TCP:"))
        .and_then(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            let at = words.iter().position(|w| *w == "mem")?;
            words.get(at + 1)?.parse::<u64>().ok()
        })
        .unwrap_or(0);
    // SAFETY: sysconf only reads a system value.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    pages * page / 1024
}

/// One poll: connect, read to the end; the time and the document.
fn poll(port: u16) -> (f64, Result<Xml, String>) {
    let t0 = Instant::now();
    let doc = (|| {
        let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| e.to_string())?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).map_err(|e| format!("read: {e}"))?;
        let text = String::from_utf8_lossy(&buf);
        if !text.ends_with("</GANGLIA_XML>\n") {
            return Err(format!("cut short at {} bytes", buf.len()));
        }
        Xml::parse(&text)
    })();
    (t0.elapsed().as_secs_f64(), doc)
}

/// `servers` hosts, polled `polls` times alone and with `hostile`
/// connections on the port.
pub fn run(bin: &Path, servers: usize, hostile: usize, churn: f64, polls: usize) -> HostileRun {
    let mut out = HostileRun {
        servers,
        ..HostileRun::default()
    };
    // This process holds the hostile connections.
    xrd2ganglia::daemon::xml_port::raise_open_files_limit();
    let records = Records::load(servers);
    let port = free_port();
    let gw = e2e::gateway(
        bin,
        9,
        servers,
        &format!("send = false\nxml_listen = [\"127.0.0.1:{port}\"]"),
    );
    let mut fleet = Fleet::new(&records, gw.addr());
    fleet.burst(Duration::from_secs(1));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match poll(port).1 {
            Ok(doc) if doc.hosts.len() >= servers => {
                out.doc_bytes = doc.bytes;
                break;
            }
            _ if Instant::now() > deadline => {
                out.errors.push(format!(
                    "hostile: {servers} hosts not in the document in 30 s"
                ));
                return out;
            }
            _ => thread::sleep(Duration::from_millis(200)),
        }
    }
    let phase = |hostile: usize| {
        let mut p = Phase {
            hostile,
            ..Phase::default()
        };
        for _ in 0..polls {
            let (took, doc) = poll(port);
            match doc {
                Ok(doc) if doc.hosts.len() >= servers => p.polls.push(took),
                _ => p.failed += 1,
            }
            thread::sleep(Duration::from_millis(500));
        }
        p.rss_kib = gw.status_kib("VmRSS:");
        p.hwm_kib = gw.status_kib("VmHWM:");
        p.tcp_kib = tcp_kib();
        p.evicted = gw.log.last().and_then(|l| l.get("xml_evicted"));
        p
    };
    out.phases.push(phase(0));
    // Half never read; half read a byte a second, and connect again when
    // closed.
    let connect = || TcpStream::connect(("127.0.0.1", port));
    let idle: Vec<TcpStream> = (0..hostile / 2).filter_map(|_| connect().ok()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let slow = {
        let stop = stop.clone();
        let mut conns: Vec<TcpStream> = (0..hostile - hostile / 2)
            .filter_map(|_| connect().ok())
            .collect();
        thread::spawn(move || {
            let mut byte = [0u8; 1];
            while !stop.load(Ordering::Relaxed) {
                for c in conns.iter_mut() {
                    let _ = c.set_nonblocking(true);
                    let closed = match c.read(&mut byte) {
                        Ok(0) => true,
                        Ok(_) => false,
                        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
                    };
                    if closed && let Ok(again) = TcpStream::connect(("127.0.0.1", port)) {
                        *c = again;
                    }
                }
                thread::sleep(Duration::from_secs(1));
            }
        })
    };
    // Every hostile connection accepted and its buffers full.
    thread::sleep(Duration::from_secs(2));
    let mut p = phase(idle.len() + hostile - hostile / 2);
    stop.store(true, Ordering::Relaxed);
    let _ = slow.join();
    drop(idle);
    if p.hostile < hostile {
        out.errors.push(format!(
            "hostile: {} of {hostile} connections opened",
            p.hostile
        ));
    }
    p.hostile = hostile;
    out.phases.push(p);
    if churn > 0.0 {
        let stop = Arc::new(AtomicBool::new(false));
        let began = Instant::now();
        let threads: Vec<_> = ["127.0.0.2", "127.0.0.3", "127.0.0.2", "127.0.0.3"]
            .iter()
            .enumerate()
            .map(|(i, from)| {
                let (stop, from) = (stop.clone(), from.to_string());
                thread::spawn(move || churn_from(&from, port, churn / 4.0, i % 2 == 1, &stop))
            })
            .collect();
        // The flood under way before the first poll.
        thread::sleep(Duration::from_secs(1));
        let mut p = phase(0);
        stop.store(true, Ordering::Relaxed);
        let made: u64 = threads.into_iter().map(|t| t.join().unwrap_or(0)).sum();
        p.churn = made as f64 / began.elapsed().as_secs_f64();
        out.phases.push(p);
    }
    gw.stop();
    out
}

/// Connects from `from` to the gateway's port and closes at once (a reset
/// when `reset`, else a FIN), `rate` times a second (at most: as fast as
/// it can), until `stop`; how many connections it made.
fn churn_from(from: &str, port: u16, rate: f64, reset: bool, stop: &AtomicBool) -> u64 {
    use socket2::{Domain, Socket, Type};
    use std::net::SocketAddr;
    let (Ok(from), Ok(to)) = (
        format!("{from}:0").parse::<SocketAddr>(),
        format!("127.0.0.1:{port}").parse::<SocketAddr>(),
    ) else {
        return 0;
    };
    let began = Instant::now();
    let mut made = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let due = began + Duration::from_secs_f64(made as f64 / rate);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            thread::sleep(wait);
        }
        let Ok(s) = Socket::new(Domain::IPV4, Type::STREAM, None) else {
            continue;
        };
        // The port chosen at connect, by the whole 4-tuple: the closed
        // ones' TIME-WAIT does not run the address out of ports.
        let on = 1i32;
        // SAFETY: setsockopt reads an int of the size given.
        unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&s),
                libc::IPPROTO_IP,
                libc::IP_BIND_ADDRESS_NO_PORT,
                (&on as *const i32).cast(),
                std::mem::size_of::<i32>() as libc::socklen_t,
            );
        }
        if s.bind(&from.into()).is_err() {
            continue;
        }
        if reset {
            let _ = s.set_linger(Some(Duration::ZERO));
        }
        let _ = s.connect(&to.into());
        made += 1;
    }
    made
}

fn figures(polls: &[f64]) -> Option<(f64, f64, f64)> {
    let mut v = polls.to_vec();
    v.sort_by(f64::total_cmp);
    Some((*v.first()?, v[v.len() / 2], *v.last()?))
}

impl HostileRun {
    pub fn print(&self) {
        println!();
        println!(
            "gmetad's polls with hostile clients on the XML port: {} hosts ({} bytes), \
             the other connections from gmetad's own address, half never reading, half \
             reading a byte a second; then (churn) two other addresses connecting and \
             closing at once, gmetad's polls from a third",
            self.servers, self.doc_bytes
        );
        println!(
            "{:>8} {:>7} {:>9} {:>9} {:>9} {:>10} {:>10} {:>12} {:>9}",
            "others",
            "polls",
            "min s",
            "median s",
            "max s",
            "RSS KiB",
            "peak KiB",
            "TCP mem KiB",
            "evicted"
        );
        for p in &self.phases {
            let (min, median, max) = figures(&p.polls).unwrap_or((f64::NAN, f64::NAN, f64::NAN));
            println!(
                "{:>8} {:>7} {:>9.3} {:>9.3} {:>9.3} {:>10} {:>10} {:>12} {:>9}",
                if p.churn > 0.0 {
                    format!("{:.0}/s", p.churn)
                } else {
                    p.hostile.to_string()
                },
                format!(
                    "{}{}",
                    p.polls.len(),
                    if p.failed > 0 {
                        format!(" ({} failed)", p.failed)
                    } else {
                        String::new()
                    }
                ),
                min,
                median,
                max,
                p.rss_kib,
                p.hwm_kib,
                p.tcp_kib,
                p.evicted
                    .map(|e| e.to_string())
                    .unwrap_or_else(|| "-".into()),
            );
        }
        for e in &self.errors {
            println!("  not run: {e}");
        }
    }

    /// Every poll got the whole document; in a full run (`timed`), each
    /// within [`POLL_TARGET`].
    pub fn problems(&self, timed: bool) -> Vec<String> {
        let mut out = self.errors.clone();
        if self.phases.len() < 2 {
            out.push("hostile: not every phase ran".into());
        }
        for p in &self.phases {
            if p.rss_kib == 0 {
                out.push(format!(
                    "hostile: no RSS read with {} other connections",
                    p.hostile
                ));
            }
            if p.failed > 0 || p.polls.is_empty() {
                out.push(format!(
                    "hostile: with {} other connections ({:.0}/s churned), {} polls failed, {} whole",
                    p.hostile,
                    p.churn,
                    p.failed,
                    p.polls.len()
                ));
            }
            if let Some((_, _, max)) = figures(&p.polls)
                && timed
                && max > POLL_TARGET
            {
                out.push(format!(
                    "hostile: with {} other connections, a poll took {max:.2} s (target {POLL_TARGET} s)",
                    p.hostile
                ));
            }
        }
        out
    }
}
