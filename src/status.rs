//! What `xrd2ganglia status` shows of a running gateway, defined once:
//! the gateway's control socket ([`crate::daemon::control`]) writes it,
//! the `status` command reads it. On the wire it is one line of JSON, the
//! schema docs/operations.md documents (`version` changes if a field
//! changes meaning or goes away; new fields may be added).
//!
//! The protocol: the client writes [`REQUEST`] and a newline; the gateway
//! answers one line, a [`Status`] or an [`ErrorReply`], and closes.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The one request the control socket takes.
pub const REQUEST: &str = "status";
/// The schema's version, in every reply.
pub const SCHEMA_VERSION: u32 = 1;

/// The running gateway, as `status` shows it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Status {
    /// [`SCHEMA_VERSION`].
    pub version: u32,
    /// The gateway's release (`xrd2ganglia --version`).
    pub gateway: String,
    /// The gateway's pid.
    pub pid: u32,
    /// Every xrootd or cmsd the gateway tracks, and every address whose
    /// datagrams were rejected without making a source, by address.
    pub sources: Vec<SourceStatus>,
    /// Senders outside `allow`, by address.
    pub refused: Vec<AddressStatus>,
    /// Datagrams refused from addresses beyond the [`MAX_ADDRESSES`]
    /// listed.
    pub refused_unlisted: u64,
    /// Every counter of the `counters:` log line, by its name there.
    pub counters: BTreeMap<String, u64>,
    /// Datagrams the kernel dropped at the gateway's own listening
    /// sockets (their receive buffers were full: nothing of the gateway's
    /// counts them); null where /proc does not tell. Absent from a
    /// gateway before it had them.
    #[serde(default)]
    pub kernel_drops: Option<KernelDropStatus>,
    /// The state file and how its saves go; null when the gateway keeps
    /// none (and from a gateway before it had this).
    #[serde(default)]
    pub state_file: Option<StateFileStatus>,
    /// Every xrootd run whose detailed stream the gateway reads (at most
    /// `max_sources` per listening socket), by address and start: its
    /// lost packets per server. Absent from a gateway before it had this.
    #[serde(default)]
    pub detailed: Vec<DetailedStatus>,
    /// The pair (`peer`), if this gateway is one of two: absent alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair: Option<PairStatus>,
}

/// The state file, as `status` shows it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct StateFileStatus {
    pub path: String,
    /// Whether the last save worked: false while the counter state is not
    /// being saved (a full disk, an unwritable directory: `error` says).
    pub saved: bool,
    /// When a save last worked (null: none since the start).
    pub last_saved: Option<Heard>,
    /// Since when the saves fail (null while they work).
    pub failing_since: Option<Heard>,
    /// Why the last save failed (null while they work).
    pub error: Option<String>,
}

/// One gateway of a pair: the link, what each hears, who sends to gmond
/// (docs/pair.md, troubleshooting).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct PairStatus {
    /// Milliseconds since an exchange with the peer last completed
    /// (either side asking); null if none has.
    pub last_exchange_ms: Option<u64>,
    /// Milliseconds since this gateway last took a server's record.
    pub newest_record_ms: Option<u64>,
    /// The same for the peer, as it said at the last exchange (aged since).
    pub peer_newest_record_ms: Option<u64>,
    /// The peer's own host in gmond, as it named it.
    pub peer_own_host: Option<String>,
    /// This one hears no server its peer hears: its XML port refuses
    /// gmetad's polls, so that gmetad reads the peer.
    pub deaf: bool,
    /// This one sends nothing to gmond (`peer_standby`).
    pub standing_by: bool,
    /// What gmond showed of the peer's own host at the last read.
    pub evidence: Option<String>,
    /// Servers seen restarting after a gap while the peer was unreachable
    /// (`NAME (ADDRESS)`): their counters continue from what
    /// `recover_from` gives, read again while the link stays cut.
    /// Absent from a gateway before it had this.
    #[serde(default)]
    pub held: Vec<String>,
    /// A hold keeps counters unpublished now: the XML port refuses
    /// gmetad's polls until the held servers report again.
    #[serde(default)]
    pub holding: bool,
}

/// The kernel's drops at the gateway's listening sockets.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct KernelDropStatus {
    /// Since the sockets were bound (the gateway's start).
    pub since_start: u64,
    /// In the last [`RECENT`] (since the start, for a younger gateway).
    pub last_minute: u64,
}

/// What [`KernelDropStatus::last_minute`] covers.
pub const RECENT: Duration = Duration::from_secs(60);

/// One source: an xrootd or cmsd at one address.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SourceStatus {
    /// The sender's IP address.
    pub address: IpAddr,
    /// Its Ganglia host (the spoof string `IP:NAME` its metrics are
    /// filed under); null for an address none of whose datagrams was a
    /// record.
    pub host: Option<String>,
    /// `pgm` of its records (`xrootd`, `cmsd`).
    pub program: Option<String>,
    /// `ins` of its records (xrootd's `-n`; `anon` without).
    pub instance: Option<String>,
    /// The Ganglia cluster its metrics are in, where the gateway names it
    /// (`cluster_name`, with `xml_listen`); null when gmond names it.
    pub cluster: Option<String>,
    /// When its last record came.
    pub last_heard: Heard,
    /// Its records (reports) taken.
    pub records: u64,
    /// Datagrams from its address that were rejected (`parse_errors`).
    pub errors: u64,
}

/// One xrootd run (its address and start time) sending the detailed
/// stream, as `status` shows it: kept and dropped with that run's state.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DetailedStatus {
    /// The sender's IP address.
    pub address: IpAddr,
    /// The run's start time (the packets' `stod`), Unix seconds.
    pub started: u32,
    /// The Ganglia host of that run's summary records (`IP:NAME`, as in
    /// `sources[]`); null while none came here (its detailed metrics go
    /// out with its summary's only).
    pub host: Option<String>,
    /// When its last detailed packet came.
    pub last_heard: Heard,
    /// Logins kept (logged in, not disconnected yet).
    pub logins: u64,
    /// Files kept open (opened, not closed yet).
    pub files_open: u64,
    /// Its packets lost on the way, by the gaps in its sequence numbers
    /// (its part of the counter `detailed_lost`).
    pub lost: u64,
}

/// A sender refused (outside `allow`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct AddressStatus {
    pub address: IpAddr,
    /// Datagrams refused.
    pub count: u64,
    /// When the last came.
    pub last_heard: Heard,
}

/// When something was last heard from.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
pub struct Heard {
    /// Seconds ago (to the millisecond).
    pub seconds_ago: f64,
    /// As a Unix time, seconds (to the millisecond).
    pub unix: f64,
}

/// The gateway's answer to a request it cannot take.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ErrorReply {
    pub error: String,
}

/// At most this many addresses are listed per receive socket as refused
/// or with errors only (a flood of spoofed senders must not grow them
/// without bound); beyond, they are counted only.
pub const MAX_ADDRESSES: usize = 1024;

impl Heard {
    /// `at`, seen at `now` (the system clock read once for the reply).
    pub fn at(at: Instant, now: Instant, wall: SystemTime) -> Heard {
        let ago = now.saturating_duration_since(at);
        let unix = wall
            .checked_sub(ago)
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .unwrap_or(Duration::ZERO);
        Heard {
            seconds_ago: millis(ago),
            unix: millis(unix),
        }
    }
}

fn millis(d: Duration) -> f64 {
    d.as_millis() as f64 / 1000.0
}

/// Per address, how many and when the last: the senders refused, or
/// whose datagrams were rejected. Bounded at [`MAX_ADDRESSES`]; touched
/// only on those paths, never by a record taken.
#[derive(Debug, Default)]
pub struct AddressTally {
    by_ip: std::collections::HashMap<IpAddr, (u64, Instant)>,
    /// Counted beyond the bound.
    pub unlisted: u64,
}

impl AddressTally {
    pub fn note(&mut self, ip: IpAddr, now: Instant) {
        if let Some((count, last)) = self.by_ip.get_mut(&ip) {
            *count += 1;
            *last = now;
        } else if self.by_ip.len() < MAX_ADDRESSES {
            self.by_ip.insert(ip, (1, now));
        } else {
            self.unlisted += 1;
        }
    }

    /// How many from `ip`.
    pub fn count(&self, ip: IpAddr) -> u64 {
        self.by_ip.get(&ip).map_or(0, |(c, _)| *c)
    }

    pub fn iter(&self) -> impl Iterator<Item = (IpAddr, u64, Instant)> + '_ {
        self.by_ip.iter().map(|(ip, (c, at))| (*ip, *c, *at))
    }
}

impl Status {
    /// Merges what another receive socket's engine knows: its sources,
    /// and its refused senders added to these.
    pub fn merge(&mut self, other: Status) {
        self.sources.extend(other.sources);
        self.detailed.extend(other.detailed);
        for r in other.refused {
            match self.refused.iter_mut().find(|x| x.address == r.address) {
                Some(x) => {
                    x.count += r.count;
                    if r.last_heard.seconds_ago < x.last_heard.seconds_ago {
                        x.last_heard = r.last_heard;
                    }
                }
                None => self.refused.push(r),
            }
        }
        self.refused_unlisted += other.refused_unlisted;
    }

    /// Sources by address, then program and instance; refused senders by
    /// address; detailed-stream runs by address and start.
    pub fn sort(&mut self) {
        self.sources.sort_by(|a, b| {
            (a.address, &a.program, &a.instance).cmp(&(b.address, &b.program, &b.instance))
        });
        self.refused.sort_by_key(|r| r.address);
        self.detailed.sort_by_key(|d| (d.address, d.started));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tally_stays_bounded_and_counts_the_rest() {
        let mut t = AddressTally::default();
        let now = Instant::now();
        for i in 0..(MAX_ADDRESSES as u32 + 10) {
            t.note(IpAddr::from(i.to_be_bytes()), now);
        }
        t.note(IpAddr::from(0u32.to_be_bytes()), now);
        assert_eq!(t.iter().count(), MAX_ADDRESSES);
        assert_eq!(t.unlisted, 10);
        assert_eq!(t.count(IpAddr::from(0u32.to_be_bytes())), 2);
    }

    #[test]
    fn merging_adds_the_refused_of_each_socket() {
        let (now, wall) = (Instant::now(), SystemTime::now());
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let part = |count, ago: u64| Status {
            refused: vec![AddressStatus {
                address: ip,
                count,
                last_heard: Heard::at(now - Duration::from_secs(ago), now, wall),
            }],
            refused_unlisted: 1,
            ..Status::default()
        };
        let mut s = part(2, 5);
        s.merge(part(3, 1));
        assert_eq!(s.refused.len(), 1);
        assert_eq!(s.refused[0].count, 5);
        assert_eq!(s.refused[0].last_heard.seconds_ago, 1.0);
        assert_eq!(s.refused_unlisted, 2);
    }
}
