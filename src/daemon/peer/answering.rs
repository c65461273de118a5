//! The answering side: the peer port's listener, who may exchange on it
//! ([`serve`]), and one exchange answered.

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ipnet::IpNet;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::message::{message, parse, read_message};
use super::{DEADLINE, Link, lock, unix_now};
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
    loop {
        let (stream, from) = tokio::select! {
            _ = stop.changed() => break,
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
        if !lock(&busy).insert(ip) {
            events.at(Instant::now()).peer_denied(
                local,
                from,
                "an exchange with that address is under way",
            );
            continue;
        }
        let (link, counters, busy, log_interval) = (
            link.clone(),
            counters.clone(),
            busy.clone(),
            settings.log_interval,
        );
        tokio::spawn(async move {
            let mut events = Events::new(&counters, log_interval);
            let done = tokio::time::timeout(DEADLINE, answer_one(&link, stream, &mut events)).await;
            let failed = match done {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(_) => Some(format!("not done within {} s", DEADLINE.as_secs())),
            };
            if let Some(e) = failed {
                events.at(Instant::now()).peer_failed(from, &e);
            }
            lock(&busy).remove(&ip);
        });
    }
}

/// One exchange as the answering side.
async fn answer_one(
    link: &Link,
    mut stream: TcpStream,
    events: &mut Events<'_>,
) -> Result<(), String> {
    let from = stream.peer_addr().map_err(|e| e.to_string())?;
    let bytes = read_message(&mut stream, link.max_bytes)
        .await
        .map_err(|e| e.to_string())?;
    let msg = parse(&bytes, link.max_counters, unix_now())?;
    link.peer_said(msg.heard.clone(), Instant::now());
    let (entries, records) = match msg.mode.as_str() {
        "pull" => link.everything(true).await,
        "push" | "full" => {
            let named: HashSet<(IpAddr, String)> = msg
                .entries
                .iter()
                .map(|e| (e.ip, e.program.clone()))
                .collect();
            let merged = link.take(msg.entries).await;
            let mut answer: Vec<Entry> = merged
                .into_iter()
                .filter(|(sent, mine)| {
                    !merge::agrees(&sent.state, &mine.state) || sent.pfc != mine.pfc
                })
                .map(|(_, mine)| mine)
                .collect();
            if msg.mode == "full" {
                let (all, _) = link.everything(false).await;
                answer.extend(
                    all.into_iter()
                        .filter(|e| !named.contains(&(e.ip, e.program.clone()))),
                );
            }
            (answer, Vec::new())
        }
        other => return Err(format!("asked with {other:?}")),
    };
    let out = message(&link.header("answer"), &entries, &records);
    stream.write_all(&out).await.map_err(|e| e.to_string())?;
    let _ = stream.shutdown().await;
    link.exchanged(msg.claim);
    events
        .at(Instant::now())
        .peer_exchanged(from, msg.refused.lines, &msg.refused.text);
    Ok(())
}
