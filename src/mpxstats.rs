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

use std::collections::HashMap;
use std::ops::Range;

use crate::summary::shape::{Hole, Shape};
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
    write_record_with(out, record, format, sender, all_attributes, |_, _| {});
}

/// [`write_record`], telling `on_value` where each value it printed went
/// (the value as read, and its byte range in `out`).
fn write_record_with(
    out: &mut Vec<u8>,
    record: &SummaryRecord<'_>,
    format: Format,
    sender: Option<&str>,
    all_attributes: bool,
    mut on_value: impl FnMut(&str, Range<usize>),
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
            }
            _ => {
                if !first {
                    out.push(b'&');
                }
                out.extend_from_slice(name.as_bytes());
                out.push(b'=');
            }
        }
        let at = out.len();
        out.extend_from_slice(value.as_bytes());
        on_value(value, at..out.len());
        if format == Format::Flat {
            out.push(b'\n');
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

/// Senders whose last record is kept as an output template.
const MAX_OUTPUTS: usize = 4096;

/// A sender's last record and the text it printed as: the next record that
/// differs only in the digits of its numbers is printed from it, without
/// parsing (the same text, see `tests::output_template_prints_what_parsing_prints`).
struct OutputTemplate {
    shape: Shape,
    /// The printed text with the holes' digits cut out.
    text: Vec<u8>,
    /// In print order: literal text up to each hole, and which hole.
    pieces: Vec<(Range<u32>, u32)>,
    /// Literal text after the last hole.
    tail: Range<u32>,
}

impl OutputTemplate {
    /// `printed`: (address, length) of each value printed, and where it
    /// went in `out` (which starts at `base` of the output buffer).
    fn build(
        datagram: &[u8],
        record: &SummaryRecord<'_>,
        out: &[u8],
        base: usize,
        printed: &[(usize, usize, Range<usize>)],
    ) -> Option<OutputTemplate> {
        let text = record.text();
        if text.as_ptr() != datagram.as_ptr() || text.len() != datagram.len() {
            return None;
        }
        let origin = datagram.as_ptr() as usize;
        // Holes are cut in datagram order; the output may print in another.
        let mut order: Vec<usize> = (0..printed.len()).collect();
        order.sort_by_key(|&i| printed[i].0);
        let mut shape = Shape::builder(datagram);
        let mut hole_of = vec![None; printed.len()];
        let hole = Hole {
            max: 20,
            plain: false,
        };
        for i in order {
            let (addr, len, _) = printed[i];
            // Values outside the datagram (the sender, a JSON record's
            // made values) stay literal.
            let Some(start) = addr.checked_sub(origin) else {
                continue;
            };
            let span = start..start.saturating_add(len);
            if span.end <= datagram.len() && shape.can_cut(&span, hole) {
                hole_of[i] = Some(shape.cut(span, hole));
            }
        }
        let mut t = OutputTemplate {
            shape: shape.finish(),
            text: Vec::with_capacity(out.len()),
            pieces: Vec::new(),
            tail: 0..0,
        };
        // `printed` is in print order, so its output ranges increase.
        let mut copied = 0;
        for (i, (_, _, at)) in printed.iter().enumerate() {
            let Some(h) = hole_of[i] else { continue };
            let at = at.start - base..at.end - base;
            let start = t.text.len();
            t.text.extend_from_slice(out.get(copied..at.start)?);
            t.pieces.push((start as u32..t.text.len() as u32, h));
            copied = at.end;
        }
        let start = t.text.len();
        t.text.extend_from_slice(out.get(copied..)?);
        t.tail = start as u32..t.text.len() as u32;
        Some(t)
    }

    fn write(&self, datagram: &[u8], holes: &[Range<u32>], out: &mut Vec<u8>) {
        let piece = |r: &Range<u32>| &self.text[r.start as usize..r.end as usize];
        for (literal, hole) in &self.pieces {
            out.extend_from_slice(piece(literal));
            let r = &holes[*hole as usize];
            out.extend_from_slice(&datagram[r.start as usize..r.end as usize]);
        }
        out.extend_from_slice(piece(&self.tail));
    }
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
    let mut printer = Printer::default();
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
        printer.print(datagram, from, o, &mut text, err);
    }
}

/// Turns datagrams into mpxstats output; keeps each sender's last record
/// as an [`OutputTemplate`].
#[derive(Default)]
struct Printer {
    parser: SummaryParser,
    outputs: HashMap<SocketAddr, OutputTemplate>,
    found: Vec<Range<u32>>,
    printed: Vec<(usize, usize, Range<usize>)>,
}

impl Printer {
    /// Appends the output for one datagram to `text`, or reports it to `err`.
    fn print(
        &mut self,
        datagram: &[u8],
        from: SocketAddr,
        o: &Options,
        text: &mut Vec<u8>,
        err: &mut dyn Write,
    ) {
        if o.format == Format::Xml {
            text.extend_from_slice(datagram);
            text.push(b'\n');
            return;
        }
        if let Some(t) = self.outputs.get(&from)
            && t.shape.matches(datagram, &mut self.found)
        {
            t.write(datagram, &self.found, text);
            return;
        }
        match self.parser.parse(datagram) {
            Ok(record) => {
                let sender = o.sender.then(|| sender_text(from.ip()));
                let start = text.len();
                let printed = &mut self.printed;
                printed.clear();
                write_record_with(
                    text,
                    &record,
                    o.format,
                    sender.as_deref(),
                    o.all_attributes,
                    |value, at| printed.push((value.as_ptr() as usize, value.len(), at)),
                );
                if self.outputs.len() >= MAX_OUTPUTS {
                    self.outputs.clear();
                }
                match OutputTemplate::build(datagram, &record, &text[start..], start, printed) {
                    Some(t) => self.outputs.insert(from, t),
                    None => self.outputs.remove(&from),
                };
            }
            Err(e) => {
                let _ = writeln!(
                    err,
                    "mpxstats: {} sent {} bytes that are not a summary record: {e}",
                    sender_text(from.ip()),
                    datagram.len()
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixtures (XML, or JSON if it starts with `{`) with their element
    /// values' digits changed per `seed` (sometimes to non-digits or
    /// longer), and now and then a text changed.
    fn variant(record: &str, seed: u64) -> String {
        let json = record.starts_with('{');
        let mut out = String::new();
        let mut n = seed;
        let mut chars = record.chars().peekable();
        while let Some(c) = chars.next() {
            let value_start = out.ends_with(if json { ':' } else { '>' });
            out.push(c);
            if value_start && c.is_ascii_digit() {
                while chars.peek().is_some_and(char::is_ascii_digit) {
                    chars.next();
                }
                out.pop();
                n = n
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let bad = seed % 4 == 1;
                match (n >> 33) % 20 {
                    v if !bad => out.push_str(&(v * (n >> 40)).to_string()),
                    0 => out.push_str("-5"),
                    1 => out.push_str("007"),
                    2 => out.push_str("123456789012345678901234"),
                    3 if json => out.push_str("\"1 2\""),
                    3 => out.push_str("1 2"),
                    v => out.push_str(&(v * (n >> 40)).to_string()),
                }
            }
        }
        if seed % 7 == 3 {
            out = out.replacen("v5.5.3", "v5.6.0", 1);
        }
        out
    }

    #[test]
    fn output_template_prints_what_parsing_prints() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/records");
        let senders: [SocketAddr; 2] = [
            "10.0.0.1:1094".parse().unwrap(),
            "[2001:db8::1]:1095".parse().unwrap(),
        ];
        for (format, sender) in [
            (Format::Flat, true),
            (Format::Flat, false),
            (Format::Cgi, false),
        ] {
            let o = Options {
                format,
                port: 1,
                sender,
                all_attributes: true,
            };
            let mut printer = Printer::default();
            let mut reference = SummaryParser::new();
            let mut hits = 0;
            for (name, json) in [
                "ds_idle",
                "ds_loaded",
                "mgr_cmsd",
                "pfc_loaded",
                "spaces",
                "srv_cmsd",
            ]
            .into_iter()
            .flat_map(|n| [(n, false), (n, true)])
            {
                let record = std::fs::read_to_string(dir.join(format!("{name}.xml"))).unwrap();
                // The JSON form has made values too: list lengths, an
                // unescaped string.
                let record = if json {
                    crate::summary::tests::json::xml_to_json(&record).replacen(
                        "\"vm\"",
                        "\"v\\u006d\"",
                        1,
                    )
                } else {
                    record
                };
                for seed in 0..40u64 {
                    let text = if seed % 5 == 0 {
                        record.clone()
                    } else {
                        variant(&record, seed)
                    };
                    let from = senders[(seed % 2) as usize];
                    let (mut got, mut want) = (Vec::new(), Vec::new());
                    let before = printer
                        .outputs
                        .get(&from)
                        .is_some_and(|t| t.shape.matches(text.as_bytes(), &mut Vec::new()));
                    hits += usize::from(before);
                    printer.print(text.as_bytes(), from, &o, &mut got, &mut Vec::new());
                    let r = reference.parse(text.as_bytes()).unwrap();
                    let host = o.sender.then(|| sender_text(from.ip()));
                    write_record(&mut want, &r, format, host.as_deref(), true);
                    assert_eq!(
                        String::from_utf8_lossy(&got),
                        String::from_utf8_lossy(&want),
                        "{name} json {json} seed {seed} {format:?}"
                    );
                }
            }
            assert!(hits > 50, "{hits} template hits");
        }
    }

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
