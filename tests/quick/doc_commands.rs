//! README and docs/ hold: every relative link leads somewhere, every
//! `xrd2ganglia` command they show is one the binary takes, no command
//! needs a tool nothing installs, README's Try it runs as written (and
//! beside it troubleshooting.md's `status` checks and tools.md's `poll`;
//! troubleshooting.md's listeners on its own), and each counter has one
//! name in `status`, the log line and Ganglia. The blocks that cannot run
//! here, and why: docs/development.md ("The docs hold"). The blocks that
//! need the real mpxstats or gmetad: tests/tools/doc_commands.rs.

use xrd2ganglia_testkit as common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::markdown::blocks;
use xrd2ganglia::events::{COUNTERS, KERNEL_DROPS};

const BIN: &str = env!("CARGO_BIN_EXE_xrd2ganglia");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

mod readme_try_it;

/// README, CHANGELOG, every page of docs/ and the records' README (README
/// links it), as (path relative to the repository, text).
fn pages() -> Vec<(PathBuf, String)> {
    let mut paths = vec![
        PathBuf::from("README.md"),
        PathBuf::from("CHANGELOG.md"),
        PathBuf::from("tests/data/records/README.md"),
    ];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(Path::new(ROOT).join("docs"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| p.strip_prefix(ROOT).unwrap().to_path_buf())
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(Path::new(ROOT).join(&p)).unwrap();
            (p, text)
        })
        .collect()
}

/// The page's text outside fenced code blocks, line by line.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// GitHub's anchor for a heading: lowercase; letters, digits, `-` and `_`
/// kept, spaces made `-`, the rest dropped; a repeated one gets `-1`...
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for line in prose(text) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#').trim();
        let slug: String = heading
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let n = seen.entry(slug.clone()).or_insert(0);
        out.insert(if *n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        });
        *n += 1;
    }
    out
}

/// Every `[text](target)` of the page's prose whose target is relative.
fn relative_links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = &rest[..end];
            if !target.contains("://") && !target.starts_with("mailto:") {
                out.push(target.to_string());
            }
            rest = &rest[end..];
        }
    }
    out
}

#[test]
fn no_relative_link_in_readme_or_docs_is_broken() {
    let mut broken = Vec::new();
    for (page, text) in pages() {
        let dir = page.parent().unwrap_or(Path::new(""));
        for link in relative_links(&text) {
            let (file, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() {
                page.clone()
            } else {
                dir.join(file)
            };
            let path = Path::new(ROOT).join(&target);
            if !path.exists() {
                broken.push(format!("{}: {link}: no such file", page.display()));
                continue;
            }
            if !anchor.is_empty() && path.extension().is_some_and(|e| e == "md") {
                let there = std::fs::read_to_string(&path).unwrap();
                if !anchors(&there).contains(anchor) {
                    broken.push(format!("{}: {link}: no such heading", page.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The words of a shell line up to its first comment, pipe, redirection or
/// list operator.
fn command_words(line: &str) -> Vec<&str> {
    let line = line.split(" #").next().unwrap_or("");
    line.split_whitespace()
        .take_while(|w| !["|", "&&", "||", ";", ">", "2>&1", "<", "&"].contains(w))
        .take_while(|w| !w.starts_with('>'))
        .collect()
}

/// Each `xrd2ganglia` command of every page's code blocks, as its words
/// after the binary, with where it is.
fn xrd2ganglia_commands() -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for (page, text) in pages() {
        for (lang, lines) in blocks(&text) {
            if !["sh", "bash", "console", ""].contains(&lang.as_str()) {
                continue;
            }
            for line in &lines {
                // A command may follow a prompt or a pipe.
                for part in line.trim_start_matches("$ ").split(" | ") {
                    let words = command_words(part.trim());
                    let Some((first, args)) = words.split_first() else {
                        continue;
                    };
                    let is_binary = *first == "xrd2ganglia"
                        || first.ends_with("/xrd2ganglia")
                        || (*first == "cargo" && args.first() == Some(&"run"));
                    if !is_binary {
                        continue;
                    }
                    let args: Vec<String> = if *first == "cargo" {
                        let at = args.iter().position(|w| *w == "--");
                        at.map_or(Vec::new(), |at| {
                            args[at + 1..].iter().map(|s| s.to_string()).collect()
                        })
                    } else {
                        args.iter().map(|s| s.to_string()).collect()
                    };
                    out.push((format!("{}: {line}", page.display()), args));
                }
            }
        }
    }
    out
}

/// Every `xrd2ganglia SUBCOMMAND --option` README and the docs show names
/// a subcommand the binary has and options that subcommand takes
/// (`--help` lists them); gmetric and mpxstats keep their own options.
#[test]
fn every_xrd2ganglia_command_in_the_docs_is_one_the_binary_takes() {
    let commands = xrd2ganglia_commands();
    assert!(commands.len() > 20, "{commands:?}");
    let mut help: BTreeMap<String, String> = BTreeMap::new();
    let mut wrong = Vec::new();
    for (at, args) in &commands {
        let Some(sub) = args.first() else { continue };
        if sub.starts_with('-') || ["gmetric", "mpxstats"].contains(&sub.as_str()) {
            continue;
        }
        let text = help.entry(sub.clone()).or_insert_with(|| {
            let out = Command::new(BIN).args([sub, "--help"]).output().unwrap();
            if out.status.success() {
                String::from_utf8_lossy(&out.stdout).into_owned()
            } else {
                String::new()
            }
        });
        if text.is_empty() {
            wrong.push(format!("{at}: no subcommand {sub}"));
            continue;
        }
        for option in args.iter().filter(|a| a.starts_with("--") && a.len() > 2) {
            let option = option.split('=').next().unwrap_or_default();
            let listed = text
                .split(|c: char| c.is_whitespace() || c == ',')
                .any(|w| w == option);
            if !listed {
                wrong.push(format!("{at}: {sub} takes no {option}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// No code block tells a reader to run `nc` or `tcpdump`, which nothing
/// the install steps name installs, unless its page says how to install it.
#[test]
fn no_command_needs_a_tool_the_docs_do_not_install() {
    let mut wrong = Vec::new();
    for (page, text) in pages() {
        for (lang, lines) in blocks(&text) {
            if !["sh", "bash", ""].contains(&lang.as_str()) {
                continue;
            }
            for line in &lines {
                for part in line.trim_start_matches("$ ").split(" | ") {
                    let words = command_words(part.trim());
                    for tool in ["nc", "tcpdump", "netcat", "socat"] {
                        let installs = [
                            format!("dnf install {tool}"),
                            format!("apt-get install {tool}"),
                        ];
                        if words.first() == Some(&tool)
                            && !installs.iter().any(|i| text.contains(i.as_str()))
                        {
                            wrong.push(format!("{}: {line}", page.display()));
                        }
                    }
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `status`, the `counters:` log line and the gateway's Ganglia metrics
/// name each counter alike: the log line and `status` by its field, the
/// metric `xrd2ganglia.` and the same name (derived from the table, so a
/// counter added later is held too).
#[test]
fn each_counter_has_one_name_in_status_the_log_line_and_ganglia() {
    let mut wrong = Vec::new();
    for spec in COUNTERS.iter().chain([&KERNEL_DROPS]) {
        let metric = spec.metric.strip_prefix("xrd2ganglia.").unwrap_or("");
        if metric != spec.field {
            wrong.push(format!("{} is sent as {}", spec.field, spec.metric));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// README's Try it, run as written from the repository's root: after the
/// first command (`cargo run --release -- serve`: the same binary, run
/// here as the test's build of it), every line of the Try it block exits
/// 0 and shows what its comment says it shows.
///
/// The try-out settings are fixed (127.0.0.1:3333 and :8659, the control
/// socket /tmp/xrd2ganglia-try-out-UID/control), and README's commands find
/// the gateway by them: two runs of the suite on one host (a user's and
/// CI's, or a monitoring host's own try-out gateway) would take each
/// other's. So the test runs again in a network and a mount namespace of
/// its own (loopback up, a /tmp of its own), where they are always free:
/// `unshare`, as root or, with a user namespace, as any user. Where no
/// namespace can be made, it runs here if they are free, and says so and
/// runs nothing if something else holds them: a skip, said, never a pass.
#[test]
fn readme_try_it_runs_as_written() {
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    readme_try_it::alone(&format!("{module}::readme_try_it_runs_as_written"));
}

/// Troubleshooting's drops command, run as written on a socket of this
/// test's (its port for gmond's 8649): it prints the listening socket's
/// drops once, not also those of a socket connected to it (a gateway's,
/// whose remote column holds the same port).
#[test]
fn the_troubleshooting_drops_command_matches_gmond_s_socket_only() {
    let page = std::fs::read_to_string(Path::new(ROOT).join("docs/troubleshooting.md")).unwrap();
    let line = blocks(&page)
        .into_iter()
        .flat_map(|(_, lines)| lines)
        .find(|l| l.contains("/proc/net/udp") && l.contains("21C9"))
        .expect("troubleshooting.md reads gmond's drops from /proc/net/udp");
    let gmond = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = gmond.local_addr().unwrap().port();
    let gateway = UdpSocket::bind("127.0.0.1:0").unwrap();
    gateway.connect(gmond.local_addr().unwrap()).unwrap();
    let command = line.replace("21C9", &format!("{port:04X}"));
    let out = Command::new("sh").arg("-c").arg(&command).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 1, "{command}:\n{text}");
}

/// The message of every `tracing::LEVEL!(...)` call in `src` (not its
/// tests), with where it is: the call's first string literal that follows
/// its `(` or a `,` (the fields before it are `name = value`).
fn log_messages() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "tests") {
                    walk(&p, out);
                }
            } else if p.extension().is_some_and(|e| e == "rs")
                && p.file_name().is_some_and(|n| n != "tests.rs")
            {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(&Path::new(ROOT).join("src"), &mut files);
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        // A file's unit tests log nothing an admin meets.
        let text = text.split("#[cfg(test)]").next().unwrap_or("");
        for level in ["warn", "info", "error"] {
            let call = format!("tracing::{level}!(");
            let mut rest = text;
            while let Some(at) = rest.find(&call) {
                rest = &rest[at + call.len()..];
                let bytes = rest.as_bytes();
                let (mut i, mut after_separator) = (0, true);
                let mut message = None;
                while i < bytes.len() {
                    match bytes[i] {
                        b'"' => {
                            let start = i + 1;
                            let mut j = start;
                            while j < bytes.len() && bytes[j] != b'"' {
                                j += if bytes[j] == b'\\' { 2 } else { 1 };
                            }
                            if after_separator {
                                message = Some(rest[start..j].to_string());
                                break;
                            }
                            i = j + 1;
                            after_separator = false;
                        }
                        b',' => {
                            after_separator = true;
                            i += 1;
                        }
                        b';' => break,
                        c if c.is_ascii_whitespace() => i += 1,
                        _ => {
                            after_separator = false;
                            i += 1;
                        }
                    }
                }
                let Some(m) = message else { continue };
                // Source line continuations (`\` then the next line's indent).
                let mut joined = String::new();
                let mut parts = m.split("\\\n");
                joined.push_str(parts.next().unwrap_or(""));
                for p in parts {
                    joined.push_str(p.trim_start());
                }
                let rel = file.strip_prefix(ROOT).unwrap().display().to_string();
                out.push((rel, joined));
            }
        }
    }
    out
}

/// The fixed text of a log message: its longest piece between `{...}`
/// placeholders, Rust escapes undone.
fn fixed_text(message: &str) -> String {
    let mut pieces = Vec::new();
    let mut piece = String::new();
    let mut depth = 0;
    for c in message.replace("\\\"", "\"").replace('`', "").chars() {
        match c {
            '{' => {
                depth += 1;
                pieces.push(std::mem::take(&mut piece));
            }
            '}' if depth > 0 => depth -= 1,
            _ if depth == 0 => piece.push(c),
            _ => {}
        }
    }
    pieces.push(piece);
    pieces
        .into_iter()
        .map(|p| {
            p.trim()
                .trim_matches(|c: char| c == ':' || c == ';' || c == ',')
                .trim()
                .to_string()
        })
        .max_by_key(|p| p.len())
        .unwrap_or_default()
}

/// Every line the gateway logs at info, warn or error can be found in
/// docs/ by its text: the longest fixed piece of each message appears on
/// some page (line breaks and backticks aside).
#[test]
fn every_log_line_is_findable_in_the_docs_by_its_text() {
    let docs: String = pages()
        .into_iter()
        .filter(|(p, _)| p.starts_with("docs"))
        .map(|(_, t)| {
            t.replace('`', "")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n");
    let messages = log_messages();
    assert!(messages.len() > 40, "{messages:?}");
    let missing: Vec<String> = messages
        .iter()
        .filter_map(|(file, m)| {
            let fixed = fixed_text(m)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            (!fixed.is_empty() && !docs.contains(&fixed)).then(|| format!("{file}: {fixed:?}"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "{} log messages docs/ does not show:\n{}",
        missing.len(),
        missing.join("\n")
    );
}

/// README names both tiers' commands, and they are what runs: `.ci/run`
/// runs the `cargo test` README says it does, and the quick tier's command
/// is the one docs/development.md and the quick binary give, naming test
/// targets that exist.
#[test]
fn readme_s_test_commands_are_what_ci_and_the_quick_tier_run() {
    let read = |p: &str| std::fs::read_to_string(Path::new(ROOT).join(p)).unwrap();
    let (readme, ci) = (read("README.md"), read(".ci/run"));
    let section = readme
        .split("## Two commands")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("README has a \"Two commands\" section");
    let lines: Vec<String> = blocks(section)
        .into_iter()
        .flat_map(|(_, lines)| lines)
        .map(|l| l.trim().to_string())
        .collect();
    assert!(lines.iter().any(|l| l == ".ci/run"), "{lines:?}");
    let full = "cargo test --locked --all-targets";
    assert!(section.contains(&format!("`{full}`")), "{section}");
    assert!(
        ci.lines().any(|l| l.starts_with(full)),
        ".ci/run does not run {full}"
    );
    // The load lab is a crate of its own, outside `cargo test`: .ci/run
    // runs its smoke pass as README says.
    let smoke = "cargo run --locked -p xrd2ganglia-load -- --smoke";
    assert!(section.contains(&format!("`{smoke}`")), "{section}");
    assert!(ci.contains(smoke), ".ci/run does not run {smoke}");
    let quick: Vec<&str> = lines
        .iter()
        .map(String::as_str)
        .filter(|l| l.starts_with("cargo test "))
        .collect();
    assert_eq!(quick, ["cargo test --lib --bins --test quick"], "{lines:?}");
    for page in ["docs/development.md", "tests/quick/main.rs"] {
        assert!(read(page).contains(&format!("`{}`", quick[0])), "{page}");
    }
    for target in quick[0].split(" --test ").skip(1) {
        let main = format!("tests/{target}/main.rs");
        assert!(Path::new(ROOT).join(&main).exists(), "{main}");
    }
}
