//! `xrd2ganglia mpxstats`: XRootD's mpxstats, from the gateway's parser.
//!
//! `mpxstats [-f {cgi|flat|xml}] -p PORT [-s]`, with the same output as the
//! mpxstats of Debian's xrootd-server 5.5.3 for the same datagrams:
//!
//! * `flat`: `name value` lines, then an empty line, per record;
//! * `cgi`: `name=value&name=value...` and a newline, per record;
//! * `xml` (default): the datagram as received and a newline;
//! * header attributes first, in mpxstats' order (tod ver src tos pgm ins
//!   pid), then with `-s` the sender as `host`, written as mpxstats writes
//!   an address it cannot resolve (`[::ffff:10.0.0.1]`, the socket being
//!   dual-stack); empty elements are left out, as mpxstats does.
//!
//! mpxstats' defects, fixed (README lists them): datagrams over 8190 bytes are
//! read whole (up to 64 KiB); records come out in arrival order (mpxstats
//! reverses a burst); a value with spaces stays one value (mpxstats splits it
//! into two lines); `site` and any other header attribute are kept (after
//! `pid`/`host`; `--compat` leaves them out for byte-for-byte mpxstats
//! output); every malformed datagram is reported on stderr with its sender and
//! the reason (mpxstats prints the first error, garbled); no reverse DNS
//! lookup per datagram (mpxstats looks up the v4-mapped address, which
//! practically never resolves, so its output is the same).

use std::io::{self, Write};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, UdpSocket};

use socket2::{Domain, Protocol, Socket, Type};

use crate::summary::{SummaryParser, SummaryRecord};

pub const USAGE: &str = "Usage: mpxstats [-f {cgi|flat|xml}] -p <port> [-s] [--compat]";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Cgi,
    Flat,
    Xml,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub format: Format,
    pub port: u16,
    /// `-s`: include the sender.
    pub sender: bool,
    /// False with `--compat`: leave out `site` and the other header
    /// attributes mpxstats does not print.
    pub all_attributes: bool,
}

/// mpxstats' command line. Errors are mpxstats' messages (without the
/// timestamp and pid its logger adds); the caller adds the usage line.
pub fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut format = Format::Xml;
    let mut port = None;
    let mut sender = false;
    let mut all_attributes = true;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        i += 1;
        let mut value = |opt: char| -> Result<String, String> {
            if i < args.len() && !args[i].starts_with('-') {
                i += 1;
                Ok(args[i - 1].clone())
            } else {
                Err(format!("mpxstats: '{opt}' option is invalid"))
            }
        };
        match a {
            "-f" => {
                let f = value('f')?;
                format = match f.as_str() {
                    "cgi" => Format::Cgi,
                    "flat" => Format::Flat,
                    "xml" => Format::Xml,
                    _ => return Err(format!("mpxstats: Invalid format -  {f}")),
                };
            }
            "-p" => {
                let p = value('p')?;
                port = Some(
                    p.parse::<u16>()
                        .ok()
                        .filter(|p| *p != 0)
                        .ok_or_else(|| format!("mpxstats: Invalid port number -  {p}"))?,
                );
            }
            "-s" => sender = true,
            "--compat" => all_attributes = false,
            _ if a.starts_with('-') => {
                let c = a.chars().nth(1).unwrap_or('-');
                return Err(format!("mpxstats: '{c}' option is invalid"));
            }
            // mpxstats ignores stray words.
            _ => {}
        }
    }
    let port = port.ok_or("mpxstats: Port has not been specified.")?;
    Ok(Options {
        format,
        port,
        sender,
        all_attributes,
    })
}

/// mpxstats' options as a clap command, for the man page and completions
/// only (parsing is [`parse_args`]'s).
pub fn documentation_command() -> clap::Command {
    use clap::{Arg, ArgAction};
    clap::Command::new("mpxstats")
        .about("Print xrd.report records as XRootD's mpxstats does (xrd2ganglia mpxstats)")
        .disable_help_flag(true)
        .arg(
            Arg::new("format")
                .short('f')
                .value_name("cgi|flat|xml")
                .help("Output format (default xml: the datagrams as received)"),
        )
        .arg(
            Arg::new("port")
                .short('p')
                .value_name("PORT")
                .required(true)
                .help("UDP port to receive on"),
        )
        .arg(
            Arg::new("sender")
                .short('s')
                .action(ArgAction::SetTrue)
                .help("Include the sender as `host` (flat and cgi)"),
        )
        .arg(
            Arg::new("compat")
                .long("compat")
                .action(ArgAction::SetTrue)
                .help("Leave out site and the other header attributes mpxstats leaves out"),
        )
}

/// The sender as mpxstats prints an address it cannot resolve: IPv6
/// (v4-mapped on a dual-stack socket) in brackets, IPv4 bare.
pub fn sender_text(addr: IpAddr) -> String {
    match addr {
        IpAddr::V6(v6) => format!("[{v6}]"),
        IpAddr::V4(v4) => v4.to_string(),
    }
}

/// mpxstats' fixed order for header attributes.
const HEADER_ORDER: [&str; 7] = ["tod", "ver", "src", "tos", "pgm", "ins", "pid"];

/// Appends one record in `format` (flat or cgi) to `out`.
pub fn write_record(
    out: &mut Vec<u8>,
    record: &SummaryRecord<'_>,
    format: Format,
    sender: Option<&str>,
    all_attributes: bool,
) {
    let mut first = true;
    let mut put = |out: &mut Vec<u8>, name: &str, value: &str| {
        if value.is_empty() {
            return;
        }
        match format {
            Format::Flat => {
                out.extend_from_slice(name.as_bytes());
                out.push(b' ');
                out.extend_from_slice(value.as_bytes());
                out.push(b'\n');
            }
            _ => {
                if !first {
                    out.push(b'&');
                }
                out.extend_from_slice(name.as_bytes());
                out.push(b'=');
                out.extend_from_slice(value.as_bytes());
            }
        }
        first = false;
    };
    let header = record.header_len();
    for name in HEADER_ORDER {
        if let Some(v) = record.vars().take(header).find(|v| v.name == name) {
            put(out, v.name, v.value);
        }
    }
    if let Some(s) = sender {
        put(out, "host", s);
    }
    if all_attributes {
        for v in record
            .vars()
            .take(header)
            .filter(|v| !HEADER_ORDER.contains(&v.name))
        {
            put(out, v.name, v.value);
        }
    }
    for v in record.vars().skip(header) {
        put(out, v.name, v.value);
    }
    out.push(b'\n');
}

/// Binds PORT on a dual-stack IPv6 socket (as mpxstats does), else IPv4.
pub fn bind(port: u16) -> io::Result<UdpSocket> {
    let dual = || -> io::Result<UdpSocket> {
        let s = Socket::new(Domain::IPV6, Type::DGRAM, Some(Protocol::UDP))?;
        s.set_only_v6(false)?;
        s.bind(&SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)).into())?;
        Ok(s.into())
    };
    dual().or_else(|_| UdpSocket::bind(("0.0.0.0", port)))
}

/// Output held back while more datagrams are already waiting.
const HOLD_BACK: usize = 64 * 1024;

/// Receives forever, writing every record to `out` and every malformed
/// datagram's sender and reason to `err`. Returns when `out` is closed.
///
/// Output is flushed whenever no datagram is waiting, so a reader sees each
/// record as soon as it arrived; under load, records that arrived together
/// are written together (one write per 64 KiB instead of one per record).
pub fn run(
    socket: &UdpSocket,
    o: &Options,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> io::Result<()> {
    let mut parser = SummaryParser::new();
    let mut buf = vec![0u8; 65536];
    let mut text = Vec::with_capacity(2 * HOLD_BACK);
    socket.set_nonblocking(true)?;
    loop {
        let received = match socket.recv_from(&mut buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // Idle: everything so far goes out before we wait.
                out.write_all(&text)?;
                out.flush()?;
                text.clear();
                socket.set_nonblocking(false)?;
                let r = socket.recv_from(&mut buf);
                socket.set_nonblocking(true)?;
                r
            }
            r => r,
        };
        let (n, from) = match received {
            Ok(r) => r,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                ) =>
            {
                continue;
            }
            Err(e) => {
                let _ = writeln!(err, "mpxstats: receive failed: {e}");
                continue;
            }
        };
        let datagram = &buf[..n];
        if text.len() >= HOLD_BACK {
            out.write_all(&text)?;
            out.flush()?;
            text.clear();
        }
        if o.format == Format::Xml {
            text.extend_from_slice(datagram);
            text.push(b'\n');
        } else {
            match parser.parse(datagram) {
                Ok(record) => {
                    let sender = o.sender.then(|| sender_text(from.ip()));
                    write_record(
                        &mut text,
                        &record,
                        o.format,
                        sender.as_deref(),
                        o.all_attributes,
                    );
                }
                Err(e) => {
                    let _ = writeln!(
                        err,
                        "mpxstats: {} sent {n} bytes that are not a summary record: {e}",
                        sender_text(from.ip())
                    );
                    continue;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Result<Options, String> {
        parse_args(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn command_line_like_mpxstats() {
        assert_eq!(
            args(&["-f", "flat", "-p", "3333", "-s"]),
            Ok(Options {
                format: Format::Flat,
                port: 3333,
                sender: true,
                all_attributes: true
            })
        );
        assert_eq!(args(&["-p", "1"]).unwrap().format, Format::Xml);
        assert!(!args(&["-p", "1", "--compat"]).unwrap().all_attributes);
        assert_eq!(
            args(&[]),
            Err("mpxstats: Port has not been specified.".into())
        );
        assert_eq!(args(&["-h"]), Err("mpxstats: 'h' option is invalid".into()));
        assert_eq!(args(&["-p"]), Err("mpxstats: 'p' option is invalid".into()));
        assert_eq!(
            args(&["-p", "abc"]),
            Err("mpxstats: Invalid port number -  abc".into())
        );
        assert_eq!(
            args(&["-p", "0"]),
            Err("mpxstats: Invalid port number -  0".into())
        );
        assert_eq!(
            args(&["-f", "bogus", "-p", "1"]),
            Err("mpxstats: Invalid format -  bogus".into())
        );
        assert!(args(&["-p", "1", "extra"]).is_ok());
    }

    #[test]
    fn flat_and_cgi_put_the_header_in_mpxstats_order() {
        let mut p = SummaryParser::new();
        let r = p
            .parse(br#"<statistics site="S" pid="9" ins="anon" pgm="xrootd" tos="1" src="h:1" ver="v" tod="2" host="door"><stats id="ofs"><role>meta manager</role><x></x></stats></statistics>"#)
            .unwrap();
        let mut out = Vec::new();
        write_record(&mut out, &r, Format::Flat, Some("[::ffff:10.0.0.1]"), true);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "tod 2\nver v\nsrc h:1\ntos 1\npgm xrootd\nins anon\npid 9\nhost [::ffff:10.0.0.1]\nsite S\nhost door\nofs.role meta manager\n\n"
        );
        let mut out = Vec::new();
        write_record(&mut out, &r, Format::Cgi, None, false);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "tod=2&ver=v&src=h:1&tos=1&pgm=xrootd&ins=anon&pid=9&ofs.role=meta manager\n"
        );
        assert_eq!(
            sender_text("::ffff:127.0.0.1".parse().unwrap()),
            "[::ffff:127.0.0.1]"
        );
        assert_eq!(sender_text("10.0.0.1".parse().unwrap()), "10.0.0.1");
    }
}
