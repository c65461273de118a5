//! When an XML port listens: after a start, once a document would be
//! whole ([`Warmup`]); with a `peer`, it hands gmetad over while deaf or
//! holding (the port stops listening, gmetad reads the other gateway).

use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::engine::saved::SavedState;

/// A source is claimed when its first record is handled, a moment before
/// that record's packets reach the table: the port listens this long after
/// the last claim.
const CLAIM_GRACE: Duration = Duration::from_millis(200);

/// When the port can answer, and so listens.
///
/// gmetad (`gmetad/data_thread.c`) keeps to an address that accepts a
/// connection, even one closed unanswered, and moves to the next address
/// of its `data_source` only when a connect fails. So the socket is bound
/// at the start (its errors stop the start) and listen()ed only once a
/// document would be whole; until then the kernel refuses connections
/// (a bound TCP socket that does not listen answers a SYN with a reset,
/// on Linux).
///
/// * With a `peer`: right after the start-up pull of its state and last
///   records (the table is then what the peer's is: no warm-up). If the
///   pull fails (the peer is down), or brings no record while the state
///   file names sources (the peer is starting too), as without one.
/// * Without: after a start with a state file the table is empty until
///   the servers report again. A document of a part of the cluster would
///   show gmetad its summed counters dropping: gmetad stores a cluster's
///   summary of a counter as a COUNTER and draws the drop as a wrap, a
///   spike of about 5e8/s. So the port listens once every source the
///   state file named has reported again, or after `warmup_max` (90 s by
///   default: less than the 120 s of gmetad's RRD heartbeat at its
///   default 15 s step, so a gmetad with no other address leaves no gap).
///   A server that never comes back makes every start wait all of it.
pub struct Warmup {
    saved: Arc<SavedState>,
    until: Instant,
    /// The start-up pull from the peer: None while under way, Some(true)
    /// when it brought the peer's state, Some(false) when it failed.
    peer: Option<watch::Receiver<Option<bool>>>,
    /// Whether this gateway of a pair is deaf (its peer hears servers it
    /// does not: [`crate::daemon::peer::Link::deaf`]).
    deaf: Option<watch::Receiver<bool>>,
    /// Whether a restart seen after a gap holds a server's counters
    /// (`recover_from` read for it, the peer unreachable:
    /// [`crate::daemon::recover::keep_floors`]): refused as when deaf.
    held: Option<watch::Receiver<bool>>,
}

impl Warmup {
    /// For a gateway started at `started` with `saved` (the state file's
    /// sources, claimed as they report), waiting at most `max`.
    pub fn new(saved: Arc<SavedState>, started: Instant, max: Duration) -> Warmup {
        let until = if saved.awaited() == 0 {
            started
        } else {
            started + max
        };
        Warmup {
            saved,
            until,
            peer: None,
            deaf: None,
            held: None,
        }
    }

    /// Once listening, stops listening while `deaf` (a pair's gateway that
    /// hears no server its peer hears): gmetad's connect is refused, and
    /// gmetad walks its `data_source` list to the peer in the same poll
    /// (accepting and closing would not move it: docs/pair.md).
    pub fn hand_over_when(mut self, deaf: watch::Receiver<bool>) -> Warmup {
        self.deaf = Some(deaf);
        self
    }

    /// Once listening, stops listening while `held` too (a server's
    /// counters held until `recover_from` is read: gmetad must not read
    /// them below what it stored), as while deaf.
    pub fn hand_over_while_held(mut self, held: watch::Receiver<bool>) -> Warmup {
        self.held = Some(held);
        self
    }

    /// Whether the port is to refuse now: deaf, or a hold.
    pub(super) fn refusing(&self) -> bool {
        let on = |w: &Option<watch::Receiver<bool>>| w.as_ref().is_some_and(|w| *w.borrow());
        on(&self.deaf) || on(&self.held)
    }

    /// Resolves when the gateway turns deaf or holds (never without a
    /// peer).
    pub(super) async fn turned_deaf(&mut self) {
        self.wait_refusing(true).await;
    }

    /// Waits until [`refusing`](Self::refusing) is `want` (never, if
    /// nothing can change it).
    pub(super) async fn wait_refusing(&mut self, want: bool) {
        async fn changed(w: &mut Option<watch::Receiver<bool>>) {
            let gone = match w {
                Some(w) => w.changed().await.is_err(),
                None => true,
            };
            if gone {
                std::future::pending::<()>().await;
            }
        }
        loop {
            if let Some(d) = &mut self.deaf {
                d.borrow_and_update();
            }
            if let Some(h) = &mut self.held {
                h.borrow_and_update();
            }
            if self.refusing() == want {
                return;
            }
            tokio::select! {
                () = changed(&mut self.deaf) => {}
                () = changed(&mut self.held) => {}
            }
        }
    }

    /// Deaf: the listener stops listening (the connections waiting in its
    /// queue are refused) until the gateway hears again, then listens on
    /// the same address, registered with the runtime anew. None at a stop,
    /// or if it cannot listen again.
    pub(super) async fn hand_over(
        &mut self,
        listener: TcpListener,
        local: SocketAddr,
        stop: &mut watch::Receiver<bool>,
    ) -> Option<TcpListener> {
        let listener = listener.into_std().ok()?;
        let sock = socket2::SockRef::from(&listener);
        if let Err(e) = sock.shutdown(Shutdown::Read) {
            tracing::warn!("xml_listen {local}: cannot stop listening while deaf: {e}");
        }
        tokio::select! {
            _ = stop.changed() => return None,
            () = self.wait_refusing(false) => {}
        }
        // Bound to a port of its own (not 0), the socket keeps it.
        let again = sock.listen(crate::daemon::bind::XML_BACKLOG);
        match (again, listener.local_addr()) {
            (Ok(()), Ok(now)) if now == local => TcpListener::from_std(listener).ok(),
            (r, now) => {
                tracing::error!("xml_listen {local}: cannot listen again ({r:?}, {now:?})");
                None
            }
        }
    }

    /// Waits for the start-up pull from the peer first.
    pub fn after_peer(mut self, pulled: watch::Receiver<Option<bool>>) -> Warmup {
        self.peer = Some(pulled);
        self
    }

    /// None once the port can listen; else the sources still awaited
    /// (0 while the peer is asked) and how long at most.
    pub(in crate::daemon) fn waiting(&mut self, now: Instant) -> Option<(usize, Duration)> {
        if let Some(peer) = &self.peer {
            match *peer.borrow() {
                None => return Some((0, Duration::from_millis(100))),
                Some(true) => return None,
                Some(false) => {}
            }
        }
        if now >= self.until {
            return None;
        }
        let left = self.saved.awaited();
        if left == 0 {
            // Counted from the last claim, not from now: the first poll
            // after every source reported is answered.
            let ready = self.saved.last_claim().map_or(now, |t| t + CLAIM_GRACE);
            if now >= ready {
                return None;
            }
            return Some((0, ready - now));
        }
        Some((left, self.until - now))
    }

    /// Waits until the port can listen (or `stop`); what it waited for.
    pub(super) async fn wait(&mut self, stop: &mut watch::Receiver<bool>) -> Option<&'static str> {
        let mut waited = false;
        while let Some((_, within)) = self.waiting(Instant::now()) {
            waited = true;
            tokio::select! {
                _ = stop.changed() => return None,
                _ = tokio::time::sleep(within.min(Duration::from_millis(50))) => {}
            }
        }
        Some(
            if self
                .peer
                .as_ref()
                .is_some_and(|p| *p.borrow() == Some(true))
            {
                "the peer's state was pulled"
            } else if !waited {
                "nothing to wait for"
            } else if self.saved.awaited() > 0 {
                "warmup_max passed before every source the state file or recover_from named reported"
            } else {
                "every source the state file or recover_from named reported again"
            },
        )
    }
}
