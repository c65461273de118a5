//! Validated settings: the file with the command line applied, typed.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;

use super::clusters::Grouping;
use super::file::{DEFAULT_CONTROL_SOCKET, DEFAULT_VALUE_HEARTBEAT, FileConfig};
use super::keys::KEYS;
use super::values::{addresses, check_path, in_ranges, networks, replace};
use super::{ConfigError, bad};
use crate::ganglia::channel::ChannelSpec;
use crate::mapping::{Description, Glob, NameTemplate, SiteMetrics, VarFilter};

pub use super::channels::DEFAULT_SEND;
use super::channels::send_channels;
pub use super::overrides::Overrides;

mod pair;
pub use pair::check_peer;
use pair::{host_port, pairing, recover_from};

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
    pub metric_name: NameTemplate,
    pub group_name: NameTemplate,
    /// Which variables become metrics (`include`, `exclude`).
    pub filter: VarFilter,
    /// What the site says of variables the catalog does not know (`[[metric]]`).
    pub site_metrics: SiteMetrics,
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
    /// At most one log line per reason in this interval.
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
    /// Whether a channel to a gmond on this host follows its receive queue
    /// (instead of `max_send_rate` and `send_burst`).
    pub follow_gmond_queue: bool,
    /// A channel that does not follow its gmond's queue sends each packet
    /// again this long after (None: never).
    pub resend_after: Option<Duration>,
    /// At stop, queued packets are sent for at most this long.
    pub drain_timeout: Duration,
    /// Changed-only sending: an unchanged value is sent again after this
    /// many seconds. None: every value of every report is sent.
    pub value_heartbeat: Option<u32>,
    /// Where counter continuity is kept across gateway restarts (None: not kept).
    pub state_file: Option<PathBuf>,
    /// Whether `state_file` is the built-in default, named by neither the
    /// file nor `--state-file`: `serve` runs without it, with a warning,
    /// where it cannot be made (a user who cannot write /var/lib); one
    /// that was named must be usable.
    pub state_file_is_default: bool,
    /// Set by `serve` (never by a file) when the state file's lock could
    /// not be made for lack of space: the daemon takes it at its first save
    /// that has room (`StateStore::lock_at_save`).
    pub state_lock_pending: bool,
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
    /// Where `xrd2ganglia status` asks (None: nowhere).
    pub control_socket: Option<ControlSocket>,
    /// Which cluster each server is in (`[[cluster]]`, `cluster_by_site`).
    pub grouping: Grouping,
    /// The other gateway of a pair (`HOST:PORT`, resolved at each exchange).
    pub peer: Option<String>,
    /// Where the peer's exchanges are answered.
    pub peer_listen: Vec<SocketAddr>,
    /// Who may exchange (empty: what `peer` resolves to at start).
    pub peer_allow: Vec<IpNet>,
    /// gmond-style XML ports read at start for the last values published.
    pub recover_from: Vec<String>,
    /// This one stands by when both send to one gmond.
    pub peer_standby: bool,
    /// Where the standby reads gmond's XML for its peer's own host
    /// (HOST:PORT); None: the first send channel's address.
    pub peer_gmond_xml: Option<String>,
    /// Without a peer, the XML port listens after this at most.
    pub warmup_max: Duration,
    /// The detailed stream's names and bounds (`detailed_*`).
    pub detailed: DetailedSettings,
    /// The file as it takes effect: defaults filled in, the command line
    /// applied, the channels resolved (what `check-config` prints).
    pub effective: FileConfig,
}

impl Settings {
    /// Whether metadata requests are listened for (sources then keep their
    /// last record, to answer from).
    pub fn answers_requests(&self) -> bool {
        !self.metadata_requests.is_empty()
    }

    /// Whether sources keep their last record: to answer gmond's metadata
    /// requests, and to hand a starting peer its table (`peer_listen`).
    pub fn keeps_records(&self) -> bool {
        self.answers_requests() || !self.peer_listen.is_empty()
    }
}

/// The file, with the command line applied, as typed settings; every
/// error names the key and the value. Keys are checked in this order, so
/// the first mistake in it is the one reported.
pub fn validate(
    mut file: FileConfig,
    source: String,
    overrides: &Overrides,
) -> Result<Settings, ConfigError> {
    check_ranges(&file)?;
    let (listen, allow) = listening(&mut file, overrides)?;
    let (channels, channels_from) = send_channels(&mut file, overrides)?;
    let (xml_listen, xml_allow) = xml_port(&mut file, overrides, &channels_from)?;
    let (metric_name, group_name, filter) = naming(&file)?;
    let site_metrics = site_metrics(&file)?;
    check_intervals(&file)?;
    let value_heartbeat = value_heartbeat(&file)?;
    let state_file_is_default = !file.state_file_given && overrides.state_file.is_none();
    let state_file = state_file(&mut file, overrides)?;
    let metadata_requests = metadata_requests(&file, &channels_from)?;
    let control_socket = control_socket(&file)?;
    let (peer, peer_listen, peer_allow) = pairing(&file)?;
    let taken: Vec<(&str, SocketAddr)> = peer_listen.iter().map(|a| ("peer_listen", *a)).collect();
    let grouping = super::clusters::grouping(&file, file.send, &xml_listen, &taken)?;
    let secs = Duration::from_secs;
    Ok(Settings {
        source,
        listen,
        allow,
        channels,
        channels_from,
        metric_name,
        group_name,
        filter,
        site_metrics,
        metadata_interval: secs(file.metadata_interval),
        tmax: file.tmax,
        dmax: file.dmax,
        max_sources: file.max_sources,
        max_metrics_per_source: file.max_metrics_per_source,
        recv_buffer: file.recv_buffer,
        log_interval: secs(file.log_interval.max(1)),
        stats_interval: secs(file.stats_interval),
        self_metrics_interval: secs(file.self_metrics_interval),
        send_burst: file.send_burst,
        max_send_rate: file.max_send_rate,
        follow_gmond_queue: file.follow_gmond_queue,
        resend_after: (file.resend_after > 0).then(|| secs(file.resend_after)),
        drain_timeout: secs(file.drain_timeout),
        value_heartbeat,
        state_file,
        state_file_is_default,
        state_lock_pending: false,
        state_interval: secs(file.state_interval),
        metadata_requests,
        send: file.send,
        xml_listen,
        xml_allow,
        cluster_name: file.cluster_name.clone(),
        control_socket,
        grouping,
        peer,
        peer_listen,
        peer_allow,
        recover_from: recover_from(&file)?,
        peer_standby: file.peer_standby,
        peer_gmond_xml: host_port(
            "peer_gmond_xml",
            &file.peer_gmond_xml,
            "not a HOST:PORT (gmond's tcp_accept_channel)",
        )?,
        warmup_max: secs(file.warmup_max),
        detailed: detailed(&file)?,
        effective: file,
    })
}

/// The detailed stream's names and bounds (`detailed_*` keys).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DetailedSettings {
    /// (path prefix, VO), longest prefix first.
    pub vo_paths: Vec<(String, String)>,
    pub max_vos: usize,
    pub max_protocols: usize,
    pub max_domains: usize,
    pub per_user: bool,
    pub max_users: usize,
    pub max_logins: usize,
}

impl DetailedSettings {
    /// The VO `detailed_vo_paths` gives a file's path.
    pub fn vo_of_path(&self, path: &[u8]) -> Option<&str> {
        self.vo_paths
            .iter()
            .find(|(prefix, _)| path.starts_with(prefix.as_bytes()))
            .map(|(_, vo)| vo.as_str())
    }
}

/// `detailed_vo_paths` (each `PREFIX=VO`, both non-empty) and the bounds.
fn detailed(file: &FileConfig) -> Result<DetailedSettings, ConfigError> {
    let mut vo_paths = Vec::new();
    for rule in &file.detailed_vo_paths {
        match rule.rsplit_once('=') {
            Some((prefix, vo)) if !prefix.is_empty() && !vo.trim().is_empty() => {
                vo_paths.push((prefix.to_string(), vo.trim().to_string()));
            }
            _ => {
                return Err(ConfigError(format!(
                    "detailed_vo_paths = {rule:?}: not PATH_PREFIX=VO"
                )));
            }
        }
    }
    vo_paths.sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
    Ok(DetailedSettings {
        vo_paths,
        max_vos: file.detailed_max_vos,
        max_protocols: file.detailed_max_protocols,
        max_domains: file.detailed_max_domains,
        per_user: file.detailed_per_user,
        max_users: file.detailed_max_users,
        max_logins: file.detailed_max_logins,
    })
}

/// `listen` (or `--listen`) and `allow`: where records are received, from whom.
fn listening(
    file: &mut FileConfig,
    overrides: &Overrides,
) -> Result<(Vec<SocketAddr>, Vec<IpNet>), ConfigError> {
    let listen_key = replace(&mut file.listen, &overrides.listen, "listen", "--listen");
    let listen = addresses(
        listen_key,
        &file.listen,
        "not an ADDRESS:PORT (write IPv6 as [::]:3333)",
    )?;
    if listen.is_empty() {
        return Err(bad(
            listen_key,
            &file.listen,
            "at least one address is needed",
        ));
    }
    Ok((listen, networks("allow", &file.allow)?))
}

/// `xml_listen` (or `--xml-listen`) and `xml_allow`: where gmetad polls,
/// from where; and the `cluster_name` it is answered with.
fn xml_port(
    file: &mut FileConfig,
    overrides: &Overrides,
    channels_from: &str,
) -> Result<(Vec<SocketAddr>, Vec<IpNet>), ConfigError> {
    let xml_key = replace(
        &mut file.xml_listen,
        &overrides.xml_listen,
        "xml_listen",
        "--xml-listen",
    );
    let xml_listen = addresses(
        xml_key,
        &file.xml_listen,
        "not an ADDRESS:PORT (gmond's XML port is 8649; write IPv6 as [::1]:8649)",
    )?;
    if !file.send && xml_listen.is_empty() {
        return Err(ConfigError(format!(
            "{channels_from} and no xml_listen: the data would go nowhere (poll the gateway with xml_listen, or send to gmond)"
        )));
    }
    if file.xml_allow.is_empty() {
        return Err(bad(
            "xml_allow",
            &file.xml_allow,
            "no client could poll; leave it out for loopback only, or name the gmetad hosts' networks",
        ));
    }
    let xml_allow = networks("xml_allow", &file.xml_allow)?;
    let cluster_name = &file.cluster_name;
    // The one rule of names gmetad makes directories of
    // (`ganglia/path_name.rs`); what it says of length, '/' and control
    // characters said as this key always said it.
    use crate::ganglia::path_name::Unsafe;
    match crate::ganglia::path_name::check(cluster_name) {
        Err(Unsafe::Empty | Unsafe::TooLong | Unsafe::Slash | Unsafe::Control) => {
            return Err(bad(
                "cluster_name",
                cluster_name,
                "must be 1 to 128 bytes, without '/' or control characters (gmetad and ganglia-web use it in paths)",
            ));
        }
        _ => super::clusters::check_dir_name("cluster_name", cluster_name)?,
    }
    Ok((xml_listen, xml_allow))
}

/// `metric_name`, `group_name`, `include` and `exclude`.
fn naming(file: &FileConfig) -> Result<(NameTemplate, NameTemplate, VarFilter), ConfigError> {
    let template = |key: &str, v: &str| -> Result<NameTemplate, ConfigError> {
        let t = NameTemplate::parse(v).map_err(|e| bad(key, v, e))?;
        if key == "metric_name" && !t.uses_var() {
            return Err(bad(
                key,
                v,
                "must contain {var}, or every variable gets the same name",
            ));
        }
        Ok(t)
    };
    let metric_name = template("metric_name", &file.metric_name)?;
    if !metric_name.uses_pgm_and_ins() {
        tracing::warn!(
            template = metric_name.as_str(),
            "metric_name lacks {{pgm}} or {{ins}}: an xrootd and a cmsd (or two instances) on one host will overwrite each other's metrics"
        );
    }
    let group_name = template("group_name", &file.group_name)?;
    let globs = |key: &str, list: &[String]| -> Result<Vec<Glob>, ConfigError> {
        list.iter()
            .map(|p| Glob::parse(p).map_err(|e| bad(key, p, e)))
            .collect()
    };
    let filter = VarFilter {
        include: globs("include", &file.include)?,
        exclude: globs("exclude", &file.exclude)?,
    };
    Ok((metric_name, group_name, filter))
}

/// The `[[metric]]` tables: each names what is wrong with it.
fn site_metrics(file: &FileConfig) -> Result<SiteMetrics, ConfigError> {
    let list: Vec<Description<'_>> = file
        .metric
        .iter()
        .map(|m| Description {
            pattern: &m.pattern,
            value_type: m.value_type.as_deref(),
            slope: m.slope.as_deref(),
            units: m.units.as_deref(),
            title: m.title.as_deref(),
            description: m.description.as_deref(),
        })
        .collect();
    SiteMetrics::new(&list).map_err(ConfigError)
}

/// `dmax`: longer than `metadata_interval`, or 0 (each in its range
/// already).
fn check_intervals(file: &FileConfig) -> Result<(), ConfigError> {
    let metadata_interval = file.metadata_interval;
    let dmax = file.dmax;
    if dmax != 0 && u64::from(dmax) <= metadata_interval {
        return Err(bad(
            "dmax",
            dmax,
            format!(
                "must be 0 (never expire) or longer than metadata_interval ({metadata_interval} s): gmond drops a metric dmax seconds after its last metadata"
            ),
        ));
    }
    Ok(())
}

/// `send_values` and `value_heartbeat`: None when every value is sent.
fn value_heartbeat(file: &FileConfig) -> Result<Option<u32>, ConfigError> {
    match file.send_values.as_str() {
        "all" => {
            if let Some(h) = file.value_heartbeat {
                return Err(bad(
                    "value_heartbeat",
                    h,
                    "only applies with send_values = \"changed\"",
                ));
            }
            Ok(None)
        }
        "changed" => Ok(Some(
            file.value_heartbeat.unwrap_or(DEFAULT_VALUE_HEARTBEAT),
        )),
        other => Err(bad(
            "send_values",
            other,
            "must be \"all\" (every value of every report) or \"changed\" (values that changed, and the rest every value_heartbeat)",
        )),
    }
}

/// The control socket's path, and whether it must be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlSocket {
    pub path: PathBuf,
    /// Set in the file to another path than the default: one that cannot
    /// be bound stops the start. The default is made where it can be (not
    /// by a non-root quick look).
    pub required: bool,
}

/// The longest path a Unix socket address holds (`sun_path`, less its
/// NUL).
const MAX_SOCKET_PATH: usize = 107;

/// `control_socket` (empty: none).
fn control_socket(file: &FileConfig) -> Result<Option<ControlSocket>, ConfigError> {
    let path = &file.control_socket;
    if path.as_os_str().is_empty() {
        return Ok(None);
    }
    let shown = || path.display().to_string();
    check_path("control_socket", path)?;
    if path.as_os_str().len() > MAX_SOCKET_PATH {
        return Err(bad(
            "control_socket",
            shown(),
            format!("is longer than a Unix socket path may be ({MAX_SOCKET_PATH} bytes)"),
        ));
    }
    if path.is_dir() {
        return Err(bad(
            "control_socket",
            shown(),
            "is a directory; name a socket in it",
        ));
    }
    Ok(Some(ControlSocket {
        path: path.clone(),
        required: path.as_path() != std::path::Path::new(DEFAULT_CONTROL_SOCKET),
    }))
}

/// `state_file` (or `--state-file`; empty: none) and `state_interval`.
fn state_file(
    file: &mut FileConfig,
    overrides: &Overrides,
) -> Result<Option<PathBuf>, ConfigError> {
    let state_key = match &overrides.state_file {
        Some(p) => {
            file.state_file = p.clone();
            "--state-file"
        }
        None => "state_file",
    };
    if !file.state_file.as_os_str().is_empty() {
        check_path(state_key, &file.state_file)?;
    }
    let state_file = match &file.state_file {
        p if p.as_os_str().is_empty() => None,
        p if p.is_dir() => {
            return Err(bad(
                state_key,
                p.display().to_string(),
                "is a directory; name a file in it",
            ));
        }
        // A FIFO would hold `serve` at its start for ever (reading it
        // waits for a writer, before SIGTERM is handled), a device would
        // be read and then replaced by the first save.
        p if std::fs::metadata(p).is_ok_and(|m| !m.is_file()) => {
            return Err(bad(
                state_key,
                p.display().to_string(),
                "is not a regular file (a FIFO, socket or device); name a file",
            ));
        }
        p => Some(p.clone()),
    };
    Ok(state_file)
}

/// `metadata_requests`: each with a port, and only when sending to gmond.
fn metadata_requests(
    file: &FileConfig,
    channels_from: &str,
) -> Result<Vec<SocketAddr>, ConfigError> {
    let metadata_requests = addresses(
        "metadata_requests",
        &file.metadata_requests,
        "not an ADDRESS:PORT (a local address to listen on, or a multicast group such as 239.2.11.71:8649)",
    )?;
    if let Some(r) = metadata_requests.iter().find(|a| a.port() == 0) {
        return Err(bad("metadata_requests", r.to_string(), "needs a port"));
    }
    if !file.send && !metadata_requests.is_empty() {
        return Err(bad(
            "metadata_requests",
            &file.metadata_requests,
            format!("only applies when sending to gmond ({channels_from})"),
        ));
    }
    Ok(metadata_requests)
}

/// Every number key in its range (its `range` in [`KEYS`], the one place
/// ranges are defined): checked first, so that no later check, and nothing the
/// gateway does with a value, meets one outside it.
fn check_ranges(file: &FileConfig) -> Result<(), ConfigError> {
    in_ranges("", file, KEYS)
}

impl fmt::Display for Settings {
    /// The effective settings, as `check-config` prints them: the file
    /// with every default, the command line and the resolved channels.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "# effective settings (from {})", self.source)?;
        writeln!(f, "# channels from {}", self.channels_from)?;
        let text = toml::to_string(&self.effective).map_err(|_| fmt::Error)?;
        f.write_str(&text)
    }
}
