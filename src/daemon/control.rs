//! The control socket (`control_socket`): where `xrd2ganglia status` asks
//! the running gateway for its sources, refused senders and counters.
//!
//! One request, `status` and a newline; one reply, a line of JSON (a
//! [`Status`], or an [`ErrorReply`]), then the connection is closed.
//!
//! **Receiving never waits for it.** Each receive task owns its engine's
//! sources (no lock on the per-datagram path); a request is handed to
//! every receive task through a small queue (an `Ask`), which the task
//! answers between two datagrams, as it takes gmond's metadata requests.
//! Until someone asks, the per-datagram cost is one poll of an empty
//! queue per `select!` round; building the answer costs the task one
//! walk of its sources per request (datagrams meanwhile wait in the
//! socket's buffer, `recv_buffer`; docs/operations.md has the figure:
//! 12-18 ms for a whole request at 7,000 sources, `benches/status-walk.py`),
//! and connections are bounded ([`MAX_CLIENTS`] at once).
//!
//! **Bad requests never disturb the daemon**: at most [`MAX_REQUEST`]
//! bytes are read (a longer line gets an error); a client that sends no
//! line within [`REQUEST_TIMEOUT`] gets an error; the whole exchange, from
//! the accept to the last byte of the reply, has [`EXCHANGE_TIMEOUT`].
//! Each is counted (`control_rejected`) and logged once per
//! `log_interval` ([`Events::control_rejected`]). Nothing is ever read by
//! a receive task but the request's queue.
//!
//! **Silent clients never keep `status` out.** Of the [`MAX_CLIENTS`]
//! connections held, a new one evicts, the oldest first, one that has not
//! sent its request yet (with an error saying so) or, if none, one whose
//! reply is being written (a client that asked and does not read: its
//! reply is what the socket's buffer took). A client that connects and
//! writes its request at once, as `status` does, is answered however many
//! others connect and say nothing, or ask and never read (8 silent ones
//! held every place of a fixed pool, and `status` was refused). Only
//! [`MAX_CLIENTS`] requests whose answers are being gathered from the
//! receive tasks at once (milliseconds each) turn a new one away.

use std::collections::VecDeque;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::time::Duration;

use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Notify, mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::{Instant, timeout, timeout_at};

use super::drops::DropWatch;
use super::state_file::StateStore;
use crate::events::{Counters, Events};
use crate::status::{ErrorReply, Heard, REQUEST, SCHEMA_VERSION, StateFileStatus, Status};

/// A request for one receive task's part of the status: its answer goes
/// back through this.
pub(crate) type Ask = oneshot::Sender<Status>;

/// Requests waiting for one receive task at most.
pub const ASK_QUEUE: usize = MAX_CLIENTS;
/// Connections held at once; a new one evicts the oldest that has sent
/// nothing yet, or (every one being answered) gets an error.
pub const MAX_CLIENTS: usize = 16;
/// The longest request line read, its newline included.
pub const MAX_REQUEST: usize = 64;
/// A client must have sent its request line within this long.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// The receive tasks' answers, and writing the reply, within this long.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);
/// A whole exchange, from the accept to the reply's last byte.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(7);

/// The bound control socket. Dropped, it removes its path (at stop, or
/// when the start fails after binding it), if that is still this socket.
pub struct ControlListener {
    /// Taken by [`serve`].
    pub(super) listener: Option<std::os::unix::net::UnixListener>,
    pub(super) path: PathBuf,
    /// Its (device, inode): the path is removed only if it is still this
    /// socket (another gateway may have replaced it).
    pub(super) id: (u64, u64),
}

impl ControlListener {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ControlListener {
    fn drop(&mut self) {
        let ours =
            std::fs::symlink_metadata(&self.path).is_ok_and(|m| (m.dev(), m.ino()) == self.id);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Why a connection got an error reply (counted, logged by the accept
/// loop).
#[derive(Debug)]
pub enum Rejected {
    /// Not the request.
    Unknown,
    /// A line longer than [`MAX_REQUEST`].
    TooLong,
    /// No line within [`REQUEST_TIMEOUT`].
    Slow,
    /// [`MAX_CLIENTS`] were being answered already.
    Busy,
    /// Closed unasked for a newer connection ([`MAX_CLIENTS`] were held).
    Evicted,
    /// Closed, its reply not read, for a newer connection.
    Unread,
}

impl Rejected {
    fn reply(&self, request: &str) -> String {
        match self {
            Rejected::Unknown => {
                format!("unknown request {request:?}: the only request is \"{REQUEST}\"")
            }
            Rejected::TooLong => format!(
                "request longer than {MAX_REQUEST} bytes: the only request is \"{REQUEST}\""
            ),
            Rejected::Slow => format!(
                "no request within {} s: send \"{REQUEST}\" and a newline",
                REQUEST_TIMEOUT.as_secs()
            ),
            Rejected::Busy => {
                format!("{MAX_CLIENTS} requests are being answered already: try again")
            }
            Rejected::Evicted => format!(
                "no request yet, and {MAX_CLIENTS} connections were held: closed for a newer one (send \"{REQUEST}\" and a newline at once)"
            ),
            // Never written: it is not read.
            Rejected::Unread => String::new(),
        }
    }

    /// How the log line says it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Rejected::Unknown => "not a request",
            Rejected::TooLong => "request too long",
            Rejected::Slow => "no request in time",
            Rejected::Busy => "too many requests at once",
            Rejected::Evicted => "no request, closed for a newer connection",
            Rejected::Unread => "reply not read, closed for a newer connection",
        }
    }
}

/// Where a held connection is: what decides whether a new one may evict it.
const SILENT: u8 = 0;
/// Its answer is being gathered from the receive tasks: not evicted.
const GATHERING: u8 = 1;
/// Its reply is being written: evicted when no silent one is left.
const WRITING: u8 = 2;

/// A connection held: where it is ([`SILENT`], [`GATHERING`],
/// [`WRITING`]), and how to evict it.
struct Held {
    id: u64,
    phase: Arc<AtomicU8>,
    evict: Arc<Notify>,
}

impl Held {
    /// The connection a new one evicts when [`MAX_CLIENTS`] are held: the
    /// oldest silent one, else the oldest whose reply is being written.
    fn to_evict(held: &VecDeque<Held>) -> Option<usize> {
        let at = |phase| held.iter().position(|h| h.phase.load(Relaxed) == phase);
        at(SILENT).or_else(|| at(WRITING))
    }
}

/// The gateway's parts a reply is made from.
pub(super) struct Parts {
    /// One queue per receive task.
    pub asks: Vec<mpsc::Sender<Ask>>,
    pub counters: Arc<Counters>,
    /// The kernel's drops at the listening sockets.
    pub drops: Option<Arc<DropWatch>>,
    /// The state file, if one is kept.
    pub state: Option<Arc<StateStore>>,
    /// The pair, if paired.
    pub pair: Option<Arc<super::peer::Link>>,
    /// The pair's holds, if paired (none held without `recover_from`).
    pub holds: Option<super::recover::Holds>,
}

/// Answers on `control` from `parts` until `stop`, then removes its path.
pub(super) async fn serve(
    mut control: ControlListener,
    parts: Parts,
    log_interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let Parts {
        asks,
        counters,
        drops,
        state,
        pair,
        holds,
    } = parts;
    let path = control.path.clone();
    let Some(listener) = control.listener.take() else {
        return;
    };
    let listener = match UnixListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("control socket {}: {e}", path.display());
            return;
        }
    };
    let asks = Arc::new(asks);
    let mut events = Events::new(&counters, log_interval);
    let mut clients: JoinSet<(u64, Result<(), Rejected>)> = JoinSet::new();
    // In the order accepted: the oldest silent one is evicted first.
    let mut held: VecDeque<Held> = VecDeque::with_capacity(MAX_CLIENTS);
    let mut next_id = 0u64;
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            Some(done) = clients.join_next() => {
                if let Ok((id, outcome)) = done {
                    held.retain(|h| h.id != id);
                    if let Err(why) = outcome {
                        events.at(std::time::Instant::now()).control_rejected(&path, why.as_str());
                    }
                }
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    if held.len() >= MAX_CLIENTS {
                        match Held::to_evict(&held) {
                            // Its task answers it with the error and ends.
                            Some(at) => {
                                if let Some(h) = held.remove(at) {
                                    h.evict.notify_one();
                                }
                            }
                            None => {
                                // Best effort, never waited for: the
                                // socket's buffer takes a line.
                                let _ = stream.try_write(&error_line(&Rejected::Busy.reply("")));
                                events.at(std::time::Instant::now()).control_rejected(&path, Rejected::Busy.as_str());
                                continue;
                            }
                        }
                    }
                    let h = Held {
                        id: next_id,
                        phase: Arc::default(),
                        evict: Arc::default(),
                    };
                    next_id += 1;
                    let client = Client {
                        asks: asks.clone(),
                        counters: counters.clone(),
                        drops: drops.clone(),
                        state: state.clone(),
                        pair: pair.clone(),
                        holds: holds.clone(),
                        phase: h.phase.clone(),
                        evict: h.evict.clone(),
                    };
                    let id = h.id;
                    held.push_back(h);
                    clients.spawn(async move { (id, answer(stream, client).await) });
                }
                Err(e) => {
                    // Out of descriptors, most likely: let some close.
                    events.at(std::time::Instant::now()).control_accept_failed(&path, &e);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
    clients.abort_all();
    // Its path goes with it.
    drop(control);
}

/// What one connection's task holds.
struct Client {
    asks: Arc<Vec<mpsc::Sender<Ask>>>,
    counters: Arc<Counters>,
    drops: Option<Arc<DropWatch>>,
    /// The state file (None: none kept), for how its saves go.
    state: Option<Arc<StateStore>>,
    /// The pair (None: no peer), for what `status` shows of it.
    pair: Option<Arc<super::peer::Link>>,
    /// Its holds (None: no peer).
    holds: Option<super::recover::Holds>,
    /// Where it is ([`SILENT`] until its request line is read).
    phase: Arc<AtomicU8>,
    /// Notified when a newer connection takes its place.
    evict: Arc<Notify>,
}

/// One connection: its request read, its reply written, all within
/// [`EXCHANGE_TIMEOUT`] of the accept.
async fn answer(stream: UnixStream, client: Client) -> Result<(), Rejected> {
    let deadline = Instant::now() + EXCHANGE_TIMEOUT;
    let read = tokio::select! {
        read = timeout(REQUEST_TIMEOUT, read_line(&stream)) => read,
        _ = client.evict.notified() => {
            // Best effort: the socket's buffer takes a line.
            let _ = stream.try_write(&error_line(&Rejected::Evicted.reply("")));
            return Err(Rejected::Evicted);
        }
    };
    client.phase.store(GATHERING, Relaxed);
    let (reply, outcome) = match read {
        Err(_) => (error_line(&Rejected::Slow.reply("")), Err(Rejected::Slow)),
        // The client went away.
        Ok(Err(_)) => return Ok(()),
        Ok(Ok(Line::TooLong)) => (
            error_line(&Rejected::TooLong.reply("")),
            Err(Rejected::TooLong),
        ),
        Ok(Ok(Line::Request(line))) if line.trim() == REQUEST => {
            match gather(&client, deadline).await {
                Ok(status) => (json_line(&status), Ok(())),
                Err(e) => (error_line(&e), Ok(())),
            }
        }
        Ok(Ok(Line::Request(line))) => {
            let shown: String = line.trim().chars().take(MAX_REQUEST).collect();
            (
                error_line(&Rejected::Unknown.reply(&shown)),
                Err(Rejected::Unknown),
            )
        }
    };
    client.phase.store(WRITING, Relaxed);
    tokio::select! {
        _ = timeout_at(deadline, write_all(&stream, &reply)) => outcome,
        // A newer connection took its place while it did not read.
        _ = client.evict.notified() => Err(Rejected::Unread),
    }
}

/// What a client sent.
enum Line {
    /// A line (without its newline), or what came before the client
    /// closed its side.
    Request(String),
    TooLong,
}

/// Reads one line of at most [`MAX_REQUEST`] bytes.
async fn read_line(stream: &UnixStream) -> io::Result<Line> {
    let mut buf = [0u8; MAX_REQUEST];
    let mut len = 0;
    loop {
        stream.readable().await?;
        match stream.try_read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => {
                len += n;
                if let Some(end) = buf[..len].iter().position(|&b| b == b'\n') {
                    len = end;
                    break;
                }
                if len == buf.len() {
                    return Ok(Line::TooLong);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Line::Request(
        String::from_utf8_lossy(&buf[..len]).into_owned(),
    ))
}

async fn write_all(stream: &UnixStream, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        stream.writable().await?;
        match stream.try_write(data) {
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The gateway's status: every receive task's part, the counters and
/// the kernel's drops.
async fn gather(client: &Client, deadline: Instant) -> Result<Status, String> {
    // Read before the receive tasks answer: what the sources show is at
    // least as new as what the counters count.
    let counters = client
        .counters
        .snapshot()
        .each()
        .map(|(spec, v)| (spec.field.to_string(), v))
        .collect();
    let kernel_drops = client
        .drops
        .as_ref()
        .and_then(|d| d.status(std::time::Instant::now()));
    let mut waiting = Vec::with_capacity(client.asks.len());
    for ask in client.asks.iter() {
        let (tx, rx) = oneshot::channel();
        ask.try_send(tx)
            .map_err(|_| "the gateway is busy answering other requests: try again".to_string())?;
        waiting.push(rx);
    }
    let state_file = client.state.as_deref().map(state_file_status);
    let mut status = Status {
        version: SCHEMA_VERSION,
        gateway: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
        counters,
        kernel_drops,
        state_file,
        pair: client.pair.as_ref().map(|l| {
            let mut pair = l.status(std::time::Instant::now());
            if let Some(h) = &client.holds {
                h.show(&mut pair);
            }
            pair
        }),
        ..Status::default()
    };
    for rx in waiting {
        match timeout_at(deadline, rx).await {
            Ok(Ok(part)) => status.merge(part),
            Ok(Err(_)) => return Err("the gateway is stopping".into()),
            Err(_) => {
                return Err(format!(
                    "a receive task did not answer within {} s",
                    ANSWER_TIMEOUT.as_secs()
                ));
            }
        }
    }
    status.sort();
    Ok(status)
}

/// The state file's part of the status: its path and how its saves go.
fn state_file_status(store: &StateStore) -> StateFileStatus {
    let health = store.health();
    let (now, wall) = (std::time::Instant::now(), std::time::SystemTime::now());
    StateFileStatus {
        path: store.display().to_string(),
        saved: health.failing.is_none() && health.last_saved.is_some(),
        last_saved: health.last_saved.map(|t| Heard::at(t, now, wall)),
        failing_since: health.failing.as_ref().map(|f| Heard::at(f.0, now, wall)),
        error: health.failing.map(|f| f.1),
    }
}

fn json_line<T: serde::Serialize>(value: &T) -> Vec<u8> {
    let mut line = serde_json::to_vec(value).unwrap_or_else(|e| {
        let e = ErrorReply {
            error: format!("cannot write the status: {e}"),
        };
        serde_json::to_vec(&e).unwrap_or_default()
    });
    line.push(b'\n');
    line
}

fn error_line(error: &str) -> Vec<u8> {
    json_line(&ErrorReply {
        error: error.to_string(),
    })
}
