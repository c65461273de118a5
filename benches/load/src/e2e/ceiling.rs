//! gmond end to end, (a): the most value packets a stock gmond takes from a smooth sender.

use super::*;

// (a) gmond's ceiling.

#[derive(Clone, Debug)]
pub struct Step {
    pub rate: f64,
    pub achieved: f64,
    pub drops: u64,
}

impl Step {
    pub(crate) fn ok(&self) -> bool {
        self.drops == 0 && self.achieved >= 0.97 * self.rate
    }
}

#[derive(Clone, Debug, Default)]
pub struct Ceiling {
    pub hosts: usize,
    pub metrics: usize,
    pub step_len: Duration,
    pub steps: Vec<Step>,
    /// Highest rate that passed (value packets/s).
    pub best: f64,
    /// The sender could not go faster than the last passing step.
    pub sender_bound: bool,
}

pub(crate) fn ceiling(o: &E2eOptions) -> Result<Ceiling, String> {
    let (hosts, per_host) = (100usize, 100usize);
    let gmond = Gmond::start(free_port(), free_port(), "")?;
    let (meta, values) = ceiling_packets(hosts, per_host);
    let socket = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    socket
        .connect(("127.0.0.1", gmond.port))
        .map_err(|e| e.to_string())?;
    show_every_metric(&gmond, &socket, &meta, &values)?;
    let step_len = if o.smoke {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(3)
    };
    let mut sender = MmsgSender::new(&socket, &values);
    let mut c = Ceiling {
        hosts,
        metrics: meta.len(),
        step_len,
        ..Ceiling::default()
    };
    let mut try_rate = |rate: f64, c: &mut Ceiling| -> bool {
        gmond.wait_read(Duration::from_secs(2));
        thread::sleep(Duration::from_millis(100));
        let before = gmond.drops();
        let (sent, elapsed) = paced(&mut sender, rate, step_len, u64::MAX);
        gmond.wait_read(Duration::from_secs(2));
        let step = Step {
            rate,
            achieved: sent as f64 / elapsed.as_secs_f64(),
            drops: gmond.drops() - before,
        };
        println!(
            "load: gmond at {:.0} value packets/s (sent {:.0}/s): {} drops",
            step.rate, step.achieved, step.drops
        );
        let ok = step.ok();
        if ok {
            c.best = c.best.max(rate);
        }
        if step.drops == 0 && !ok {
            c.sender_bound = true;
        }
        c.steps.push(step);
        ok
    };
    // Up until a step drops, then bisect between the last pass and it.
    let (mut pass, mut fail) = (0.0f64, None);
    let mut rate = 10_000.0f64;
    while rate <= 400_000.0 {
        if try_rate(rate, &mut c) {
            pass = rate;
            rate *= if o.smoke { 2.0 } else { 1.5 };
        } else {
            fail = Some(rate);
            break;
        }
    }
    if pass == 0.0 {
        // Even the first step dropped: go down instead.
        let mut rate = 5_000.0;
        while rate >= 1_000.0 && !try_rate(rate, &mut c) {
            rate /= 2.0;
        }
    } else if let (false, Some(mut fail)) = (o.smoke || c.sender_bound, fail) {
        for _ in 0..3 {
            let mid = ((pass + fail) / 2.0 / 500.0).round() * 500.0;
            if mid <= pass || mid >= fail {
                break;
            }
            if try_rate(mid, &mut c) {
                pass = mid;
            } else {
                fail = mid;
            }
        }
    }
    Ok(c)
}

/// Metadata first, then one value each (gmond shows a metric once it has
/// both), slowly, until gmond shows every metric.
fn show_every_metric(
    gmond: &Gmond,
    socket: &UdpSocket,
    meta: &[Vec<u8>],
    values: &[Vec<u8>],
) -> Result<(), String> {
    let mut shown = 0;
    let mut drops = 0;
    for rate in [10_000.0, 2_000.0] {
        let before = gmond.drops();
        for packets in [meta, values] {
            let mut s = MmsgSender::new(socket, packets);
            paced(&mut s, rate, Duration::from_secs(30), packets.len() as u64);
            gmond.wait_read(Duration::from_secs(2));
        }
        drops = gmond.drops() - before;
        let x = gmond.xml()?;
        shown = x
            .hosts
            .iter()
            .filter(|(ip, _)| ip.starts_with("10.99."))
            .map(|(_, h)| h.metrics.len())
            .sum::<usize>();
        if shown == meta.len() && drops == 0 {
            break;
        }
    }
    if shown != meta.len() {
        return Err(format!(
            "gmond shows {shown} of {} metrics after their metadata and a value each \
             ({drops} drops at its socket)",
            meta.len()
        ));
    }
    Ok(())
}

/// Metadata (128) and value (133) packets of `per_host` metrics on each of
/// `hosts` spoofed hosts, shaped like the gateway's.
pub(crate) fn ceiling_packets(hosts: usize, per_host: usize) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let (mut meta, mut values) = (Vec::new(), Vec::new());
    for h in 0..hosts {
        let host = format!("10.99.{}.{}:ceiling{h}.example.org", h / 256, h % 256);
        for m in 0..per_host {
            let name = format!("xrootd.ceiling.metric{m:03}");
            let id = MetricId::new(&host, &name, true);
            let extra = [
                (Borrowed("SPOOF_HOST"), Borrowed(host.as_str())),
                (Borrowed("GROUP"), Borrowed("xrootd.ceiling")),
                (Borrowed("TITLE"), Borrowed("ceiling metric")),
            ];
            let packet = Packet::Metadata {
                id: id.clone(),
                meta: Metadata {
                    value_type: Borrowed("double"),
                    units: Borrowed("bytes/s"),
                    slope: Slope::Both,
                    tmax: 60,
                    dmax: 0,
                    extra: Borrowed(&extra),
                },
            };
            let mut p = Vec::new();
            xdr::encode(&mut p, &packet);
            meta.push(p);
            let mut p = Vec::new();
            let value = format!("{}", 1_000_000 + h * 1000 + m);
            xdr::encode(&mut p, &Packet::string_value(id, &value));
            values.push(p);
        }
    }
    (meta, values)
}
