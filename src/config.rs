//! Configuration: TOML file (every key optional) + command-line overrides
//! -> validated [`Settings`]. Errors name the key and the value.
//!
//! Where packets go, first match wins: `--send` on the command line;
//! `[[channel]]` tables in the file; the `udp_send_channel`s of `gmond_conf`
//! (default `/etc/ganglia/gmond.conf`) when that file exists, as gmetric does;
//! otherwise unicast to 127.0.0.1:8649.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ipnet::IpNet;
use serde::Deserialize;

use crate::ganglia::channel::ChannelSpec;
use crate::ganglia::gmond_conf;
use crate::mapping::{DEFAULT_GROUP_TEMPLATE, DEFAULT_NAME_TEMPLATE, Template};

/// Read when `--config` is not given, if it exists.
pub const DEFAULT_CONFIG: &str = "/etc/xrd2ganglia/xrd2ganglia.toml";
pub const DEFAULT_GMOND_CONF: &str = "/etc/ganglia/gmond.conf";
pub const DEFAULT_LISTEN: &[&str] = &["0.0.0.0:3333", "[::]:3333"];
pub const DEFAULT_SEND: (&str, u16) = ("127.0.0.1", 8649);
pub const DEFAULT_STATE_FILE: &str = "/var/lib/xrd2ganglia/state";
/// Value packets per second per send channel (a metadata packet counts as
/// two). Into a stock gmond 3.7.2 on the 2-core machine here (`cargo bench
/// --bench load -- --only gmond`; README, "Delivery into gmond"): 0 drops
/// at 40,000 and 55,000 on a quiet machine, 40 drops at 70,000, and drops
/// at 45,000 in two runs of four; at 40,000, 0 drops in three full runs of
/// four (19 in the fourth's burst).
pub const DEFAULT_SEND_RATE: u64 = 40_000;
/// Packets back to back: well within a stock gmond's receive buffer
/// (about 250 small datagrams).
pub const DEFAULT_SEND_BURST: usize = 100;

/// The file as written: every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<Vec<String>>,
    pub allow: Option<Vec<String>>,
    pub gmond_conf: Option<PathBuf>,
    pub channel: Option<Vec<ChannelConfig>>,
    pub metric_name: Option<String>,
    pub group_name: Option<String>,
    pub metadata_interval: Option<u64>,
    pub tmax: Option<u32>,
    pub dmax: Option<u32>,
    pub max_sources: Option<usize>,
    pub max_metrics_per_source: Option<usize>,
    pub recv_buffer: Option<usize>,
    pub log_interval: Option<u64>,
    pub stats_interval: Option<u64>,
    pub self_metrics_interval: Option<u64>,
    pub send_burst: Option<usize>,
    pub max_send_rate: Option<u64>,
    pub drain_timeout: Option<u64>,
    pub send_values: Option<String>,
    pub value_heartbeat: Option<u32>,
    pub state_file: Option<PathBuf>,
    pub state_interval: Option<u64>,
    pub metadata_requests: Option<Vec<String>>,
    pub send: Option<bool>,
    pub xml_listen: Option<Vec<String>>,
    pub xml_allow: Option<Vec<String>>,
    pub cluster_name: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelConfig {
    pub host: String,
    #[serde(default = "default_port")]
    pub port: u16,
    #[serde(default = "default_ttl")]
    pub ttl: u32,
    pub mcast_if: Option<String>,
    pub bind: Option<String>,
}

fn default_port() -> u16 {
    8649
}

fn default_ttl() -> u32 {
    1
}

/// Command-line settings that override the file.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub listen: Vec<String>,
    pub send: Vec<String>,
    /// `--state-file`: replaces `state_file` (empty: no state kept), so the
    /// shipped config runs from a checkout, where /var/lib is not ours.
    pub state_file: Option<PathBuf>,
    /// `--xml-listen`: replaces `xml_listen`.
    pub xml_listen: Vec<String>,
    /// `--no-send`: `send = false`.
    pub no_send: bool,
}

/// Validated settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where the settings came from (a file or "built-in defaults").
    pub source: String,
    pub listen: Vec<SocketAddr>,
    /// Empty: every sender is accepted.
    pub allow: Vec<IpNet>,
    pub channels: Vec<ChannelSpec>,
    /// Why these channels (for check-config and the start-up log).
    pub channels_from: String,
    pub metric_name: Template,
    pub group_name: Template,
    /// Metadata of each metric is resent at least this often.
    pub metadata_interval: Duration,
    /// TMAX before a source's report interval is known.
    pub tmax: u32,
    /// DMAX: gmond drops a metric this long after its last metadata (0: never).
    pub dmax: u32,
    pub max_sources: usize,
    pub max_metrics_per_source: usize,
    /// Receive socket buffer (SO_RCVBUF), bytes.
    pub recv_buffer: usize,
    /// At most one log line per sender and reason in this interval.
    pub log_interval: Duration,
    /// The gateway's counters are logged this often (0: never).
    pub stats_interval: Duration,
    /// The gateway's counters are sent to Ganglia this often (0: never).
    pub self_metrics_interval: Duration,
    /// Packets a channel's sender sends back to back at most (its token
    /// bucket's size).
    pub send_burst: usize,
    /// Packets per second per channel, on average (0: unpaced).
    pub max_send_rate: u64,
    /// At stop, queued packets are sent for at most this long.
    pub drain_timeout: Duration,
    /// Changed-only sending: an unchanged value is sent again after this
    /// many seconds. None: every value of every report is sent.
    pub value_heartbeat: Option<u32>,
    /// Where counter continuity is kept across gateway restarts (None: not kept).
    pub state_file: Option<PathBuf>,
    /// How often the state file is written (and at exit).
    pub state_interval: Duration,
    /// Where gmond's metadata requests (136) are heard: unicast addresses
    /// to bind, or multicast groups to join (with their port).
    pub metadata_requests: Vec<SocketAddr>,
    /// Whether packets go to gmond at all (`send = false`: only the XML
    /// port has the data; `channels` is then empty).
    pub send: bool,
    /// Where gmetad polls the gateway for gmond's XML.
    pub xml_listen: Vec<SocketAddr>,
    /// Who may poll it.
    pub xml_allow: Vec<IpNet>,
    /// The CLUSTER NAME of that XML.
    pub cluster_name: String,
}

/// Who may poll `xml_listen` unless `xml_allow` says otherwise.
pub const DEFAULT_XML_ALLOW: &[&str] = &["127.0.0.0/8", "::1/128"];
/// The CLUSTER NAME of the XML unless `cluster_name` says otherwise.
pub const DEFAULT_CLUSTER_NAME: &str = "XRootD";

impl Settings {
    /// Whether metadata requests are listened for (sources then keep their
    /// last record, to answer from).
    pub fn answers_requests(&self) -> bool {
        !self.metadata_requests.is_empty()
    }
}

#[derive(Debug)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

fn bad(key: &str, value: impl fmt::Debug, why: impl fmt::Display) -> ConfigError {
    ConfigError(format!("{key} = {value:?}: {why}"))
}

impl FileConfig {
    pub fn parse(text: &str, path: &Path) -> Result<FileConfig, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError(format!("{}: {e}", path.display())))
    }

    pub fn read(path: &Path) -> Result<FileConfig, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read config {}: {e}", path.display())))?;
        Self::parse(&text, path)
    }
}

/// Loads `path` (or [`DEFAULT_CONFIG`] if it exists, or nothing), applies
/// the overrides and validates.
pub fn load(path: Option<&Path>, overrides: &Overrides) -> Result<Settings, ConfigError> {
    let (file, source) = match path {
        Some(p) => (FileConfig::read(p)?, p.display().to_string()),
        None if Path::new(DEFAULT_CONFIG).exists() => (
            FileConfig::read(Path::new(DEFAULT_CONFIG))?,
            DEFAULT_CONFIG.to_string(),
        ),
        None => (FileConfig::default(), "built-in defaults".to_string()),
    };
    validate(file, source, overrides)
}

pub fn validate(
    file: FileConfig,
    source: String,
    overrides: &Overrides,
) -> Result<Settings, ConfigError> {
    let listen_src: Vec<String> = if !overrides.listen.is_empty() {
        overrides.listen.clone()
    } else {
        file.listen
            .clone()
            .unwrap_or_else(|| DEFAULT_LISTEN.iter().map(|s| s.to_string()).collect())
    };
    let key = if overrides.listen.is_empty() {
        "listen"
    } else {
        "--listen"
    };
    let mut listen = Vec::new();
    for l in &listen_src {
        let addr: SocketAddr = l
            .parse()
            .map_err(|_| bad(key, l, "not an ADDRESS:PORT (write IPv6 as [::]:3333)"))?;
        listen.push(addr);
    }
    if listen.is_empty() {
        return Err(bad(key, &listen_src, "at least one address is needed"));
    }

    let allow = networks("allow", file.allow.iter().flatten())?;

    let send = file.send.unwrap_or(true) && !overrides.no_send;
    let (channels, channels_from) = if send {
        channels(&file, overrides)?
    } else {
        let key = if overrides.no_send {
            "--no-send"
        } else {
            "send = false"
        };
        if !overrides.send.is_empty() {
            return Err(bad("--send", &overrides.send, format!("contradicts {key}")));
        }
        (Vec::new(), key.to_string())
    };
    let xml_key = if overrides.xml_listen.is_empty() {
        "xml_listen"
    } else {
        "--xml-listen"
    };
    let xml_src = if overrides.xml_listen.is_empty() {
        file.xml_listen.clone().unwrap_or_default()
    } else {
        overrides.xml_listen.clone()
    };
    let mut xml_listen = Vec::new();
    for l in &xml_src {
        let addr: SocketAddr = l.parse().map_err(|_| {
            bad(
                xml_key,
                l,
                "not an ADDRESS:PORT (gmond's XML port is 8649; write IPv6 as [::1]:8649)",
            )
        })?;
        xml_listen.push(addr);
    }
    if !send && xml_listen.is_empty() {
        return Err(ConfigError(format!(
            "{channels_from} and no xml_listen: the data would go nowhere (poll the gateway with xml_listen, or send to gmond)"
        )));
    }
    let xml_allow = match &file.xml_allow {
        None => networks(
            "xml_allow",
            DEFAULT_XML_ALLOW
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .iter(),
        )?,
        Some(list) if list.is_empty() => {
            return Err(bad(
                "xml_allow",
                list,
                "no client could poll; leave it out for loopback only, or name the gmetad hosts' networks",
            ));
        }
        Some(list) => networks("xml_allow", list.iter())?,
    };
    let cluster_name = file
        .cluster_name
        .clone()
        .unwrap_or_else(|| DEFAULT_CLUSTER_NAME.to_string());
    if cluster_name.is_empty()
        || cluster_name.len() > crate::ganglia::sanitize::MAX_TEXT
        || cluster_name.contains('/')
        || cluster_name.chars().any(char::is_control)
    {
        return Err(bad(
            "cluster_name",
            &cluster_name,
            "must be 1 to 256 characters, without '/' or control characters (gmetad and ganglia-web use it in paths)",
        ));
    }

    let template =
        |key: &str, value: Option<String>, default: &str| -> Result<Template, ConfigError> {
            let v = value.unwrap_or_else(|| default.to_string());
            let t = Template::parse(&v).map_err(|e| bad(key, &v, e))?;
            if key == "metric_name" && !t.uses_var() {
                return Err(bad(
                    key,
                    &v,
                    "must contain {var}, or every variable gets the same name",
                ));
            }
            Ok(t)
        };
    let metric_name = template("metric_name", file.metric_name, DEFAULT_NAME_TEMPLATE)?;
    if !metric_name.uses_pgm_and_ins() {
        tracing::warn!(
            template = metric_name.as_str(),
            "metric_name lacks {{pgm}} or {{ins}}: an xrootd and a cmsd (or two instances) on one host will overwrite each other's metrics"
        );
    }
    let group_name = template("group_name", file.group_name, DEFAULT_GROUP_TEMPLATE)?;

    let metadata_interval = file.metadata_interval.unwrap_or(60);
    if metadata_interval == 0 {
        return Err(bad(
            "metadata_interval",
            metadata_interval,
            "must be at least 1 second",
        ));
    }
    let dmax = file.dmax.unwrap_or(3600);
    if dmax != 0 && u64::from(dmax) <= metadata_interval {
        return Err(bad(
            "dmax",
            dmax,
            format!(
                "must be 0 (never expire) or longer than metadata_interval ({metadata_interval} s): gmond drops a metric dmax seconds after its last metadata"
            ),
        ));
    }
    let tmax = file.tmax.unwrap_or(60);
    if tmax == 0 {
        return Err(bad("tmax", tmax, "must be at least 1 second"));
    }
    let value_heartbeat = match file.send_values.as_deref().unwrap_or("all") {
        "all" => {
            if let Some(h) = file.value_heartbeat {
                return Err(bad(
                    "value_heartbeat",
                    h,
                    "only applies with send_values = \"changed\"",
                ));
            }
            None
        }
        "changed" => match file.value_heartbeat.unwrap_or(60) {
            0 => return Err(bad("value_heartbeat", 0, "must be at least 1 second")),
            h => Some(h),
        },
        other => {
            return Err(bad(
                "send_values",
                other,
                "must be \"all\" (every value of every report) or \"changed\" (values that changed, and the rest every value_heartbeat)",
            ));
        }
    };
    let (state_key, state_src) = match &overrides.state_file {
        Some(p) => ("--state-file", Some(p)),
        None => ("state_file", file.state_file.as_ref()),
    };
    let state_file = match state_src {
        None => Some(PathBuf::from(DEFAULT_STATE_FILE)),
        Some(p) if p.as_os_str().is_empty() => None,
        Some(p) if p.is_dir() => {
            return Err(bad(
                state_key,
                p.display().to_string(),
                "is a directory; name a file in it",
            ));
        }
        Some(p) => Some(p.clone()),
    };
    let state_interval = file.state_interval.unwrap_or(60);
    if state_interval == 0 {
        return Err(bad("state_interval", 0, "must be at least 1 second"));
    }
    let mut metadata_requests = Vec::new();
    for r in file.metadata_requests.iter().flatten() {
        let addr: SocketAddr = r.parse().map_err(|_| {
            bad(
                "metadata_requests",
                r,
                "not an ADDRESS:PORT (a local address to listen on, or a multicast group such as 239.2.11.71:8649)",
            )
        })?;
        if addr.port() == 0 {
            return Err(bad("metadata_requests", r, "needs a port"));
        }
        metadata_requests.push(addr);
    }
    if !send && !metadata_requests.is_empty() {
        return Err(bad(
            "metadata_requests",
            &file.metadata_requests,
            format!("only applies when sending to gmond ({channels_from})"),
        ));
    }
    let positive = |key: &str, v: Option<usize>, default: usize| -> Result<usize, ConfigError> {
        match v.unwrap_or(default) {
            0 => Err(bad(key, 0, "must be at least 1")),
            n => Ok(n),
        }
    };
    Ok(Settings {
        source,
        listen,
        allow,
        channels,
        channels_from,
        metric_name,
        group_name,
        metadata_interval: Duration::from_secs(metadata_interval),
        tmax,
        dmax,
        max_sources: positive("max_sources", file.max_sources, 10_000)?,
        max_metrics_per_source: positive(
            "max_metrics_per_source",
            file.max_metrics_per_source,
            5_000,
        )?,
        recv_buffer: positive("recv_buffer", file.recv_buffer, 4 << 20)?,
        log_interval: Duration::from_secs(file.log_interval.unwrap_or(60).max(1)),
        stats_interval: Duration::from_secs(file.stats_interval.unwrap_or(300)),
        self_metrics_interval: Duration::from_secs(file.self_metrics_interval.unwrap_or(60)),
        send_burst: positive("send_burst", file.send_burst, DEFAULT_SEND_BURST)?,
        max_send_rate: file.max_send_rate.unwrap_or(DEFAULT_SEND_RATE),
        drain_timeout: Duration::from_secs(file.drain_timeout.unwrap_or(5)),
        value_heartbeat,
        state_file,
        state_interval: Duration::from_secs(state_interval),
        metadata_requests,
        send,
        xml_listen,
        xml_allow,
        cluster_name,
    })
}

/// Networks (`10.0.0.0/8`) or single addresses, for `key`.
fn networks<'a>(
    key: &str,
    list: impl Iterator<Item = &'a String>,
) -> Result<Vec<IpNet>, ConfigError> {
    list.map(|a| {
        a.parse()
            .or_else(|_| a.parse::<std::net::IpAddr>().map(IpNet::from))
            .map_err(|_| {
                bad(
                    key,
                    a,
                    "not a network (10.0.0.0/8, 2001:db8::/32) or address",
                )
            })
    })
    .collect()
}

fn channels(
    file: &FileConfig,
    overrides: &Overrides,
) -> Result<(Vec<ChannelSpec>, String), ConfigError> {
    if !overrides.send.is_empty() {
        let list = overrides
            .send
            .iter()
            .map(|s| ChannelSpec::parse_host_port(s).map_err(|e| bad("--send", s, e)))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok((list, "--send".into()));
    }
    if let Some(chs) = &file.channel {
        let mut list = Vec::new();
        for c in chs {
            if c.port == 0 {
                return Err(bad("channel.port", c.port, "not a port number"));
            }
            let bind = match &c.bind {
                Some(b) => Some(
                    b.parse()
                        .map_err(|_| bad("channel.bind", b, "not an IP address"))?,
                ),
                None => None,
            };
            list.push(ChannelSpec {
                host: c.host.clone(),
                port: c.port,
                ttl: c.ttl,
                mcast_if: c.mcast_if.clone(),
                bind,
            });
        }
        if !list.is_empty() {
            return Ok((list, "[[channel]] in the config".into()));
        }
    }
    let explicit = file.gmond_conf.is_some();
    let gmond_path = file
        .gmond_conf
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_GMOND_CONF));
    if gmond_path.exists() {
        let conf = gmond_conf::read(&gmond_path)
            .map_err(|e| bad("gmond_conf", gmond_path.display().to_string(), e))?;
        let list = conf
            .send_channels
            .iter()
            .map(|c| {
                ChannelSpec::from_gmond(c)
                    .map_err(|e| bad("gmond_conf", gmond_path.display().to_string(), e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if list.is_empty() {
            return Err(bad(
                "gmond_conf",
                gmond_path.display().to_string(),
                "has no udp_send_channel",
            ));
        }
        return Ok((
            list,
            format!("udp_send_channel of {}", gmond_path.display()),
        ));
    }
    if explicit {
        return Err(bad(
            "gmond_conf",
            gmond_path.display().to_string(),
            "file not found",
        ));
    }
    Ok((
        vec![ChannelSpec::unicast(DEFAULT_SEND.0, DEFAULT_SEND.1)],
        format!("built-in default ({} not found)", gmond_path.display()),
    ))
}

impl fmt::Display for Settings {
    /// The effective settings, as `check-config` prints them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "# effective settings (from {})", self.source)?;
        let list = |v: Vec<String>| {
            v.iter()
                .map(|s| format!("{s:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        writeln!(
            f,
            "listen = [{}]",
            list(self.listen.iter().map(|a| a.to_string()).collect())
        )?;
        if self.allow.is_empty() {
            writeln!(f, "allow = []  # every sender")?;
        } else {
            writeln!(
                f,
                "allow = [{}]",
                list(self.allow.iter().map(|a| a.to_string()).collect())
            )?;
        }
        writeln!(f, "# channels from {}", self.channels_from)?;
        for c in &self.channels {
            writeln!(f, "[[channel]]  # {c}")?;
            write!(
                f,
                "host = {:?}\nport = {}\nttl = {}\n",
                c.host, c.port, c.ttl
            )?;
            if let Some(i) = &c.mcast_if {
                writeln!(f, "mcast_if = {i:?}")?;
            }
            if let Some(b) = &c.bind {
                writeln!(f, "bind = \"{b}\"")?;
            }
        }
        writeln!(f, "metric_name = {:?}", self.metric_name.as_str())?;
        writeln!(f, "group_name = {:?}", self.group_name.as_str())?;
        writeln!(
            f,
            "metadata_interval = {}",
            self.metadata_interval.as_secs()
        )?;
        writeln!(f, "tmax = {}", self.tmax)?;
        writeln!(f, "dmax = {}", self.dmax)?;
        writeln!(f, "max_sources = {}", self.max_sources)?;
        writeln!(
            f,
            "max_metrics_per_source = {}",
            self.max_metrics_per_source
        )?;
        writeln!(f, "recv_buffer = {}", self.recv_buffer)?;
        writeln!(f, "log_interval = {}", self.log_interval.as_secs())?;
        writeln!(f, "stats_interval = {}", self.stats_interval.as_secs())?;
        writeln!(
            f,
            "self_metrics_interval = {}",
            self.self_metrics_interval.as_secs()
        )?;
        writeln!(f, "send_burst = {}", self.send_burst)?;
        writeln!(f, "max_send_rate = {}", self.max_send_rate)?;
        writeln!(f, "drain_timeout = {}", self.drain_timeout.as_secs())?;
        match self.value_heartbeat {
            None => writeln!(f, "send_values = \"all\"")?,
            Some(h) => writeln!(f, "send_values = \"changed\"\nvalue_heartbeat = {h}")?,
        }
        match &self.state_file {
            Some(p) => writeln!(f, "state_file = {:?}", p.display().to_string())?,
            None => writeln!(
                f,
                "state_file = \"\"  # counters are not kept across restarts"
            )?,
        }
        writeln!(f, "state_interval = {}", self.state_interval.as_secs())?;
        writeln!(
            f,
            "metadata_requests = [{}]",
            list(
                self.metadata_requests
                    .iter()
                    .map(|a| a.to_string())
                    .collect()
            )
        )?;
        writeln!(f, "send = {}", self.send)?;
        writeln!(
            f,
            "xml_listen = [{}]",
            list(self.xml_listen.iter().map(|a| a.to_string()).collect())
        )?;
        writeln!(
            f,
            "xml_allow = [{}]",
            list(self.xml_allow.iter().map(|a| a.to_string()).collect())
        )?;
        writeln!(f, "cluster_name = {:?}", self.cluster_name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(text: &str) -> Result<Settings, ConfigError> {
        validate(
            FileConfig::parse(text, Path::new("t.toml"))?,
            "t.toml".into(),
            &Overrides::default(),
        )
    }

    fn err(text: &str) -> String {
        from(text).unwrap_err().to_string()
    }

    #[test]
    fn shipped_config_is_valid_and_documented() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/xrd2ganglia.toml");
        let text = std::fs::read_to_string(&path).unwrap();
        let file = FileConfig::parse(&text, &path).unwrap();
        let s = validate(
            file,
            "shipped".into(),
            &Overrides {
                send: vec!["127.0.0.1:8649".into()],
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(
            s.listen,
            [
                "0.0.0.0:3333".parse().unwrap(),
                "[::]:3333".parse::<SocketAddr>().unwrap()
            ]
        );
        assert!(
            s.allow
                .iter()
                .any(|n| n.contains(&"127.0.0.1".parse::<std::net::IpAddr>().unwrap()))
        );
        assert!(
            s.allow
                .iter()
                .any(|n| n.contains(&"10.1.2.3".parse::<std::net::IpAddr>().unwrap()))
        );
        // Every key of FileConfig appears (commented or not) in the shipped file.
        for key in [
            "listen",
            "allow",
            "gmond_conf",
            "[[channel]]",
            "metric_name",
            "group_name",
            "metadata_interval",
            "tmax",
            "dmax",
            "max_sources",
            "max_metrics_per_source",
            "recv_buffer",
            "log_interval",
            "stats_interval",
            "self_metrics_interval",
            "send_burst",
            "max_send_rate",
            "drain_timeout",
            "send_values",
            "value_heartbeat",
            "state_file",
            "state_interval",
            "metadata_requests",
            "send",
            "xml_listen",
            "xml_allow",
            "cluster_name",
        ] {
            assert!(
                text.contains(key),
                "conf/xrd2ganglia.toml does not document {key}"
            );
        }
    }

    #[test]
    fn defaults_without_a_file() {
        let s = validate(
            FileConfig {
                gmond_conf: Some("/nonexistent/gmond.conf".into()),
                ..Default::default()
            },
            "x".into(),
            &Overrides::default(),
        );
        // An explicitly named gmond.conf that is missing is an error...
        assert!(s.unwrap_err().to_string().contains("file not found"));
        // ...the default one missing means unicast to 127.0.0.1:8649.
        let (chs, from) = channels(&FileConfig::default(), &Overrides::default()).unwrap();
        if !Path::new(DEFAULT_GMOND_CONF).exists() {
            assert_eq!(chs, [ChannelSpec::unicast("127.0.0.1", 8649)]);
            assert!(from.contains("built-in"));
        } else {
            assert!(from.contains(DEFAULT_GMOND_CONF), "{from}");
        }
        let s = from_text_with_send("");
        assert_eq!(s.listen.len(), 2);
        assert_eq!(
            (s.metadata_interval.as_secs(), s.dmax, s.tmax),
            (60, 3600, 60)
        );
        assert!(s.allow.is_empty());
    }

    fn from_text_with_send(text: &str) -> Settings {
        validate(
            FileConfig::parse(text, Path::new("t")).unwrap(),
            "t".into(),
            &Overrides {
                send: vec!["127.0.0.1:9".into()],
                ..Default::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn gmond_conf_channels_are_used() {
        let dir = std::env::temp_dir().join(format!("x2g-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let g = dir.join("gmond.conf");
        std::fs::write(&g, "udp_send_channel { host = 127.0.0.1 port = 8650 }\nudp_send_channel { mcast_join = 239.2.11.71 port = 8649 ttl = 2 }").unwrap();
        let s = from(&format!("gmond_conf = {:?}", g.display().to_string())).unwrap();
        assert_eq!(s.channels.len(), 2);
        assert_eq!(s.channels[0], ChannelSpec::unicast("127.0.0.1", 8650));
        assert_eq!(
            (s.channels[1].host.as_str(), s.channels[1].ttl),
            ("239.2.11.71", 2)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cli_overrides_win() {
        let s = validate(
            FileConfig::parse(
                "listen = [\"127.0.0.1:1\"]\n[[channel]]\nhost = \"10.0.0.1\"",
                Path::new("t"),
            )
            .unwrap(),
            "t".into(),
            &Overrides {
                listen: vec!["127.0.0.1:2".into()],
                send: vec!["127.0.0.1:3".into(), "[::1]:4".into()],
                state_file: Some("here/state".into()),
                xml_listen: vec!["127.0.0.1:8659".into()],
                no_send: false,
            },
        )
        .unwrap();
        assert_eq!(s.state_file, Some(PathBuf::from("here/state")));
        assert_eq!(
            s.xml_listen,
            ["127.0.0.1:8659".parse::<SocketAddr>().unwrap()]
        );
        assert_eq!(s.listen, ["127.0.0.1:2".parse::<SocketAddr>().unwrap()]);
        assert_eq!(
            s.channels,
            [
                ChannelSpec::unicast("127.0.0.1", 3),
                ChannelSpec::unicast("::1", 4)
            ]
        );
        assert_eq!(s.channels_from, "--send");
        let with_state = |text: &str, state: &str| {
            validate(
                FileConfig::parse(text, Path::new("t")).unwrap(),
                "t".into(),
                &Overrides {
                    send: vec!["127.0.0.1:3".into()],
                    state_file: Some(state.into()),
                    ..Default::default()
                },
            )
        };
        // --state-file "" keeps nothing, whatever the file says.
        let s = with_state("state_file = \"/x/state\"", "").unwrap();
        assert_eq!(s.state_file, None);
        assert_eq!(
            with_state("", "/").unwrap_err().to_string(),
            "--state-file = \"/\": is a directory; name a file in it"
        );
    }

    #[test]
    fn bad_values_name_key_and_value() {
        assert_eq!(
            err("listen = [\"0.0.0.0:99999\"]"),
            "listen = \"0.0.0.0:99999\": not an ADDRESS:PORT (write IPv6 as [::]:3333)"
        );
        assert_eq!(
            err("allow = [\"10.0.0.0/33\"]"),
            "allow = \"10.0.0.0/33\": not a network (10.0.0.0/8, 2001:db8::/32) or address"
        );
        assert_eq!(
            err("metric_name = \"{pgm}.{x}\""),
            "metric_name = \"{pgm}.{x}\": unknown placeholder {x} in \"{pgm}.{x}\" (known: {pgm} {ins} {site} {section} {var})"
        );
        assert_eq!(
            err("metric_name = \"{pgm}\""),
            "metric_name = \"{pgm}\": must contain {var}, or every variable gets the same name"
        );
        assert!(
            err("metric_name = \"a/b.{var}\"").starts_with("metric_name = \"a/b.{var}\": \"a/b\"")
        );
        assert!(err("dmax = 30").starts_with(
            "dmax = 30: must be 0 (never expire) or longer than metadata_interval (60 s)"
        ));
        assert_eq!(
            err("metadata_interval = 0"),
            "metadata_interval = 0: must be at least 1 second"
        );
        assert_eq!(
            err("max_sources = 0"),
            "max_sources = 0: must be at least 1"
        );
        assert!(
            err("[[channel]]\nhost = \"h\"\nbind = \"nope\"")
                .starts_with("channel.bind = \"nope\"")
        );
        assert_eq!(
            err("send_values = \"some\""),
            "send_values = \"some\": must be \"all\" (every value of every report) or \"changed\" (values that changed, and the rest every value_heartbeat)"
        );
        assert_eq!(
            err("value_heartbeat = 30"),
            "value_heartbeat = 30: only applies with send_values = \"changed\""
        );
        assert_eq!(
            err("send_values = \"changed\"\nvalue_heartbeat = 0"),
            "value_heartbeat = 0: must be at least 1 second"
        );
        assert_eq!(
            err("state_file = \"/\""),
            "state_file = \"/\": is a directory; name a file in it"
        );
        assert!(
            err("metadata_requests = [\"8650\"]")
                .starts_with("metadata_requests = \"8650\": not an ADDRESS:PORT")
        );
        let s = from_text_with_send(
            "send_values = \"changed\"\nstate_file = \"\"\nmetadata_requests = [\"239.2.11.71:8649\"]",
        );
        assert_eq!(
            (
                s.value_heartbeat,
                s.state_file.clone(),
                s.metadata_requests.len()
            ),
            (Some(60), None, 1)
        );
        assert_eq!(
            from_text_with_send("").state_file,
            Some(PathBuf::from(DEFAULT_STATE_FILE))
        );
        // serde: unknown keys and wrong types name the key and line.
        let e = err("lisen = []");
        assert!(e.contains("lisen") && e.contains("t.toml"), "{e}");
        let e = err("dmax = \"x\"");
        assert!(e.contains("dmax") && e.contains("line 1"), "{e}");
        let e = validate(
            FileConfig::default(),
            "t".into(),
            &Overrides {
                send: vec!["nope".into()],
                ..Default::default()
            },
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "--send = \"nope\": \"nope\" is not HOST:PORT");
    }

    #[test]
    fn xml_port_settings_and_their_errors() {
        let s = from_text_with_send("");
        assert!(s.send && s.xml_listen.is_empty());
        assert_eq!(s.cluster_name, "XRootD");
        let ips = |s: &Settings, ip: &str| {
            s.xml_allow
                .iter()
                .any(|n| n.contains(&ip.parse::<std::net::IpAddr>().unwrap()))
        };
        // Loopback only, unless said otherwise.
        assert!(ips(&s, "127.0.0.1") && ips(&s, "::1") && !ips(&s, "10.0.0.1"));
        let s = from(
            "send = false\nxml_listen = [\"0.0.0.0:8649\"]\nxml_allow = [\"10.0.0.0/8\", \"192.0.2.7\"]\ncluster_name = \"T2 Site\"",
        )
        .unwrap();
        assert!(!s.send && s.channels.is_empty());
        assert_eq!(s.channels_from, "send = false");
        assert!(ips(&s, "10.9.9.9") && ips(&s, "192.0.2.7") && !ips(&s, "127.0.0.1"));
        assert_eq!(s.cluster_name, "T2 Site");
        assert!(
            s.to_string()
                .contains("send = false\nxml_listen = [\"0.0.0.0:8649\"]"),
            "{s}"
        );

        assert_eq!(
            err("send = false"),
            "send = false and no xml_listen: the data would go nowhere (poll the gateway with xml_listen, or send to gmond)"
        );
        assert!(
            err("xml_listen = [\"8649\"]")
                .starts_with("xml_listen = \"8649\": not an ADDRESS:PORT")
        );
        assert!(err("xml_allow = []").contains("no client could poll"));
        assert!(
            err("xml_allow = [\"nowhere\"]").starts_with("xml_allow = \"nowhere\": not a network")
        );
        assert!(err("cluster_name = \"a/b\"").contains("without '/'"));
        assert!(err("cluster_name = \"\"").starts_with("cluster_name"));
        assert!(
            err("send = false\nxml_listen = [\"127.0.0.1:1\"]\nmetadata_requests = [\"0.0.0.0:8650\"]")
                .contains("only applies when sending to gmond")
        );
        // --no-send on the command line, and --send with it is a contradiction.
        let no_send = |send: Vec<String>| {
            validate(
                FileConfig::parse("xml_listen = [\"127.0.0.1:1\"]", Path::new("t")).unwrap(),
                "t".into(),
                &Overrides {
                    send,
                    no_send: true,
                    ..Default::default()
                },
            )
        };
        assert!(no_send(vec![]).is_ok_and(|s| !s.send && s.channels_from == "--no-send"));
        assert!(
            no_send(vec!["127.0.0.1:9".into()])
                .unwrap_err()
                .to_string()
                .contains("contradicts --no-send")
        );
    }
}
