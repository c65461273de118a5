//! gmetad polls the gateway: gmond's XML on a TCP port (`xml_listen`).
//!
//! As gmond's `tcp_accept_channel` does: on each connection the whole
//! document is written and the connection closed; nothing is read. The
//! document comes from the [`HostTable`], which the receive tasks keep
//! updating meanwhile (a poll holds one host's shard at a time, never the
//! socket's time).
//!
//! **gmetad is always served**, whatever other clients do (connect and
//! never read, read a byte a second, connect again and again), from any
//! allowed address, gmetad's own included (with the default `xml_allow`,
//! every local user shares gmetad's loopback address, so fairness between
//! addresses alone cannot be the answer). As the event-driven servers do
//! (nginx, HAProxy: connections are state on the event loop, not threads
//! from a fixed pool):
//!
//! * Each connection is a task on the runtime that writes the document as
//!   the socket takes it: it renders a piece ([`PIECE`] bytes, a host is
//!   never cut) from the table, writes it when the socket is writable,
//!   renders the next. A client that does not read holds no thread and no
//!   slot another needs; every connection progresses at its client's pace.
//! * **Fairness between addresses.** The writing is shared between client
//!   addresses, not connections: one piece of one connection of an
//!   address is rendered and written at a time (its address's turn, let
//!   go while it waits for its client), so an address that opens
//!   connection after connection gets the share one connection gets. A
//!   client that has closed costs no rendering (the first piece is the
//!   prologue alone, a reset is looked for before each piece). Issue 42:
//!   connect-and-close floods from two addresses must leave a third
//!   address's polls whole.
//! * Connections are capped ([`MAX_CONNECTIONS`], and [`MAX_PER_ADDRESS`]
//!   per client address), and a slot for a new poll always exists: a new
//!   connection over a cap closes the connection (of its address, or, all
//!   taken, of the address holding the most: never the one poll of a
//!   quiet address) that has made the least progress ([`Progress::order`]): first
//!   one that has not shown it reads (taken 256 KiB, more than the socket
//!   buffers hold for a client that reads nothing) and waits for its
//!   client (its socket full), the longest waiting first. A poller
//!   reading a document is rarely waiting and shows it reads within
//!   milliseconds; a client that reads nothing waits as soon as the
//!   buffers are full, and one that reads a byte a second frees no room
//!   for a write for minutes: connecting again and again, they close each
//!   other, not the poll. Counted (`xml_evicted`) and logged.
//! * A whole-document deadline ([`POLL_DEADLINE`]) and a stall timeout
//!   ([`STALL_TIMEOUT`], gmetad's own read timeout) end the others.
//!
//! **Bounded memory.** Per connection: a piece and one host's text (the
//! buffer rendered into), a task, and a kernel send buffer capped at
//! [`FIRST_SEND_BUFFER`] (`SO_SNDBUF`; the kernel doubles it for its
//! accounting) until the client has shown it reads, [`SEND_BUFFER`]
//! then, instead of loopback's autotuned megabytes. A document's list of hosts
//! (8 bytes per host) is made once per second and shared by that second's
//! polls (`table/document.rs`'s `Render`). At [`MAX_CONNECTIONS`] = 256: at most 256 x (512 KiB
//! of kernel send buffer + 32 KiB + a host) plus one list per second of
//! polls still open, whatever the clients do (and 256 x 32 KiB of kernel
//! send buffer for clients that do not read). The accept queue is long
//! (4096, `bind::XML_BACKLOG`): a burst of connections does not make the kernel
//! drop gmetad's SYN.
//!
//! **Descriptors.** `serve` raises its soft `RLIMIT_NOFILE` to the hard
//! limit at start (the unit sets `LimitNOFILE`). Running out all the same
//! is counted (`xml_accept_failed`), logged once per `log_interval`, and
//! answered by closing the connection that made the least progress, not by
//! pausing the accept loop.
//!
//! **Every port alike.** The gateway's `xml_listen` (every cluster) and
//! each `[[cluster]]` rule's own (its clusters only, to its `xml_allow`:
//! docs/clusters.md) are served by one [`serve`] each, with the caps,
//! deadlines, buffers and warm-up above per port.
//!
//! Clients outside `xml_allow` are closed at once (counted, logged once
//! per `log_interval`, as every outcome, by [`Events`]). After a start,
//! the port listens only once it can answer ([`Warmup`]).
//!
//! Here the accept loop and the writing of a document; beside it,
//! `xml_port/warmup.rs` (when the port listens, and the hand-over to the
//! peer while deaf or holding) and `xml_port/connections.rs` (the
//! connections served, each address's turn, and which one a new
//! connection closes over the caps).

use std::io;
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, watch};

use crate::events::{Counters, Events};

use super::InForce;
use super::table::{ClusterInfo, HostTable, Written};

mod connections;
mod warmup;

use connections::{Connection, Connections, Progress};
pub use warmup::Warmup;

/// Connections served at once; a new one over it closes the one that made
/// the least progress.
pub const MAX_CONNECTIONS: usize = 256;
/// Connections served at once from one address; a new one over it closes
/// that address's that made the least progress.
pub const MAX_PER_ADDRESS: usize = 64;
/// `SO_SNDBUF` asked for each new connection (the kernel doubles it):
/// what the kernel holds, and we render, for a client that does not read.
/// Loopback's autotuning would grow it to megabytes.
pub const FIRST_SEND_BUFFER: usize = 16 * 1024;
/// `SO_SNDBUF` once the client has shown it reads ([`READS`]): enough for
/// a gmetad across a network (a buffer smaller than the path's bandwidth
/// times its round trip slows the document down). The kernel caps it at
/// `net.core.wmem_max` (208 KiB by default).
pub const SEND_BUFFER: usize = 256 * 1024;
/// A document is rendered and written this many bytes at a time (and one
/// host more at most).
pub const PIECE: usize = 16 * 1024;
/// A client that took this many bytes reads: more than a client that
/// reads nothing takes (what our send buffer, 2 x [`FIRST_SEND_BUFFER`],
/// and its receive window hold: a default Linux receive buffer, 128 KiB,
/// gives a window of about 64 KiB, and it grows only as the client reads).
pub(super) const READS: u64 = 256 * 1024;
/// A client that takes nothing for this long is dropped.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(10);
/// A document not written within this long is abandoned.
pub const POLL_DEADLINE: Duration = Duration::from_secs(120);

/// How one document went, as its task tells the accept loop (which
/// counts and logs it): the connection's number, its client, the outcome.
pub(super) type Outcome = (u64, SocketAddr, io::Result<Written>);

/// Accepts polls on `listener` until `stop`.
pub(super) async fn serve(
    listener: std::net::TcpListener,
    port: Option<u32>,
    table: Arc<HostTable>,
    in_force: watch::Receiver<Arc<InForce>>,
    counters: Arc<Counters>,
    mut warmup: Warmup,
    mut stop: watch::Receiver<bool>,
) {
    let local = listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let started = Instant::now();
    let Some(why) = warmup.wait(&mut stop).await else {
        return;
    };
    if let Err(e) = socket2::SockRef::from(&listener).listen(super::bind::XML_BACKLOG) {
        tracing::error!("xml_listen {local}: listen: {e}");
        return;
    }
    Events::new(&counters, Duration::from_secs(60)).xml_listening(local, started.elapsed(), why);
    // None once it cannot listen again after a hand-over (or a stop came
    // meanwhile): the documents being written are finished all the same.
    let mut listener = match TcpListener::from_std(listener) {
        Ok(l) => Some(l),
        Err(e) => {
            tracing::error!("xml_listen {local}: {e}");
            return;
        }
    };
    let began = Instant::now();
    let mut conns = Connections::default();
    let mut events = Events::new(&counters, in_force.borrow().settings.log_interval);
    let (done_tx, mut done) = mpsc::unbounded_channel::<Outcome>();
    while let Some(open) = &listener {
        let accepted = tokio::select! {
            _ = stop.changed() => break,
            Some(outcome) = done.recv() => {
                conns.finished(outcome, local, &mut events);
                continue;
            }
            () = warmup.turned_deaf() => None,
            a = open.accept() => Some(a),
        };
        let Some(accepted) = accepted else {
            if let Some(deaf) = listener.take() {
                listener = warmup.hand_over(deaf, local, &mut stop).await;
            }
            continue;
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                conns.accept_failed(&e, local, &mut events).await;
                continue;
            }
        };
        // The settings only: a poll may take minutes, and the senders of
        // settings a reload replaced retire when nothing holds them.
        let settings = in_force.borrow().settings.clone();
        let ip = peer.ip().to_canonical();
        if !settings.xml_allow_for(port).iter().any(|n| n.contains(&ip)) {
            events.at(Instant::now()).xml_denied(local, peer);
            continue;
        }
        conns.make_room(peer.ip(), local, &mut events);
        let progress = Arc::new(Progress {
            at_ms: AtomicU64::new(millis_since(began)),
            bytes: AtomicU64::new(0),
            waiting: AtomicBool::new(false),
        });
        let id = conns.next;
        conns.next += 1;
        let writer = Writer {
            id,
            port,
            peer,
            began,
            progress: progress.clone(),
            table: table.clone(),
            turn: conns.turn(peer.ip()),
            done: done_tx.clone(),
        };
        let task = tokio::spawn(writer.run(stream, settings)).abort_handle();
        conns.add(
            id,
            Connection {
                peer,
                progress,
                task,
            },
        );
    }
    // A stop: the port closes (a new poll is refused, and gmetad moves on
    // to the next address of its data_source), and the documents being
    // written are finished, for at most `drain_timeout` from the stop: a
    // document cut short is an XML error and an empty row in gmetad
    // (issue 43, item 4). What is not finished by then is cut (reset).
    drop(listener);
    let drain = in_force.borrow().settings.drain_timeout;
    let deadline = tokio::time::Instant::from_std(super::after(Instant::now(), drain));
    while !conns.by_id.is_empty() {
        tokio::select! {
            Some(outcome) = done.recv() => conns.finished(outcome, local, &mut events),
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }
    if !conns.by_id.is_empty() {
        events
            .at(Instant::now())
            .xml_cut_at_stop(local, conns.by_id.len(), drain);
    }
    for c in conns.by_id.values() {
        c.task.abort();
    }
}

/// One connection's document, written by a task of its own.
struct Writer {
    id: u64,
    /// The rule port it answers on (None: the gateway's, every cluster).
    port: Option<u32>,
    peer: SocketAddr,
    /// When the port began (what `progress` counts from).
    began: Instant,
    progress: Arc<Progress>,
    table: Arc<HostTable>,
    /// Its address's turn to write ([`connections::Address::turn`]).
    turn: Arc<Semaphore>,
    /// Where the outcome goes (to the accept loop).
    done: mpsc::UnboundedSender<Outcome>,
}

impl Writer {
    async fn run(self, stream: TcpStream, settings: Arc<crate::config::Settings>) {
        let sock = socket2::SockRef::from(&stream);
        let _ = sock.set_send_buffer_size(FIRST_SEND_BUFFER);
        // Closed unfinished (evicted, stalled, past the deadline), it is
        // reset: what its send buffer held is freed at once, not kept by
        // the kernel for an orphan that no one reads. A whole document
        // clears this before its graceful close ([`write_document`]).
        let _ = sock.set_linger(Some(Duration::ZERO));
        let cluster = ClusterInfo {
            name: &settings.cluster_name,
            host_dmax: settings.dmax,
            grouping: &settings.grouping,
            port: self.port,
        };
        let (noted, began) = (&self.progress, self.began);
        let took = |n: Option<usize>| match n {
            Some(n) => {
                noted.at_ms.store(millis_since(began), Relaxed);
                noted.bytes.fetch_add(n as u64, Relaxed);
                noted.waiting.store(false, Relaxed);
            }
            None => noted.waiting.store(true, Relaxed),
        };
        let outcome = write_document(
            stream,
            &self.table,
            &cluster,
            (STALL_TIMEOUT, POLL_DEADLINE),
            &self.turn,
            took,
        )
        .await;
        let _ = self.done.send((self.id, self.peer, outcome));
    }
}

/// Raises the soft limit of open files to the hard one (the default soft
/// limit, 1024, is less than a port's connections and the rest), as far as
/// allowed: the unit's seccomp filter refuses setrlimit (`@resources`), and
/// sets `LimitNOFILE` itself instead. Says what it could not do at debug.
pub fn raise_open_files_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 || limit.rlim_cur >= limit.rlim_max
        {
            return;
        }
        let soft = limit.rlim_cur;
        limit.rlim_cur = limit.rlim_max;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
            let e = io::Error::last_os_error();
            tracing::debug!("open files limit kept at {soft}: {e}");
        }
    }
}

fn millis_since(began: Instant) -> u64 {
    began.elapsed().as_millis().min(u128::from(u64::MAX)) as u64
}

/// EMFILE (this process) or ENFILE (the system).
pub(super) fn is_out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Writes the document to one client as its socket takes it, a piece at a
/// time, and closes; `took` hears of every write the socket took (the
/// bytes), and of every wait for the client (None). `limits`: the stall
/// timeout and the whole-document deadline.
///
/// Each piece is rendered and written in its address's `turn` (one piece
/// of one connection of the address at a time), let go before any wait
/// for the client: an address that opens connection after connection
/// shares the writing with every other address as one connection does,
/// however many it opens (issue 42, item 6: about 4,000 connect-and-close
/// a second from two addresses cut 3-5 of 18 polls from a third). A client
/// that has closed its connection costs no rendering: the first piece is
/// the prologue alone, and a reset is looked for before each piece.
async fn write_document(
    stream: TcpStream,
    table: &HostTable,
    cluster: &ClusterInfo<'_>,
    (stall, deadline): (Duration, Duration),
    turn: &Semaphore,
    mut took: impl FnMut(Option<usize>),
) -> io::Result<Written> {
    let started = Instant::now();
    let mut taken = 0u64;
    let mut render = None;
    let mut out = Vec::with_capacity(2 * PIECE);
    loop {
        // Never closed: `turn` lives as long as its address's connections.
        let my_turn = turn.acquire().await.ok();
        // Gone (reset: before its first piece, or by the piece before,
        // as a closed socket answers data): nothing more to render for it.
        // (A FIN is not gone: a client may close its side and read.)
        match stream.try_read(&mut [0u8; 1]) {
            Err(e) if e.kind() != io::ErrorKind::WouldBlock => return Err(e),
            _ => {}
        }
        // The first piece is the prologue alone (a constant): a client
        // that has closed answers it with a reset before any host is
        // rendered for it.
        let (render, piece) = match &mut render {
            Some(r) => (r, PIECE),
            None => (render.insert(table.render(Instant::now())), 1),
        };
        out.clear();
        let done = render.fill(cluster, &mut out, piece);
        let mut my_turn = my_turn;
        let mut rest = &out[..];
        while !rest.is_empty() {
            // Each wait for the client is at most `stall`, and never past
            // the deadline.
            let left = deadline.saturating_sub(started.elapsed());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("not taken within {} s", deadline.as_secs_f64()),
                ));
            }
            match stream.try_write(rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    rest = &rest[n..];
                    took(Some(n));
                    if taken < READS && taken + n as u64 >= READS {
                        // It reads: the full buffer.
                        let _ = socket2::SockRef::from(&stream).set_send_buffer_size(SEND_BUFFER);
                    }
                    taken += n as u64;
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            // The socket is full: waiting for the client, not for us; the
            // address's turn goes to its next connection meanwhile.
            my_turn = None;
            took(None);
            let wait = stall.min(left);
            match tokio::time::timeout(wait, stream.writable()).await {
                Ok(ready) => ready?,
                Err(_) if wait == stall => {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("nothing taken for {} s", stall.as_secs_f64()),
                    ));
                }
                // The deadline came first: said at the loop's top.
                Err(_) => {}
            }
        }
        drop(my_turn);
        if done {
            break;
        }
        // A piece at a time: the accept loop and the other connections
        // take their turns between two pieces.
        tokio::task::yield_now().await;
    }
    // Whole: a graceful close, the rest of the send buffer delivered.
    let sock = socket2::SockRef::from(&stream);
    let _ = sock.set_linger(None);
    let _ = sock.shutdown(Shutdown::Write);
    Ok(render.map(|r| r.written()).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tests::Harness;
    use std::net::IpAddr;
    use std::sync::atomic::Ordering::Relaxed;

    /// [`write_document`] on a runtime of its own, for a blocking test.
    fn write_blocking(
        server: std::net::TcpStream,
        table: &HostTable,
        cluster: &ClusterInfo<'_>,
        stall: Duration,
        deadline: Duration,
    ) -> io::Result<Written> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            server.set_nonblocking(true)?;
            let stream = TcpStream::from_std(server)?;
            let turn = Semaphore::new(1);
            write_document(stream, table, cluster, (stall, deadline), &turn, |_| ()).await
        })
    }

    /// A table whose document is far bigger than the socket buffers.
    /// Cluster "X", its hosts without a DMAX, grouped as by default.
    fn cluster_x(grouping: &crate::config::clusters::Grouping) -> ClusterInfo<'_> {
        ClusterInfo {
            name: "X",
            host_dmax: 0,
            grouping,
            port: None,
        }
    }

    fn big_table() -> HostTable {
        let (t, mut r) = (HostTable::new(100_000), Harness::new(""));
        let vars: String = (0..40).map(|v| format!("<v{v}>{v}</v{v}>")).collect();
        for i in 0..4000u32 {
            let rec = format!(
                r#"<statistics tod="1" ver="v5.5.3" src="h{i}:1094" tos="1700000000" pgm="xrootd" ins="anon" pid="7" site="X"><stats id="bench">{vars}</stats></statistics>"#
            );
            let from = SocketAddr::from(([10, 9, (i >> 8) as u8, i as u8], 1));
            let at = r.at(0);
            t.take(r.feed_at(rec, from, at).engine.batch(), from.ip(), at);
        }
        t
    }

    #[test]
    fn a_client_that_stops_reading_is_dropped() {
        let table = big_table();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let grouping = crate::config::clusters::Grouping::default();
        let cluster = cluster_x(&grouping);
        let t = Instant::now();
        let r = write_blocking(
            server,
            &table,
            &cluster,
            Duration::from_millis(500),
            POLL_DEADLINE,
        );
        let e = r.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert_eq!(e.to_string(), "nothing taken for 0.5 s");
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        drop(client);
    }

    #[test]
    fn a_client_too_slow_overall_is_dropped_and_a_reader_gets_it_all() {
        let table = big_table();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let grouping = crate::config::clusters::Grouping::default();
        let cluster = cluster_x(&grouping);
        // A reader that takes a little every 100 ms: never stalled, too slow.
        let given_up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = given_up.clone();
        let slow = std::thread::spawn(move || {
            use std::io::Read;
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            let mut buf = [0u8; 4096];
            while let Ok(n) = c.read(&mut buf) {
                if n == 0 || stop.load(Relaxed) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let (server, _) = listener.accept().unwrap();
        let t = Instant::now();
        let e = write_blocking(
            server,
            &table,
            &cluster,
            STALL_TIMEOUT,
            Duration::from_secs(1),
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "not taken within 1 s");
        // Near the 1 s deadline (slack for a loaded machine).
        assert!(t.elapsed() < Duration::from_secs(6), "{:?}", t.elapsed());
        given_up.store(true, Relaxed);
        slow.join().unwrap();
        // A client that reads gets the whole document.
        let reader = std::thread::spawn(move || {
            use std::io::Read;
            let mut c = std::net::TcpStream::connect(addr).unwrap();
            let mut text = String::new();
            c.read_to_string(&mut text).unwrap();
            text
        });
        let (server, _) = listener.accept().unwrap();
        let w = write_blocking(server, &table, &cluster, STALL_TIMEOUT, POLL_DEADLINE).unwrap();
        let text = reader.join().unwrap();
        assert_eq!((w.hosts, text.len()), (4000, w.bytes));
        assert!(w.bytes > 20_000_000, "{}", w.bytes);
        assert!(text.ends_with("</GANGLIA_XML>\n"));
    }

    /// A connection from `ip` that has taken `bytes`, its client waiting
    /// or not, on a task that does nothing.
    fn connection(ip: [u8; 4], bytes: u64, waiting: bool) -> Connection {
        let task = tokio::spawn(std::future::pending::<()>()).abort_handle();
        Connection {
            peer: SocketAddr::from((ip, 40000)),
            progress: Arc::new(Progress {
                at_ms: AtomicU64::new(0),
                bytes: AtomicU64::new(bytes),
                waiting: AtomicBool::new(waiting),
            }),
            task,
        }
    }

    /// Issue 42, item 6: with every slot taken by connections of a few
    /// churning addresses, a new one closes a connection of the address
    /// holding the most, never the one poll of another address, even a
    /// poll not run yet (before, the least progress of all went: that
    /// poll, the newest connection with nothing taken).
    #[tokio::test]
    async fn a_full_port_makes_room_at_the_busiest_address_not_at_a_lone_poll() {
        let counters = Counters::default();
        let mut events = Events::new(&counters, Duration::from_secs(60));
        let local = SocketAddr::from(([127, 0, 0, 1], 8649));
        let mut conns = Connections::default();
        // 255 churned connections, just accepted (nothing taken, not
        // waiting): 64 from each of three addresses, 63 from a fourth.
        for id in 0..255u64 {
            let ip = [127, 0, 0, 2 + (id / 64) as u8];
            conns.add(id, connection(ip, 0, false));
        }
        // gmetad's poll, the newest, not run yet.
        conns.add(255, connection([127, 0, 0, 1], 0, false));
        // A new connection from the fourth address (63 of its own).
        let new = IpAddr::from([127, 0, 0, 5]);
        conns.make_room(new, local, &mut events);
        assert_eq!(conns.by_id.len(), 255);
        assert!(conns.by_id.contains_key(&255), "the lone poll was closed");
        assert_eq!(conns.per_address(IpAddr::from([127, 0, 0, 1])), 1);
        assert_eq!(conns.per_address(new), 63);
        let busiest = (2..5).map(|a| conns.per_address(IpAddr::from([127, 0, 0, a])));
        assert_eq!(busiest.sum::<usize>(), 191);
        assert_eq!(counters.xml_evicted.load(Relaxed), 1);
    }
}
