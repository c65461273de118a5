//! The configuration file: every key, its default and its meaning, defined
//! once. Each key is optional in the file (serde fills in its default);
//! [`super::validate`] turns the result into typed [`super::Settings`];
//! `check-config` prints the effective file by serialising it; the list of
//! keys ([`FileConfig::keys`]) is derived from this struct, and a test
//! holds the shipped config and README's table to it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ConfigError;
use crate::mapping::{DEFAULT_EXCLUDE, DEFAULT_GROUP_TEMPLATE, DEFAULT_NAME_TEMPLATE};

/// Value packets per second per send channel (a metadata packet counts as
/// three, a host's heartbeat metadata as four: what they cost gmond,
/// docs/gmond.md). Into a stock gmond 3.7.2 on the 2-core machine here (`cargo bench
/// --bench load -- --only gmond`; README, "Delivery into gmond"): 0 drops
/// at 40,000 and 55,000 on a quiet machine, 40 drops at 70,000, and drops
/// at 45,000 in two runs of four; at 40,000, 0 drops in three full runs of
/// four (19 in the fourth's burst).
pub const DEFAULT_SEND_RATE: u64 = 40_000;
/// Packets back to back: well within a stock gmond's receive buffer
/// (about 250 small datagrams).
pub const DEFAULT_SEND_BURST: usize = 100;
/// Seconds before a packet to a gmond on another host is sent again: more
/// than the second or two gmond is deaf while gmetad polls a site's
/// cluster, less than the 15 s between two reports. Into a stock gmond
/// polled every 15 s at 1,000 servers' load, it took the host-polls that
/// showed a value more than one interval old from 783 of 19,000 to 0 (docs/gmond.md).
pub const DEFAULT_RESEND_AFTER: u64 = 3;
/// The latest `resend_after`: a second copy later than this would mostly
/// repeat a value that a newer report (xrd.report's usual interval is
/// 15-60 s) has already replaced.
pub const MAX_RESEND_AFTER: u64 = 60;
pub const DEFAULT_LISTEN: &[&str] = &["0.0.0.0:3333", "[::]:3333"];
pub const DEFAULT_GMOND_CONF: &str = "/etc/ganglia/gmond.conf";
pub const DEFAULT_STATE_FILE: &str = "/var/lib/xrd2ganglia/state";
/// Who may poll `xml_listen` unless `xml_allow` says otherwise.
pub const DEFAULT_XML_ALLOW: &[&str] = &["127.0.0.0/8", "::1/128"];
/// Seconds before an unchanged value is sent again, with `send_values =
/// "changed"`.
pub const DEFAULT_VALUE_HEARTBEAT: u32 = 60;

/// The keys whose change waits for a restart; every other key takes effect
/// at a reload (SIGHUP), which logs each of these that changed, by name,
/// and leaves its running value in place. What holds them: the sockets
/// stay bound (`listen`, `recv_buffer`, `metadata_requests`,
/// `xml_listen`), the state file stays owned (`state_file`,
/// `state_interval`), and the timers and log limiters made at start
/// (`stats_interval`, `self_metrics_interval`, `log_interval`: the
/// receive tasks take a new `log_interval` at once, the XML port and the
/// metadata-request listener at the restart).
pub const RESTART_KEYS: &[&str] = &[
    "listen",
    "recv_buffer",
    "log_interval",
    "stats_interval",
    "self_metrics_interval",
    "state_file",
    "state_interval",
    "metadata_requests",
    "xml_listen",
];

/// The file as written; every key has its default.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FileConfig {
    /// UDP addresses to receive xrd.report datagrams on (IPv6 sockets are
    /// v6-only).
    pub listen: Vec<String>,
    /// Sender networks accepted; others are dropped, counted and logged.
    /// Empty: every sender.
    pub allow: Vec<String>,
    /// Where to find `udp_send_channel`s when no channel is given (default
    /// /etc/ganglia/gmond.conf, used if it exists; named here, it must).
    pub gmond_conf: Option<PathBuf>,
    /// Send channels to gmond (unicast or multicast).
    pub channel: Vec<ChannelConfig>,
    /// Metric name template.
    pub metric_name: String,
    /// GROUP template.
    pub group_name: String,
    /// Variables left out (patterns on variable names, `*` and `?`
    /// wildcards; see README, "What the default leaves out").
    pub exclude: Vec<String>,
    /// Variables sent even when `exclude` matches them.
    pub include: Vec<String>,
    /// Seconds between metadata resends per metric.
    pub metadata_interval: u64,
    /// TMAX before a source's report interval is known.
    pub tmax: u32,
    /// DMAX: 0 (never expire) or more than `metadata_interval`.
    pub dmax: u32,
    /// Sources remembered; the least recently seen are forgotten past it.
    pub max_sources: usize,
    /// New metrics of a source past this are not sent (counted, logged).
    pub max_metrics_per_source: usize,
    /// SO_RCVBUF of the listening sockets, bytes.
    pub recv_buffer: usize,
    /// At most one log line per sender and reason per this many seconds.
    pub log_interval: u64,
    /// The gateway's counters are logged this often, seconds (0: never).
    pub stats_interval: u64,
    /// The gateway's counters are sent to Ganglia this often (0: never).
    pub self_metrics_interval: u64,
    /// Per send channel, packets sent back to back at most.
    pub send_burst: usize,
    /// Per send channel, value packets per second on average; a metadata
    /// packet counts as three, a host's heartbeat metadata as four (0:
    /// unpaced).
    pub max_send_rate: u64,
    /// A channel whose gmond is on this host follows that gmond's receive
    /// queue (read in /proc/self/net/udp) instead of `max_send_rate` and
    /// `send_burst`: it holds its packets while gmond does not read (while
    /// gmetad polls it) and sends as fast as gmond reads.
    pub follow_gmond_queue: bool,
    /// Seconds after which a unicast channel that does not follow its
    /// gmond's queue (gmond on another host) sends each packet a second
    /// time, if the token bucket has room, never after a newer one of its
    /// metric (0: never).
    pub resend_after: u64,
    /// At stop, seconds the queued packets may take to go out.
    pub drain_timeout: u64,
    /// "all": every value of every report; "changed": values that changed,
    /// the rest every `value_heartbeat`.
    pub send_values: String,
    /// With "changed": seconds before an unchanged value is sent again
    /// (default 60; TMAX grows by as much).
    pub value_heartbeat: Option<u32>,
    /// Counter continuity across gateway restarts ("": not kept).
    pub state_file: PathBuf,
    /// Seconds between writes of `state_file` (and at exit).
    pub state_interval: u64,
    /// Where to hear gmond's metadata requests (136): unicast addresses to
    /// bind or multicast groups to join, with port.
    pub metadata_requests: Vec<String>,
    /// false: nothing goes to gmond, only `xml_listen` has the data.
    pub send: bool,
    /// TCP addresses where gmetad polls the gateway for gmond's XML.
    pub xml_listen: Vec<String>,
    /// Who may poll `xml_listen`: networks or addresses.
    pub xml_allow: Vec<String>,
    /// The CLUSTER NAME of that XML.
    pub cluster_name: String,
}

impl Default for FileConfig {
    fn default() -> FileConfig {
        let strings = |list: &[&str]| list.iter().map(|s| s.to_string()).collect();
        FileConfig {
            listen: strings(DEFAULT_LISTEN),
            allow: Vec::new(),
            gmond_conf: None,
            channel: Vec::new(),
            metric_name: DEFAULT_NAME_TEMPLATE.into(),
            group_name: DEFAULT_GROUP_TEMPLATE.into(),
            exclude: DEFAULT_EXCLUDE.iter().map(|s| s.to_string()).collect(),
            include: Vec::new(),
            metadata_interval: 60,
            tmax: 60,
            dmax: 3600,
            max_sources: 10_000,
            max_metrics_per_source: 5_000,
            recv_buffer: 4 << 20,
            log_interval: 60,
            stats_interval: 300,
            self_metrics_interval: 60,
            send_burst: DEFAULT_SEND_BURST,
            max_send_rate: DEFAULT_SEND_RATE,
            follow_gmond_queue: true,
            resend_after: DEFAULT_RESEND_AFTER,
            drain_timeout: 5,
            send_values: "all".into(),
            value_heartbeat: None,
            state_file: DEFAULT_STATE_FILE.into(),
            state_interval: 60,
            metadata_requests: Vec::new(),
            send: true,
            xml_listen: Vec::new(),
            xml_allow: strings(DEFAULT_XML_ALLOW),
            cluster_name: "XRootD".into(),
        }
    }
}

/// One `[[channel]]` table.
#[derive(Clone, Debug, Deserialize, Serialize)]
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

impl FileConfig {
    pub fn parse(text: &str, path: &Path) -> Result<FileConfig, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError(format!("{}: {e}", path.display())))
    }

    pub fn read(path: &Path) -> Result<FileConfig, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read config {}: {e}", path.display())))?;
        Self::parse(&text, path)
    }

    /// The keys whose values differ between two files, in definition order.
    pub fn changed_keys(&self, other: &FileConfig) -> Vec<&'static str> {
        let (Ok(a), Ok(b)) = (toml::Table::try_from(self), toml::Table::try_from(other)) else {
            return Vec::new();
        };
        FileConfig::keys()
            .iter()
            .filter(|k| a.get(**k) != b.get(**k))
            .copied()
            .collect()
    }

    /// Every key the file takes, in definition order (what serde's derive
    /// knows of this struct: a deserializer that only asks).
    pub fn keys() -> &'static [&'static str] {
        struct Fields(Option<&'static [&'static str]>);
        impl<'de> serde::Deserializer<'de> for &mut Fields {
            type Error = serde::de::value::Error;
            fn deserialize_any<V: serde::de::Visitor<'de>>(
                self,
                _: V,
            ) -> Result<V::Value, Self::Error> {
                Err(serde::de::Error::custom("only the field names are asked"))
            }
            fn deserialize_struct<V: serde::de::Visitor<'de>>(
                self,
                _: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, Self::Error> {
                self.0 = Some(fields);
                Err(serde::de::Error::custom("only the field names are asked"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 u8 u16 u32 u64 f32 f64 char str string bytes
                byte_buf option unit unit_struct newtype_struct seq tuple
                tuple_struct map enum identifier ignored_any
            }
        }
        let mut f = Fields(None);
        let _ = FileConfig::deserialize(&mut f);
        f.0.unwrap_or(&[])
    }
}
