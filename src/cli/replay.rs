//! `xrd2ganglia replay`: sends a recording's datagrams (the library's
//! `recording`) to a gateway again, at their pace: what a newcomer feeds
//! the gateway with, and what an admin tries a config change on
//! yesterday's traffic with.

use std::collections::HashMap;
use std::io::{self, BufReader, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use xrd2ganglia::recording;

use super::{Failed, Failure, Outcome, StartError};

/// The most senders given a socket of their own; the senders past it
/// share these (a gateway tells sources apart by address and by the
/// record's own `src`, so sharing merges nothing a record names).
const MAX_SOCKETS: usize = 1024;
/// The most senders remembered by address (each keeps its socket); past
/// them a sender's socket is chosen by a hash of its address (still one
/// socket per sender), so a recording of endless senders takes no more
/// memory than this.
const MAX_SENDERS: usize = 65_536;

/// Sends every entry of `file` to `to`, each sender's from a socket of its
/// own, paced as recorded (`speed` times faster). A bad entry is reported
/// on stderr with its line and skipped; the rest is sent (then exit 1).
pub fn run(file: &Path, to: SocketAddr, speed: f64) -> Outcome {
    if !(speed.is_finite() && speed > 0.0) {
        return Err(StartError::Config(xrd2ganglia::config::ConfigError(format!(
            "--speed {speed}: must be a number above 0"
        )))
        .into());
    }
    let input = match std::fs::File::open(file) {
        Ok(f) => BufReader::new(f),
        Err(error) => {
            let path = PathBuf::from(file);
            return Err(StartError::Read { path, error }.into());
        }
    };
    let mut sockets: HashMap<SocketAddr, usize> = HashMap::new();
    let mut pool: Vec<UdpSocket> = Vec::new();
    let (mut sent, mut bad) = (0u64, 0u64);
    let mut clock: Option<(f64, Instant)> = None;
    let mut more_senders = false;
    let mut err = io::stderr();
    for item in recording::entries(input) {
        let (line, entry) = match item {
            Ok(item) => item,
            // A read error, or a line longer than any entry: the reading ends.
            Err(e) => {
                let _ = writeln!(err, "xrd2ganglia replay: {}: {e}", file.display());
                return Err(Failure::AlreadyReported);
            }
        };
        let entry = match entry {
            Ok(e) => e,
            Err(why) => {
                bad += 1;
                let _ = writeln!(err, "xrd2ganglia replay: {}:{line}: {why}", file.display());
                continue;
            }
        };
        // The first entry's time is now; each later one is sent as long
        // after it as it was recorded (one recorded earlier: at once).
        let (first, started) = *clock.get_or_insert((entry.time, Instant::now()));
        let due = started + Duration::from_secs_f64(((entry.time - first) / speed).max(0.0));
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let n = sockets.len();
        let at = match sockets.get(&entry.from) {
            Some(&at) => at,
            None if n < MAX_SENDERS => *sockets.entry(entry.from).or_insert(n % MAX_SOCKETS),
            None => {
                more_senders = true;
                (xrd2ganglia::fnv::hash(entry.from.to_string().as_bytes()) as usize) % MAX_SOCKETS
            }
        };
        if at == pool.len() {
            pool.push(sender_socket(to).map_err(Failed::Io)?);
        }
        pool[at]
            .send_to(&entry.datagram, to)
            .map_err(|e| Failed::Io(io::Error::new(e.kind(), format!("sending to {to}: {e}"))))?;
        sent += 1;
    }
    println!(
        "xrd2ganglia replay: sent {sent} datagrams of {} senders to {to}{}",
        if more_senders {
            format!("more than {MAX_SENDERS}")
        } else {
            sockets.len().to_string()
        },
        if bad > 0 {
            format!("; {bad} bad entries skipped")
        } else {
            String::new()
        }
    );
    if bad > 0 {
        return Err(Failure::AlreadyReported);
    }
    Ok(())
}

/// A socket of the family `to` is in, on a port of the kernel's choosing.
fn sender_socket(to: SocketAddr) -> io::Result<UdpSocket> {
    match to {
        SocketAddr::V4(_) => UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)),
        SocketAddr::V6(_) => UdpSocket::bind((Ipv6Addr::UNSPECIFIED, 0)),
    }
}
