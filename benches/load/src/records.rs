//! The load tool: the records the simulated servers send, and the packets they become.

use super::*;

// ---------------------------------------------------------------------------
// Records and the packets the gateway makes of them.

pub(crate) struct Records {
    /// Datagram text of each fixture.
    pub(crate) data: Vec<Vec<u8>>,
    /// Per fixture: reports as a server sends them over time, the same
    /// record with other numbers (same digit counts), sent in turn.
    pub(crate) variants: Vec<Vec<Vec<u8>>>,
    /// Per fixture: the steady-state packets of one report (values only).
    pub(crate) packets: Vec<Vec<Vec<u8>>>,
    /// Per fixture: the name of its last value packet (a record's completion).
    pub(crate) last_name: Vec<String>,
    /// `mpxstats -f flat` lines of each fixture.
    pub(crate) flat_lines: Vec<usize>,
    /// Per fixture: where the digits of the `tod` attribute lie (the same
    /// in every variant), and their number.
    pub(crate) tod_at: Vec<std::ops::Range<usize>>,
    pub(crate) tod_base: Vec<u64>,
    /// Per fixture: the last value packet's value minus the report's
    /// sequence number (the last metric is uptime, tod - tos, and each
    /// report's tod is its fixture's plus its number): how the sink tells
    /// which report of a server a completion belongs to.
    pub(crate) seq_offset: Vec<i64>,
    /// The sequence number the next [`offer`] starts at (each report of a
    /// server has a higher one than the last, across runs).
    pub(crate) next_seq: AtomicU64,
    /// Server i sends fixture `i % FIXTURES.len()` from `server_ip(i)`.
    pub(crate) servers: usize,
}

/// Reports per fixture with different numbers.
pub(crate) const VARIANTS: u64 = 16;

/// `record` with every element value's digits replaced by others of the
/// same count (no leading zero): what the next report of a server looks like.
pub(crate) fn vary(record: &[u8], seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(record.len());
    let mut n = seed.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut i = 0;
    while i < record.len() {
        let b = record[i];
        if b.is_ascii_digit() && out.last() == Some(&b'>') {
            let start = i;
            while i < record.len() && record[i].is_ascii_digit() {
                i += 1;
            }
            for k in 0..i - start {
                n ^= n << 13;
                n ^= n >> 7;
                n ^= n << 17;
                let digit = (n % 10) as u8;
                let digit = if k == 0 && i - start > 1 {
                    1 + digit % 9
                } else {
                    digit
                };
                out.push(b'0' + digit);
            }
            continue;
        }
        out.push(b);
        i += 1;
    }
    out
}

/// The digits of the `tod="..."` attribute of a record.
pub(crate) fn tod_digits(record: &[u8]) -> Option<std::ops::Range<usize>> {
    let key = b" tod=\"";
    let start = record.windows(key.len()).position(|w| w == key)? + key.len();
    let len = record[start..].iter().position(|b| !b.is_ascii_digit())?;
    (len > 0 && record.get(start + len) == Some(&b'"')).then_some(start..start + len)
}

pub(crate) fn server_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(127, 10 + (i >> 16) as u8, (i >> 8) as u8, i as u8)
}

impl Records {
    pub(crate) fn load(servers: usize) -> Records {
        let dir = crate::under_test::repo_root().join("tests/data/records");
        let settings = crate::default_settings();
        let counters = Counters::default();
        let mut events = Events::new(&counters, Duration::from_secs(3600));
        let mut r = Records {
            data: Vec::new(),
            variants: Vec::new(),
            packets: Vec::new(),
            last_name: Vec::new(),
            flat_lines: Vec::new(),
            tod_at: Vec::new(),
            tod_base: Vec::new(),
            seq_offset: Vec::new(),
            next_seq: AtomicU64::new(0),
            servers,
        };
        for name in FIXTURES {
            let data = std::fs::read(dir.join(format!("{name}.xml"))).expect("fixture");
            let flat = std::fs::read_to_string(dir.join(format!("{name}.flat"))).expect("flat");
            let mut pipeline = Engine::new(Arc::new(settings.clone()), Instant::now());
            let from = SocketAddr::from((server_ip(0), 40000));
            let t0 = Instant::now();
            pipeline.datagram(&data, from, t0, &mut events);
            // Reports 100 ms apart, as in the runs: the second is steady state.
            pipeline.datagram(&data, from, t0 + Duration::from_millis(100), &mut events);
            let packets: Vec<Vec<u8>> = pipeline.packets().map(<[u8]>::to_vec).collect();
            let last = packets
                .iter()
                .rev()
                .find_map(|p| match xdr::decode(p) {
                    Ok(Packet::Value { id, .. }) => Some(id.name.into_owned()),
                    _ => None,
                })
                .expect("a value packet");
            r.variants
                .push((0..VARIANTS).map(|seed| vary(&data, seed)).collect());
            let tod_at = tod_digits(&data).unwrap_or_else(|| panic!("{name}: no tod attribute"));
            r.tod_base.push(
                std::str::from_utf8(&data[tod_at.clone()])
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .expect("tod"),
            );
            assert!(
                r.variants[r.variants.len() - 1]
                    .iter()
                    .all(|v| tod_digits(v) == Some(tod_at.clone())),
                "{name}: the variants moved tod"
            );
            r.tod_at.push(tod_at);
            r.data.push(data);
            r.packets.push(packets);
            r.last_name.push(last);
            r.flat_lines.push(flat.lines().count());
            let fixture = r.data.len() - 1;
            r.seq_offset.push(r.find_seq_offset(fixture, &settings));
        }
        r
    }

    /// Report `seq` of `fixture` (variant `variant`) with its tod stamped,
    /// into `buf`.
    pub(crate) fn stamp(&self, fixture: usize, variant: usize, seq: u64, buf: &mut Vec<u8>) {
        let variants = &self.variants[fixture];
        buf.clear();
        buf.extend_from_slice(&variants[variant % variants.len()]);
        let at = self.tod_at[fixture].clone();
        let mut tod = self.tod_base[fixture] + seq;
        for b in buf[at].iter_mut().rev() {
            *b = b'0' + (tod % 10) as u8;
            tod /= 10;
        }
        assert_eq!(tod, 0, "tod outgrew its digits");
    }

    /// The value of `fixture`'s last value packet minus the report's
    /// sequence number, checked over a few reports: the sink relies on it.
    pub(crate) fn find_seq_offset(&self, fixture: usize, settings: &Settings) -> i64 {
        let counters = Counters::default();
        let mut events = Events::new(&counters, Duration::from_secs(3600));
        let mut pipeline = Engine::new(Arc::new(settings.clone()), Instant::now());
        let from = SocketAddr::from((server_ip(0), 40000));
        let t0 = Instant::now();
        let mut buf = Vec::new();
        let mut offset = None;
        for (k, seq) in [0u64, 1, 2, 7, 1000].into_iter().enumerate() {
            self.stamp(fixture, k, seq, &mut buf);
            pipeline.datagram(
                &buf,
                from,
                t0 + Duration::from_millis(100 * k as u64),
                &mut events,
            );
            let last = pipeline
                .packets()
                .filter_map(|p| match xdr::decode(p) {
                    Ok(Packet::Value { id, value, .. }) => {
                        Some((id.name.into_owned(), value.to_string()))
                    }
                    _ => None,
                })
                .last()
                .expect("a value packet");
            assert_eq!(last.0, self.last_name[fixture], "{}", FIXTURES[fixture]);
            let v: i64 = last.1.parse().unwrap_or_else(|_| {
                panic!(
                    "{}: last value {:?} ({}) is not a number",
                    FIXTURES[fixture], last.1, last.0
                )
            });
            let o = v - seq as i64;
            assert!(
                offset.is_none_or(|x| x == o),
                "{}: the last value packet ({}) does not follow tod, so the sink cannot \
                 tell reports apart",
                FIXTURES[fixture],
                last.0
            );
            offset = Some(o);
        }
        offset.expect("offset")
    }

    pub(crate) fn fixture_of(&self, server: usize) -> usize {
        server % FIXTURES.len()
    }

    pub(crate) fn packets_per_round(&self) -> usize {
        self.packets.iter().map(Vec::len).sum()
    }

    pub(crate) fn packets_per_record(&self) -> f64 {
        self.packets_per_round() as f64 / FIXTURES.len() as f64
    }

    /// Value packets (133) a steady report makes, averaged over the servers.
    pub(crate) fn value_packets_per_record(&self) -> f64 {
        let per_fixture: Vec<usize> = self
            .packets
            .iter()
            .map(|ps| {
                ps.iter()
                    .filter(|p| p.get(..4) == Some(&133u32.to_be_bytes()))
                    .count()
            })
            .collect();
        let n = self.servers.max(1);
        (0..n)
            .map(|s| per_fixture[self.fixture_of(s)])
            .sum::<usize>() as f64
            / n as f64
    }

    pub(crate) fn flat_lines_per_record(&self) -> f64 {
        self.flat_lines.iter().sum::<usize>() as f64 / FIXTURES.len() as f64
    }

    /// One socket per simulated server, bound to its own address.
    pub(crate) fn sockets(&self) -> Vec<UdpSocket> {
        (0..self.servers)
            .map(|i| UdpSocket::bind((server_ip(i), 0)).expect("bind a 127.x address"))
            .collect()
    }
}
