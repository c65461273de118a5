//! The asking side: one exchange sent and its answer merged ([`ask`]),
//! and the pushes and full exchanges that keep the pair in step
//! ([`keep_in_step`]).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::link::Claims;
use super::message::{Assembler, Incoming, Item, Mode, finish};
use super::{
    DEADLINE, FULL_EVERY, HEARD_EVERY, Link, PING_EVERY, PROBE_DEADLINE, PROBE_EVERY, PUSH_EVERY,
    unix_now,
};
use crate::config::Settings;
use crate::engine::pairing::{Entry, LastRecord};
use crate::events::{Counters, Events};

/// One exchange as the asking side: sends `entries` in `mode`, merges the
/// answer a batch at a time as it comes; the peer's records (a pull's
/// answer) go to `records` as they come. How many records came.
pub(super) async fn ask(
    link: &Link,
    peer: &str,
    mode: &str,
    entries: &[Entry],
    records: &mut (dyn FnMut(LastRecord) + Send),
    events: &mut Events<'_>,
) -> Result<usize, (SocketAddr, String)> {
    ask_within(link, peer, mode, entries, records, events, DEADLINE).await
}

/// [`ask`], the whole exchange within `deadline`.
async fn ask_within(
    link: &Link,
    peer: &str,
    mode: &str,
    entries: &[Entry],
    records: &mut (dyn FnMut(LastRecord) + Send),
    events: &mut Events<'_>,
    deadline: std::time::Duration,
) -> Result<usize, (SocketAddr, String)> {
    let unknown = SocketAddr::from(([0, 0, 0, 0], 0));
    let exchange = async {
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host(peer)
            .await
            .map_err(|e| (unknown, format!("cannot resolve {peer}: {e}")))?
            .collect();
        let mut last_error = (unknown, format!("{peer} resolves to nothing"));
        for addr in addrs {
            match TcpStream::connect(addr).await {
                Ok(mut s) => {
                    let out = finish(link.writer(mode), entries, &[]);
                    s.write_all(&out).await.map_err(|e| (addr, e.to_string()))?;
                    let got = take_answer(link, s, records, events)
                        .await
                        .map_err(|e| (addr, e))?;
                    return Ok(got);
                }
                Err(e) => last_error = (addr, format!("connect: {e}")),
            }
        }
        Err(last_error)
    };
    tokio::time::timeout(deadline, exchange)
        .await
        .map_err(|_| {
            (
                unknown,
                format!("no answer within {} s", deadline.as_secs_f64()),
            )
        })?
}

/// The answer to an exchange, read a frame at a time and merged a batch
/// at a time.
async fn take_answer(
    link: &Link,
    mut stream: TcpStream,
    records: &mut (dyn FnMut(LastRecord) + Send),
    events: &mut Events<'_>,
) -> Result<usize, String> {
    let addr = stream.peer_addr().map_err(|e| e.to_string())?;
    let assembler = Assembler::new(link.max_counters, link.max_entries(), unix_now());
    let mut incoming = Incoming::new(&mut stream, assembler);
    let header = incoming.header().await?;
    if header.mode != Mode::Answer {
        return Err(format!("answered with {:?}", header.mode.as_str()));
    }
    let mut claims = Claims::default();
    let mut count = 0;
    loop {
        match incoming.next().await? {
            Item::Entries(batch) => claims.add(link.take(batch).await.1),
            Item::Heard(heard) => link.peer_said(heard, Instant::now()),
            Item::Record(r) => {
                count += 1;
                records(r);
            }
            Item::End => break,
        }
    }
    link.exchanged(header.claim);
    let refused = incoming.assembler.refused;
    let e = events.at(Instant::now());
    e.peer_exchanged(addr, refused.lines, &refused.text);
    e.peer_claims_refused(addr, claims.refused, &claims.why);
    Ok(count)
}

/// Pushes changed entries every [`PUSH_EVERY`] (an empty push every
/// [`PING_EVERY`]), everything every [`FULL_EVERY`], until `stop`. After
/// a failed exchange (the link cut, the peer down) what it carried is
/// owed: an empty push probes the link every [`PROBE_EVERY`] (within
/// [`PROBE_DEADLINE`]), and as soon as one is answered a full exchange
/// follows at once, so the two agree within a second of the link being
/// back (the changed entries taken out for the failed push go with it).
pub async fn keep_in_step(
    link: Arc<Link>,
    settings: Arc<Settings>,
    counters: Arc<Counters>,
    mut stop: watch::Receiver<bool>,
) {
    let Some(peer) = settings.peer.clone() else {
        return;
    };
    let mut events = Events::new(&counters, settings.log_interval);
    let mut tick = tokio::time::interval(PUSH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The first exchange is a full one: the peer learns what this one's
    // state file held (the start-up pull only went the other way).
    let mut last_push = Instant::now();
    let mut last_full: Option<Instant> = None;
    // An exchange failed: the link must answer a probe, then a full
    // exchange makes up for what was lost.
    let mut owed = false;
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = tick.tick(), if !owed => {}
            _ = tokio::time::sleep(PROBE_EVERY), if owed => {}
        }
        let now = Instant::now();
        link.decide(now);
        let round = async {
            if owed {
                let probe = ask_within(
                    &link,
                    &peer,
                    "push",
                    &[],
                    &mut |_| {},
                    &mut events,
                    PROBE_DEADLINE,
                )
                .await;
                if let Err((addr, e)) = probe {
                    link.failed();
                    events.at(Instant::now()).peer_failed(addr, &e);
                    return false;
                }
                tracing::info!("peer {peer} answers again: a full exchange at once");
            }
            let full = owed || last_full.is_none_or(|t| now.duration_since(t) >= FULL_EVERY);
            let (entries, _) = if full {
                link.everything(false).await
            } else {
                link.ask_entries(true, false).await
            };
            if !full
                && entries.is_empty()
                && now.duration_since(last_push) + PUSH_EVERY / 2 < PING_EVERY
            {
                return true;
            }
            let mode = if full { "full" } else { "push" };
            match ask(&link, &peer, mode, &entries, &mut |_| {}, &mut events).await {
                Ok(_) => {
                    last_push = now;
                    if full {
                        last_full = Some(now);
                    }
                    true
                }
                Err((addr, e)) => {
                    link.failed();
                    events.at(Instant::now()).peer_failed(addr, &e);
                    false
                }
            }
        };
        // A stop never waits for an exchange (nor for the receive tasks
        // it asks, which are stopping too).
        let done = tokio::select! {
            _ = stop.changed() => break,
            done = round => done,
        };
        owed = !done;
    }
}

/// Samples what this one hears (the `records` counter) every
/// [`HEARD_EVERY`], and decides again whether it is deaf (its XML port
/// hands gmetad over) and whether it stands by; until `stop`.
pub async fn hearing(link: Arc<Link>, counters: Arc<Counters>, mut stop: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(HEARD_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = tick.tick() => {}
        }
        let now = Instant::now();
        link.sample(
            counters.records.load(std::sync::atomic::Ordering::Relaxed),
            now,
        );
        link.judge_hearing(now);
        link.decide(now);
    }
}
