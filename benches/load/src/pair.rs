//! The load tool: a pair of gateways (docs/pair.md) at a site's load.
//!
//! `servers` simulated servers (the real records, each from its own
//! 127.x address) report every `every` to three gateways: gw1 and gw2, a
//! pair (each the other's `peer`), and gw0 alone, the baseline. Each
//! exchange between the two goes through a counting TCP relay, so the
//! bytes are what crossed the wire; CPU is utime + stime (/proc/PID/stat).
//! Then the failover: a poller that does what gmetad does with two
//! addresses (the one that answered last; on a refused connect, the list
//! from the top) reads whole documents every second while gw1 is killed,
//! started again with its state file (its start-up pull timed from the
//! spawn to its XML port's first accepted connection), and gw2 killed
//! right after: the longest time between two whole documents is the gap.

use super::*;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};

/// What `--only pair` runs.
pub struct PairOptions {
    pub servers: usize,
    pub every: Duration,
    pub sustain: Duration,
}

/// What it measured.
pub struct PairRun {
    pub servers: usize,
    pub every_s: f64,
    pub sustain_s: f64,
    /// Bytes the relays carried, each way (gw1 asking, gw2 asking).
    pub bytes_1: u64,
    pub bytes_2: u64,
    pub exchanges: u64,
    /// CPU of each gateway over the sustain, % of one core.
    pub cpu_lone: f64,
    pub cpu_gw1: f64,
    pub cpu_gw2: f64,
    /// gw1's start with its state file, spawn to its XML port accepting.
    pub pull_ms: f64,
    /// Hosts in gw1's first document after that start.
    pub first_doc_hosts: usize,
    /// Longest time between two whole documents the poller read.
    pub gap_ms: f64,
    pub polls: usize,
}

/// A TCP relay to `to` counting the bytes it carries (both ways).
struct Relay {
    port: u16,
    bytes: Arc<AtomicU64>,
    connections: Arc<AtomicU64>,
}

impl Relay {
    fn start(to: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a relay");
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let bytes = Arc::new(AtomicU64::new(0));
        let connections = Arc::new(AtomicU64::new(0));
        let (b, c) = (bytes.clone(), connections.clone());
        thread::spawn(move || {
            for inbound in listener.incoming().flatten() {
                let Ok(outbound) = TcpStream::connect(("127.0.0.1", to)) else {
                    continue;
                };
                c.fetch_add(1, Ordering::Relaxed);
                for (mut from, mut into) in [
                    (inbound.try_clone(), outbound.try_clone()),
                    (outbound.try_clone(), inbound.try_clone()),
                ]
                .into_iter()
                .filter_map(|(a, b)| Some((a.ok()?, b.ok()?)))
                {
                    let b = b.clone();
                    thread::spawn(move || {
                        let mut buf = [0u8; 65536];
                        while let Ok(n) = from.read(&mut buf) {
                            if n == 0 || into.write_all(&buf[..n]).is_err() {
                                break;
                            }
                            b.fetch_add(n as u64, Ordering::Relaxed);
                        }
                        let _ = into.shutdown(Shutdown::Write);
                    });
                }
            }
        });
        Relay {
            port,
            bytes,
            connections,
        }
    }
}

/// One gateway of the run: its process, ports and state file.
struct Member {
    child: Option<Child>,
    port: u16,
    xml_port: u16,
    conf: PathBuf,
    dir: Scratch,
}

impl Member {
    fn new(tag: &str, peer: Option<(u16, u16)>) -> Member {
        let dir = Scratch::new(tag);
        let (port, xml_port) = (free_port(), free_port());
        let mut config = format!(
            "state_file = {:?}\ncontrol_socket = {:?}\nstate_interval = 5\nstats_interval = 0\n\
             self_metrics_interval = 0\ncluster_name = \"pair\"\nmax_sources = 20000\n",
            dir.path().join("state").display().to_string(),
            dir.path().join("control").display().to_string(),
        );
        if let Some((peer, listen)) = peer {
            config.push_str(&format!(
                "peer = \"127.0.0.1:{peer}\"\npeer_listen = [\"127.0.0.1:{listen}\"]\n"
            ));
        }
        let conf = dir.path().join("xrd2ganglia.toml");
        std::fs::write(&conf, config).expect("write a config");
        Member {
            child: None,
            port,
            xml_port,
            conf,
            dir,
        }
    }

    fn start(&mut self, bin: &Path) {
        let log = std::fs::File::create(self.dir.path().join("serve.log")).expect("a log file");
        let child = Command::new(bin)
            .args(["serve", "--config"])
            .arg(&self.conf)
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .args(["--xml-listen", &format!("127.0.0.1:{}", self.xml_port)])
            .arg("--no-send")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start the gateway");
        self.child = Some(child);
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().map(Child::id).unwrap_or(0)
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The hosts in a whole document from 127.0.0.1:`port`, or None (refused,
/// closed early, cut).
fn poll(port: u16) -> Result<usize, std::io::ErrorKind> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.kind())?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let mut doc = Vec::new();
    s.read_to_end(&mut doc).map_err(|e| e.kind())?;
    let text = String::from_utf8_lossy(&doc);
    if !text.trim_end().ends_with("</GANGLIA_XML>") {
        return Err(std::io::ErrorKind::UnexpectedEof);
    }
    Ok(text.matches("<HOST ").count())
}

pub fn run(bin: &Path, o: &PairOptions) -> PairRun {
    let records = Records::load(o.servers);
    let (listen1, listen2) = (free_port(), free_port());
    let (relay1, relay2) = (Relay::start(listen2), Relay::start(listen1));
    let mut lone = Member::new("pair-lone", None);
    let mut gw1 = Member::new("pair-gw1", Some((relay1.port, listen1)));
    let mut gw2 = Member::new("pair-gw2", Some((relay2.port, listen2)));
    for m in [&mut lone, &mut gw1, &mut gw2] {
        m.start(bin);
    }
    thread::sleep(Duration::from_secs(1));
    let to = [lone.port, gw1.port, gw2.port];
    let stop = Arc::new(AtomicBool::new(false));
    // The servers: one real record each (the tod stamped), round robin,
    // every server every `every`, to all three.
    let fleet = fleet(records, o.servers, o.every, to, stop.clone());
    // Every server heard, every exchange settled (a full one each 30 s).
    thread::sleep(o.every + Duration::from_secs(35));
    let ticks = |m: &Member| cpu_ticks(m.pid());
    let cpu0 = [ticks(&lone), ticks(&gw1), ticks(&gw2)];
    let bytes0 = [
        relay1.bytes.load(Ordering::Relaxed),
        relay2.bytes.load(Ordering::Relaxed),
    ];
    let conns0 =
        relay1.connections.load(Ordering::Relaxed) + relay2.connections.load(Ordering::Relaxed);
    let t = Instant::now();
    thread::sleep(o.sustain);
    let secs = t.elapsed().as_secs_f64();
    let pct = |m: &Member, before: u64| {
        100.0 * (cpu_ticks(m.pid()).saturating_sub(before)) as f64 / clock_ticks() / secs
    };
    let (cpu_lone, cpu_gw1, cpu_gw2) =
        (pct(&lone, cpu0[0]), pct(&gw1, cpu0[1]), pct(&gw2, cpu0[2]));
    let bytes_1 = relay1.bytes.load(Ordering::Relaxed) - bytes0[0];
    let bytes_2 = relay2.bytes.load(Ordering::Relaxed) - bytes0[1];
    let exchanges = relay1.connections.load(Ordering::Relaxed)
        + relay2.connections.load(Ordering::Relaxed)
        - conns0;

    // The failover, read as gmetad reads a data_source of two addresses.
    let docs = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let polling = Arc::new(AtomicBool::new(true));
    let poller = poller(
        [gw1.xml_port, gw2.xml_port],
        o.servers,
        docs.clone(),
        polling.clone(),
    );
    thread::sleep(Duration::from_secs(5));
    gw1.kill();
    thread::sleep(Duration::from_secs(5));
    let spawned = Instant::now();
    gw1.start(bin);
    let mut first_doc_hosts = 0;
    let mut pull_ms = f64::NAN;
    while spawned.elapsed() < Duration::from_secs(120) {
        match poll(gw1.xml_port) {
            Ok(hosts) => {
                pull_ms = spawned.elapsed().as_secs_f64() * 1e3;
                first_doc_hosts = hosts;
                break;
            }
            Err(_) => thread::sleep(Duration::from_millis(20)),
        }
    }
    gw2.kill();
    thread::sleep(Duration::from_secs(10));
    polling.store(false, Ordering::Relaxed);
    let _ = poller.join();
    stop.store(true, Ordering::Relaxed);
    let _ = fleet.join();
    let docs = docs.lock().unwrap().clone();
    let gap_ms = docs
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64() * 1e3)
        .fold(0.0, f64::max);
    PairRun {
        servers: o.servers,
        every_s: o.every.as_secs_f64(),
        sustain_s: secs,
        bytes_1,
        bytes_2,
        exchanges,
        cpu_lone,
        cpu_gw1,
        cpu_gw2,
        pull_ms,
        first_doc_hosts,
        gap_ms,
        polls: docs.len(),
    }
}

/// The servers: one real record each (the tod stamped), round robin,
/// every server every `every`, to all three ports `to`, until `stop`.
fn fleet(
    records: Records,
    n: usize,
    every: Duration,
    to: [u16; 3],
    stop: Arc<AtomicBool>,
) -> thread::JoinHandle<()> {
    let records = Arc::new(records);
    thread::spawn(move || {
        let sockets = records.sockets();
        let rps = n as f64 / every.as_secs_f64();
        let t0 = Instant::now();
        let mut buf = Vec::new();
        let mut i = 0u64;
        while !stop.load(Ordering::Relaxed) {
            e2e::sleep_until(t0 + Duration::from_secs_f64(i as f64 / rps));
            let s = (i % n as u64) as usize;
            let f = records.fixture_of(s);
            buf.clear();
            buf.extend_from_slice(&records.data[f]);
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0)
                .to_string();
            let at = records.tod_at[f].clone();
            if at.len() == now.len() {
                buf[at].copy_from_slice(now.as_bytes());
            }
            for port in to {
                let _ = sockets[s].send_to(&buf, ("127.0.0.1", port));
            }
            i += 1;
        }
    })
}

/// Polls the pair as gmetad polls a data_source of two addresses, once a
/// second while `polling`: the instant of each whole document (at least
/// `want` hosts) goes into `docs`.
fn poller(
    ports: [u16; 2],
    want: usize,
    docs: Arc<Mutex<Vec<Instant>>>,
    polling: Arc<AtomicBool>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut last_good = 0;
        while polling.load(Ordering::Relaxed) {
            let order = [last_good, 0, 1];
            for &k in &order {
                match poll(ports[k]) {
                    Ok(hosts) if hosts >= want => {
                        last_good = k;
                        docs.lock().unwrap().push(Instant::now());
                        break;
                    }
                    // Refused: the next address at once.
                    Err(std::io::ErrorKind::ConnectionRefused) => continue,
                    // Accepted but not whole: gmetad stays on it.
                    _ => {
                        last_good = k;
                        break;
                    }
                }
            }
            thread::sleep(Duration::from_secs(1));
        }
    })
}

impl PairRun {
    pub fn print(&self) {
        let per_s = |b: u64| b as f64 / self.sustain_s;
        println!(
            "pair: {} servers every {:.0} s, {:.0} s: exchange {:.0} B/s asked by gw1, {:.0} B/s by gw2 ({} exchanges); CPU % of a core: alone {:.2}, gw1 {:.2}, gw2 {:.2}",
            self.servers,
            self.every_s,
            self.sustain_s,
            per_s(self.bytes_1),
            per_s(self.bytes_2),
            self.exchanges,
            self.cpu_lone,
            self.cpu_gw1,
            self.cpu_gw2,
        );
        println!(
            "pair: gw1 restarted with its state: XML port answering {:.0} ms after the spawn, {} hosts in its first document; gw2 killed: longest time between whole documents (a poll a second, {} polls) {:.0} ms",
            self.pull_ms, self.first_doc_hosts, self.polls, self.gap_ms
        );
    }
}
