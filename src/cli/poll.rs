//! `xrd2ganglia poll`: reads a gmond-style XML port (a gmond, the
//! gateway's `xml_listen`, gmetad's 8651) as gmetad does, and prints its
//! clusters, hosts and (with `--metrics`) metrics (the library's `poll`).

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::{Failed, Outcome};

/// How long connecting and reading may take in all, each.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The longest document read (a gmetad of many clusters writes tens of MiB).
const MAX_DOCUMENT: u64 = 1 << 30;

/// Reads the document at `addr` (HOST:PORT) and prints it.
pub fn run(addr: &str, metrics: bool) -> Outcome {
    let fail = |why: String| Failed::Poll {
        addr: addr.to_string(),
        why,
    };
    let target = addr
        .to_socket_addrs()
        .map_err(|e| fail(format!("not an address: {e}")))?
        .next()
        .ok_or_else(|| fail("resolves to no address".into()))?;
    let stream = TcpStream::connect_timeout(&target, TIMEOUT).map_err(|e| {
        fail(format!(
            "{e} (is gmond, the gateway's xml_listen or gmetad on that port?)"
        ))
    })?;
    stream
        .set_read_timeout(Some(TIMEOUT))
        .map_err(|e| fail(e.to_string()))?;
    let mut bytes = Vec::new();
    stream
        .take(MAX_DOCUMENT)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(format!("reading: {e}")))?;
    // gmond says ISO-8859-1 and writes what it was sent; names are ASCII.
    let text = String::from_utf8_lossy(&bytes);
    let clusters = xrd2ganglia::poll::read(&text).map_err(fail)?;
    let mut out = std::io::stdout().lock();
    // A closed stdout (`| head`) is no failure of the port's.
    let _ = out
        .write_all(xrd2ganglia::poll::show(&clusters, metrics).as_bytes())
        .and_then(|()| out.flush());
    Ok(())
}
