//! The configuration file: every key, its default and its meaning, defined
//! once. Each key is optional in the file (serde fills in its default);
//! [`super::validate`] turns the result into typed [`super::Settings`];
//! `check-config` prints the effective file by serialising it.
//!
//! A key's value and default are its field of [`FileConfig`] (and of
//! [`ChannelConfig`] for `[[channel]]`) and `impl Default`; everything
//! else said of it (what it means, what its value looks like, whether a
//! reload applies it, which option overrides it) is its [`Key`] in
//! [`KEYS`] (and [`CHANNEL_KEYS`], [`METRIC_KEYS`]), in `keys.rs`.
//! docs/configuration.md and the man page xrd2ganglia.toml(5)
//! ([`super::docs`]) and the reload's warnings are made from them. Tests
//! hold the tables to the structs' fields, both ways and in order, and
//! the shipped config and docs/configuration.md to the tables.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::ConfigError;
pub use super::keys::{
    Absent, CHANNEL_KEYS, KEYS, Key, METRIC_KEYS, OnSighup, restart_keys, waits_for_restart,
};
use crate::mapping::{DEFAULT_EXCLUDE, DEFAULT_GROUP_TEMPLATE, DEFAULT_NAME_TEMPLATE};

/// Value packets per second per send channel (a metadata packet counts as
/// three, a host's heartbeat metadata as four: what they cost gmond,
/// docs/gmond.md). Into a stock gmond 3.7.2 on the 2-core machine here (`cargo run
/// --release -p xrd2ganglia-load -- --only gmond`; README, "Delivery into gmond"): 0 drops
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
/// Where `xrd2ganglia status` asks the running gateway: in the directory
/// the unit's `RuntimeDirectory=xrd2ganglia` makes (0750, the service's
/// user and group).
pub const DEFAULT_CONTROL_SOCKET: &str = "/run/xrd2ganglia/control";
/// Who may poll `xml_listen` unless `xml_allow` says otherwise.
pub const DEFAULT_XML_ALLOW: &[&str] = &["127.0.0.0/8", "::1/128"];
/// Clusters named by sites at once: a federation's sites with room to
/// spare; a flood of invented sites stops here.
pub const DEFAULT_MAX_CLUSTERS: usize = 1000;
/// Seconds before an unchanged value is sent again, with `send_values =
/// "changed"`.
pub const DEFAULT_VALUE_HEARTBEAT: u32 = 60;

/// Seconds a starting gateway without a peer waits, at most, for every
/// source its state file named before its XML port listens.
pub const DEFAULT_WARMUP_MAX: u64 = 90;

/// The file as written; every key has its default. A field is a key:
/// what it means is its [`Key`] in [`KEYS`] (`keys.rs`).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FileConfig {
    pub listen: Vec<String>,
    pub allow: Vec<String>,
    pub gmond_conf: Option<PathBuf>,
    pub channel: Vec<ChannelConfig>,
    pub metric_name: String,
    pub group_name: String,
    pub exclude: Vec<String>,
    pub include: Vec<String>,
    pub metric: Vec<MetricConfig>,
    pub metadata_interval: u64,
    pub tmax: u32,
    pub dmax: u32,
    pub max_sources: usize,
    pub max_metrics_per_source: usize,
    pub recv_buffer: usize,
    pub log_interval: u64,
    pub stats_interval: u64,
    pub self_metrics_interval: u64,
    pub send_burst: usize,
    pub max_send_rate: u64,
    pub follow_gmond_queue: bool,
    pub resend_after: u64,
    pub drain_timeout: u64,
    pub send_values: String,
    pub value_heartbeat: Option<u32>,
    pub state_file: PathBuf,
    pub state_interval: u64,
    pub metadata_requests: Vec<String>,
    pub send: bool,
    pub xml_listen: Vec<String>,
    pub xml_allow: Vec<String>,
    pub cluster_name: String,
    pub control_socket: PathBuf,
    pub peer: Option<String>,
    pub peer_listen: Vec<String>,
    pub peer_allow: Vec<String>,
    pub peer_standby: bool,
    pub peer_gmond_xml: Option<String>,
    pub warmup_max: u64,
    pub recover_from: Vec<String>,
    pub detailed_vo_paths: Vec<String>,
    pub detailed_max_vos: usize,
    pub detailed_max_protocols: usize,
    pub detailed_max_domains: usize,
    pub detailed_per_user: bool,
    pub detailed_max_users: usize,
    pub detailed_max_logins: usize,
    /// Whether the file names `state_file` (not a key: known from the
    /// text, for `serve`: a state file the file names must be usable, the
    /// built-in default may be passed over where it cannot be made).
    #[serde(skip)]
    pub state_file_given: bool,
    pub cluster_by_site: bool,
    pub max_clusters: usize,
    pub cluster: Vec<ClusterConfig>,
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
            metric: Vec::new(),
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
            control_socket: DEFAULT_CONTROL_SOCKET.into(),
            peer: None,
            peer_listen: Vec::new(),
            peer_allow: Vec::new(),
            peer_standby: false,
            peer_gmond_xml: None,
            warmup_max: DEFAULT_WARMUP_MAX,
            recover_from: Vec::new(),
            detailed_vo_paths: Vec::new(),
            detailed_max_vos: 10,
            detailed_max_protocols: 4,
            detailed_max_domains: 10,
            detailed_per_user: false,
            detailed_max_users: 10,
            detailed_max_logins: 100_000,
            state_file_given: false,
            cluster_by_site: false,
            max_clusters: DEFAULT_MAX_CLUSTERS,
            cluster: Vec::new(),
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

/// One `[[metric]]` table.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MetricConfig {
    #[serde(rename = "match")]
    pub pattern: String,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub value_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slope: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub units: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

impl MetricConfig {
    /// Every key a `[[metric]]` table takes, in definition order.
    pub fn keys() -> &'static [&'static str] {
        field_names::<MetricConfig>()
    }
}

/// One `[[cluster]]` rule (docs/clusters.md).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sites: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latlong: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Its clusters, and only them, served on ports of their own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub xml_listen: Vec<String>,
    /// Who may poll them (None: the gateway's `xml_allow`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xml_allow: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub channel: Vec<ChannelConfig>,
}

impl ClusterConfig {
    /// Every key a `[[cluster]]` table takes, in definition order.
    pub fn keys() -> &'static [&'static str] {
        field_names::<ClusterConfig>()
    }
}

fn default_port() -> u16 {
    8649
}

fn default_ttl() -> u32 {
    1
}

/// The largest config file read: 50,000 `hosts` patterns fit in it, and
/// what it holds once read is bounded by it (9 million `exclude` patterns
/// took 1.9 GB before).
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

impl FileConfig {
    pub fn parse(text: &str, path: &Path) -> Result<FileConfig, ConfigError> {
        let mut file: FileConfig =
            toml::from_str(text).map_err(|e| ConfigError(format!("{}: {e}", path.display())))?;
        // Parsed once more as a plain table: whether the key is written.
        file.state_file_given = text
            .parse::<toml::Table>()
            .is_ok_and(|t| t.contains_key("state_file"));
        Ok(file)
    }

    pub fn read(path: &Path) -> Result<FileConfig, ConfigError> {
        use std::io::Read as _;
        let cannot =
            |e: std::io::Error| ConfigError(format!("cannot read config {}: {e}", path.display()));
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_CONFIG_BYTES + 1).read_to_string(&mut text))
            .map_err(cannot)?;
        if text.len() as u64 > MAX_CONFIG_BYTES {
            return Err(ConfigError(format!(
                "config {}: larger than {} MiB, which no config needs (its lists and rules are read whole)",
                path.display(),
                MAX_CONFIG_BYTES >> 20
            )));
        }
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

    /// Every key the file takes, in definition order.
    pub fn keys() -> &'static [&'static str] {
        field_names::<FileConfig>()
    }
}

impl ChannelConfig {
    /// Every key a `[[channel]]` table takes, in definition order.
    pub fn keys() -> &'static [&'static str] {
        field_names::<ChannelConfig>()
    }
}

/// The fields of a struct as serde's derive knows them (its keys in a
/// file): a deserializer that only asks.
fn field_names<T: serde::de::DeserializeOwned>() -> &'static [&'static str] {
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
    let _ = T::deserialize(&mut f);
    f.0.unwrap_or(&[])
}
