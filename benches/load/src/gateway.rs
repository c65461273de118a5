//! The load tool: the gateway as the runs start it, its log and its process.

use super::*;

/// A running `xrd2ganglia serve`, its log read as it comes.
pub(crate) struct Gateway {
    pub(crate) child: Child,
    pub(crate) port: u16,
    pub(crate) dir: Scratch,
    pub(crate) log: GwLog,
    pub(crate) exited: bool,
}

/// A counters line of the gateway's log (`counters: k=v ...`, also the
/// final `stopped; counters: ...`): when it arrived and its pairs. Keys the
/// gateway does not log are absent (unknown), not zero.
#[derive(Clone, Debug)]
pub(crate) struct LogLine {
    pub(crate) at: Instant,
    pub(crate) stopped: bool,
    pub(crate) pairs: HashMap<String, String>,
}

impl LogLine {
    pub(crate) fn get(&self, key: &str) -> Option<u64> {
        self.pairs.get(key)?.parse().ok()
    }

    /// Parses a log line; None if it is not a counters line.
    pub(crate) fn parse(line: &str, at: Instant) -> Option<LogLine> {
        let line = strip_ansi(line);
        let (head, rest) = line.split_once("counters:")?;
        Some(LogLine {
            at,
            stopped: head.contains("stopped"),
            pairs: rest
                .split_whitespace()
                .filter_map(|t| t.split_once('='))
                .map(|(k, v)| (k.to_string(), v.trim_end_matches(',').to_string()))
                .collect(),
        })
    }
}

pub(crate) fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ ... final byte in @..~
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) && c != '[' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The gateway's counters lines, stamped on arrival by a reader thread
/// (which also copies the whole log to a file).
#[derive(Clone, Default)]
pub(crate) struct GwLog(pub(crate) Arc<Mutex<Vec<LogLine>>>);

impl GwLog {
    pub(crate) fn start(stderr: std::process::ChildStderr, file: PathBuf) -> GwLog {
        let log = GwLog::default();
        let lines = log.0.clone();
        thread::spawn(move || {
            use std::io::{BufRead, Write};
            let mut out = std::fs::File::create(file).ok();
            let mut reader = std::io::BufReader::new(stderr);
            let mut buf = Vec::new();
            while reader.read_until(b'\n', &mut buf).is_ok_and(|n| n > 0) {
                let at = Instant::now();
                if let Some(f) = out.as_mut() {
                    let _ = f.write_all(&buf);
                }
                if let Some(l) = LogLine::parse(&String::from_utf8_lossy(&buf), at) {
                    lines.lock().unwrap_or_else(|e| e.into_inner()).push(l);
                }
                buf.clear();
            }
        });
        log
    }

    pub(crate) fn all(&self) -> Vec<LogLine> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Lines that arrived after `t`.
    pub(crate) fn since(&self, t: Instant) -> Vec<LogLine> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|l| l.at > t)
            .cloned()
            .collect()
    }

    pub(crate) fn last(&self) -> Option<LogLine> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .last()
            .cloned()
    }
}

impl Gateway {
    /// The gateway of the throughput runs: sending to the sink unpaced,
    /// its counters logged every `stats_interval` seconds (0: at stop only).
    pub(crate) fn start(bin: &Path, sink_port: u16, stats_interval: u32) -> Gateway {
        Self::start_with(bin, sink_port, stats_interval, "")
    }

    /// Like `start`, with `extra` top-level settings.
    pub(crate) fn start_with(
        bin: &Path,
        sink_port: u16,
        stats_interval: u32,
        extra: &str,
    ) -> Gateway {
        Gateway::start_config(bin, |_, port| {
            Gateway::throughput_config(port, sink_port, stats_interval, extra)
        })
    }

    /// The throughput runs' config: listening on `port`, sending to the
    /// sink unpaced, `extra` top-level settings.
    pub(crate) fn throughput_config(
        port: u16,
        sink_port: u16,
        stats_interval: u32,
        extra: &str,
    ) -> String {
        format!(
            "listen = [\"127.0.0.1:{port}\"]\n\
             metadata_interval = 1800\nstats_interval = {stats_interval}\nself_metrics_interval = 0\n\
             max_send_rate = 0\nfollow_gmond_queue = false\nresend_after = 0\nrecv_buffer = 33554432\nmax_sources = 20000\nstate_file = \"\"\n{extra}\n\
             [[channel]]\nhost = \"127.0.0.1\"\nport = {sink_port}\n"
        )
    }

    /// `serve` with the config `config(its temp dir, its listen port)`.
    pub(crate) fn start_config(bin: &Path, config: impl FnOnce(&Path, u16) -> String) -> Gateway {
        Gateway::start_config_logging(bin, "info", config)
    }

    /// `start_config` with the log filter `log_level`.
    pub(crate) fn start_config_logging(
        bin: &Path,
        log_level: &str,
        config: impl FnOnce(&Path, u16) -> String,
    ) -> Gateway {
        let dir = Scratch::new("gw");
        let port = free_port();
        let conf = dir.0.join("xrd2ganglia.toml");
        let mut text = config(&dir.0, port);
        // This build's gateway gets a control socket of its own: the
        // default, /run/xrd2ganglia/control, is one per machine (an older
        // build given with --gateway-bin knows no such key).
        if bin == crate::under_test::gateway() && !text.contains("control_socket") {
            text = format!(
                "control_socket = {:?}\n{text}",
                dir.0.join("control").display().to_string()
            );
        }
        std::fs::write(&conf, text).expect("config");
        let mut child = Command::new(bin)
            .args(["serve", "--config"])
            .arg(&conf)
            .args(["--log-level", log_level])
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start xrd2ganglia serve");
        let stderr = child.stderr.take().expect("piped stderr");
        let log = GwLog::start(stderr, dir.0.join("log"));
        let gw = Gateway {
            port,
            dir,
            log,
            exited: false,
            child,
        };
        if !listening(gw.pid(), port) {
            let log = std::fs::read_to_string(gw.dir.0.join("log")).unwrap_or_default();
            eprintln!("load: xrd2ganglia serve did not start:\n{log}");
            std::process::exit(1);
        }
        gw
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir.0
    }

    /// Datagrams the kernel dropped at the gateway's listening socket.
    pub(crate) fn socket_drops(&self) -> u64 {
        drops_of(&udp_rows(Some(self.pid()), self.port))
    }

    pub(crate) fn rx_queue(&self) -> u64 {
        rx_of(&udp_rows(Some(self.pid()), self.port))
    }

    /// SIGTERM by pid; the exit status (None: still running after
    /// `timeout`, then killed) and how long it took.
    pub(crate) fn terminate(
        &mut self,
        timeout: Duration,
    ) -> (Option<std::process::ExitStatus>, Duration) {
        let t0 = Instant::now();
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.pid() as i32, libc::SIGTERM) };
        let status = wait_timeout(&mut self.child, timeout);
        let took = t0.elapsed();
        if status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        self.exited = true;
        // Let the reader see the last lines.
        thread::sleep(Duration::from_millis(50));
        (status, took)
    }

    /// Stops the gateway (SIGTERM) and returns its final counters line.
    pub(crate) fn stop(mut self) -> Option<LogLine> {
        self.terminate(Duration::from_secs(30));
        self.log.all().into_iter().rev().find(|l| l.stopped)
    }

    pub(crate) fn cpu_ticks(&self) -> u64 {
        cpu_ticks(self.pid())
    }

    pub(crate) fn status_kib(&self, key: &str) -> u64 {
        proc_status(self.pid(), key)
    }
}

/// Pids whose parent is `pid`.
pub(crate) fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
            // After the command name: state, then the parent's pid.
            stat.rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().nth(1)?.parse::<u32>().ok())
                == Some(pid)
        })
        .collect()
}

/// User plus system CPU time of a process, in clock ticks.
pub(crate) fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name: utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if !self.exited {
            self.terminate(Duration::from_secs(10));
        }
    }
}

pub(crate) fn proc_status(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

pub(crate) fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}
