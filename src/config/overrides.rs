//! The command line's settings that replace the file's (`--listen`,
//! `--send`, `--state-file`, `--xml-listen`, `--no-send`), applied by
//! [`super::validate`] and by the channels' resolution.

use std::path::PathBuf;

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
