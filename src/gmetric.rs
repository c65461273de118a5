//! `xrd2ganglia gmetric` (or the binary called as `gmetric`): a drop-in for
//! Ganglia 3.7's gmetric. Same options, same datagrams byte for byte, same
//! messages and exit codes for the same mistakes (measured against Debian's
//! /usr/bin/gmetric 3.7.2), sharing the daemon's XDR encoder, send channels
//! and gmond.conf reader.
//!
//! gmetric's order, kept here: parse options ([`getopt`]); read the config;
//! create every send channel; heartbeat mode if `-S` and `-H`, else require
//! `-n -v -t`; reject `"` in name, value, type, units; check the type; check
//! a non-string value with strtod; require a ':' in `-S`; send the metadata
//! (128) to every channel, then, if none failed, the value (133, `%s`).
//!
//! Deliberate differences, each because gmetric's packets would be dropped by
//! gmond or break its XML (gmetad then drops the whole cluster), are checked
//! after gmetric's own checks and listed in README:
//! `-H` without `-S`; an empty name; `"`, `<`, `&` or `>` in the title,
//! description, group, cluster or spoof (and `<`, `&`, `>` in name and
//! units, where gmetric only rejects `"`); control characters in any of
//! them; non-ASCII or control characters in a string value; a spoof with an
//! empty IP or name part. And: with no -c and no /etc/ganglia/gmond.conf,
//! gmetric 3.7.2 fails; this one uses gmond's built-in default channel
//! (multicast 239.2.11.71:8649, ttl 1).

mod cnum;
mod getopt;

use std::ffi::OsString;
use std::io::Write;
use std::path::Path;

use crate::ganglia::channel::{ChannelSpec, SendChannel, Sent};
use crate::ganglia::gmond_conf::{self, GmondConf};
use std::borrow::Cow::Borrowed;

use crate::ganglia::xdr::{self, Metadata, MetricId, Packet, Slope, Text};

/// The gmetric version whose behaviour this reproduces.
pub const GMETRIC_VERSION: &str = "3.7.2";
pub const DEFAULT_CONF: &str = "/etc/ganglia/gmond.conf";
/// gmond's built-in default send channel: where gmetric sends without a
/// gmond.conf (host, port, ttl).
pub const DEFAULT_CHANNEL: (&str, u16, u32) = ("239.2.11.71", 8649, 1);

const TYPES: [&str; 9] = [
    "string", "int8", "uint8", "int16", "uint16", "int32", "uint32", "float", "double",
];

/// Runs gmetric. `argv0` prefixes option errors as it does in gmetric.
/// Returns the exit code.
pub fn run(argv0: &str, args: Vec<OsString>, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    match run_inner(argv0, args, out, err, &crate::ganglia::local_hostname) {
        Ok(()) => 0,
        Err(Exit { code, message }) => {
            let _ = err.write_all(message.as_bytes());
            code
        }
    }
}

struct Exit {
    code: u8,
    /// Written to stderr as is (gmetric's own newlines included).
    message: String,
}

fn fail(message: impl Into<String>) -> Exit {
    Exit {
        code: 1,
        message: message.into(),
    }
}

fn run_inner(
    argv0: &str,
    args: Vec<OsString>,
    out: &mut dyn Write,
    err: &mut dyn Write,
    hostname: &dyn Fn() -> String,
) -> Result<(), Exit> {
    let text = utf8_args(argv0, args)?;
    let o = match getopt::parse(argv0, &text) {
        Ok(getopt::Parsed::Run(o)) => o,
        Ok(getopt::Parsed::Help) => {
            let _ = out.write_all(help().as_bytes());
            return Ok(());
        }
        Ok(getopt::Parsed::Version) => {
            let _ = writeln!(
                out,
                "gmetric {GMETRIC_VERSION} (xrd2ganglia {})",
                env!("CARGO_PKG_VERSION")
            );
            return Ok(());
        }
        Err(message) => return Err(fail(format!("{message}\n"))),
    };

    let (conf, specs) = channels(&o)?;
    let channels = if o.dry_run {
        Vec::new()
    } else {
        open_channels(&specs)?
    };

    let metric = Metric::from_options(&o, &conf, hostname)?;
    let (metadata, value) = metric.encode();
    if o.dry_run {
        print_dry_run(out, &specs, [&metadata, &value]);
        return Ok(());
    }
    for warning in metric.gmond_line_warnings() {
        let _ = writeln!(err, "warning: {warning}");
    }
    send(&channels, &metadata, &value)
}

/// The arguments as text: one that is not UTF-8 is refused.
fn utf8_args(argv0: &str, args: Vec<OsString>) -> Result<Vec<String>, Exit> {
    let mut text = Vec::with_capacity(args.len());
    for a in args {
        match a.into_string() {
            Ok(s) => text.push(s),
            Err(a) => {
                return Err(fail(format!(
                    "{argv0}: argument {a:?} is not UTF-8 text. exiting.\n"
                )));
            }
        }
    }
    Ok(text)
}

/// Opens every channel, failing (with gmetric's message) at the first
/// that cannot be.
fn open_channels(specs: &[ChannelSpec]) -> Result<Vec<SendChannel>, Exit> {
    let mut open = Vec::new();
    for spec in specs {
        match SendChannel::open(spec) {
            Ok(ch) => open.push(ch),
            Err(_) if is_multicast(&spec.host) => {
                return Err(fail(format!(
                    "Unable to join multicast channel {}:{}. Exiting\n\n",
                    spec.host, spec.port
                )));
            }
            Err(_) => {
                return Err(fail(format!(
                    "Unable to create UDP client for {}:{}. Often means there is no route to IP. Exiting.\n\n",
                    spec.host, spec.port
                )));
            }
        }
    }
    Ok(open)
}

/// `--dry-run`: where the packets would go, and each decoded.
fn print_dry_run(out: &mut dyn Write, specs: &[ChannelSpec], packets: [&[u8]; 2]) {
    let list: Vec<String> = specs.iter().map(|s| s.to_string()).collect();
    let _ = writeln!(out, "# would send to {}", list.join(", "));
    for p in packets {
        match xdr::decode(p) {
            Ok(packet) => {
                let _ = write!(out, "{packet}");
            }
            Err(e) => {
                let _ = writeln!(out, "({} bytes: {e})", p.len());
            }
        }
        if p.len() > xdr::MAX_PACKET {
            let _ = writeln!(
                out,
                "# {} bytes: over the 1464-byte limit, would not be sent",
                p.len()
            );
        }
    }
}

/// The config (gmond.conf) and the send channels it names.
fn channels(o: &getopt::Options) -> Result<(GmondConf, Vec<ChannelSpec>), Exit> {
    channels_from(o, DEFAULT_CONF)
}

/// [`channels`], with the default path as a parameter (for tests).
fn channels_from(
    o: &getopt::Options,
    default_conf: &str,
) -> Result<(GmondConf, Vec<ChannelSpec>), Exit> {
    let path = o.conf.as_deref().unwrap_or(default_conf);
    let p = Path::new(path);
    if p.is_dir() {
        return Err(Exit {
            code: 2,
            message: "input in flex scanner failed\n".into(),
        });
    }
    let conf = if p.exists() {
        gmond_conf::read(p).map_err(|e| fail(format!("{e}\nParse error for '{path}'\n\n")))?
    } else if o.conf.is_some() {
        return Err(fail(format!("Configuration file '{path}' not found.\n\n")));
    } else {
        // Deliberate: gmond's built-in default instead of gmetric 3.7.2's failure.
        let (host, port, ttl) = DEFAULT_CHANNEL;
        return Ok((
            GmondConf::default(),
            vec![ChannelSpec {
                host: host.into(),
                port,
                ttl,
                mcast_if: None,
                bind: None,
            }],
        ));
    };
    let mut specs = Vec::new();
    for ch in &conf.send_channels {
        specs.push(ChannelSpec::from_gmond(ch).map_err(|e| fail(format!("{e}\n\n")))?);
    }
    if specs.is_empty() {
        return Err(fail("Unable to create ganglia send channels. Exiting.\n"));
    }
    Ok((conf, specs))
}

fn is_multicast(host: &str) -> bool {
    host.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_multicast())
}

/// One gmetric call, resolved: what goes into the two packets.
#[derive(Debug, Clone, PartialEq)]
struct Metric {
    host: String,
    spoof: bool,
    name: String,
    value: String,
    value_type: String,
    units: String,
    slope: Slope,
    tmax: u32,
    dmax: u32,
    extra: Vec<(&'static str, String)>,
}

/// gmetric's own checks of a metric (not heartbeat): `-n -v -t` given, no
/// `"` in them or in `-u`, a known type, a number unless a string.
/// Returns the name, value and type.
fn gmetric_checks(o: &getopt::Options) -> Result<(String, String, String), Exit> {
    let (Some(n), Some(v), Some(t)) = (&o.name, &o.value, &o.value_type) else {
        return Err(fail("Incorrect options supplied, exiting.\n"));
    };
    let units = o.units.as_deref().unwrap_or("");
    if [n, v, t].iter().any(|s| s.contains('"')) || units.contains('"') {
        return Err(fail(
            "one of your parameters has an invalid character '\"'. exiting.\n",
        ));
    }
    if !TYPES.contains(&t.as_str()) {
        return Err(fail(format!(
            "the type parameter \"{t}\" is not a valid type. exiting.\n"
        )));
    }
    if t != "string" && cnum::strtod_len(v) != v.len() {
        return Err(fail(format!(
            "the value parameter \"{v}\" does not represent a number. exiting.\n"
        )));
    }
    Ok((n.clone(), v.clone(), t.clone()))
}

/// The deliberate differences from gmetric (see the module doc): what
/// gmond would drop, or copy into its XML and break it, is refused.
fn refuse_what_gmond_mishandles(
    o: &getopt::Options,
    conf: &GmondConf,
    heartbeat_mode: bool,
    name: &str,
    value: &str,
    value_type: &str,
) -> Result<(), Exit> {
    if o.heartbeat && o.spoof.is_none() {
        return Err(fail(
            "-H (--heartbeat) needs -S (--spoof): gmond drops a heartbeat that is not spoofed (gmetric 3.7.2 sends it anyway). exiting.\n",
        ));
    }
    if !heartbeat_mode && name.is_empty() {
        return Err(fail(
            "the name parameter is empty: gmond would list a metric with no name. exiting.\n",
        ));
    }
    let mut raw: Vec<(&str, &str, &str)> = Vec::new();
    if !heartbeat_mode {
        raw.push(("name", name, "<>&"));
        raw.push(("units", o.units.as_deref().unwrap_or(""), "<>&"));
    }
    for (param, v) in [
        ("title", &o.title),
        ("desc", &o.desc),
        ("group", &o.group),
        ("cluster", &o.cluster),
        ("spoof", &o.spoof),
    ] {
        if let Some(v) = v {
            raw.push((param, v, "\"<>&"));
        }
    }
    if let Some(h) = &conf.override_hostname {
        raw.push(("override_hostname", h, "\"<>&"));
    }
    if let Some(h) = &conf.override_ip {
        raw.push(("override_ip", h, "\"<>&"));
    }
    for (param, v, bad) in raw {
        if let Some(c) = v.chars().find(|c| bad.contains(*c) || c.is_control()) {
            return Err(fail(format!(
                "the {param} parameter {v:?} has the character {c:?}: gmond copies it into its XML unescaped, which breaks the XML and makes gmetad drop the whole cluster. exiting.\n"
            )));
        }
    }
    if value_type == "string"
        && let Some(c) = value
            .chars()
            .find(|c| !c.is_ascii() || (c.is_ascii_control() && !matches!(c, '\t' | '\n' | '\r')))
    {
        return Err(fail(format!(
            "the value parameter has the character {c:?}: gmond 3.7 escapes it into ill-formed XML, which makes gmetad drop the whole cluster. exiting.\n"
        )));
    }
    if let Some(s) = &o.spoof {
        let (ip, host) = s.split_once(':').unwrap_or((s, ""));
        if ip.is_empty() || host.is_empty() {
            return Err(fail(format!(
                "the spoof parameter {s:?} needs both parts, IP:NAME: gmond does not file a host for it. exiting.\n"
            )));
        }
    }
    Ok(())
}

/// The metadata's extra data, in gmetric's order.
fn extra_data(o: &getopt::Options, spoof_host: Option<String>) -> Vec<(&'static str, String)> {
    let mut extra = Vec::new();
    if let Some(s) = spoof_host {
        extra.push(("SPOOF_HOST", s));
    }
    if o.heartbeat {
        extra.push(("SPOOF_HEARTBEAT", "yes".to_string()));
    }
    if let Some(c) = &o.cluster {
        extra.push(("CLUSTER", c.clone()));
    }
    if let Some(g) = &o.group {
        for token in g.split([',', ' ']).filter(|t| !t.is_empty()) {
            extra.push(("GROUP", token.to_string()));
        }
    }
    if let Some(d) = &o.desc {
        extra.push(("DESC", d.clone()));
    }
    if let Some(t) = &o.title {
        extra.push(("TITLE", t.clone()));
    }
    extra
}

impl Metric {
    fn from_options(
        o: &getopt::Options,
        conf: &GmondConf,
        hostname: &dyn Fn() -> String,
    ) -> Result<Metric, Exit> {
        let heartbeat_mode = o.spoof.is_some() && o.heartbeat;
        let (name, value, value_type) = if heartbeat_mode {
            (
                "heartbeat".to_string(),
                "0".to_string(),
                "uint32".to_string(),
            )
        } else {
            gmetric_checks(o)?
        };
        if let Some(s) = &o.spoof
            && !s.contains(':')
        {
            return Err(fail("Incorrect format for spoof argument. exiting.\n"));
        }
        // Where gmetric is wrong (see the module doc): refuse, and say why.
        refuse_what_gmond_mishandles(o, conf, heartbeat_mode, &name, &value, &value_type)?;

        // The host: -S, else gmond.conf's override, else gethostname().
        let override_spoof = conf.override_hostname.as_ref().map(|h| {
            let ip = conf.override_ip.as_deref().unwrap_or(h);
            format!("{ip}:{h}")
        });
        let spoof_host = o.spoof.clone().or(override_spoof);
        let host = spoof_host.clone().unwrap_or_else(hostname);
        let spoof = spoof_host.is_some() || o.heartbeat;
        let extra = extra_data(o, spoof_host);

        // -H ignores -u -s -x -d: the heartbeat is always this.
        let (units, slope, tmax, dmax) = if heartbeat_mode {
            (String::new(), Slope::Zero, 0, 0)
        } else {
            (
                o.units.clone().unwrap_or_default(),
                slope(o.slope.as_deref().unwrap_or("both")),
                o.tmax.unwrap_or(60),
                o.dmax.unwrap_or(0),
            )
        };
        Ok(Metric {
            host,
            spoof,
            name,
            value,
            value_type,
            units,
            slope,
            tmax,
            dmax,
            extra,
        })
    }

    /// The 128 and 133 packets.
    fn encode(&self) -> (Vec<u8>, Vec<u8>) {
        let id = MetricId::new(&self.host, &self.name, self.spoof);
        let extra: Vec<(Text<'_>, Text<'_>)> = self
            .extra
            .iter()
            .map(|(k, v)| (Borrowed(*k), Borrowed(v.as_str())))
            .collect();
        let mut metadata = Vec::new();
        let packet = Packet::Metadata {
            id: id.clone(),
            meta: Metadata {
                value_type: Borrowed(&self.value_type),
                units: Borrowed(&self.units),
                slope: self.slope,
                tmax: self.tmax,
                dmax: self.dmax,
                extra: Borrowed(&extra),
            },
        };
        xdr::encode(&mut metadata, &packet);
        let mut value = Vec::new();
        xdr::encode(&mut value, &Packet::string_value(id, &self.value));
        (metadata, value)
    }

    /// gmond 3.7 writes each METRIC start tag and each EXTRA_ELEMENT into a
    /// 1024-byte buffer; a longer line is cut and its XML is ill-formed.
    /// gmetric sends such values; so do we (byte-identical), with a warning.
    fn gmond_line_warnings(&self) -> Vec<String> {
        let escaped = |s: &str| -> usize {
            s.chars()
                .map(|c| match c {
                    '&' => 5,
                    '<' | '>' => 4,
                    '"' | '\'' => 6,
                    _ => c.len_utf8(),
                })
                .sum()
        };
        let digits = |n: u32| n.to_string().len();
        // <METRIC NAME="" VAL="" TYPE="" UNITS="" TN="" TMAX="" DMAX="" SLOPE=""> is 71 bytes; TN up to 5 digits.
        let metric_line = 71
            + self.name.len()
            + escaped(&self.value)
            + self.value_type.len()
            + self.units.len()
            + 5
            + digits(self.tmax)
            + digits(self.dmax)
            + self.slope.as_str().len();
        let mut out = Vec::new();
        if metric_line > 1023 {
            out.push(format!(
                "gmond 3.7 cuts its METRIC lines at 1023 bytes and this one takes {metric_line}: its XML will be ill-formed until the metric expires (shorten the value)"
            ));
        }
        for (k, v) in &self.extra {
            // <EXTRA_ELEMENT NAME="" VAL=""/> is 31 bytes.
            let line = 31 + k.len() + v.len();
            if line > 1023 {
                out.push(format!("gmond 3.7 cuts its EXTRA_ELEMENT lines at 1023 bytes and {k} takes {line}: its XML will be ill-formed"));
            }
        }
        out
    }
}

/// gmetric's slope words; anything else is unspecified, silently.
fn slope(word: &str) -> Slope {
    match word {
        "zero" => Slope::Zero,
        "positive" => Slope::Positive,
        "negative" => Slope::Negative,
        "both" => Slope::Both,
        "derivative" => Slope::Derivative,
        _ => Slope::Unspecified,
    }
}

/// gmetric's send: metadata to every channel; only if none failed, the value
/// to every channel. A refused datagram (nothing listening: the kernel
/// reports it on the next send) counts as a failed channel, as in gmetric. A
/// packet over 1464 bytes fails with a count of 1, as in gmetric.
fn send(channels: &[SendChannel], metadata: &[u8], value: &[u8]) -> Result<(), Exit> {
    let too_big = || fail("There was an error sending to 1 of the send channels.\n");
    if metadata.len() > xdr::MAX_PACKET {
        return Err(too_big());
    }
    let failed = |packet: &[u8]| {
        channels
            .iter()
            .filter(|ch| !matches!(ch.send(packet), Ok(Sent::Ok)))
            .count()
    };
    let n = failed(metadata);
    if n == 0 {
        if value.len() > xdr::MAX_PACKET {
            return Err(too_big());
        }
        let n = failed(value);
        if n == 0 {
            return Ok(());
        }
        return Err(fail(format!(
            "There was an error sending to {n} of the send channels.\n"
        )));
    }
    Err(fail(format!(
        "There was an error sending to {n} of the send channels.\n"
    )))
}

fn help() -> String {
    getopt::help_text(&format!(
        "gmetric {GMETRIC_VERSION} (xrd2ganglia {})",
        env!("CARGO_PKG_VERSION")
    ))
}

/// gmetric's options as a clap command, for the man page and completions.
pub fn documentation_command() -> clap::Command {
    getopt::documentation_command()
}

#[cfg(test)]
mod tests;
