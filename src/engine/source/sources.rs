//! The sources of one engine, by sender address: found, created (with
//! what the state file kept of them), told of a report, and evicted at
//! `max_sources`.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use crate::config::Settings;
use crate::mapping::MappedRecord;

use super::super::Context;
use super::super::clusters::key_of;
use super::super::packets::{ForgottenHost, HostId};
use super::Source;

/// Sources by sender IP (a handful per IP: xrootd, cmsd, instances).
#[derive(Default)]
pub(in crate::engine) struct Sources {
    by_ip: HashMap<IpAddr, Vec<Source>>,
    len: usize,
    /// The hosts of sources forgotten since the daemon last took them
    /// ([`super::Engine::forgotten`]): they leave the send queues and
    /// the table too.
    forgotten: Vec<ForgottenHost>,
}

impl Sources {
    /// Sources known now.
    pub(in crate::engine) fn len(&self) -> usize {
        self.len
    }

    /// Every source, with its sender address.
    pub(in crate::engine) fn iter(&self) -> impl Iterator<Item = (IpAddr, &Source)> {
        self.by_ip
            .iter()
            .flat_map(|(ip, list)| list.iter().map(move |s| (*ip, s)))
    }

    /// Every source, with its sender address, to change.
    pub(in crate::engine) fn iter_with_ip_mut(
        &mut self,
    ) -> impl Iterator<Item = (IpAddr, &mut Source)> {
        self.by_ip
            .iter_mut()
            .flat_map(|(ip, list)| list.iter_mut().map(move |s| (*ip, s)))
    }

    /// The sources of one sender address.
    pub(in crate::engine) fn of_ip(&self, ip: IpAddr) -> impl Iterator<Item = &Source> {
        self.by_ip.get(&ip).into_iter().flatten()
    }

    /// Whether any source sends from `ip`.
    pub(in crate::engine) fn has_ip(&self, ip: IpAddr) -> bool {
        self.by_ip.contains_key(&ip)
    }

    /// The source of `program` at `ip`.
    pub(in crate::engine) fn find(&self, ip: IpAddr, program: &str) -> Option<&Source> {
        self.by_ip.get(&ip)?.iter().find(|s| s.program == program)
    }

    /// The hosts forgotten by the last datagram.
    pub(in crate::engine) fn forgotten(&self) -> &[ForgottenHost] {
        &self.forgotten
    }

    /// A new datagram: what the last one forgot goes, whether or not it
    /// was taken (bounded).
    pub(in crate::engine) fn clear_forgotten(&mut self) {
        self.forgotten.clear();
    }

    /// The source of a record just mapped, from `from` at `now`: created
    /// if new (with what the state file kept of it), its report noted
    /// (interval, TMAX, a restart), its host name and TMAX set for its
    /// metadata, and whether this report sends every metadata.
    pub(in crate::engine) fn report(
        &mut self,
        from: SocketAddr,
        (tos, pid): (u32, u32),
        mapped: &MappedRecord,
        cx: &mut Context<'_, '_>,
    ) -> &mut Source {
        let (now, now_s, settings, saved) = (cx.now, cx.now_s, cx.settings, cx.saved);
        let events = &mut *cx.events;
        let (ip, program, cap) = (from.ip(), &mapped.program, settings.max_sources);
        // An established source evicted keeps its counters where the state
        // file's unclaimed sources wait, to continue if it comes back.
        let mut parked = 0;
        let mut park = |ip: IpAddr, gone: &Source| {
            if let (Some(s), Some(_), Some(id)) = (saved, gone.watched, &gone.id) {
                s.unwatch(ip, &id.name);
            }
            let kept = gone.established()
                && saved.is_some_and(|s| {
                    gone.to_saved()
                        .is_some_and(|g| s.park(ip, &gone.program, g, cap))
                });
            parked += usize::from(kept);
        };
        let (source, created, evicted) =
            self.get_or_insert(ip, program, now, cap, mapped.len(), &mut park);
        if evicted.total > 0 {
            events.sources_evicted(ip, evicted.total, evicted.established, parked, cap);
        }
        if created {
            events.source_added();
            if let Some(kept) = saved.and_then(|s| s.claim(ip, program, now)) {
                source.restore(kept, now_s);
            }
            source.floors = saved.and_then(|s| s.floors_of(ip, &mapped.host.name, now));
        }
        let tmax = announced_tmax(source.observe(now, settings.tmax), settings);
        let restarted = source.note_start(tos, pid);
        if restarted || created {
            source.peer_dirty = true;
        }
        if restarted {
            events.restarted(from, &mapped.host.spoof, program, tos, pid);
            // Its counters count from zero again: continue from what was sent.
            for state in &mut source.states {
                state.restart();
            }
            source.pfc = None;
            // After a gap, the peer unreachable: the last reports of the
            // run that ended may be what this gateway missed, and its
            // peer cannot say so. What gmetad stored is the other witness
            // (`recover_from`): the counters are held until it is read.
            let watch = source.missed
                && settings.peer.is_some()
                && !settings.recover_from.is_empty()
                && saved.is_some_and(|s| {
                    !s.peer_reachable() && s.watch(ip, &mapped.host.name, now, cap)
                });
            if watch {
                source.watched = Some(0);
                events.restart_held(from, &mapped.host.spoof, program);
            }
        }
        // A watched source takes what was read for it, at each record.
        if let (Some(seen), Some(s)) = (source.watched, saved) {
            let news = s.watch_news(ip, &mapped.host.name, seen);
            if news.floors.is_some() {
                source.floors = news.floors;
            }
            source.holding = news.holding;
            source.watched = (!news.ended).then_some(news.answers);
        }
        // A new TMAX (known from the second report on) goes out with each
        // metric's next periodic metadata, which is spread over time:
        // sources that started together learn their TMAX together, and
        // resending everything for it would be their first burst all over
        // again.
        source.refresh_all =
            restarted || source.host != mapped.host.spoof || source.metadata_tmax == 0;
        if source.refresh_all {
            source.host.clear();
            source.host.push_str(&mapped.host.spoof);
            source.host_key = crate::mapping::name_key(&source.host);
            source.id = Some(HostId::spoofed(&mapped.host.ip, &mapped.host.name));
        }
        source.metadata_tmax = tmax;
        source
    }

    /// The sources of one sender address.
    pub(in crate::engine) fn of_ip_mut(&mut self, ip: IpAddr) -> impl Iterator<Item = &mut Source> {
        self.by_ip.get_mut(&ip).into_iter().flatten()
    }

    /// The XCache run a g-stream came from: the xrootd of `ip` started at
    /// `stod` and, if the g-stream names its instance, running as `program`.
    pub(in crate::engine) fn xcache_of(
        &mut self,
        ip: IpAddr,
        stod: u32,
        program: Option<&str>,
    ) -> Option<&mut Source> {
        self.of_ip_mut(ip).find(|s| {
            s.started.is_some_and(|(tos, _)| tos == stod)
                && super::super::is_xrootd(&s.program)
                && program.is_none_or(|p| p == s.program)
        })
    }

    pub(in crate::engine) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Source> {
        self.by_ip.values_mut().flatten()
    }

    /// The source, created if new; evicts a tenth when over `cap`
    /// ([`evict`](Self::evict)), handing each evicted source to `gone`.
    /// Returns it, whether it is new, and what was evicted.
    pub(in crate::engine) fn get_or_insert(
        &mut self,
        ip: IpAddr,
        program: &str,
        now: Instant,
        cap: usize,
        metrics: usize,
        gone: &mut dyn FnMut(IpAddr, &Source),
    ) -> (&mut Source, bool, Evicted) {
        let exists = self
            .by_ip
            .get(&ip)
            .is_some_and(|v| v.iter().any(|s| s.program == program));
        let mut evicted = Evicted::default();
        if !exists {
            if self.len >= cap {
                evicted = self.evict(cap, gone);
            }
            // Most addresses have one source: room for exactly one more
            // (a Vec's first growth would make room for four).
            let list = self.by_ip.entry(ip).or_default();
            list.reserve_exact(1);
            list.push(Source::new(program, now, metrics));
            self.len += 1;
        }
        let list = self.by_ip.entry(ip).or_default();
        let at = list.iter().position(|s| s.program == program).unwrap_or(0);
        (&mut list[at], !exists, evicted)
    }

    /// Brings the sources down to nine tenths of `cap`. Sources that sent
    /// a single record go first, the least recently seen of them first:
    /// a flood of one-shot senders (12,000 new addresses in 2.6 s) then
    /// takes its own kind, not an established server that reports every
    /// minute or less often. Established sources ([`Source::established`])
    /// go only when too few others are left, the least recently seen
    /// first. Each evicted source is handed to `gone` (to keep its
    /// counters for its return).
    pub(in crate::engine) fn evict(
        &mut self,
        cap: usize,
        gone: &mut dyn FnMut(IpAddr, &Source),
    ) -> Evicted {
        self.evict_by(cap, gone, |s| (s.established(), s.last_seen))
    }

    /// [`evict`](Self::evict) in the order of `rank`, lowest first (other
    /// orders are measured against it: `engine/tests/eviction.rs`).
    pub(in crate::engine) fn evict_by<K: Ord + Copy>(
        &mut self,
        cap: usize,
        gone: &mut dyn FnMut(IpAddr, &Source),
        rank: impl Fn(&Source) -> K,
    ) -> Evicted {
        let target = cap - cap / 10 - 1;
        let mut ranks: Vec<K> = self.by_ip.values().flatten().map(&rank).collect();
        if ranks.len() <= target {
            return Evicted::default();
        }
        let drop = ranks.len() - target;
        let (_, cutoff, _) = ranks.select_nth_unstable(drop - 1);
        let cutoff = *cutoff;
        // Everything ranked below the cutoff goes, and as many ranked at it
        // as make up `drop` (not whichever of both come first).
        let mut at_cutoff = drop - ranks.iter().filter(|r| **r < cutoff).count();
        let mut out = Evicted::default();
        let forgotten = &mut self.forgotten;
        for (ip, list) in self.by_ip.iter_mut() {
            list.retain(|s| {
                let r = rank(s);
                let keep = match r.cmp(&cutoff) {
                    std::cmp::Ordering::Less => false,
                    std::cmp::Ordering::Equal if at_cutoff > 0 => {
                        at_cutoff -= 1;
                        false
                    }
                    _ => true,
                };
                if !keep {
                    out.total += 1;
                    out.established += usize::from(s.established());
                    gone(*ip, s);
                    // Its host leaves the XML table too.
                    forgotten.push(ForgottenHost {
                        host: s.host_key,
                        cluster: key_of(&s.cluster),
                    });
                }
                keep
            });
        }
        self.by_ip.retain(|_, l| !l.is_empty());
        self.len -= out.total;
        out
    }
}

/// What one eviction took.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(in crate::engine) struct Evicted {
    pub(in crate::engine) total: usize,
    /// Of them, sources with more than one record or restored counters.
    pub(in crate::engine) established: usize,
}

/// TMAX as announced: with changed-only sending, an unchanged value may go
/// `value_heartbeat` seconds unsent, so TMAX grows by as much and gmond's
/// TN stays below it.
pub(in crate::engine) fn announced_tmax(base: u32, settings: &Settings) -> u32 {
    base.saturating_add(settings.value_heartbeat.unwrap_or(0))
}
