//! Every key of the configuration file, each defined once: one entry of
//! a [`key_table!`] gives its field (name and type), its default, its
//! range if it is a number, and everything said of it (what its value
//! looks like, what leaving it out means, whether a reload applies it,
//! which option overrides it, what it does). From that one table come
//! the struct serde reads the file into ([`FileConfig`], with unknown keys
//! refused by serde's `deny_unknown_fields`), its `impl Default`, the
//! [`KEYS`] that docs/configuration.md and the man page xrd2ganglia.toml(5)
//! ([`super::docs`]), the range checks ([`super::validate`]) and the
//! reload's warnings read, and the shipped config ([`super::shipped`]).
//! The file's keys are in `keys/file_keys.rs` (a piece per topic under
//! `keys/file_keys/`); the `[[channel]]` and `[[metric]]` tables'
//! ([`ChannelConfig`], [`MetricConfig`]) in `keys/tables.rs`; what a
//! number key takes ([`Range`]) in `keys/ranges.rs`.
//!
//! Why a `macro_rules!` table, and not a derive reading attributes: a
//! derive of our own is a proc-macro crate (its own directory, syn and
//! quote to build, code generated out of sight), while the table is plain
//! Rust beside the code that reads it, its expansion a struct, an `impl
//! Default` and a `const` array that `cargo expand` shows as written;
//! serde's derive still does the parsing, the unknown-key errors and
//! `check-config`'s printing, as before. Range checks go in the table's
//! order.

/// One key of the file: everything said of it but its value's type and
/// default (its field and `impl Default`, made from the same entry of its
/// [`key_table!`]). The docs page, the man page, the range checks and the
/// reload's warnings are made from these.
#[derive(Clone, Copy, Debug)]
pub struct Key {
    /// As written in the file (the field's name).
    pub name: &'static str,
    /// What its value looks like, for a reader ("list of ADDRESS:PORT").
    pub value: &'static str,
    /// What leaving it out means.
    pub absent: Absent,
    /// Whether a reload (SIGHUP) applies it.
    pub on_sighup: OnSighup,
    /// The command-line option that overrides it, and how.
    pub option: Option<&'static str>,
    /// What a number key takes (checked before anything else; shown on
    /// the docs page); None for every other key.
    pub range: Option<Range>,
    /// What it does: one paragraph, `code` in backticks.
    pub meaning: &'static str,
    /// What the shipped config (conf/xrd2ganglia.toml, [`super::shipped`])
    /// says before the key's `# key = default` line: its comment lines,
    /// each ending in a newline, from the blank line that parts it from
    /// the key before; "" where the line follows the key before's.
    pub shipped: &'static str,
    /// The key the shipped config shows this one after, where that is not
    /// the key before it in the table (None: in the table's order).
    pub shipped_after: Option<&'static str>,
}

/// What leaving a key out of the file means.
#[derive(Clone, Copy, Debug)]
pub enum Absent {
    /// Its default value, as serialising the default shows it
    /// (`FileConfig::default()`; a channel with only its `host`).
    Default,
    /// It has no value; what the gateway does then (a function: the text
    /// names constants).
    Means(fn() -> String),
    /// It must be given.
    Required,
}

/// Whether a reload (SIGHUP) applies a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnSighup {
    /// The reload applies it.
    AtOnce,
    /// It waits for the next restart: a reload that changes it logs it by
    /// name and keeps the running value. Why.
    Restart(&'static str),
}

impl Key {
    /// A key with only its name: the base a [`key_table!`] entry fills in
    /// (`on_sighup`, `option`, `range` and `absent` where they are not the
    /// usual `AtOnce`, `None`, `None` and `Default`).
    pub const fn named(name: &'static str) -> Key {
        Key {
            name,
            value: "",
            absent: Absent::Default,
            on_sighup: OnSighup::AtOnce,
            option: None,
            range: None,
            meaning: "",
            shipped: "",
            shipped_after: None,
        }
    }
}

/// One table of keys: the struct (each key a `pub` field, in order, with
/// its serde attributes), its `impl Default` (each key's `= default`), and
/// the `const` array of [`Key`]s (each named by its field, unless its
/// entry says `name:`, as a renamed field must), then fields that are no
/// key (serde skips them).
///
/// ```text
/// key_table! {
///     #[serde(deny_unknown_fields, default)]
///     pub struct FileConfig; pub const KEYS;
///     listen: Vec<String> = strings(DEFAULT_LISTEN) => {
///         value: "list of ADDRESS:PORT",
///         on_sighup: OnSighup::Restart(BOUND),
///         meaning: "...",
///     },
///     ...
/// }
/// ```
macro_rules! key_table {
    (
        $(#[$struct_attr:meta])*
        pub struct $name:ident; pub const $keys:ident;
        $(
            $(#[$field_attr:meta])*
            $field:ident : $ty:ty = $default:expr => { $($facts:tt)* }
        ),+ $(,)?
        $(
            ; not keys:
            $( $(#[$extra_attr:meta])* $extra:ident : $extra_ty:ty = $extra_default:expr ),+ $(,)?
        )?
    ) => {
        #[derive(Clone, Debug, serde::Deserialize, serde::Serialize)]
        $(#[$struct_attr])*
        pub struct $name {
            $( $(#[$field_attr])* pub $field: $ty, )+
            $($( $(#[$extra_attr])* pub $extra: $extra_ty, )+)?
        }

        impl Default for $name {
            fn default() -> $name {
                $name {
                    $( $field: $default, )+
                    $($( $extra: $extra_default, )+)?
                }
            }
        }

        /// Every key of the table, in its fields' order.
        pub const $keys: &[$crate::config::keys::Key] = &[
            $( $crate::config::keys::Key {
                $($facts)*
                ..$crate::config::keys::Key::named(stringify!($field))
            }, )+
        ];
    };
}

mod file_keys;
mod ranges;
mod tables;

pub use file_keys::{FileConfig, KEYS};
pub use ranges::{DAY, Range};
pub use tables::{CHANNEL_KEYS, ChannelConfig, METRIC_KEYS, MetricConfig};

/// Whether a change of `key` waits for a restart ([`OnSighup::Restart`]).
pub fn waits_for_restart(key: &str) -> bool {
    KEYS.iter()
        .any(|k| k.name == key && matches!(k.on_sighup, OnSighup::Restart(_)))
}

/// The keys whose change waits for a restart, in definition order.
pub fn restart_keys() -> impl Iterator<Item = &'static str> {
    KEYS.iter()
        .filter(|k| matches!(k.on_sighup, OnSighup::Restart(_)))
        .map(|k| k.name)
}
