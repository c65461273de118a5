//! The shipped config, conf/xrd2ganglia.toml, made from the key table:
//! after its header, each key's own words ([`Key::shipped`]) and then its
//! default as a commented-out `# key = value` line, serialised from
//! `FileConfig::default()` as the docs show it. `xrd2ganglia generate-docs
//! DIR` writes it (`xrd2ganglia.toml`); a test holds the checked-in file
//! to [`text`].

use super::docs::{channel_defaults, file_defaults};
use super::file::{Absent, CHANNEL_KEYS, KEYS, Key};

/// The command that writes the shipped config, for the test that finds
/// the checked-in one out of date.
pub const REGENERATE: &str =
    "cargo run -- generate-docs target/docs && cp target/docs/xrd2ganglia.toml conf/";

/// What the shipped config says before its first key.
const HEADER: &str = "# xrd2ganglia configuration.\n\
            #\n\
            # Every key is optional. A line \"# key = value\" shows the key's default,\n\
            # commented out: uncomment and change it to set it (an upgrade then keeps\n\
            # your value, and the defaults of the keys you left alone follow the new\n\
            # release). Lines indented further (\"#   key = ...\") are examples. One key is\n\
            # set: allow, which is not its default (see there). Every key, its default\n\
            # and what a reload (SIGHUP) does with it: man 5 xrd2ganglia.toml. Check a\n\
            # file with\n\
            #   xrd2ganglia check-config --config /etc/xrd2ganglia/xrd2ganglia.toml\n\
            # which prints the effective settings or names the key and value that is wrong.\n\
            #\n\
            # On the xrootd/cmsd side, point every server at this gateway:\n\
            #   xrd.report <gateway-host>:3333 every 15s all sync\n";

/// conf/xrd2ganglia.toml.
pub fn text() -> String {
    let defaults = (file_defaults(), channel_defaults());
    let mut out = String::from(HEADER);
    for key in KEYS.iter().filter(|k| k.shipped_after.is_none()) {
        write_key(&mut out, key, &defaults);
    }
    out
}

/// `key`'s words and default line, then the keys shown after it.
fn write_key(out: &mut String, key: &Key, defaults: &(toml::Table, toml::Table)) {
    out.push_str(key.shipped);
    // A key the file sets live (`allow`) is not shown at its default too;
    // a table (`[[channel]]`...) is shown as a table, in its words.
    let set = |name: &str| {
        key.shipped
            .lines()
            .any(|l| l.starts_with(&format!("{name} = ")))
    };
    if matches!(key.absent, Absent::Default)
        && !key.value.starts_with("array of tables")
        && !set(key.name)
        && let Some(value) = defaults.0.get(key.name)
    {
        out.push_str(&format!("# {} = {value}\n", key.name));
    }
    // The commented `[[channel]]` table the words end with: its keys'
    // defaults.
    if key.name == "channel" {
        for k in CHANNEL_KEYS {
            if let Some(value) = defaults.1.get(k.name) {
                out.push_str(&format!("# {} = {value}\n", k.name));
            }
        }
    }
    for next in KEYS.iter().filter(|k| k.shipped_after == Some(key.name)) {
        write_key(out, next, defaults);
    }
}
