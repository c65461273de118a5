//! `xrd2ganglia poll`: reads a gmond-style XML port (a gmond, the
//! gateway's `xml_listen`, gmetad's 8651) as gmetad does, and prints its
//! clusters, hosts and (with `--metrics`) metrics (the library's `poll`).
//!
//! What it takes is bounded: the whole exchange (connecting, reading to
//! the end) within `--timeout`, a document of at most [`MAX_DOCUMENT`]
//! bytes; past either it stops (exit 1) and says which.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::{Failed, Outcome, StartError};

/// The longest document read: a gmetad of many clusters writes tens of
/// MiB; this is several times the largest seen, and what `poll` may hold.
pub const MAX_DOCUMENT: usize = 256 << 20;
/// `--timeout`'s default, seconds: the whole exchange.
pub const DEFAULT_TIMEOUT: f64 = 10.0;

/// Reads the document at `addr` (HOST:PORT), all of it within `timeout`
/// seconds, and prints it.
pub fn run(addr: &str, metrics: bool, timeout: f64) -> Outcome {
    let fail = |why: String| Failed::Poll {
        addr: addr.to_string(),
        why,
    };
    let Some(limit) = Duration::try_from_secs_f64(timeout)
        .ok()
        .filter(|d| !d.is_zero())
    else {
        return Err(StartError::Config(xrd2ganglia::config::ConfigError(format!(
            "--timeout {timeout}: must be a number of seconds above 0"
        )))
        .into());
    };
    let deadline = Instant::now() + limit;
    let left = || deadline.saturating_duration_since(Instant::now());
    let late = |read: usize| {
        fail(format!(
            "no whole document within --timeout {timeout} s ({read} bytes read): the port is \
             stuck or sends too slowly"
        ))
    };
    // Resolved in a thread of its own, so that a resolver that does not
    // answer is left at the deadline too (the thread ends with the process).
    let (tx, rx) = std::sync::mpsc::channel();
    let name = addr.to_string();
    std::thread::spawn(move || {
        let _ = tx.send(name.to_socket_addrs().map(|mut a| a.next()));
    });
    let target = match rx.recv_timeout(left()) {
        Ok(Ok(Some(target))) => target,
        Ok(Ok(None)) => return Err(fail("resolves to no address".into()).into()),
        Ok(Err(e)) => return Err(fail(format!("not an address: {e}")).into()),
        Err(_) => return Err(late(0).into()),
    };
    if left().is_zero() {
        return Err(late(0).into());
    }
    let mut stream = TcpStream::connect_timeout(&target, left()).map_err(|e| {
        if e.kind() == ErrorKind::TimedOut {
            late(0)
        } else {
            fail(format!(
                "{e} (is gmond, the gateway's xml_listen or gmetad on that port?)"
            ))
        }
    })?;
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let wait = left();
        if wait.is_zero() {
            return Err(late(bytes.len()).into());
        }
        stream
            .set_read_timeout(Some(wait))
            .map_err(|e| fail(e.to_string()))?;
        let n = match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(late(bytes.len()).into());
            }
            Err(e) => return Err(fail(format!("reading: {e}")).into()),
        };
        if bytes.len() + n > MAX_DOCUMENT {
            return Err(fail(format!(
                "the document is longer than {} MiB, the most poll reads",
                MAX_DOCUMENT >> 20
            ))
            .into());
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
    // gmond says ISO-8859-1 and writes what it was sent; names are ASCII.
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    let clusters = xrd2ganglia::poll::read(&text).map_err(fail)?;
    let mut out = std::io::stdout().lock();
    // A closed stdout (`| head`) is no failure of the port's.
    let _ = out
        .write_all(xrd2ganglia::poll::show(&clusters, metrics).as_bytes())
        .and_then(|()| out.flush());
    Ok(())
}
