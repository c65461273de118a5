//! The load tool: the counting sink that stands in for gmond.

use super::*;

// ---------------------------------------------------------------------------
// The sink: counts packets, notes when each record's last value arrived.

/// How the sink waits for packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SinkMode {
    /// Asleep in recv(): woken by each packet, at once. For latency.
    Blocking,
    /// Naps of [`POLL`] when its queue is empty: a sink asleep in recv()
    /// is woken per packet, and on this machine the sender pays for the
    /// wakeup, which would understate what the sender can do. For throughput.
    Polled,
}

/// How long the sink sleeps when its queue is empty.
pub(crate) const POLL: Duration = Duration::from_micros(50);

#[derive(Default)]
pub(crate) struct SinkCounts {
    pub(crate) packets: AtomicU64,
    pub(crate) values: AtomicU64,
    pub(crate) metadata: AtomicU64,
    /// Records whose last value packet arrived.
    pub(crate) completed: AtomicU64,
    /// Records whose last value packet did not arrive, but a later
    /// record's of the same server did (replaced in the gateway's send
    /// queue, or dropped before it).
    pub(crate) superseded: AtomicU64,
}

/// Records sent and not yet completed, per server: (sequence number, send
/// time), oldest first.
pub(crate) type Pending = Vec<Mutex<VecDeque<(u64, Instant)>>>;

pub(crate) struct Sink {
    pub(crate) socket: UdpSocket,
    pub(crate) counts: Arc<SinkCounts>,
    /// Records not yet completed, per server.
    pub(crate) pending: Arc<Pending>,
    pub(crate) latencies: Arc<Mutex<Vec<u32>>>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) thread: Option<thread::JoinHandle<()>>,
}

/// What the sink's thread needs to tell which record a packet completes.
struct Matcher {
    counts: Arc<SinkCounts>,
    pending: Arc<Pending>,
    latencies: Arc<Mutex<Vec<u32>>>,
    fixture_of: Vec<usize>,
    seq_offset: Vec<i64>,
    server_of: HashMap<String, usize>,
    last_names: Vec<Vec<u8>>,
}

impl Matcher {
    /// Counts a packet that arrived at `now`; a record's last value
    /// completes it (its latency kept) and supersedes the server's earlier
    /// records still pending.
    fn take(&self, packet: &[u8], now: Instant) {
        self.counts.packets.fetch_add(1, Ordering::Relaxed);
        let Some((id, host, name)) = header(packet) else {
            return;
        };
        match id {
            128 => {
                self.counts.metadata.fetch_add(1, Ordering::Relaxed);
                return;
            }
            133 => self.counts.values.fetch_add(1, Ordering::Relaxed),
            _ => return,
        };
        if !self.last_names.iter().any(|l| l.as_slice() == name) {
            return;
        }
        let ip = host.split(|&b| b == b':').next().unwrap_or(b"");
        let Some(&server) = std::str::from_utf8(ip)
            .ok()
            .and_then(|ip| self.server_of.get(ip))
        else {
            return;
        };
        // Which report this is: its value (uptime) follows the
        // report's stamped tod.
        let Some(seq) = value_of(packet)
            .and_then(|v| std::str::from_utf8(v).ok()?.trim().parse::<i64>().ok())
            .and_then(|v| u64::try_from(v - self.seq_offset[self.fixture_of[server]]).ok())
        else {
            return;
        };
        // A (host, metric) leaves the gateway in order: the
        // server's earlier records still pending will never
        // complete (their last value was replaced by this one).
        let mut q = self.pending[server].lock().expect("pending");
        let mut superseded = 0;
        while q.front().is_some_and(|&(s, _)| s < seq) {
            q.pop_front();
            superseded += 1;
        }
        self.counts
            .superseded
            .fetch_add(superseded, Ordering::Relaxed);
        // Not pending: a record from before the measured window.
        if let Some(&(s, sent)) = q.front()
            && s == seq
        {
            q.pop_front();
            drop(q);
            self.counts.completed.fetch_add(1, Ordering::Relaxed);
            let us = now.duration_since(sent).as_micros().min(u32::MAX as u128);
            self.latencies.lock().expect("latencies").push(us as u32);
        }
    }
}

impl Sink {
    pub(crate) fn start(records: &Records, mode: SinkMode) -> Sink {
        let socket = big_buffers(UdpSocket::bind("127.0.0.1:0").expect("sink"));
        let counts = Arc::new(SinkCounts::default());
        let pending: Arc<Pending> =
            Arc::new((0..records.servers).map(|_| Mutex::default()).collect());
        let latencies = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let matcher = Matcher {
            counts: counts.clone(),
            pending: pending.clone(),
            latencies: latencies.clone(),
            fixture_of: (0..records.servers)
                .map(|s| records.fixture_of(s))
                .collect(),
            seq_offset: records.seq_offset.clone(),
            server_of: (0..records.servers)
                .map(|i| (server_ip(i).to_string(), i))
                .collect(),
            last_names: records
                .last_name
                .iter()
                .map(|n| n.as_bytes().to_vec())
                .collect(),
        };
        let thread = {
            let (socket, stop) = (socket.try_clone().expect("clone"), stop.clone());
            match mode {
                SinkMode::Polled => socket.set_nonblocking(true).expect("non-blocking"),
                SinkMode::Blocking => socket
                    .set_read_timeout(Some(Duration::from_millis(50)))
                    .expect("timeout"),
            }
            thread::spawn(move || {
                let mut buf = [0u8; 2048];
                while !stop.load(Ordering::Relaxed) {
                    let Ok(n) = socket.recv(&mut buf) else {
                        if mode == SinkMode::Polled {
                            thread::sleep(POLL);
                        }
                        continue;
                    };
                    matcher.take(&buf[..n], Instant::now());
                }
            })
        };
        Sink {
            socket,
            counts,
            pending,
            latencies,
            stop,
            thread: Some(thread),
        }
    }

    pub(crate) fn port(&self) -> u16 {
        self.socket.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    /// Waits until no packet has arrived for `quiet`.
    pub(crate) fn settle(&self, quiet: Duration) {
        let mut last = self.counts.packets.load(Ordering::Relaxed);
        loop {
            thread::sleep(quiet);
            let now = self.counts.packets.load(Ordering::Relaxed);
            if now == last {
                return;
            }
            last = now;
        }
    }

    /// Records sent and neither completed nor superseded.
    pub(crate) fn outstanding(&self) -> u64 {
        self.pending
            .iter()
            .map(|q| q.lock().expect("pending").len() as u64)
            .sum()
    }

    pub(crate) fn reset(&self) {
        for c in [
            &self.counts.packets,
            &self.counts.values,
            &self.counts.metadata,
            &self.counts.completed,
            &self.counts.superseded,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        for q in self.pending.iter() {
            q.lock().expect("pending").clear();
        }
        self.latencies.lock().expect("latencies").clear();
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// (packet id, host, metric name) of a Ganglia packet, borrowed.
pub(crate) fn header(p: &[u8]) -> Option<(u32, &[u8], &[u8])> {
    let word = |at: usize| -> Option<u32> {
        Some(u32::from_be_bytes(p.get(at..at + 4)?.try_into().ok()?))
    };
    let string = |at: usize| -> Option<(&[u8], usize)> {
        let len = word(at)? as usize;
        let s = p.get(at + 4..at + 4 + len)?;
        Some((s, at + 4 + len.div_ceil(4) * 4))
    };
    let id = word(0)?;
    let (host, at) = string(4)?;
    let (name, _) = string(at)?;
    Some((id, host, name))
}

/// The value string of a string value packet (id 133): after the host,
/// the name, the spoof flag and the format string.
pub(crate) fn value_of(p: &[u8]) -> Option<&[u8]> {
    let word = |at: usize| -> Option<usize> {
        Some(u32::from_be_bytes(p.get(at..at + 4)?.try_into().ok()?) as usize)
    };
    let skip = |at: usize| -> Option<usize> { Some(at + 4 + word(at)?.div_ceil(4) * 4) };
    let at = skip(skip(4)?)? + 4; // host, name, spoof
    let at = skip(at)?; // format
    let len = word(at)?;
    p.get(at + 4..at + 4 + len)
}

pub(crate) fn big_buffers(socket: UdpSocket) -> UdpSocket {
    let s = socket2::SockRef::from(&socket);
    let _ = s.set_recv_buffer_size(32 << 20);
    let _ = s.set_send_buffer_size(4 << 20);
    socket
}

/// Socket inodes of process `pid` (from its fd links `socket:[N]`).
pub(crate) fn socket_inodes(pid: u32) -> std::collections::HashSet<String> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect()
}

/// Rows of /proc/net/udp and /proc/net/udp6 for local `port`: of process
/// `pid`'s sockets, or (None) bound to 127.0.0.1, so that another address's
/// socket that happens to have the same port number is not counted.
pub(crate) fn udp_rows(pid: Option<u32>, port: u16) -> Vec<Vec<String>> {
    let suffix = format!(":{port:04X}");
    let own = format!("0100007F:{port:04X}");
    let inodes = pid.map(socket_inodes);
    ["/proc/net/udp", "/proc/net/udp6"]
        .iter()
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .flat_map(|t| {
            t.lines()
                .skip(1)
                .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
                .filter(|c| match &inodes {
                    Some(set) => {
                        c.get(1).is_some_and(|a| a.ends_with(&suffix))
                            && c.get(9).is_some_and(|i| set.contains(i))
                    }
                    None => c.get(1).is_some_and(|a| *a == own),
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Drops column (the last) summed over `rows`.
pub(crate) fn drops_of(rows: &[Vec<String>]) -> u64 {
    rows.iter()
        .filter_map(|c| c.last()?.parse::<u64>().ok())
        .sum()
}

/// Receive queue bytes summed over `rows`.
pub(crate) fn rx_of(rows: &[Vec<String>]) -> u64 {
    rows.iter()
        .filter_map(|c| u64::from_str_radix(c.get(4)?.split(':').nth(1)?, 16).ok())
        .sum()
}

/// Datagrams the kernel dropped at our own socket on 127.0.0.1:`port`.
pub(crate) fn kernel_drops(port: u16) -> u64 {
    drops_of(&udp_rows(None, port))
}
