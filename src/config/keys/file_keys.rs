//! The file's own keys: one entry each, in the order docs/configuration.md,
//! the man page and `check-config` show them ([`key_table!`]). The table
//! is written in pieces by topic, one file each under `file_keys/`: each
//! piece is a macro that adds its entries to those before it and hands
//! them all to the next piece, the last to [`key_table!`], so that the
//! one table makes the one struct. The pieces' entries are expanded here:
//! the names they use are this file's.

use std::path::PathBuf;

use super::ranges::{DAY, count, seconds};
use super::tables::{ChannelConfig, MetricConfig};
use super::{Absent, OnSighup};
use crate::config::ClusterConfig;
use crate::config::file::{
    DEFAULT_CONTROL_SOCKET, DEFAULT_GMOND_CONF, DEFAULT_LISTEN, DEFAULT_MAX_CLUSTERS,
    DEFAULT_RESEND_AFTER, DEFAULT_SEND_BURST, DEFAULT_SEND_RATE, DEFAULT_STATE_FILE,
    DEFAULT_VALUE_HEARTBEAT, DEFAULT_WARMUP_MAX, DEFAULT_XML_ALLOW, MAX_RESEND_AFTER,
};
use crate::mapping::{DEFAULT_EXCLUDE, DEFAULT_GROUP_TEMPLATE, DEFAULT_NAME_TEMPLATE};

/// Why a listening address waits for a restart.
const BOUND: &str = "its sockets stay bound";
/// Why the peer exchange's keys wait for a restart.
const PEER: &str = "the peer exchange is set up at the start";
/// Why a timer's interval waits for a restart.
const TIMER: &str = "its timer is set at the start";

/// A default list of strings.
fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[macro_use]
mod receiving;
#[macro_use]
mod limits;
#[macro_use]
mod sending;
#[macro_use]
mod serving;
#[macro_use]
mod pair;
#[macro_use]
mod detailed;
#[macro_use]
mod clusters;

/// The whole table, gathered by the pieces: the struct and its keys.
macro_rules! all_file_keys {
    ($($entries:tt)*) => {
        key_table! {
            /// The file as written; every key has its default (serde fills in
            /// what the file leaves out from `impl Default`), and a key the table
            /// does not have is refused, named.
            #[serde(deny_unknown_fields, default)]
            pub struct FileConfig; pub const KEYS;
            $($entries)*
            ; not keys:
            /// Whether the file names `state_file` (not a key: known from the
            /// text, for `serve`: a state file the file names must be usable, the
            /// built-in default may be passed over where it cannot be made).
            #[serde(skip)]
            state_file_given: bool = false,
        }
    };
}

receiving_keys! {}
