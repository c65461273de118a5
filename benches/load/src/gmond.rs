//! A real gmond on loopback with its stock receive buffer: started, read
//! (drops at its socket, its XML), stopped by pid.

use std::collections::HashMap;
use std::io::Read;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::Scratch;
use xrd2ganglia_testkit::gmond_conf;

pub const GMOND: &str = "/usr/sbin/gmond";

/// Whether gmond is installed; the message says what to install if not.
pub fn installed() -> Result<(), String> {
    if Path::new(GMOND).exists() {
        Ok(())
    } else {
        Err(format!(
            "{GMOND} not found: the gmond runs need Debian's ganglia-monitor \
             (apt-get install ganglia-monitor; .ci/run installs it)"
        ))
    }
}

/// gmond receiving on UDP 127.0.0.1:`port` (stock buffer: no `buffer =`),
/// serving XML on TCP 127.0.0.1:`xml_port`.
pub struct Gmond {
    child: Child,
    pub port: u16,
    pub xml_port: u16,
    /// Appended to the file verbatim (a `udp_send_channel` for its 136s).
    sections: String,
    /// Its `udp_recv_channel`'s `buffer`, if set.
    buffer: Option<u32>,
    dir: Scratch,
}

impl Gmond {
    pub fn start(port: u16, xml_port: u16, sections: &str) -> Result<Gmond, String> {
        Gmond::start_buffered(port, xml_port, sections, None)
    }

    /// As [`start`](Gmond::start), with `udp_recv_channel { buffer = N }`
    /// when given (what the docs advise for a busy gmond).
    pub fn start_buffered(
        port: u16,
        xml_port: u16,
        sections: &str,
        buffer: Option<u32>,
    ) -> Result<Gmond, String> {
        installed()?;
        let buffer_line = buffer.map_or(String::new(), |b| format!("  buffer = {b}"));
        let dir = Scratch::new("gmond");
        let conf = dir.0.join("gmond.conf");
        // As the tests write it, with the stock datagram limit stated.
        let channels = format!(
            "udp_recv_channel {{ port = {port}  bind = 127.0.0.1{buffer_line} }}\n\
             tcp_accept_channel {{ port = {xml_port}  bind = 127.0.0.1 }}\n\
             {sections}"
        );
        std::fs::write(
            &conf,
            gmond_conf("xrd2ganglia-load", "max_udp_msg_len = 1472", &channels),
        )
        .map_err(|e| format!("gmond.conf: {e}"))?;
        let log = std::fs::File::create(dir.0.join("gmond.log"))
            .map_err(|e| format!("gmond.log: {e}"))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(GMOND)
            .arg("-c")
            .arg(&conf)
            .arg("-f")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| format!("cannot start {GMOND}: {e}"))?;
        let mut g = Gmond {
            child,
            port,
            xml_port,
            sections: sections.to_string(),
            buffer,
            dir,
        };
        // Up when its UDP socket is bound: no XML poll needed to know.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if !g.sockets().is_empty() && TcpListening::on(xml_port) {
                return Ok(g);
            }
            if let Ok(Some(status)) = g.child.try_wait() {
                return Err(format!("gmond exited ({status}): {}", g.log()));
            }
            if Instant::now() > deadline {
                return Err(format!("gmond did not start in 10 s: {}", g.log()));
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// A new gmond on the same ports and configuration (after `terminate`).
    pub fn restart(&self) -> Result<Gmond, String> {
        let mut last = String::new();
        for _ in 0..20 {
            match Gmond::start_buffered(self.port, self.xml_port, &self.sections, self.buffer) {
                Ok(g) => return Ok(g),
                Err(e) => last = e,
            }
            thread::sleep(Duration::from_millis(250));
        }
        Err(last)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("gmond.log")).unwrap_or_default()
    }

    /// /proc/net/udp{,6} rows of gmond's receive socket(s).
    fn sockets(&self) -> Vec<Vec<String>> {
        crate::udp_rows(Some(self.pid()), self.port)
    }

    /// gmond's CPU time so far, in ns (every thread's run time, from
    /// /proc/PID/task/*/schedstat: finer than utime + stime's ticks).
    pub fn cpu_ns(&self) -> u64 {
        cpu_ns(self.pid())
    }

    /// Datagrams the kernel dropped at gmond's receive socket so far.
    pub fn drops(&self) -> u64 {
        crate::drops_of(&self.sockets())
    }

    /// Bytes waiting in gmond's receive queue.
    pub fn rx_queue(&self) -> u64 {
        crate::rx_of(&self.sockets())
    }

    /// Waits until gmond's receive queue is empty (up to `timeout`).
    pub fn wait_read(&self, timeout: Duration) {
        let t0 = Instant::now();
        while self.rx_queue() > 0 && t0.elapsed() < timeout {
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGTERM by pid; returns the drops read just before, and how it ended.
    pub fn terminate(&mut self) -> (u64, Option<ExitStatus>) {
        let drops = self.drops();
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.pid() as i32, libc::SIGTERM) };
        let status = crate::wait_timeout(&mut self.child, Duration::from_secs(10));
        (drops, status)
    }

    /// gmond's XML, read once, parsed by IP.
    pub fn xml(&self) -> Result<Xml, String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.xml_port))
            .map_err(|e| format!("connect to gmond's XML: {e}"))?;
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| e.to_string())?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf)
            .map_err(|e| format!("read gmond's XML: {e}"))?;
        Xml::parse(&String::from_utf8_lossy(&buf))
    }
}

impl Drop for Gmond {
    fn drop(&mut self) {
        // Child::kill signals our own child by its pid.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A process's CPU time in ns: the sum of its threads' run time
/// (/proc/PID/task/*/schedstat, first field); 0 if it is gone.
pub fn cpu_ns(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.ok()?.path().join("schedstat")).ok()?;
            text.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum()
}

/// Watches gmond from another thread, every 5 ms until stopped: when its
/// CPU time last rose (how long after `t0`: when it took the last packet
/// of a burst), and when the kernel dropped packets at its socket (asked
/// by netlink, as the gateway asks: cheap whatever the sockets on the
/// host).
pub struct BusyWatch {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: thread::JoinHandle<Watched>,
}

/// What a [`BusyWatch`] saw.
#[derive(Clone, Debug, Default)]
pub struct Watched {
    pub last_busy: Option<Duration>,
    /// Drops per 500 ms from `t0` (index: half-seconds), trailing zeros cut.
    pub drops: Vec<u64>,
}

impl BusyWatch {
    pub fn start(gmond: &Gmond, t0: Instant) -> BusyWatch {
        use std::sync::atomic::{AtomicBool, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let pid = gmond.pid();
        let target = std::net::SocketAddr::from(([127, 0, 0, 1], gmond.port));
        let thread = thread::spawn(move || {
            let mut diag = xrd2ganglia::sock_diag::SockDiag::open().ok();
            let mut drops_now = || {
                diag.as_mut()
                    .and_then(|d| d.udp_receiver(target).ok().flatten())
                    .and_then(|q| q.drops)
            };
            let mut w = Watched::default();
            let mut last = cpu_ns(pid);
            let mut dropped = drops_now();
            while !flag.load(Ordering::Relaxed) {
                thread::sleep(Duration::from_millis(5));
                let now = cpu_ns(pid);
                // More than gmond's idle ticking (its timers, under 1 ms
                // a second): 0.1 ms of work in 5 ms (a gateway pacing 40,000
                // tokens/s keeps gmond about 10% busy).
                if now > last + 100_000 {
                    w.last_busy = Some(t0.elapsed());
                }
                last = now;
                let d = drops_now();
                if let (Some(before), Some(after)) = (dropped, d)
                    && after > before
                {
                    let at = (t0.elapsed().as_millis() / 500) as usize;
                    if w.drops.len() <= at {
                        w.drops.resize(at + 1, 0);
                    }
                    w.drops[at] += after - before;
                }
                dropped = d.or(dropped);
            }
            w
        });
        BusyWatch { stop, thread }
    }

    /// Stops watching.
    pub fn stop(self) -> Watched {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

struct TcpListening;

impl TcpListening {
    /// Whether something listens on TCP 127.0.0.1:`port`, from /proc/net/tcp
    /// (a connect would make gmond write its XML).
    fn on(port: u16) -> bool {
        let local = format!("0100007F:{port:04X}");
        std::fs::read_to_string("/proc/net/tcp")
            .unwrap_or_default()
            .lines()
            .skip(1)
            .any(|l| {
                let c: Vec<&str> = l.split_whitespace().collect();
                c.get(1) == Some(&local.as_str()) && c.get(3) == Some(&"0A")
            })
    }
}

/// One HOST of gmond's XML.
#[derive(Debug, Default)]
pub struct XmlHost {
    pub tn: f64,
    /// METRIC NAME -> VAL.
    pub metrics: HashMap<String, String>,
}

/// gmond's XML: hosts by IP (every simulated server has its own IP; the
/// NAMEs repeat).
#[derive(Debug, Default)]
pub struct Xml {
    pub hosts: HashMap<String, XmlHost>,
    pub bytes: usize,
}

impl Xml {
    pub fn parse(text: &str) -> Result<Xml, String> {
        // gmond's DOCTYPE has an internal subset.
        let opts = roxmltree::ParsingOptions {
            allow_dtd: true,
            ..Default::default()
        };
        let doc = roxmltree::Document::parse_with_options(text, opts)
            .map_err(|e| format!("gmond's XML is not well-formed: {e}"))?;
        let mut out = Xml {
            bytes: text.len(),
            ..Xml::default()
        };
        for h in doc.descendants().filter(|n| n.has_tag_name("HOST")) {
            let host = XmlHost {
                tn: h
                    .attribute("TN")
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(0.0),
                metrics: h
                    .children()
                    .filter(|n| n.has_tag_name("METRIC"))
                    .map(|m| {
                        (
                            m.attribute("NAME").unwrap_or("").to_string(),
                            m.attribute("VAL").unwrap_or("").to_string(),
                        )
                    })
                    .collect(),
            };
            out.hosts
                .insert(h.attribute("IP").unwrap_or("").to_string(), host);
        }
        Ok(out)
    }
}
