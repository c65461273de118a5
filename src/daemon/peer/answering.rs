//! The answering side: the peer port's listener, who may exchange on it
//! ([`serve`]), and one exchange answered.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ipnet::IpNet;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

use super::link::Claims;
use super::message::{Assembler, Incoming, Item, Mode, Refused, finish, is_other_version};
use super::{DEADLINE, Link, MAX_EXCHANGES, lock, unix_now};
use crate::config::Settings;
use crate::engine::merge;
use crate::engine::pairing::Entry;
use crate::events::{Counters, Events};

/// Who may exchange: `peer_allow`, else what `peer` resolves to now.
async fn allowed(settings: &Settings) -> Vec<IpNet> {
    if !settings.peer_allow.is_empty() {
        return settings.peer_allow.clone();
    }
    let Some(peer) = settings.peer.as_deref() else {
        return Vec::new();
    };
    match tokio::net::lookup_host(peer).await {
        Ok(addrs) => addrs.map(|a| IpNet::from(a.ip().to_canonical())).collect(),
        Err(e) => {
            tracing::warn!(
                "peer {peer}: cannot resolve ({e}): no one may exchange until peer_allow says who"
            );
            Vec::new()
        }
    }
}

/// Answers exchanges on `listener` until `stop`.
pub async fn serve(
    listener: std::net::TcpListener,
    link: Arc<Link>,
    settings: Arc<Settings>,
    counters: Arc<Counters>,
    mut stop: watch::Receiver<bool>,
) {
    let local = listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let Ok(listener) = TcpListener::from_std(listener) else {
        return;
    };
    let allow = allowed(&settings).await;
    let busy: Arc<Mutex<HashSet<IpAddr>>> = Arc::default();
    let mut events = Events::new(&counters, settings.log_interval);
    // Each exchange's outcome, logged here: one rate limit for them all.
    let (done_tx, mut done_rx) = mpsc::channel::<(SocketAddr, Outcome)>(MAX_EXCHANGES);
    loop {
        let (stream, from) = tokio::select! {
            _ = stop.changed() => break,
            Some((from, outcome)) = done_rx.recv() => {
                let e = events.at(Instant::now());
                match outcome {
                    Ok(done) => {
                        e.peer_exchanged(from, done.refused.lines, &done.refused.text);
                        e.peer_claims_refused(from, done.claims.refused, &done.claims.why);
                    }
                    Err(why) => e.peer_failed(from, &why),
                }
                continue;
            }
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let ip = from.ip().to_canonical();
        if !allow.iter().any(|n| n.contains(&ip)) {
            events
                .at(Instant::now())
                .peer_denied(local, from, "not in peer_allow");
            continue;
        }
        if lock(&busy).len() >= MAX_EXCHANGES {
            events.at(Instant::now()).peer_denied(
                local,
                from,
                "as many exchanges as may go at once are under way",
            );
            continue;
        }
        if !lock(&busy).insert(ip) {
            events.at(Instant::now()).peer_denied(
                local,
                from,
                "an exchange with that address is under way",
            );
            continue;
        }
        let (link, busy, done_tx) = (link.clone(), busy.clone(), done_tx.clone());
        tokio::spawn(async move {
            let done = tokio::time::timeout(DEADLINE, answer_one(&link, stream)).await;
            let outcome =
                done.unwrap_or_else(|_| Err(format!("not done within {} s", DEADLINE.as_secs())));
            lock(&busy).remove(&ip);
            let _ = done_tx.send((from, outcome)).await;
        });
    }
}

/// One exchange as the answering side: the asker's entries are read a
/// frame at a time and merged a batch at a time
/// ([`super::message::Incoming`]).
async fn answer_one(link: &Link, mut stream: TcpStream) -> Outcome {
    let (read, mut write) = stream.split();
    let assembler = Assembler::new(link.max_counters, link.max_entries(), unix_now());
    let mut incoming = Incoming::new(read, assembler);
    let header = match incoming.header().await {
        Ok(h) => h,
        Err(e) => {
            if is_other_version(&e) {
                // This one's header and end: the peer's log says which
                // version answered.
                let _ = write.write_all(&link.writer("answer").end()).await;
                let _ = write.shutdown().await;
            }
            return Err(e);
        }
    };
    // The sources named (8 bytes each, at most max_sources), and the
    // merged entries that differ from what was sent (this gateway's own).
    let mut named: HashSet<u64> = HashSet::new();
    let mut answer: Vec<Entry> = Vec::new();
    let mut claims = Claims::default();
    loop {
        match incoming.next().await? {
            Item::Entries(batch) => {
                if !matches!(header.mode, Mode::Push | Mode::Full) {
                    return Err(format!("entries in a {}", header.mode.as_str()));
                }
                let (merged, refused) = link.take(batch).await;
                claims.add(refused);
                for (sent, mine) in merged {
                    named.insert(name_hash(sent.ip, &sent.program));
                    if !merge::agrees(&sent.state, &mine.state) || sent.pfc != mine.pfc {
                        answer.push(mine);
                    }
                }
            }
            Item::Heard(heard) => link.peer_said(heard, Instant::now()),
            Item::Record(_) => return Err("records sent to the answering side".into()),
            Item::End => break,
        }
    }
    let (entries, records) = match header.mode {
        Mode::Pull => link.everything(true).await,
        Mode::Push => (answer, Vec::new()),
        Mode::Full => {
            let (all, _) = link.everything(false).await;
            answer.extend(
                all.into_iter()
                    .filter(|e| !named.contains(&name_hash(e.ip, &e.program))),
            );
            (answer, Vec::new())
        }
        Mode::Answer => return Err("asked with \"answer\"".into()),
    };
    let out = finish(link.writer("answer"), &entries, &records);
    write.write_all(&out).await.map_err(|e| e.to_string())?;
    let _ = write.shutdown().await;
    link.exchanged(header.claim);
    Ok(Done {
        refused: incoming.assembler.refused,
        claims,
    })
}

/// What came of an exchange answered: done (with what of it was
/// refused), or why it failed.
type Outcome = Result<Done, String>;

struct Done {
    refused: Refused,
    claims: Claims,
}

/// A source's name, hashed: what a full exchange's answer leaves out.
fn name_hash(ip: IpAddr, program: &str) -> u64 {
    let mut key = ip.to_string().into_bytes();
    key.push(b' ');
    key.extend_from_slice(program.as_bytes());
    crate::fnv::hash(&key)
}
