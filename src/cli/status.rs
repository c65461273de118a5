//! `xrd2ganglia status`: asks the running gateway on its control socket
//! (the library's `daemon::control`) and prints its sources, refused
//! senders and counters, as tables or (`--json`) as the gateway's JSON
//! line, whose schema is `xrd2ganglia::status` (docs/operations.md).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use xrd2ganglia::events::COUNTERS;
use xrd2ganglia::status::{ErrorReply, Heard, REQUEST, Status};

use super::{Failed, Outcome, settings_for_naming};
use xrd2ganglia::config::ConfigError;

/// How long the gateway has to answer, connecting included (its own
/// limit for an answer is 5 s).
const TIMEOUT: Duration = Duration::from_secs(10);
/// The longest reply read (a gateway at `max_sources` sources writes a
/// few MiB).
const MAX_REPLY: u64 = 256 << 20;

/// Asks the gateway at `socket` (else at the `control_socket` of
/// `config`) and prints what it says.
pub fn run(config: Option<PathBuf>, socket: Option<PathBuf>, json: bool) -> Outcome {
    let path = match socket {
        Some(p) => p,
        None => {
            let settings = settings_for_naming(config.as_deref())?;
            match settings.control_socket {
                Some(c) => c.path,
                None => {
                    return Err(ConfigError(format!(
                        "control_socket is \"\" in {}: that gateway has no control socket to ask",
                        settings.source
                    ))
                    .into());
                }
            }
        }
    };
    let line = ask(&path).map_err(|why| Failed::NoGateway {
        path: path.clone(),
        why,
    })?;
    let status: Status = match serde_json::from_str(&line) {
        Ok(s) => s,
        Err(e) => {
            return Err(match serde_json::from_str::<ErrorReply>(&line) {
                // A gateway answered: not "no gateway".
                Ok(reply) => Failed::Refused {
                    path,
                    error: reply.error,
                },
                Err(_) => Failed::NoGateway {
                    path,
                    why: format!("its answer is not a status ({e})"),
                },
            }
            .into());
        }
    };
    let mut out = io::stdout().lock();
    let written = if json {
        writeln!(out, "{}", line.trim_end())
    } else {
        write!(out, "{}", table(&status, &path))
    };
    // A closed stdout (`| head`) is no failure of the gateway's.
    let _ = written.and_then(|()| out.flush());
    Ok(())
}

/// Sends the request and reads the one-line reply, within [`TIMEOUT`]
/// (in a thread: a gateway that is stopped, SIGSTOP, leaves even the
/// connect waiting once its backlog is full).
fn ask(path: &Path) -> Result<String, String> {
    let (tx, rx) = mpsc::channel();
    let p = path.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(exchange(&p));
    });
    match rx.recv_timeout(TIMEOUT) {
        Ok(Ok(line)) => Ok(line),
        Ok(Err(e)) => Err(explain(&e)),
        Err(_) => Err(format!(
            "no answer within {} s (the gateway is stopped or overloaded)",
            TIMEOUT.as_secs()
        )),
    }
}

fn exchange(path: &Path) -> io::Result<String> {
    let mut stream = UnixStream::connect(path)?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    // A gateway that turned the connection away has written why and
    // closed: the write may fail (EPIPE: "Broken pipe"), its reply is
    // still there to read, and says more.
    let wrote = stream.write_all(format!("{REQUEST}\n").as_bytes());
    let mut line = String::new();
    let read = BufReader::new(stream.take(MAX_REPLY)).read_line(&mut line);
    if !line.is_empty() {
        return Ok(line);
    }
    wrote?;
    read?;
    Err(io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "it closed the connection without an answer",
    ))
}

/// Why no gateway answered, and what to do.
fn explain(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => "no such socket (is the gateway running? \
            `systemctl status xrd2ganglia`; a gateway started by hand uses its own \
            config's control_socket: name that config with --config, or the socket with \
            --socket)"
            .into(),
        io::ErrorKind::ConnectionRefused => {
            "connection refused (the socket of a gateway that is not running)".into()
        }
        io::ErrorKind::PermissionDenied => "permission denied (run as root, or as a member \
            of the gateway's group: xrd2ganglia for the packaged service)"
            .into(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => format!(
            "no answer within {} s (the gateway is stopped or overloaded)",
            TIMEOUT.as_secs()
        ),
        _ => e.to_string(),
    }
}

/// The pair's lines: the link, what each hears, who sends to gmond.
fn pair(p: &xrd2ganglia::status::PairStatus) -> String {
    let ms = |v: Option<u64>| {
        v.map_or_else(
            || "never".into(),
            |v| format!("{:.1} s ago", v as f64 / 1000.0),
        )
    };
    let mut out = String::new();
    if p.deaf {
        out.push_str("WARNING: this gateway hears no server its peer hears: its XML port refuses gmetad's polls so that gmetad reads the peer (docs/pair.md, a deaf gateway)\n\n");
    }
    if !p.held.is_empty() {
        out.push_str(&held(p));
    }
    out.push_str(&format!(
        "Pair: last exchange {}; newest record here {}, at the peer {}\n",
        ms(p.last_exchange_ms),
        ms(p.newest_record_ms),
        ms(p.peer_newest_record_ms)
    ));
    out.push_str(&format!(
        "Pair: {} to gmond; the peer's own host {}; gmond showed it: {}\n\n",
        if p.standing_by {
            "standing by, nothing sent"
        } else {
            "sending"
        },
        p.peer_own_host.as_deref().unwrap_or("-"),
        p.evidence.as_deref().unwrap_or("not read")
    ));
    out
}

/// The hold's warning: servers seen restarting after a gap while the
/// peer was unreachable, at most [`HELD_SHOWN`] named.
fn held(p: &xrd2ganglia::status::PairStatus) -> String {
    let mut named = p.held.iter().take(HELD_SHOWN).cloned().collect::<Vec<_>>();
    if p.held.len() > HELD_SHOWN {
        named.push(format!("and {} more", p.held.len() - HELD_SHOWN));
    }
    let now = if p.holding {
        "their counters are held and the XML port refuses gmetad's polls until they report again"
    } else {
        "their counters continue from what it gives"
    };
    let servers = match p.held.len() {
        1 => "1 server".to_string(),
        n => format!("{n} servers"),
    };
    format!(
        "WARNING: {servers} restarted after a gap while the peer was unreachable: recover_from is read for them while the link is cut; {now} (docs/pair.md, a hold): {}\n\n",
        named.join(", ")
    )
}

/// Servers a hold's warning names.
const HELD_SHOWN: usize = 5;

/// The kernel's drops at the listening sockets and how the state file's
/// saves go, each with its warning when it needs action.
fn health(out: &mut String, status: &Status) {
    if let Some(d) = &status.kernel_drops {
        if d.last_minute > 0 {
            out.push_str(&format!(
                "WARNING: the kernel dropped {} datagrams at the gateway's listening sockets in the last minute: their receive buffers were full (raise recv_buffer and net.core.rmem_max: docs/troubleshooting.md)\n\n",
                d.last_minute
            ));
        }
        out.push_str(&format!(
            "Kernel drops (receive buffers full): {} in the last minute, {} since the start\n\n",
            d.last_minute, d.since_start
        ));
    }
    if let Some(f) = &status.state_file {
        match (&f.error, &f.failing_since) {
            (Some(error), Some(since)) => out.push_str(&format!(
                "WARNING: the state file {} is not being saved (failing since {}): {error}; \
                 counters will not stay continuous across a restart until a save works \
                 (tried every state_interval: free space, or make it writable)\n\n",
                f.path,
                ago(since)
            )),
            _ => out.push_str(&format!(
                "State file: {}, {}\n\n",
                f.path,
                f.last_saved
                    .as_ref()
                    .map_or("not saved yet".to_string(), |t| format!("saved {}", ago(t)))
            )),
        }
    }
}

/// The status as tables: sources, refused senders, counters.
fn table(status: &Status, path: &Path) -> String {
    let mut out = format!(
        "xrd2ganglia {} (pid {}) on {}\n\n",
        status.gateway,
        status.pid,
        path.display()
    );
    health(&mut out, status);
    if let Some(p) = &status.pair {
        out.push_str(&pair(p));
    }
    let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    out.push_str(&format!("Sources: {}\n", status.sources.len()));
    let rows: Vec<Vec<String>> = status
        .sources
        .iter()
        .map(|s| {
            vec![
                s.address.to_string(),
                dash(&s.host),
                dash(&s.program),
                dash(&s.instance),
                dash(&s.cluster),
                ago(&s.last_heard),
                s.records.to_string(),
                s.errors.to_string(),
            ]
        })
        .collect();
    let head = [
        "ADDRESS",
        "HOST",
        "PROGRAM",
        "INSTANCE",
        "CLUSTER",
        "LAST HEARD",
        "RECORDS",
        "ERRORS",
    ];
    columns(&mut out, &head, &rows, 6);
    detailed(&mut out, status);
    out.push_str(&format!(
        "\nRefused (not in allow): {}\n",
        status.refused.len()
    ));
    let rows: Vec<Vec<String>> = status
        .refused
        .iter()
        .map(|r| {
            vec![
                r.address.to_string(),
                r.count.to_string(),
                ago(&r.last_heard),
            ]
        })
        .collect();
    columns(&mut out, &["ADDRESS", "COUNT", "LAST"], &rows, 1);
    if status.refused_unlisted > 0 {
        out.push_str(&format!(
            "and {} datagrams from addresses not listed\n",
            status.refused_unlisted
        ));
    }
    out.push_str("\nCounters:\n");
    let known = COUNTERS.iter().map(|c| c.field);
    let extra = status
        .counters
        .keys()
        .map(String::as_str)
        .filter(|k| !COUNTERS.iter().any(|c| c.field == *k));
    let rows: Vec<Vec<String>> = known
        .chain(extra)
        .filter_map(|k| Some(vec![k.to_string(), status.counters.get(k)?.to_string()]))
        .collect();
    columns(&mut out, &["COUNTER", "VALUE"], &rows, 1);
    out
}

/// The detailed stream's lines: per xrootd run, so that an admin sees
/// which server loses packets (none without the stream).
fn detailed(out: &mut String, status: &Status) {
    if status.detailed.is_empty() {
        return;
    }
    let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    // Per xrootd run, so that an admin sees which server loses packets.
    out.push_str(&format!(
        "\nDetailed stream: {} server runs\n",
        status.detailed.len()
    ));
    let rows: Vec<Vec<String>> = status
        .detailed
        .iter()
        .map(|d| {
            vec![
                d.address.to_string(),
                dash(&d.host),
                // As long ago as its last packet says (the gateway's
                // clock, read once for the reply).
                ago(&Heard {
                    seconds_ago: (d.last_heard.unix + d.last_heard.seconds_ago
                        - f64::from(d.started))
                    .max(0.0),
                    unix: f64::from(d.started),
                }),
                ago(&d.last_heard),
                d.logins.to_string(),
                d.files_open.to_string(),
                d.lost.to_string(),
            ]
        })
        .collect();
    let head = [
        "ADDRESS",
        "HOST",
        "STARTED",
        "LAST HEARD",
        "LOGINS",
        "FILES OPEN",
        "LOST",
    ];
    columns(out, &head, &rows, 4);
}

/// Rows under a header, each column as wide as its widest cell; columns
/// from `right` on aligned right (numbers).
fn columns(out: &mut String, head: &[&str], rows: &[Vec<String>], right: usize) {
    if rows.is_empty() {
        return;
    }
    let mut width: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in width.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.zip(&width).enumerate() {
            if i > 0 {
                text.push_str("  ");
            }
            if i >= right {
                text.push_str(&format!("{cell:>w$}"));
            } else {
                text.push_str(&format!("{cell:<w$}"));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&mut head.iter().copied());
    for row in rows {
        line(&mut row.iter().map(String::as_str));
    }
}

/// "4.2 s ago", "3 min ago", "2 h ago", "5 d ago".
fn ago(heard: &Heard) -> String {
    let s = heard.seconds_ago;
    if s < 60.0 {
        format!("{s:.1} s ago")
    } else if s < 3600.0 {
        format!("{} min ago", (s / 60.0) as u64)
    } else if s < 86_400.0 {
        format!("{} h ago", (s / 3600.0) as u64)
    } else {
        format!("{} d ago", (s / 86_400.0) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xrd2ganglia::status::PairStatus;

    /// A hold shows before the pair's lines: the hosts, at most
    /// [`HELD_SHOWN`] named, and whether the XML port refuses now.
    #[test]
    fn a_hold_is_a_warning_naming_the_held_servers() {
        let mut p = PairStatus {
            last_exchange_ms: Some(31_200),
            held: vec!["ds1.example.org (192.0.2.1)".into()],
            holding: true,
            ..PairStatus::default()
        };
        assert_eq!(
            pair(&p),
            "WARNING: 1 server restarted after a gap while the peer was unreachable: recover_from is read for them while the link is cut; their counters are held and the XML port refuses gmetad's polls until they report again (docs/pair.md, a hold): ds1.example.org (192.0.2.1)\n\n\
             Pair: last exchange 31.2 s ago; newest record here never, at the peer never\n\
             Pair: sending to gmond; the peer's own host -; gmond showed it: not read\n\n"
        );
        p.holding = false;
        p.held = (1..=7).map(|i| format!("ds{i} (192.0.2.{i})")).collect();
        let shown = pair(&p);
        assert!(
            shown.starts_with("WARNING: 7 servers restarted after a gap while the peer was unreachable: recover_from is read for them while the link is cut; their counters continue from what it gives (docs/pair.md, a hold): ds1 (192.0.2.1), ds2 (192.0.2.2), ds3 (192.0.2.3), ds4 (192.0.2.4), ds5 (192.0.2.5), and 2 more\n\n"),
            "{shown}"
        );
        p.held.clear();
        assert!(
            pair(&p).starts_with("Pair: last exchange"),
            "no hold, no warning"
        );
    }
}
