//! The detailed stream ([`crate::detailed`]) as metrics of the server's
//! own host: who moved how much, per VO, per protocol, per client domain
//! (and per user, when a site turns it on).
//!
//! **Per server instance** (the sender's address and `stod`): its logins
//! (`u`, by dictid: the names each counts under), its open files (`f`
//! opens, by file dictid: the names and what transfer records said so far),
//! the sequence numbers last seen (the f-stream's own, and the one every
//! other packet to this destination shares), and the totals. Bounds: at
//! most `max_sources` instances (the least recently heard from goes);
//! per instance at most `detailed_max_logins` logins and as many open
//! files (beyond, the oldest, the lowest dictid, goes: a lost disconnect
//! or close, or a login flood, cannot grow it); per list at most
//! 4 x its cap + 16 names tallied (later names count as `other`). An
//! instance is dropped when a server of the same address, port and
//! instance name announces a new start (`=`), or at the cap.
//!
//! **Names**: a file counts under its user's VO (`o=`, else the first
//! group `g=`, else the site's path rule on the file's path, else
//! `other`), protocol (the userid's `xroot/`, `http/`), client domain (the
//! host without its first label) and, with `detailed_per_user`, user
//! (`n=`, else the userid's name). Each list sends at most its cap of
//! names (`detailed_max_vos`, ...), the rest as `other`: the first names
//! seen while there is room, then a name that has moved more than twice
//! the bytes of the smallest named one takes its place. A name's counters
//! count what moved while it was named (a name that loses its place stops
//! reporting, and goes on from where it was if it comes back); `other`
//! counts the rest, so the list's sum is the server's total.
//!
//! **Counters** (bytes read, written, files opened, closed) are this
//! instance's totals: they start from 0 with each xrootd run, and go out
//! only to the xrootd source whose `tos` is the instance's `stod` (as the
//! g-stream's), whose series keep them continuous through xrootd and
//! gateway restarts ([`super::series`]). The gauges (files open, users)
//! are counted per name, `other` taking the rest.
//!
//! Here the servers' instances and what each packet does to them; one
//! list's names, counts and ranking are `detailed/list.rs`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use crate::config::DetailedSettings;
use crate::detailed::{self, Auth, Body, Bytes, Packet, Record, UserId};
use crate::mapping::{MappedRecord, Mapper};

use super::packets::PacketBatch;
use super::source::{Source, Sources};
use super::{Appending, Context, Due, interval_seconds};

mod list;

pub(crate) use list::Counts;
use list::List;

/// The lists, in the order they are sent.
const VO: usize = 0;
const PROTOCOL: usize = 1;
const DOMAIN: usize = 2;
const USER: usize = 3;
const LISTS: usize = 4;

/// Each list's metrics: its catalog names, by field.
const FIELDS: [[&str; 6]; LISTS] = [
    [
        "detailed.vo.i.bytes_read",
        "detailed.vo.i.bytes_written",
        "detailed.vo.i.files_opened",
        "detailed.vo.i.files_closed",
        "detailed.vo.i.files_open",
        "detailed.vo.i.users",
    ],
    [
        "detailed.protocol.i.bytes_read",
        "detailed.protocol.i.bytes_written",
        "detailed.protocol.i.files_opened",
        "detailed.protocol.i.files_closed",
        "detailed.protocol.i.files_open",
        "detailed.protocol.i.users",
    ],
    [
        "detailed.domain.i.bytes_read",
        "detailed.domain.i.bytes_written",
        "detailed.domain.i.files_opened",
        "detailed.domain.i.files_closed",
        "detailed.domain.i.files_open",
        "detailed.domain.i.users",
    ],
    [
        "detailed.user.i.bytes_read",
        "detailed.user.i.bytes_written",
        "detailed.user.i.files_opened",
        "detailed.user.i.files_closed",
        "detailed.user.i.files_open",
        "detailed.user.i.users",
    ],
];

/// The name everything unnamed counts under (id 0 of every list).
pub const OTHER: &str = "other";

/// The names a login or a file counts under, by list.
type Ids = [u32; LISTS];

#[derive(Debug)]
struct Login {
    ids: Ids,
}

#[derive(Debug)]
struct OpenFile {
    ids: Ids,
    /// What transfer records said so far (what the close adds is the rest).
    seen: Bytes,
}

/// One xrootd run, as its detailed stream tells it.
#[derive(Debug)]
pub(crate) struct Server {
    /// [`detailed::server_ident`] of its `=` packet, when one came.
    ident: Option<u64>,
    map_seq: Option<u8>,
    f_seq: Option<u8>,
    logins: BTreeMap<u32, Login>,
    files: BTreeMap<u32, OpenFile>,
    lists: [List; LISTS],
    last_heard: Instant,
    /// The metrics this run's totals have gone out as (their name keys):
    /// the first time, the counter continues from what was sent before
    /// (another run, or another gateway process) instead of taking this
    /// run's reading, which starts from 0, as its own.
    counted: HashSet<u64>,
    /// Packets lost, by the sequence numbers.
    pub lost: u64,
}

/// What one packet did that is counted apart.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// f-stream records read.
    pub records: u64,
    /// Packets lost before this one (sequence gap).
    pub lost: u64,
    /// Records naming a dictid never mapped (a close of a file never
    /// opened, an open by a user never logged in) or mapped again.
    pub unmatched: u64,
    /// Logins or open files forgotten at the bound.
    pub evicted: u64,
}

impl Server {
    fn new(s: &DetailedSettings, now: Instant) -> Server {
        let user_cap = if s.per_user { s.max_users } else { 0 };
        Server {
            ident: None,
            map_seq: None,
            f_seq: None,
            logins: BTreeMap::new(),
            files: BTreeMap::new(),
            lists: [
                List::new(s.max_vos),
                List::new(s.max_protocols),
                List::new(s.max_domains),
                List::new(user_cap),
            ],
            last_heard: now,
            counted: HashSet::new(),
            lost: 0,
        }
    }

    /// Notes a packet's sequence number: a gap of less than 128 is
    /// counted as lost packets; a larger one (a packet late or repeated)
    /// is not, and does not move the expected number back.
    fn sequence(&mut self, f: bool, pseq: u8) -> u64 {
        let last = if f {
            &mut self.f_seq
        } else {
            &mut self.map_seq
        };
        let lost = match *last {
            None => 0,
            Some(prev) => {
                let gap = pseq.wrapping_sub(prev.wrapping_add(1));
                if gap >= 128 {
                    return 0;
                }
                u64::from(gap)
            }
        };
        *last = Some(pseq);
        self.lost += lost;
        lost
    }

    /// A login: the names it counts under.
    fn login(
        &mut self,
        dictid: u32,
        userid: &[u8],
        auth: Option<&[u8]>,
        cap: usize,
        t: &mut Tally,
    ) {
        let id = UserId::parse(userid);
        let a = auth.map(Auth::parse).unwrap_or_default();
        let vo = if !a.org.is_empty() {
            a.org
        } else {
            a.first_group()
        };
        let user = if a.name.is_empty() { id.user } else { a.name };
        let ids = [
            self.lists[VO].id(vo),
            self.lists[PROTOCOL].id(id.protocol),
            self.lists[DOMAIN].id(id.domain()),
            self.lists[USER].id(user),
        ];
        if let Some(old) = self.logins.remove(&dictid) {
            t.unmatched += 1;
            self.logout(&old);
        }
        while self.logins.len() >= cap.max(1) {
            let Some((_, oldest)) = self.logins.pop_first() else {
                break;
            };
            t.evicted += 1;
            self.logout(&oldest);
        }
        for (list, &i) in self.lists.iter_mut().zip(&ids) {
            list.names[i as usize].users += 1;
        }
        self.logins.insert(dictid, Login { ids });
    }

    fn logout(&mut self, login: &Login) {
        for (list, &i) in self.lists.iter_mut().zip(&login.ids) {
            let n = &mut list.names[i as usize];
            n.users = n.users.saturating_sub(1);
        }
    }

    /// The records of an `f` packet.
    fn files(
        &mut self,
        records: detailed::Records<'_>,
        s: &DetailedSettings,
        t: &mut Tally,
    ) -> Option<detailed::Error> {
        for r in records {
            let r = match r {
                Ok(r) => r,
                Err(e) => return Some(e),
            };
            t.records += 1;
            match r {
                Record::Open {
                    file, user, lfn, ..
                } => self.open(file, user, lfn, s, t),
                Record::Xfr { file, bytes } => {
                    if let Some(f) = self.files.get_mut(&file) {
                        let (r, w) = moved(&f.seen, &bytes);
                        f.seen = bytes;
                        let ids = f.ids;
                        self.count(&ids, r, w, |_| {});
                    } else {
                        t.unmatched += 1;
                    }
                }
                Record::Close { file, bytes, .. } => {
                    let (ids, seen) = match self.files.remove(&file) {
                        Some(f) => {
                            self.unopen(&f.ids);
                            (f.ids, f.seen)
                        }
                        None => {
                            t.unmatched += 1;
                            ([0; LISTS], Bytes::default())
                        }
                    };
                    let (r, w) = moved(&seen, &bytes);
                    self.count(&ids, r, w, |c| c.closed += 1);
                }
                Record::Disc { user } => {
                    if let Some(l) = self.logins.remove(&user) {
                        self.logout(&l);
                    } else if user != 0 {
                        // 0: a login that failed (no `u` record was sent).
                        t.unmatched += 1;
                    }
                }
                Record::Unknown(_) => {}
            }
        }
        None
    }

    fn open(
        &mut self,
        file: u32,
        user: Option<u32>,
        lfn: Option<&[u8]>,
        s: &DetailedSettings,
        t: &mut Tally,
    ) {
        let mut ids = match user.and_then(|u| self.logins.get(&u)) {
            Some(l) => l.ids,
            None => {
                t.unmatched += 1;
                [0; LISTS]
            }
        };
        if ids[VO] == 0
            && let Some(vo) = lfn.and_then(|p| s.vo_of_path(p))
        {
            ids[VO] = self.lists[VO].id(vo.as_bytes());
        }
        if let Some(old) = self.files.remove(&file) {
            t.unmatched += 1;
            self.unopen(&old.ids);
        }
        while self.files.len() >= s.max_logins.max(1) {
            let Some((_, oldest)) = self.files.pop_first() else {
                break;
            };
            t.evicted += 1;
            self.unopen(&oldest.ids);
        }
        for (list, &i) in self.lists.iter_mut().zip(&ids) {
            list.names[i as usize].open += 1;
        }
        self.count(&ids, 0, 0, |c| c.opened += 1);
        self.files.insert(
            file,
            OpenFile {
                ids,
                seen: Bytes::default(),
            },
        );
    }

    fn unopen(&mut self, ids: &Ids) {
        for (list, &i) in self.lists.iter_mut().zip(ids) {
            let n = &mut list.names[i as usize];
            n.open = n.open.saturating_sub(1);
        }
    }

    /// Adds bytes read and written, and what `f` counts, under `ids`.
    #[inline]
    fn count(&mut self, ids: &Ids, read: u64, written: u64, f: impl Fn(&mut Counts)) {
        for (list, &i) in self.lists.iter_mut().zip(ids) {
            list.add(i, read.saturating_add(written), |c| {
                c.read = c.read.saturating_add(read);
                c.written = c.written.saturating_add(written);
                f(c);
            });
        }
    }

    /// Every name a list sends now (its named ones, then `other`) with its
    /// counters and gauges, for tests and for [`Detailed::append`].
    pub(crate) fn sent(&self, list: usize) -> impl Iterator<Item = (&str, Counts, u64, u64)> {
        let l = &self.lists[list];
        let total_open = self.files.len() as u64;
        let total_users = self.logins.len() as u64;
        let (named_open, named_users) = l
            .names
            .iter()
            .skip(1)
            .filter(|n| n.named)
            .fold((0, 0), |(o, u), n| (o + n.open, u + n.users));
        let named = l
            .names
            .iter()
            .skip(1)
            .filter(|n| n.named)
            .map(|n| (&*n.text, n.counts, n.open, n.users));
        let other = (
            OTHER,
            l.other,
            total_open.saturating_sub(named_open),
            total_users.saturating_sub(named_users),
        );
        named.chain(std::iter::once(other))
    }

    pub(crate) fn logins(&self) -> usize {
        self.logins.len()
    }

    pub(crate) fn open_files(&self) -> usize {
        self.files.len()
    }

    /// When its last packet came.
    pub(crate) fn last_heard(&self) -> Instant {
        self.last_heard
    }
}

/// Bytes (read, written) between what was seen and what is said now
/// (never negative: a count that went down adds nothing).
fn moved(seen: &Bytes, now: &Bytes) -> (u64, u64) {
    (
        now.read_total().saturating_sub(seen.read_total()),
        now.write.saturating_sub(seen.write),
    )
}

/// Every server instance of one engine, and scratch to map their totals.
#[derive(Default)]
pub(super) struct Detailed {
    servers: HashMap<(IpAddr, u32), Server>,
    mapped: MappedRecord,
    keys: Vec<String>,
    counts: Vec<(usize, &'static str, u64)>,
}

impl Detailed {
    pub(super) fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Every instance kept: its address, its start (`stod`) and it.
    pub(super) fn iter(&self) -> impl Iterator<Item = (IpAddr, u32, &Server)> {
        self.servers.iter().map(|(&(ip, stod), s)| (ip, stod, s))
    }

    /// The instance of `ip` started at `stod`, for tests.
    #[cfg(test)]
    pub(crate) fn server(&self, ip: IpAddr, stod: u32) -> Option<&Server> {
        self.servers.get(&(ip, stod))
    }

    /// How many instances are kept.
    pub(super) fn servers(&self) -> usize {
        self.servers.len()
    }

    /// Takes one decoded packet from `from`: returns what it did and, if
    /// its f-stream records ended at a bad one, the error. `cap` bounds
    /// the instances (`max_sources`); the instances it dropped are counted
    /// in `dropped`.
    pub(super) fn take(
        &mut self,
        packet: Packet<'_>,
        from: SocketAddr,
        now: Instant,
        s: &DetailedSettings,
        cap: usize,
        dropped: &mut usize,
    ) -> (Tally, Option<detailed::Error>) {
        let key = (from.ip(), packet.header.stod);
        if !self.servers.contains_key(&key) {
            while self.servers.len() >= cap.max(1) {
                let Some(&oldest) = self
                    .servers
                    .iter()
                    .min_by_key(|(_, s)| s.last_heard)
                    .map(|(k, _)| k)
                else {
                    break;
                };
                self.servers.remove(&oldest);
                *dropped += 1;
            }
        }
        let server = self
            .servers
            .entry(key)
            .or_insert_with(|| Server::new(s, now));
        server.last_heard = now;
        let mut t = Tally {
            lost: server.sequence(packet.header.f_sequence(), packet.header.pseq),
            ..Tally::default()
        };
        let mut error = None;
        match packet.body {
            Body::User {
                dictid,
                userid,
                auth,
            } => server.login(dictid, userid, auth, s.max_logins, &mut t),
            Body::Files(records) => error = server.files(records, s, &mut t),
            Body::Path { .. } | Body::Other => {}
            Body::Ident { info } => {
                let ident = detailed::server_ident(info);
                server.ident = Some(ident);
                // The same server (address, port, instance) started
                // again: its older runs are gone.
                let before = self.servers.len();
                self.servers.retain(|&(ip, stod), old| {
                    ip != key.0 || stod >= key.1 || old.ident != Some(ident)
                });
                *dropped += before - self.servers.len();
            }
        }
        (t, error)
    }

    /// Appends the metrics of the instance `source` runs (its address and
    /// start time), each on its metric's schedule, counters continuous.
    /// Returns (metadata, values) appended.
    pub(super) fn append(
        &mut self,
        batch: &mut PacketBatch,
        mapper: &mut Mapper,
        source: &mut Source,
        ip: IpAddr,
        how: Appending<'_>,
    ) -> (u64, u64) {
        let Appending {
            now_s,
            settings,
            answering,
        } = how;
        let (Some((tos, _)), Some(naming)) = (source.started(), source.naming()) else {
            return (0, 0);
        };
        let Some(server) = self.servers.get_mut(&(ip, tos)) else {
            return (0, 0);
        };
        self.keys.clear();
        self.counts.clear();
        let lists = if settings.detailed.per_user {
            LISTS
        } else {
            USER
        };
        for (list, fields) in FIELDS.iter().enumerate().take(lists) {
            for (name, c, open, users) in server.sent(list) {
                let entry = self.keys.len();
                self.keys.push(name.to_string());
                let values = [c.read, c.written, c.opened, c.closed, open, users];
                for (field, v) in fields.iter().zip(values) {
                    self.counts.push((entry, field, v));
                }
            }
        }
        let keys: Vec<&str> = self.keys.iter().map(String::as_str).collect();
        mapper.map_keyed_counts(naming.parts(), &keys, &self.counts, &mut self.mapped);
        let interval_s = interval_seconds(settings);
        let cap = settings.max_metrics_per_source;
        let (mut metadata, mut values) = (0, 0);
        for m in self.mapped.metrics() {
            let found = if answering {
                source.metric_at(m.name_key).map(|at| (at, Due::Answer))
            } else {
                let found = source.metric(m.name_key, now_s, interval_s, false, cap);
                found.map(|(at, metadata)| (at, Due::Report { metadata }))
            };
            let Some((at, due)) = found else {
                continue;
            };
            if !answering && server.counted.insert(m.name_key) {
                source.restart_metric(at);
            }
            let (m, v) = source.append_metric(batch, at, &m, due, now_s, settings);
            metadata += m;
            values += v;
        }
        (metadata, values)
    }

    /// Appends the metrics of the instance that `from` started at `stod`
    /// to its xrootd source's, if that has reported: after a packet.
    pub(super) fn report_after_packet(
        &mut self,
        batch: &mut PacketBatch,
        mapper: &mut Mapper,
        sources: &mut Sources,
        ip: IpAddr,
        stod: u32,
        cx: &mut Context<'_, '_>,
    ) {
        let Some(source) = sources.xcache_of(ip, stod, None) else {
            return;
        };
        source.head(batch);
        self.report(batch, mapper, source, ip, cx);
    }

    /// Appends the metrics of the instance `source` runs, if any server
    /// sends the detailed stream, counted as sent: after its record's.
    pub(super) fn report(
        &mut self,
        batch: &mut PacketBatch,
        mapper: &mut Mapper,
        source: &mut Source,
        ip: IpAddr,
        cx: &mut Context<'_, '_>,
    ) {
        if self.is_empty() {
            return;
        }
        let (metadata, values) = self.append(batch, mapper, source, ip, cx.appending(false));
        cx.events.sent(metadata, values);
    }
}
