//! gmond end to end, the simulated servers and what gmond should show of them.

use super::*;

// ---------------------------------------------------------------------------
// The simulated servers and what gmond should show of them.

/// N servers, each its own 127.x address and socket; server s's k-th
/// report is variant k % 16 of its fixture.
pub(crate) struct Fleet<'r> {
    pub(crate) records: &'r Records,
    pub(crate) sockets: Vec<UdpSocket>,
    pub(crate) to: SocketAddr,
    /// Reports sent, per server.
    pub(crate) sent: Vec<u32>,
    /// When each server's last report was sent.
    pub(crate) last: Vec<Option<Instant>>,
    /// When each server sent each of its reports (to judge a document
    /// polled while they send).
    pub(crate) history: Vec<Vec<Instant>>,
    /// The next server in the round.
    pub(crate) next: usize,
    pub(crate) total: u64,
}

impl<'r> Fleet<'r> {
    pub(crate) fn new(records: &'r Records, to: SocketAddr) -> Fleet<'r> {
        let n = records.servers;
        Fleet {
            records,
            sockets: records.sockets(),
            to,
            sent: vec![0; n],
            last: vec![None; n],
            history: vec![Vec::new(); n],
            next: 0,
            total: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.sockets.len()
    }

    /// Reports sent, by every server.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    pub(crate) fn send(&mut self, s: usize) {
        let variants = &self.records.variants[self.records.fixture_of(s)];
        let data = &variants[self.sent[s] as usize % variants.len()];
        if self.sockets[s].send_to(data, self.to).is_ok() {
            self.sent[s] += 1;
            let now = Instant::now();
            self.last[s] = Some(now);
            self.history[s].push(now);
            self.total += 1;
        }
    }

    /// One report from every server, spread evenly over `within`.
    pub(crate) fn burst(&mut self, within: Duration) -> Duration {
        let t0 = Instant::now();
        let n = self.len();
        for s in 0..n {
            let due = t0 + within.mul_f64(s as f64 / n as f64);
            sleep_until(due);
            self.send(s);
        }
        t0.elapsed()
    }

    /// Reports round robin at `rps` for `duration`: every server reports
    /// every n / rps seconds, the phases spread evenly over that interval.
    pub(crate) fn run(&mut self, rps: f64, duration: Duration) {
        let t0 = Instant::now();
        let mut i = 0u64;
        while t0.elapsed() < duration {
            sleep_until(t0 + Duration::from_secs_f64(i as f64 / rps));
            let s = self.next;
            self.next = (self.next + 1) % self.len();
            self.send(s);
            i += 1;
        }
    }
}

pub(crate) fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        thread::sleep(t - now);
    }
}

/// (metric name, value text) of one record's value packets.
pub(crate) type Values = Vec<(String, String)>;

/// The metric values a host's last record becomes: a private pipeline fed
/// the same reports (cached per fixture and count: hosts of one fixture
/// that sent as many reports send the same values).
pub(crate) struct Expect<'r> {
    pub(crate) records: &'r Records,
    pub(crate) settings: Settings,
    pub(crate) cache: HashMap<(usize, u32), Rc<Values>>,
}

impl<'r> Expect<'r> {
    pub(crate) fn new(records: &'r Records) -> Expect<'r> {
        let settings = crate::default_settings();
        Expect {
            records,
            settings,
            cache: HashMap::new(),
        }
    }

    pub(crate) fn last(&mut self, fixture: usize, reports: u32) -> Rc<Values> {
        let (records, settings) = (self.records, &self.settings);
        self.cache
            .entry((fixture, reports))
            .or_insert_with(|| {
                let counters = Counters::default();
                let mut events = Events::new(&counters, Duration::from_secs(3600));
                let mut pipeline =
                    Engine::new(std::sync::Arc::new(settings.clone()), Instant::now());
                let from = SocketAddr::from((server_ip(0), 40000));
                let variants = &records.variants[fixture];
                let t0 = Instant::now();
                for k in 0..reports {
                    pipeline.datagram(
                        &variants[k as usize % variants.len()],
                        from,
                        t0 + Duration::from_secs(u64::from(k)),
                        &mut events,
                    );
                }
                Rc::new(
                    pipeline
                        .packets()
                        .filter_map(|p| match xdr::decode(p) {
                            Ok(Packet::Value { id, value, .. }) if id.name != "heartbeat" => {
                                Some((id.name.into_owned(), value.to_string()))
                            }
                            _ => None,
                        })
                        .collect(),
                )
            })
            .clone()
    }
}

/// What gmond's XML shows of the fleet.
#[derive(Clone, Debug, Default)]
pub struct Check {
    pub hosts: usize,
    pub hosts_present: usize,
    pub metrics: usize,
    pub metrics_present: usize,
    /// Metrics showing the value of their host's last report.
    pub metrics_last: usize,
    /// Hosts with every metric, each with its last value.
    pub hosts_all_last: usize,
    /// Hosts whose lag behind their last report is within the target.
    pub hosts_fresh: usize,
    pub max_lag: Option<f64>,
    pub xml_bytes: usize,
    /// The first problem seen, for the reader.
    pub example: Option<String>,
}

impl Check {
    pub(crate) fn complete(&self) -> bool {
        self.hosts > 0 && self.metrics_present == self.metrics
    }

    pub(crate) fn all_last(&self) -> bool {
        self.hosts > 0 && self.hosts_all_last == self.hosts
    }
}

/// Compares gmond's XML with what every server's last report became.
/// With `poll_at`, also each host's lag: (poll time - its last report's
/// send time) - its TN.
pub(crate) fn check(
    fleet: &Fleet,
    expect: &mut Expect,
    xml: &Xml,
    poll_at: Option<Instant>,
) -> Check {
    let mut c = Check {
        hosts: fleet.len(),
        xml_bytes: xml.bytes,
        ..Check::default()
    };
    let problem = |c: &mut Check, text: String| {
        if c.example.is_none() {
            c.example = Some(text);
        }
    };
    for s in 0..fleet.len() {
        let want = expect.last(fleet.records.fixture_of(s), fleet.sent[s]);
        c.metrics += want.len();
        let ip = server_ip(s).to_string();
        let Some(host) = xml.hosts.get(&ip) else {
            problem(&mut c, format!("host {ip} not in gmond"));
            continue;
        };
        c.hosts_present += 1;
        let (mut present, mut last) = (0, 0);
        for (name, value) in want.iter() {
            match host.metrics.get(name) {
                None => problem(&mut c, format!("{ip}: no metric {name}")),
                Some(v) => {
                    present += 1;
                    if v == value {
                        last += 1;
                    } else {
                        problem(
                            &mut c,
                            format!("{ip}: {name} = {v:?}, its last report made {value:?}"),
                        );
                    }
                }
            }
        }
        c.metrics_present += present;
        c.metrics_last += last;
        if last == want.len() {
            c.hosts_all_last += 1;
        }
        if let (Some(poll), Some(sent)) = (poll_at, fleet.last[s]) {
            let lag = poll.duration_since(sent).as_secs_f64() - host.tn;
            c.max_lag = Some(c.max_lag.map_or(lag, |m: f64| m.max(lag)));
            if lag <= LAG_TARGET {
                c.hosts_fresh += 1;
            } else {
                problem(&mut c, format!("{ip}: {lag:.1} s behind its last report"));
            }
        }
    }
    c
}
