//! Reading gmond.conf (libconfuse syntax) for what a sender needs: the
//! `udp_send_channel`s and `globals { override_hostname override_ip }`.
//!
//! Syntax handled: `key = value` and `key value`, quoted strings with `\`
//! escapes, unquoted words, `{ }` sections (with an optional title),
//! `( , )` lists, comments `#`, `//` and `/* */`, case-insensitive keys,
//! `include ("glob")` (relative to the including file). Every other section
//! and option is read and ignored. gmond's defaults for a send channel:
//! port 8649, ttl 1.

use std::fmt;
use std::path::{Path, PathBuf};

/// One `udp_send_channel { }`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UdpSendChannel {
    pub host: Option<String>,
    pub mcast_join: Option<String>,
    pub port: u16,
    pub ttl: u32,
    pub mcast_if: Option<String>,
    pub bind: Option<String>,
    pub bind_hostname: bool,
}

impl Default for UdpSendChannel {
    fn default() -> Self {
        UdpSendChannel {
            host: None,
            mcast_join: None,
            port: 8649,
            ttl: 1,
            mcast_if: None,
            bind: None,
            bind_hostname: false,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GmondConf {
    pub send_channels: Vec<UdpSendChannel>,
    pub override_hostname: Option<String>,
    pub override_ip: Option<String>,
}

#[derive(Debug)]
pub struct ConfError {
    pub file: PathBuf,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ConfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "{}:{}: {}", self.file.display(), self.line, self.message)
        } else {
            write!(f, "{}: {}", self.file.display(), self.message)
        }
    }
}

impl std::error::Error for ConfError {}

/// Includes nest at most this deep (a file including itself stops here).
const MAX_INCLUDE_DEPTH: usize = 8;

/// Reads gmond.conf and the files it includes.
pub fn read(path: &Path) -> Result<GmondConf, ConfError> {
    let mut conf = GmondConf::default();
    read_into(path, &mut conf, 0)?;
    Ok(conf)
}

/// Parses gmond.conf text; `path` names it in errors and anchors includes.
pub fn parse(text: &str, path: &Path) -> Result<GmondConf, ConfError> {
    let mut conf = GmondConf::default();
    parse_into(text, path, &mut conf, 0)?;
    Ok(conf)
}

/// The longest gmond.conf (or included file) read: a stock one is 10 KiB;
/// a longer one (a device, a file filled by mistake) is refused before it
/// takes memory.
pub const MAX_GMOND_CONF_BYTES: u64 = 1 << 20;

fn read_into(path: &Path, conf: &mut GmondConf, depth: usize) -> Result<(), ConfError> {
    use std::io::Read as _;
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_GMOND_CONF_BYTES + 1).read_to_string(&mut text))
        .map_err(|e| conf_error(path, 0, e.to_string()))?;
    if text.len() as u64 > MAX_GMOND_CONF_BYTES {
        return Err(conf_error(
            path,
            0,
            format!(
                "longer than {} MiB, which no gmond.conf is",
                MAX_GMOND_CONF_BYTES >> 20
            ),
        ));
    }
    parse_into(&text, path, conf, depth)
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Str(String),
    Open,
    Close,
    Eq,
    LParen,
    RParen,
    Comma,
}

fn tokenize(text: &str, path: &Path) -> Result<Vec<(Tok, usize)>, ConfError> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    while i < b.len() {
        let c = b[i];
        match c {
            b'\n' => {
                line += 1;
                i += 1;
            }
            c if c.is_ascii_whitespace() || c == b';' => i += 1,
            b'#' => i = line_end(b, i),
            b'/' if b.get(i + 1) == Some(&b'/') => i = line_end(b, i),
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let start_line = line;
                i = comment_end(b, i + 2, &mut line).ok_or_else(|| {
                    conf_error(path, start_line, "unterminated /* comment".into())
                })?;
            }
            b'"' | b'\'' => {
                let start_line = line;
                let (s, end) = quoted(b, i, &mut line).ok_or_else(|| {
                    conf_error(path, start_line, "unterminated quoted string".into())
                })?;
                out.push((Tok::Str(s), start_line));
                i = end;
            }
            _ => {
                if let Some(tok) = punctuation(c) {
                    out.push((tok, line));
                    i += 1;
                    continue;
                }
                let start = i;
                while i < b.len() && !ends_word(b, i) {
                    i += 1;
                }
                out.push((
                    Tok::Word(String::from_utf8_lossy(&b[start..i]).into_owned()),
                    line,
                ));
            }
        }
    }
    Ok(out)
}

/// A `ConfError` at `line` of `path` (0: the file as a whole).
fn conf_error(path: &Path, line: usize, message: String) -> ConfError {
    ConfError {
        file: path.to_path_buf(),
        line,
        message,
    }
}

/// The single-byte token `c` is, if any.
fn punctuation(c: u8) -> Option<Tok> {
    Some(match c {
        b'{' => Tok::Open,
        b'}' => Tok::Close,
        b'=' => Tok::Eq,
        b'(' => Tok::LParen,
        b')' => Tok::RParen,
        b',' => Tok::Comma,
        _ => return None,
    })
}

/// Where the line holding `b[i]` ends (at its newline, or the end).
fn line_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i] != b'\n' {
        i += 1;
    }
    i
}

/// After a `/* comment` whose text starts at `i`: the position after its
/// `*/`, counting its newlines into `line`; None if it is not closed.
fn comment_end(b: &[u8], mut i: usize, line: &mut usize) -> Option<usize> {
    loop {
        if i + 1 >= b.len() {
            return None;
        }
        if b[i] == b'*' && b[i + 1] == b'/' {
            return Some(i + 2);
        }
        if b[i] == b'\n' {
            *line += 1;
        }
        i += 1;
    }
}

/// The string quoted at `b[i]` (`"` with `\` escapes, or `'` as written)
/// and the position after its closing quote, counting its newlines into
/// `line`; None if it is not closed.
fn quoted(b: &[u8], mut i: usize, line: &mut usize) -> Option<(String, usize)> {
    let quote = b[i];
    let mut s = Vec::new();
    i += 1;
    loop {
        let &ch = b.get(i)?;
        i += 1;
        if ch == quote {
            return Some((String::from_utf8_lossy(&s).into_owned(), i));
        }
        if ch == b'\\'
            && quote == b'"'
            && let Some(&next) = b.get(i)
        {
            i += 1;
            s.push(match next {
                b'n' => b'\n',
                b't' => b'\t',
                other => other,
            });
            continue;
        }
        if ch == b'\n' {
            *line += 1;
        }
        s.push(ch);
    }
}

/// A word ends at white space, punctuation, a quote or a comment.
fn ends_word(b: &[u8], i: usize) -> bool {
    let c = b[i];
    c.is_ascii_whitespace()
        || matches!(
            c,
            b'{' | b'}' | b'=' | b'(' | b')' | b',' | b'"' | b'\'' | b'#' | b';'
        )
        || (c == b'/' && matches!(b.get(i + 1), Some(b'/') | Some(b'*')))
}

fn parse_into(
    text: &str,
    path: &Path,
    conf: &mut GmondConf,
    depth: usize,
) -> Result<(), ConfError> {
    let toks = tokenize(text, path)?;
    // Stack of open section names (lowercase).
    let mut sections: Vec<String> = Vec::new();
    let mut channel: Option<UdpSendChannel> = None;
    let mut i = 0;
    while i < toks.len() {
        let (tok, line) = &toks[i];
        match tok {
            Tok::Close => {
                let Some(name) = sections.pop() else {
                    return Err(conf_error(
                        path,
                        *line,
                        "'}' without an open section".into(),
                    ));
                };
                if name == "udp_send_channel"
                    && sections.is_empty()
                    && let Some(ch) = channel.take()
                {
                    conf.send_channels.push(ch);
                }
                i += 1;
            }
            Tok::Word(word) => {
                let key = word.to_ascii_lowercase();
                i += 1;
                // Section: `name {` or `name "title" {`.
                let opens_at = match (toks.get(i), toks.get(i + 1)) {
                    (Some((Tok::Open, _)), _) => Some(i + 1),
                    (Some((Tok::Str(_) | Tok::Word(_), _)), Some((Tok::Open, _))) => Some(i + 2),
                    _ => None,
                };
                if let Some(next) = opens_at {
                    if key == "udp_send_channel" && sections.is_empty() {
                        channel = Some(UdpSendChannel::default());
                    }
                    sections.push(key);
                    i = next;
                    continue;
                }
                if matches!(toks.get(i), Some((Tok::Eq, _))) {
                    i += 1;
                }
                let values = option_values(&toks, &mut i, word)
                    .map_err(|message| conf_error(path, *line, message))?;
                let at = At {
                    path,
                    line: *line,
                    depth,
                };
                apply(conf, &mut channel, &sections, &key, &values, at)?;
            }
            other => return Err(conf_error(path, *line, format!("unexpected {other:?}"))),
        }
    }
    if let Some(open) = sections.last() {
        return Err(conf_error(
            path,
            0,
            format!("section {open:?} is not closed"),
        ));
    }
    Ok(())
}

/// The value of option `word` at `toks[*i]` (`*i` then after it): a word,
/// a string, or a `( list )`.
fn option_values(toks: &[(Tok, usize)], i: &mut usize, word: &str) -> Result<Vec<String>, String> {
    let mut values = Vec::new();
    match toks.get(*i) {
        Some((Tok::Word(v) | Tok::Str(v), _)) => {
            values.push(v.clone());
            *i += 1;
        }
        Some((Tok::LParen, _)) => {
            *i += 1;
            loop {
                match toks.get(*i) {
                    Some((Tok::RParen, _)) => {
                        *i += 1;
                        break;
                    }
                    Some((Tok::Comma, _)) => *i += 1,
                    Some((Tok::Word(v) | Tok::Str(v), _)) => {
                        values.push(v.clone());
                        *i += 1;
                    }
                    _ => return Err(format!("unterminated list for {word:?}")),
                }
            }
        }
        _ => return Err(format!("option {word:?} has no value")),
    }
    Ok(values)
}

/// Where an option stands: its file, its line, and how deep in includes.
#[derive(Clone, Copy)]
struct At<'a> {
    path: &'a Path,
    line: usize,
    depth: usize,
}

/// One option (`key` with its `values`, in `sections`) into `conf`, or
/// into the `udp_send_channel` being read.
fn apply(
    conf: &mut GmondConf,
    channel: &mut Option<UdpSendChannel>,
    sections: &[String],
    key: &str,
    values: &[String],
    at: At<'_>,
) -> Result<(), ConfError> {
    let At { path, line, depth } = at;
    let err = |message: String| conf_error(path, line, message);
    let value = values.first().map(String::as_str).unwrap_or("");
    let section = sections.first().map(String::as_str);
    match (section, sections.len(), key) {
        (None, _, "include") => {
            if depth >= MAX_INCLUDE_DEPTH {
                return Err(err(format!(
                    "includes nested more than {MAX_INCLUDE_DEPTH} deep"
                )));
            }
            for pattern in values {
                for file in glob(path, pattern).ok_or_else(|| err("invalid include path".into()))? {
                    read_into(&file, conf, depth + 1)?;
                }
            }
        }
        (Some("globals"), 1, "override_hostname") => {
            conf.override_hostname = Some(value.to_string())
        }
        (Some("globals"), 1, "override_ip") => conf.override_ip = Some(value.to_string()),
        (Some("udp_send_channel"), 1, _) => {
            let Some(ch) = channel.as_mut() else {
                return Ok(());
            };
            match key {
                "host" => ch.host = Some(value.to_string()),
                "mcast_join" => ch.mcast_join = Some(value.to_string()),
                "mcast_if" => ch.mcast_if = Some(value.to_string()),
                "bind" => ch.bind = Some(value.to_string()),
                "port" => {
                    ch.port = value.parse().map_err(|_| {
                        err(format!(
                            "udp_send_channel port {value:?} is not a port number"
                        ))
                    })?
                }
                "ttl" => {
                    ch.ttl = value.parse().map_err(|_| {
                        err(format!("udp_send_channel ttl {value:?} is not a number"))
                    })?
                }
                "bind_hostname" => {
                    ch.bind_hostname = matches!(
                        value.to_ascii_lowercase().as_str(),
                        "yes" | "true" | "on" | "1"
                    )
                }
                _ => {}
            }
        }
        _ => {}
    }
    Ok(())
}

/// Expands `pattern` (relative to the directory of `including`); `*` and `?`
/// are allowed in the last path component. A pattern matching nothing (or a
/// missing directory) includes nothing; a plain path that does not exist is
/// an error (None), as in gmond. Sorted, so the result does not depend on
/// readdir order (gmond uses it unsorted).
fn glob(including: &Path, pattern: &str) -> Option<Vec<PathBuf>> {
    let pattern = Path::new(pattern);
    let pattern = if pattern.is_absolute() {
        pattern.to_path_buf()
    } else {
        including.parent().unwrap_or(Path::new(".")).join(pattern)
    };
    let file_pat = pattern.file_name().and_then(|f| f.to_str())?;
    if !file_pat.contains(['*', '?']) {
        return pattern.exists().then(|| vec![pattern.clone()]);
    }
    let dir = pattern.parent().unwrap_or(Path::new("."));
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Some(Vec::new());
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| !n.starts_with('.') && wildcard(file_pat.as_bytes(), n.as_bytes()))
        })
        .map(|e| e.path())
        .collect();
    files.sort();
    Some(files)
}

fn wildcard(p: &[u8], s: &[u8]) -> bool {
    match (p.first(), s.first()) {
        (None, None) => true,
        (Some(b'*'), _) => wildcard(&p[1..], s) || (!s.is_empty() && wildcard(p, &s[1..])),
        (Some(b'?'), Some(_)) => wildcard(&p[1..], &s[1..]),
        (Some(a), Some(b)) if a == b => wildcard(&p[1..], &s[1..]),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_unicast_multicast_comments_and_case() {
        let text = r#"
/* block
   comment */ globals { daemonize = yes  Override_Hostname = "web1"  override_ip = 10.1.2.3 }
# hash comment
cluster { name = "c" owner = "o" }
UDP_SEND_CHANNEL {
  mcast_join = 239.2.11.71   // trailing comment
  port = 8649
  TTL = 3
  mcast_if = eth1
}
udp_send_channel { host = "gmond.example.org" port 8650 bind = 10.0.0.5 bind_hostname = yes }
udp_recv_channel { port = 8649 bind = 239.2.11.71 }
modules { module { name = "core_metrics" } module { name = "cpu_module" path = "modcpu.so" } }
collection_group { collect_every = 20 time_threshold = 90 metric { name = "load_one" value_threshold = "1.0" } }
"#;
        let conf = parse(text, Path::new("test.conf")).unwrap();
        assert_eq!(conf.override_hostname.as_deref(), Some("web1"));
        assert_eq!(conf.override_ip.as_deref(), Some("10.1.2.3"));
        assert_eq!(
            conf.send_channels,
            vec![
                UdpSendChannel {
                    mcast_join: Some("239.2.11.71".into()),
                    port: 8649,
                    ttl: 3,
                    mcast_if: Some("eth1".into()),
                    ..Default::default()
                },
                UdpSendChannel {
                    host: Some("gmond.example.org".into()),
                    port: 8650,
                    bind: Some("10.0.0.5".into()),
                    bind_hostname: true,
                    ..Default::default()
                },
            ]
        );
    }

    /// Issue 42: every tool's input is bounded. `gmond_conf` (read by
    /// serve, check-config and gweb) naming an endless file is refused
    /// at the bound, not read until memory runs out.
    #[test]
    fn an_endless_gmond_conf_is_refused_at_the_bound() {
        let e = read(Path::new("/dev/zero")).unwrap_err().to_string();
        assert_eq!(e, "/dev/zero: longer than 1 MiB, which no gmond.conf is");
    }

    #[test]
    fn includes_are_followed() {
        let dir = std::env::temp_dir().join(format!("x2g-gmondconf-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("conf.d")).unwrap();
        std::fs::write(
            dir.join("conf.d/a.conf"),
            "udp_send_channel { host = 127.0.0.1 port = 1 }",
        )
        .unwrap();
        std::fs::write(
            dir.join("conf.d/b.conf"),
            "udp_send_channel { host = 127.0.0.2 port = 2 }",
        )
        .unwrap();
        std::fs::write(dir.join("conf.d/skip.txt"), "garbage {").unwrap();
        std::fs::write(dir.join("gmond.conf"), "include ('conf.d/*.conf')\n").unwrap();
        let conf = read(&dir.join("gmond.conf")).unwrap();
        let hosts: Vec<_> = conf
            .send_channels
            .iter()
            .map(|c| c.host.clone().unwrap())
            .collect();
        assert_eq!(hosts, ["127.0.0.1", "127.0.0.2"]);
        // A missing plain path is an error; a pattern matching nothing is not.
        std::fs::write(dir.join("missing.conf"), "include (\"nope.conf\")").unwrap();
        assert!(
            read(&dir.join("missing.conf"))
                .unwrap_err()
                .to_string()
                .ends_with("invalid include path")
        );
        std::fs::write(dir.join("none.conf"), "include (\"nodir/*.conf\")").unwrap();
        assert!(
            read(&dir.join("none.conf"))
                .unwrap()
                .send_channels
                .is_empty()
        );
        // Self-inclusion stops with an error instead of recursing forever.
        std::fs::write(dir.join("loop.conf"), "include (\"loop.conf\")").unwrap();
        assert!(
            read(&dir.join("loop.conf"))
                .unwrap_err()
                .message
                .contains("nested")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = parse(
            "udp_send_channel {\n port = abc\n host = h }",
            Path::new("g.conf"),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "g.conf:2: udp_send_channel port \"abc\" is not a port number"
        );
        // No host and no mcast_join: gmond and gmetric send to loopback.
        let c = parse("udp_send_channel { port = 1 }", Path::new("g.conf")).unwrap();
        assert_eq!(
            (c.send_channels[0].host.as_deref(), c.send_channels[0].port),
            (None, 1)
        );
        assert_eq!(
            parse("globals {", Path::new("g")).unwrap_err().to_string(),
            "g: section \"globals\" is not closed"
        );
        assert!(parse("a = \"unterminated", Path::new("g")).is_err());
        assert!(parse("/* never closed", Path::new("g")).is_err());
    }

    /// The file Debian 12's ganglia-monitor 3.7.2 installs (a copy in
    /// tests/data): its multicast channel, its `include` of a directory
    /// that does not exist, modules, collection groups and all.
    #[test]
    fn reads_debian_default() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gmond.conf.debian");
        let conf = read(&path).unwrap();
        assert_eq!(
            conf.send_channels,
            vec![UdpSendChannel {
                mcast_join: Some("239.2.11.71".into()),
                port: 8649,
                ttl: 1,
                ..Default::default()
            }]
        );
        assert_eq!((conf.override_hostname, conf.override_ip), (None, None));
    }
}
