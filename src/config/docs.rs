//! The configuration's documentation, made from the key definitions
//! ([`KEYS`], [`CHANNEL_KEYS`]) and the defaults (`FileConfig::default()`
//! serialised): docs/configuration.md ([`markdown`]) and the man page
//! xrd2ganglia.toml(5) ([`man_page`]). `xrd2ganglia generate-docs DIR`
//! writes both; a test holds the checked-in page to [`markdown`].
//!
//! The prose around the keys is written here once, with `code` in
//! backticks, and rendered for each format.

use roff::{Inline, Roff, bold, italic, roman};

pub use super::exit_codes::{EXIT_CODES, ExitCode};
use super::file::{
    Absent, CHANNEL_KEYS, ChannelConfig, FileConfig, KEYS, Key, METRIC_KEYS, OnSighup,
};
use super::{DEFAULT_CONFIG, DEFAULT_GMOND_CONF, DEFAULT_SEND};

/// What a key's value looks like, with its range where it has one
/// ("seconds, 0 to 3600").
fn value_text(key: &Key) -> String {
    match key.range {
        Some(r) => format!("{}, {}", key.value, r.text()),
        None => key.value.to_string(),
    }
}

/// The command that writes the generated pages, for the page's header and
/// the test that finds the checked-in page out of date.
pub const REGENERATE: &str =
    "cargo run -- generate-docs target/docs && cp target/docs/configuration.md docs/";

/// What the `[[metric]]` section of the docs says first.
const METRIC_INTRO: &str = "Each `[[metric]]` table describes variables the catalog does not know \
    (`[[metric]]` `match = \"myplug.requests\"` `slope = \"counter\"` `units = \"requests/s\"`); \
    `check-config` refuses a bad `type`, `slope` or pattern and a repeated `match` (exit 2), \
    naming the table; a reload applies them. Its keys:";

/// The defaults of the file's keys, as the file would write them.
pub(super) fn file_defaults() -> toml::Table {
    toml::Table::try_from(FileConfig::default()).unwrap_or_default()
}

/// The defaults of a `[[channel]]` table's keys: a channel with only its
/// required `host`, serialised.
pub(super) fn channel_defaults() -> toml::Table {
    let channel: Option<ChannelConfig> = toml::from_str("host = \"\"").ok();
    let mut table = channel
        .and_then(|c| toml::Table::try_from(c).ok())
        .unwrap_or_default();
    table.remove("host");
    table
}

/// What leaving `key` out means, as the docs show it (`code` in
/// backticks); None where the key says `Absent::Default` but the defaults
/// have no value for it (a test holds the two to each other).
fn default_text(key: &Key, defaults: &toml::Table) -> Option<String> {
    match key.absent {
        Absent::Default => defaults.get(key.name).map(|v| format!("`{v}`")),
        Absent::Means(what) => Some(what()),
        Absent::Required => Some("required".into()),
    }
}

/// Every key's default as the docs show it, for the test that holds
/// [`Absent`] to the defaults: (key, shown, has a serialised default).
pub fn defaults_shown() -> Vec<(&'static str, Option<String>, bool)> {
    let (file, channel) = (file_defaults(), channel_defaults());
    let file_keys = KEYS.iter().map(|k| (k, &file));
    let channel_keys = CHANNEL_KEYS.iter().map(|k| (k, &channel));
    let none = toml::Table::new();
    let metric_keys = METRIC_KEYS.iter().map(|k| (k, &none));
    file_keys
        .chain(channel_keys)
        .chain(metric_keys)
        .map(|(k, d)| (k.name, default_text(k, d), d.contains_key(k.name)))
        .collect()
}

/// "at once", or "restart" and why.
fn on_sighup(key: &Key) -> String {
    match key.on_sighup {
        OnSighup::AtOnce => "at once".into(),
        OnSighup::Restart(why) => format!("restart ({why})"),
    }
}

/// The paragraphs before the keys.
fn introduction() -> Vec<String> {
    vec![
        format!(
            "The gateway reads one TOML file: the one `--config FILE` (`-c`) names, which \
             must exist; without `--config`, `{DEFAULT_CONFIG}` if it exists; else the \
             try-out settings built in from `conf/try-out.toml` (loopback only, nothing sent \
             unless `--send` is given, no state file; every key it does not set at its \
             default). Every key is optional."
        ),
        format!(
            "A key the gateway does not take, a value of the wrong type or out of range stops \
             the start with a message that names the key and the value (exit 2), and so does a \
             file over {} MiB (what a config holds once read is bounded by it). \
             `xrd2ganglia check-config [--config FILE]` checks a file as a reload would (the \
             values and the send hosts, not the addresses and the state file a running gateway \
             holds) and prints the effective settings: every key with its value, the command \
             line applied, the send channels resolved.",
            crate::config::file::MAX_CONFIG_BYTES >> 20
        ),
        "`dump` and `gweb` take `--config` too, for the naming (`metric_name`, \
         `group_name`, `include`, `exclude`, `cluster_name`); where the file sends the data \
         (`send`, `channel`, `gmond_conf`, `xml_listen`) does not apply to them."
            .into(),
    ]
}

/// Where packets go: the list, first match wins.
fn where_packets_go() -> Vec<String> {
    let (host, port) = DEFAULT_SEND;
    vec![
        "`--send HOST:PORT` on the command line (repeatable, unicast);".into(),
        "the `[[channel]]` tables of the file;".into(),
        format!(
            "the `udp_send_channel` sections of `gmond_conf` (`{DEFAULT_GMOND_CONF}` unless \
             named) when that file exists, the way gmetric finds gmond;"
        ),
        format!("otherwise unicast to {host}:{port}, a gmond on this host;"),
        "nowhere with `send = false` or `--no-send` (`xml_listen` then has the data).".into(),
    ]
}

/// What follows the list of where packets go.
fn packets_note() -> String {
    let (host, port, ttl) = crate::gmetric::DEFAULT_CHANNEL;
    format!(
        "The gmetric drop-in (`xrd2ganglia gmetric`) finds its channels as gmetric does, \
         in `-c FILE` or `{DEFAULT_GMOND_CONF}`, and without either sends where gmond's \
         built-in default channel does: multicast to {host}:{port}, ttl {ttl}. So without a \
         gmond.conf, `serve` sends unicast to {}:{} while `gmetric` sends multicast.",
        DEFAULT_SEND.0, DEFAULT_SEND.1
    )
}

/// What a reload does.
fn reload() -> Vec<String> {
    vec![
        "SIGHUP (`systemctl reload xrd2ganglia`) reads the file again, with the command \
         line the gateway started with. A file that does not pass (as `check-config` would \
         say) is refused with a log line, and the running configuration stays."
            .into(),
        "Otherwise the keys marked \"at once\" take effect between two datagrams: the send \
         channels are opened again and the replaced ones drain their queues for at most \
         `drain_timeout`; counter offsets are kept. A changed key marked \"restart\" keeps \
         its running value and is logged by name (`SIGHUP: stats_interval changed: it \
         takes effect at the next restart (the running value stays)`). `send = false` is \
         refused while the running gateway has no XML port."
            .into(),
    ]
}

/// The options that are no key, after the table of those that override one.
fn other_options() -> Vec<String> {
    vec![
        "`--config FILE` (`-c`) names the file (above). `serve --log-level FILTER` sets \
         the log filter (`error`, `warn`, `info`, `debug`, `trace` or a tracing filter); \
         given, it wins over `RUST_LOG`, which sets the filter otherwise (default \
         `info`); logs go to stderr. `check-config` takes every option of `serve`, \
         `--log-level` too (it checks the filter), so that one set of options serves \
         both. See `xrd2ganglia serve --help`."
            .into(),
    ]
}

/// Escapes a table cell's text for markdown.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// A page being written, a line at a time.
#[derive(Default)]
struct Page(String);

impl Page {
    fn line(&mut self, s: &str) {
        self.0.push_str(s);
        self.0.push('\n');
    }

    /// Paragraphs, each after an empty line.
    fn paragraphs(&mut self, paragraphs: impl IntoIterator<Item = String>) {
        for p in paragraphs {
            self.line("");
            self.line(&p);
        }
    }

    /// A table: its header row, the separator, then `rows`.
    fn table(&mut self, header: &str, rows: impl IntoIterator<Item = String>) {
        self.line(header);
        let columns = header.matches('|').count().saturating_sub(1);
        self.line(&format!("|{}", "---|".repeat(columns)));
        for row in rows {
            self.line(&row);
        }
    }

    /// A table's keys (`[[channel]]`, `[[metric]]`): key, value, default,
    /// meaning.
    fn key_table(&mut self, keys: &[Key], defaults: &toml::Table) {
        self.table(
            "| key | value | default | meaning |",
            keys.iter().map(|key| {
                let default = default_text(key, defaults).unwrap_or_default();
                format!(
                    "| `{}` | {} | {} | {} |",
                    key.name,
                    cell(&value_text(key)),
                    cell(&default),
                    cell(key.meaning)
                )
            }),
        );
    }
}

/// docs/configuration.md.
pub fn markdown() -> String {
    let mut page = Page::default();
    page.line("# Configuration");
    page.line("");
    page.line(&format!(
        "<!-- Made from the key definitions (src/config/keys.rs) by src/config/docs.rs: \
         edit those, then `{REGENERATE}`. -->"
    ));
    page.paragraphs(introduction());
    keys_section(&mut page);
    tables_sections(&mut page);
    page.line("");
    page.line("## Reload (SIGHUP)");
    page.paragraphs(reload());
    command_line_section(&mut page);
    exit_codes_section(&mut page);
    page.0
}

/// The file's keys, one row each.
fn keys_section(page: &mut Page) {
    page.line("");
    page.line("## Keys");
    page.line("");
    page.line(
        "\"On SIGHUP\" says whether a reload applies the key at once or it waits for the \
         next restart ([Reload](#reload-sighup)).",
    );
    page.line("");
    let defaults = file_defaults();
    page.table(
        "| key | value | default | on SIGHUP | meaning |",
        KEYS.iter().map(|key| {
            // An array of tables is written as its tables are.
            let name = if key.value.starts_with("array of tables") {
                format!("[[{}]]", key.name)
            } else {
                key.name.to_string()
            };
            let default = default_text(key, &defaults).unwrap_or_default();
            let meaning = match key.option {
                Some(o) => format!("{} Command line: {o}.", key.meaning),
                None => key.meaning.to_string(),
            };
            format!(
                "| `{name}` | {} | {} | {} | {} |",
                cell(&value_text(key)),
                cell(&default),
                on_sighup(key),
                cell(&meaning)
            )
        }),
    );
}

/// `[[channel]]` (and where packets go) and `[[metric]]`.
fn tables_sections(page: &mut Page) {
    page.line("");
    page.line("## `[[channel]]`");
    page.line("");
    page.line("Each `[[channel]]` table is one send channel; a reload opens them again. Its keys:");
    page.line("");
    page.key_table(CHANNEL_KEYS, &channel_defaults());
    page.line("");
    page.line("Where packets go, first match wins:");
    page.line("");
    for (i, item) in where_packets_go().iter().enumerate() {
        page.line(&format!("{}. {item}", i + 1));
    }
    page.paragraphs([packets_note()]);
    page.line("");
    page.line("## `[[metric]]`");
    page.line("");
    page.line(METRIC_INTRO);
    page.line("");
    page.key_table(METRIC_KEYS, &toml::Table::new());
}

/// The options that stand in for keys.
fn command_line_section(page: &mut Page) {
    page.line("");
    page.line("## Command line");
    page.line("");
    page.line("`serve` and `check-config` take these options in place of keys:");
    page.line("");
    page.table(
        "| key | command line |",
        KEYS.iter()
            .filter_map(|key| Some(format!("| `{}` | {} |", key.name, cell(key.option?)))),
    );
    page.paragraphs(other_options());
}

/// Every command's exit codes.
fn exit_codes_section(page: &mut Page) {
    page.line("");
    page.line("## Exit codes");
    page.line("");
    page.line(
        "`xrd2ganglia`'s own commands exit 2 when they cannot start as configured, 3 when \
         they cannot start now for a reason outside the config that may pass (the unit \
         restarts on 3, never on 2), and 1 when something fails after the start; the \
         gmetric and mpxstats drop-ins keep their originals' codes. `--help` and \
         `--version` exit 0.",
    );
    page.line("");
    page.table(
        "| command | exit | when |",
        EXIT_CODES
            .iter()
            .map(|e| format!("| `{}` | {} | {} |", e.command, e.code, cell(e.when))),
    );
}

/// Text with `code` in backticks, as roff: code in bold.
fn inline(text: &str) -> Vec<Inline> {
    text.split('`')
        .enumerate()
        .filter(|(_, part)| !part.is_empty())
        .map(|(i, part)| if i % 2 == 1 { bold(part) } else { roman(part) })
        .collect()
}

/// One key as a tagged paragraph: its name and default, then its meaning,
/// then its facts.
fn roff_key(page: &mut Roff, key: &Key, defaults: &toml::Table) {
    let default = default_text(key, defaults).unwrap_or_default();
    let mut tag = vec![bold(key.name)];
    match key.absent {
        Absent::Default => tag.push(roman(" = ")),
        Absent::Means(_) => tag.push(roman(" (left out: ")),
        Absent::Required => tag.push(roman(" (")),
    }
    tag.extend(inline(&default));
    if !matches!(key.absent, Absent::Default) {
        tag.push(roman(")"));
    }
    page.control("TP", []).text(tag).text(inline(key.meaning));
    let mut facts = vec![roff::line_break(), italic("Value:"), roman(" ")];
    facts.extend(inline(&value_text(key)));
    facts.push(roman(". "));
    facts.push(italic("On SIGHUP:"));
    facts.push(roman(format!(" {}.", on_sighup(key))));
    if let Some(o) = key.option {
        facts.push(roman(" "));
        facts.push(italic("Command line:"));
        facts.push(roman(" "));
        facts.extend(inline(o));
        facts.push(roman("."));
    }
    page.text(facts);
}

/// Paragraphs of the man page, `.PP` between them.
fn roff_paragraphs(page: &mut Roff, paragraphs: &[String]) {
    for (i, p) in paragraphs.iter().enumerate() {
        if i > 0 {
            page.control("PP", []);
        }
        page.text(inline(p));
    }
}

/// The man page xrd2ganglia.toml(5).
pub fn man_page() -> String {
    let version = format!("xrd2ganglia {}", env!("CARGO_PKG_VERSION"));
    let mut page = Roff::new();
    page.control(
        "TH",
        ["XRD2GANGLIA.TOML", "5", "\"\"", &version, "File Formats"],
    )
    .control("SH", ["NAME"])
    .text([roman(
        "xrd2ganglia.toml - configuration file of the xrd2ganglia gateway",
    )])
    .control("SH", ["SYNOPSIS"])
    .text([roman(DEFAULT_CONFIG)])
    .control("SH", ["DESCRIPTION"]);
    roff_paragraphs(&mut page, &introduction());
    page.control("SH", ["KEYS"]);
    let defaults = file_defaults();
    for key in KEYS {
        roff_key(&mut page, key, &defaults);
    }
    page.control("SH", ["CHANNELS"]).text(inline(
        "Each `[[channel]]` table is one send channel; a reload opens them again. Its keys:",
    ));
    let defaults = channel_defaults();
    for key in CHANNEL_KEYS {
        roff_key(&mut page, key, &defaults);
    }
    page.control("PP", [])
        .text([roman("Where packets go, first match wins:")]);
    for (i, item) in where_packets_go().iter().enumerate() {
        page.control("IP", [format!("{}.", i + 1).as_str(), "4"])
            .text(inline(item));
    }
    page.control("PP", []).text(inline(&packets_note()));
    page.control("SH", ["METRICS"]).text(inline(METRIC_INTRO));
    let none = toml::Table::new();
    for key in METRIC_KEYS {
        roff_key(&mut page, key, &none);
    }
    page.control("SH", ["RELOAD"]);
    roff_paragraphs(&mut page, &reload());
    page.control("SH", ["COMMAND LINE"]).text(inline(
        "`serve` and `check-config` take these options in place of keys:",
    ));
    for key in KEYS {
        if let Some(o) = key.option {
            page.control("TP", [])
                .text([bold(key.name)])
                .text(inline(o));
        }
    }
    for p in other_options() {
        page.control("PP", []).text(inline(&p));
    }
    files_and_see_also(&mut page);
    page.render()
}

/// The man page's FILES and SEE ALSO.
fn files_and_see_also(page: &mut Roff) {
    page.control("SH", ["FILES"])
        .control("TP", [])
        .text([roman(DEFAULT_CONFIG)])
        .text([roman("The configuration file.")])
        .control("TP", [])
        .text([roman(DEFAULT_GMOND_CONF)])
        .text(inline(
            "gmond's, where the send channels are found (`gmond_conf`).",
        ))
        .control("SH", ["SEE ALSO"])
        .text([
            bold("xrd2ganglia"),
            roman("(1), "),
            bold("xrd2ganglia-check-config"),
            roman("(1), "),
            bold("xrd2ganglia-serve"),
            roman("(1), "),
            bold("gmond.conf"),
            roman("(5)"),
        ]);
}
