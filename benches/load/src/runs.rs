//! The load tool: the throughput, latency, parse, chain and memory runs.

use super::*;

// ---------------------------------------------------------------------------
// Runs.

#[derive(Clone, Debug, Default)]
pub(crate) struct Run {
    pub(crate) label: String,
    pub(crate) offered_rps: Option<f64>,
    pub(crate) sent: u64,
    pub(crate) achieved_rps: f64,
    pub(crate) packets_ps: f64,
    pub(crate) completed: u64,
    pub(crate) socket_drops: u64,
    /// Packets dropped at the sink's own socket (would blur "lost").
    pub(crate) sink_drops: u64,
    /// Packets the gateway could not send (its send_errors counter).
    pub(crate) send_errors: Option<u64>,
    /// Records lost: serve runs, their last value never arrived and no
    /// later record of the server did; other runs, sent minus handled.
    pub(crate) not_forwarded: u64,
    /// Serve runs: records whose last value never arrived but a later
    /// record's of the same server did (only its newer value was sent).
    pub(crate) superseded: Option<u64>,
    /// Serve runs: the gateway's `packets_conflated` (packets replaced in
    /// its send queue by newer ones of the same metric) over the measured
    /// run: its final counters minus its last line before the run.
    pub(crate) conflated: Option<u64>,
    pub(crate) p50_us: Option<u32>,
    pub(crate) p99_us: Option<u32>,
    pub(crate) cpu_pct: Option<f64>,
    /// The gateway's CPU time per forwarded record.
    pub(crate) cpu_us_per_record: Option<f64>,
    pub(crate) peak_rss_kib: Option<u64>,
}

/// (a) The loopback limit: the value packets of the records, straight to
/// the sink, for the run's duration.
pub(crate) fn raw(records: &Records, o: &Options, mmsg: bool) -> Run {
    // The sink only counts (recvmmsg, nothing parsed): the loopback limit,
    // not a parser's.
    let sink = CountSink::start();
    let socket = big_buffers(UdpSocket::bind("127.0.0.1:0").expect("raw sender"));
    socket
        .connect(("127.0.0.1", sink.port()))
        .expect("connect to the sink");
    let all: Vec<Vec<u8>> = records.packets.iter().flatten().cloned().collect();
    let t0 = Instant::now();
    let mut sent = 0u64;
    if mmsg {
        // C speed: sendmmsg from headers built once, 64 packets a call.
        let mut sender = MmsgSender::new(&socket, &all);
        while t0.elapsed() < o.duration {
            sent += sender.send(64) as u64;
        }
    } else {
        while t0.elapsed() < o.duration {
            for p in &all {
                if socket.send(p).is_ok() {
                    sent += 1;
                }
            }
        }
    }
    let elapsed = t0.elapsed();
    sink.settle(Duration::from_millis(200));
    let got = sink.count();
    Run {
        label: if mmsg {
            "raw loopback, sendmmsg (64/call)"
        } else {
            "raw loopback, send"
        }
        .into(),
        sent,
        packets_ps: got as f64 / elapsed.as_secs_f64(),
        achieved_rps: got as f64 / elapsed.as_secs_f64() / records.packets_per_record(),
        sink_drops: kernel_drops(sink.port()),
        ..Run::default()
    }
}

/// Sends records round robin over the servers at `rate` records/s (None: as
/// fast as possible) for `duration`, noting each one's sequence number and
/// send time for the sink. Each report carries its sequence number in its
/// tod (base + number, rising from one call to the next).
pub(crate) fn offer(
    records: &Records,
    sockets: &[UdpSocket],
    to: SocketAddr,
    rate: Option<u64>,
    duration: Duration,
    pending: Option<&Pending>,
) -> u64 {
    let t0 = Instant::now();
    let first = records.next_seq.load(Ordering::Relaxed);
    let mut buf = Vec::with_capacity(4096);
    let mut i = 0u64;
    loop {
        let now = Instant::now();
        if now.duration_since(t0) >= duration {
            let rounds = i.div_ceil(sockets.len() as u64);
            records.next_seq.store(first + rounds, Ordering::Relaxed);
            return i;
        }
        if let Some(rate) = rate {
            let due = t0 + Duration::from_secs_f64(i as f64 / rate as f64);
            if due > now {
                let wait = due - now;
                if wait > Duration::from_micros(200) {
                    thread::sleep(wait - Duration::from_micros(100));
                }
                continue;
            }
        }
        let server = (i as usize) % sockets.len();
        let round = i / sockets.len() as u64;
        let seq = first + round;
        records.stamp(records.fixture_of(server), round as usize, seq, &mut buf);
        // Pending before it is sent (the sink may see its packets first).
        if let Some(p) = pending {
            p[server]
                .lock()
                .expect("pending")
                .push_back((seq, Instant::now()));
        }
        if sockets[server].send_to(&buf, to).is_ok() {
            i += 1;
        } else if let Some(p) = pending {
            // Not sent: sent again next turn, pending once.
            let mut q = p[server].lock().expect("pending");
            if q.back().is_some_and(|&(s, _)| s == seq) {
                q.pop_back();
            }
        }
    }
}

/// (b) `serve` forwarding every value, at `rate` records/s or flat out.
pub(crate) fn serve(
    bin: &Path,
    records: &Records,
    o: &Options,
    rate: Option<u64>,
    label: &str,
    mode: SinkMode,
) -> Run {
    let sink = Sink::start(records, mode);
    // Counters every second: the last line before the measured window is
    // the baseline of its packets_conflated (the warm-up's are not its).
    let gw = Gateway::start(bin, sink.port(), 1);
    let to = gw.addr();
    let sockets = records.sockets();
    // Warm up: every server's first record (metadata) and a second one.
    for _ in 0..2 {
        offer(
            records,
            &sockets,
            to,
            Some(2000),
            Duration::from_secs_f64(records.servers as f64 / 2000.0),
            None,
        );
    }
    sink.settle(Duration::from_millis(300));
    sink.reset();
    // The gateway is idle: its next counters line is the baseline.
    let settled = Instant::now();
    let baseline = loop {
        if let Some(l) = gw.log.since(settled).into_iter().next() {
            break Some(l);
        }
        if settled.elapsed() > Duration::from_secs(3) {
            break None;
        }
        thread::sleep(Duration::from_millis(20));
    };
    let drops_before = gw.socket_drops();
    let cpu_before = gw.cpu_ticks();
    let t0 = Instant::now();
    let sent = offer(records, &sockets, to, rate, o.duration, Some(&sink.pending));
    let elapsed = t0.elapsed();
    // Rates over the offered window; loss once the gateway has caught up.
    let in_window = (
        sink.counts.completed.load(Ordering::Relaxed),
        sink.counts.packets.load(Ordering::Relaxed),
    );
    sink.settle(Duration::from_millis(300));
    let cpu = (gw.cpu_ticks() - cpu_before) as f64 / clock_ticks();
    let (socket_drops, peak_rss) = (gw.socket_drops() - drops_before, gw.status_kib("VmHWM:"));
    let last = gw.stop();
    let counter = |k: &str| last.as_ref().and_then(|l| l.get(k));
    let completed = sink.counts.completed.load(Ordering::Relaxed);
    let superseded = sink.counts.superseded.load(Ordering::Relaxed);
    let lost = sink.outstanding();
    let mut lat = sink.latencies.lock().expect("latencies").clone();
    lat.sort_unstable();
    let pct = |p: f64| (!lat.is_empty()).then(|| lat[((lat.len() - 1) as f64 * p) as usize]);
    Run {
        label: label.into(),
        offered_rps: Some(sent as f64 / elapsed.as_secs_f64()),
        sent,
        achieved_rps: in_window.0 as f64 / elapsed.as_secs_f64(),
        packets_ps: in_window.1 as f64 / elapsed.as_secs_f64(),
        completed,
        socket_drops,
        sink_drops: kernel_drops(sink.port()),
        send_errors: counter("send_errors"),
        not_forwarded: lost,
        superseded: Some(superseded),
        conflated: counter("packets_conflated").map(|c| {
            c.saturating_sub(
                baseline
                    .as_ref()
                    .and_then(|l| l.get("packets_conflated"))
                    .unwrap_or(0),
            )
        }),
        p50_us: pct(0.50),
        p99_us: pct(0.99),
        cpu_pct: Some(100.0 * cpu / elapsed.as_secs_f64()),
        // Per record the gateway read: a superseded one was parsed and
        // queued as much as one that arrived.
        cpu_us_per_record: (sent > socket_drops).then(|| cpu * 1e6 / (sent - socket_drops) as f64),
        peak_rss_kib: Some(peak_rss),
    }
}

/// mpxstats (XRootD's or ours) receiving records flat out and writing flat
/// text to /dev/null: records handled = sent - dropped at its socket - left
/// in its queue (no reader of its output competes for the CPU).
pub(crate) fn mpxstats(bin: &Path, pre: &[&str], records: &Records, o: &Options) -> Option<Run> {
    if !bin.exists() {
        println!("load: {} not installed; its run is skipped", bin.display());
        return None;
    }
    let port = free_port();
    let mut child = Command::new(bin)
        .args(pre)
        .args(["-p", &port.to_string(), "-f", "flat"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let pid = child.id();
    wait_for_port(pid, port);
    let to = SocketAddr::from(([127, 0, 0, 1], port));
    let sockets = records.sockets();
    let drops = || drops_of(&udp_rows(Some(pid), port));
    let (drops_before, cpu_before) = (drops(), cpu_ticks(pid));
    let t0 = Instant::now();
    let sent = offer(records, &sockets, to, None, o.duration, None);
    let elapsed = t0.elapsed();
    let dropped = drops() - drops_before;
    let queued = rx_of(&udp_rows(Some(pid), port));
    let cpu_s = (cpu_ticks(child.id()) - cpu_before) as f64 / clock_ticks();
    let mean_size = records.data.iter().map(Vec::len).sum::<usize>() / records.data.len();
    let done = sent.saturating_sub(dropped + queued / mean_size.max(1) as u64);
    let _ = child.kill();
    let _ = child.wait();
    Some(Run {
        label: format!(
            "{} {}-f flat",
            bin.file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
            pre.iter().map(|p| format!("{p} ")).collect::<String>()
        ),
        offered_rps: Some(sent as f64 / elapsed.as_secs_f64()),
        sent,
        achieved_rps: done as f64 / elapsed.as_secs_f64(),
        completed: done,
        socket_drops: dropped,
        not_forwarded: sent.saturating_sub(done),
        cpu_pct: Some(100.0 * cpu_s / elapsed.as_secs_f64()),
        ..Run::default()
    })
}

/// The chain sites run today: `mpxstats -f flat` piped into Perl that forks
/// the real gmetric once per value, sending to the sink.
pub(crate) fn chain(records: &Records, o: &Options) -> Option<Run> {
    for tool in ["/usr/bin/mpxstats", "/usr/bin/gmetric", "/usr/bin/perl"] {
        if !Path::new(tool).exists() {
            println!("load: {tool} not installed; the chain run is skipped");
            return None;
        }
    }
    let sink = Sink::start(records, SinkMode::Blocking);
    let dir = Scratch::new("chain");
    let conf = dir.0.join("gmond.conf");
    std::fs::write(
        &conf,
        format!(
            "udp_send_channel {{\n  host = 127.0.0.1\n  port = {}\n}}\n",
            sink.port()
        ),
    )
    .expect("gmond.conf");
    // What such scripts do: one gmetric per "name value" line, spoofing the
    // sender (here the record's src), text as string, numbers as double.
    let script = dir.0.join("to-gmetric.pl");
    std::fs::write(
        &script,
        r#"$| = 1; my ($conf) = @ARGV; my $host = "unknown";
while (my $line = <STDIN>) {
  chomp $line; my ($name, $value) = split(/ /, $line, 2);
  next unless defined $value;
  if ($name eq "src") { ($host) = split(/:/, $value); }
  my $type = ($value =~ /^-?[0-9.]+$/) ? "double" : "string";
  system("/usr/bin/gmetric", "-c", $conf, "-n", "xrootd.$name", "-v", $value, "-t", $type, "-S", "127.0.0.1:$host");
}
"#,
    )
    .expect("script");
    let port = free_port();
    let mut mpx = Command::new("/usr/bin/mpxstats")
        .args(["-p", &port.to_string(), "-f", "flat"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let perl = Command::new("/usr/bin/perl")
        .arg(&script)
        .arg(&conf)
        .stdin(mpx.stdout.take()?)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok();
    wait_for_port(mpx.id(), port);
    let to = SocketAddr::from(([127, 0, 0, 1], port));
    let sockets = &records.sockets()[..1];
    // Keep the chain busy for the whole run: a few records up front.
    let sent = offer(
        records,
        sockets,
        to,
        Some(20),
        Duration::from_millis(250),
        None,
    );
    let duration = o.duration.max(Duration::from_secs(3));
    thread::sleep(Duration::from_millis(500));
    let start = sink.counts.values.load(Ordering::Relaxed);
    let t0 = Instant::now();
    thread::sleep(duration);
    let values = sink.counts.values.load(Ordering::Relaxed) - start;
    let elapsed = t0.elapsed();
    let _ = mpx.kill();
    let _ = mpx.wait();
    if let Some(mut p) = perl {
        // Stop perl so it forks no more, then end the gmetric it runs (its
        // children, by pid) and perl itself: nothing outlives the tool.
        // SAFETY: kill(2) on our own child's pid and on its children's.
        unsafe { libc::kill(p.id() as i32, libc::SIGSTOP) };
        for child in children_of(p.id()) {
            unsafe { libc::kill(child as i32, libc::SIGKILL) };
        }
        let _ = p.kill();
        let _ = p.wait();
    }
    let values_ps = values as f64 / elapsed.as_secs_f64();
    Some(Run {
        label: "mpxstats | perl | gmetric per value".into(),
        sent,
        packets_ps: sink.counts.packets.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64(),
        achieved_rps: values_ps / records.flat_lines_per_record(),
        completed: values,
        ..Run::default()
    })
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Memory {
    pub(crate) sources: usize,
    pub(crate) pairs: u64,
    pub(crate) rss_before_kib: u64,
    /// VmRSS once the gateway had read every datagram and its send queue
    /// was empty.
    pub(crate) rss_after_kib: u64,
    /// VmHWM then: the peak, send queue and receive bursts included.
    pub(crate) peak_kib: u64,
    /// Seconds from the last datagram sent to the gateway's counters
    /// showing everything read and `send_queue=0`; None: not within the
    /// timeout (the RSS was read anyway).
    pub(crate) drained_after: Option<f64>,
    /// With an XML port: one poll of the whole document once drained.
    pub(crate) poll: Option<DocPoll>,
}

/// One poll of the gateway's XML document.
#[derive(Clone, Debug, Default)]
pub(crate) struct DocPoll {
    pub(crate) bytes: usize,
    /// Connect to the last byte.
    pub(crate) secs: f64,
    /// VmHWM after it (the document is written in pieces: no copy of it).
    pub(crate) peak_kib: u64,
}

impl Memory {
    pub(crate) fn per_pair(&self, kib: u64) -> f64 {
        (kib.saturating_sub(self.rss_before_kib) * 1024) as f64 / self.pairs.max(1) as f64
    }

    /// Steady state: RSS growth per pair once the send queue is empty.
    pub(crate) fn bytes_per_pair(&self) -> f64 {
        self.per_pair(self.rss_after_kib)
    }

    /// Peak RSS growth per pair.
    pub(crate) fn peak_bytes_per_pair(&self) -> f64 {
        self.per_pair(self.peak_kib)
    }
}

/// Two reports of a loaded data server from each of `o.sources` sources
/// (the second leaves the source in steady state, its template made): RSS
/// growth per tracked (host, metric) pair.
pub(crate) fn memory(bin: &Path, o: &Options, xml: bool) -> Memory {
    let records = Records::load(1);
    let fixture = 1; // ds_loaded
    let per_source = records.packets[fixture].len() as u64 - 1; // minus the heartbeat
    let sink = UdpSocket::bind("127.0.0.1:0").expect("sink");
    // Nobody reads the sink: memory is the question, and the packets are
    // dropped by the kernel at the sink without slowing the gateway.
    // Counters every second: the run waits for `send_queue=0`.
    let xml_port = free_port();
    let extra = if xml {
        format!("xml_listen = [\"127.0.0.1:{xml_port}\"]")
    } else {
        String::new()
    };
    let sink_port = sink.local_addr().map(|a| a.port()).unwrap_or(9);
    let gw = Gateway::start_with(bin, sink_port, 1, &extra);
    let to = gw.addr();
    let t0 = Instant::now();
    let mut offered = 0u64;
    let reports = &records.variants[fixture][..2];
    // The first source grows the per-record buffers to size.
    let s = UdpSocket::bind((server_ip(0), 0)).expect("bind");
    for data in reports {
        offered += u64::from(s.send_to(data, to).is_ok());
    }
    thread::sleep(Duration::from_millis(300));
    let before = gw.status_kib("VmRSS:");
    for i in 1..=o.sources {
        let Ok(s) = UdpSocket::bind((server_ip(i), 0)) else {
            continue;
        };
        for data in reports {
            offered += u64::from(s.send_to(data, to).is_ok());
        }
        if i % 100 == 0 {
            // Let the gateway keep up, so every source is tracked.
            while gw.rx_queue() > 256 * 1024 {
                thread::sleep(Duration::from_millis(1));
            }
        }
    }
    let sent_at = Instant::now();
    while gw.rx_queue() > 0 {
        thread::sleep(Duration::from_millis(10));
    }
    // The send queue may still hold packets when the socket is empty: wait
    // for a counters line with every datagram read and `send_queue=0`
    // (and the next one the same).
    let drained = e2e::drained(&gw, t0, offered, Duration::from_secs(60));
    let (rss_after_kib, peak_kib) = (gw.status_kib("VmRSS:"), gw.status_kib("VmHWM:"));
    let poll = xml.then(|| {
        use std::io::Read;
        let t = Instant::now();
        let mut bytes = 0;
        if let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", xml_port)) {
            let mut buf = vec![0u8; 1 << 16];
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
                bytes += n;
            }
        }
        DocPoll {
            bytes,
            secs: t.elapsed().as_secs_f64(),
            peak_kib: gw.status_kib("VmHWM:"),
        }
    });
    Memory {
        sources: o.sources,
        pairs: per_source * o.sources as u64,
        rss_before_kib: before,
        rss_after_kib,
        peak_kib,
        drained_after: drained.map(|t| t.saturating_duration_since(sent_at).as_secs_f64()),
        poll,
    }
}
