//! `xrd2ganglia dump`: what `serve` would send for some records, printed
//! instead of sent.

use std::io::{self, BufRead, Write as _};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};

use xrd2ganglia::dump::{self, Dumper, Style};

use super::{
    Failed, Failure, Listener, Outcome, StartError, init_logging, log_filter, settings_for_naming,
};

/// Prints the metrics for the records received on `listen` (until stdout
/// is closed; with `record`, also writing each datagram into that file, a
/// recording `replay` sends again), or else read from `input` (a file, or `-` or none: stdin)
/// as sent by `from`. Fails (exit 1) if some records were not summary
/// records, each reported on stderr.
pub fn run(
    config: Option<PathBuf>,
    json: bool,
    listen: Option<SocketAddr>,
    from: IpAddr,
    input: Option<PathBuf>,
    record: Option<PathBuf>,
) -> Outcome {
    // dump reports bad records itself, one line each.
    init_logging(log_filter(None, "error")?);
    let settings = settings_for_naming(config.as_deref())?;
    let style = if json { Style::Json } else { Style::Table };
    let mut dumper = Dumper::new(settings);
    let (mut out, mut err) = (io::stdout().lock(), io::stderr());
    if let Some(addr) = listen {
        let socket = UdpSocket::bind(addr).map_err(|error| StartError::Bind {
            listener: Listener::Reports,
            addr,
            error,
        })?;
        let mut recording = match &record {
            None => None,
            Some(path) => match std::fs::File::create(path) {
                Ok(f) => Some(io::BufWriter::new(f)),
                Err(error) => {
                    let path = path.clone();
                    return Err(StartError::Record { path, error }.into());
                }
            },
        };
        let recording = recording.as_mut().map(|w| w as &mut dyn io::Write);
        return match dump::from_socket(&mut dumper, &socket, style, &mut out, &mut err, recording) {
            // stdout closed: the reader went away, the end of a dump.
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
            Err(e) => Err(Failed::Io(e).into()),
            Ok(()) => Ok(()),
        };
    }
    let mut records: Box<dyn BufRead> = match input.as_deref().filter(|p| *p != Path::new("-")) {
        None => Box::new(io::stdin().lock()),
        Some(path) => match std::fs::File::open(path) {
            Ok(f) => Box::new(io::BufReader::new(f)),
            Err(error) => {
                let path = path.to_owned();
                return Err(StartError::Read { path, error }.into());
            }
        },
    };
    match dump::from_reader(&mut dumper, &mut records, from, style, &mut out, &mut err) {
        Ok(0) => Ok(()),
        // Some records were not summary records (each reported on stderr).
        Ok(_) => Err(Failure::AlreadyReported),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        // A line longer than a record can be: said with the record's number.
        Err(e) if e.kind() == io::ErrorKind::InvalidData => {
            let _ = writeln!(err, "xrd2ganglia dump: {e}");
            Err(Failure::AlreadyReported)
        }
        Err(e) => Err(Failed::Io(e).into()),
    }
}
