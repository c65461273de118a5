//! The configuration file as read. Each key is optional in the file
//! (serde fills in its default);
//! [`super::validate`] turns the result into typed [`super::Settings`];
//! `check-config` prints the effective file by serialising it.
//!
//! Each key is one entry of a table in `keys.rs` (`keys/file_keys.rs`,
//! `keys/tables.rs`), which makes [`FileConfig`] (and [`ChannelConfig`],
//! [`MetricConfig`]), their `impl Default` and the [`Key`]s that
//! docs/configuration.md, the man page xrd2ganglia.toml(5)
//! ([`super::docs`]), the range checks and the reload's warnings read.
//! Here: the defaults those entries name, the `[[cluster]]` rule, and
//! reading a file.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::ConfigError;
pub use super::keys::{
    Absent, CHANNEL_KEYS, ChannelConfig, FileConfig, KEYS, Key, METRIC_KEYS, MetricConfig,
    OnSighup, restart_keys, waits_for_restart,
};

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
