//! No test, benchmark or script of the repository stops processes by name.
//!
//! The suite runs on monitoring hosts too, where gmond, gmetad and xrootd
//! are the site's own: killing "every gmond" there takes the site's
//! monitoring down. Whatever the suite starts it stops by the pid it got
//! when starting it. This test reads every file that could run (sources,
//! scripts, packaging, CI) and fails on a kill by name: the tools that take
//! a name, or a pid looked up by name and handed to kill.

use std::path::{Path, PathBuf};

/// Words that kill by name (built at run time, so this file is checked
/// too without flagging itself).
fn by_name_tools() -> [String; 3] {
    [
        ["p", "kill"].concat(),
        ["kill", "all"].concat(),
        ["kill", "all5"].concat(),
    ]
}

/// Lookups of pids by name: harmless alone, a kill by name with `kill`.
fn by_name_lookups() -> [String; 2] {
    [["pid", "of"].concat(), ["p", "grep"].concat()]
}

fn words(line: &str) -> impl Iterator<Item = &str> {
    line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

/// Whether a line kills processes by name.
fn kills_by_name(line: &str) -> bool {
    let tools = by_name_tools();
    let lookups = by_name_lookups();
    let mut kill = false;
    let mut lookup = false;
    for w in words(line) {
        if tools.iter().any(|t| t == w) {
            return true;
        }
        kill |= w == "kill" || w == "xargs";
        lookup |= lookups.iter().any(|l| l == w);
    }
    kill && lookup
}

/// Every file that could run: all of the checkout but build output,
/// version control, vendored crates, documentation and recorded data.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            let skip = matches!(
                name.as_str(),
                "target" | "vendor" | "corpus" | "artifacts" | "coverage" | "data"
            ) || (name.starts_with('.') && name != ".ci");
            if !skip {
                files(&path, out);
            }
        } else if kind.is_file() && !name.ends_with(".md") {
            out.push(path);
        }
    }
}

#[test]
fn the_detector_tells_a_kill_by_name_from_a_kill_by_pid() {
    let [tool, all, _] = by_name_tools();
    let [pid_of, p_grep] = by_name_lookups();
    for flagged in [
        format!("{tool} -x gmond 2>/dev/null || true"),
        format!("{all} gmetad"),
        format!("kill -9 $({pid_of} gmond)"),
        format!("kill $({p_grep} -f xrd2ganglia)"),
        format!("{p_grep} gmond | xargs kill"),
        format!("let _ = Command::new(\"{tool}\").args([\"-f\", &conf]).status();"),
    ] {
        assert!(kills_by_name(&flagged), "not flagged: {flagged}");
    }
    for fine in [
        "let _ = self.child.kill();",
        "unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };",
        "kill -TERM \"$pid\"",
        "systemctl stop gmond",
        "a killer feature, killed by its pid",
        &format!("{p_grep} -x gmond >/dev/null && echo running"),
    ] {
        assert!(!kills_by_name(fine), "flagged: {fine}");
    }
}

#[test]
fn nothing_in_the_repository_kills_processes_by_name() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    files(root, &mut all);
    all.sort();
    let this = root.join(file!());
    assert!(all.contains(&this), "{} is not checked", this.display());
    for must in ["tests", "benches", ".ci/run", "packaging", "src"] {
        assert!(
            all.iter().any(|p| p.starts_with(root.join(must))),
            "nothing read under {must}"
        );
    }
    let mut found = Vec::new();
    for path in &all {
        // Binary files cannot hold a script.
        let Ok(text) = std::fs::read_to_string(path) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            if kills_by_name(line) {
                found.push(format!(
                    "{}:{}: {}",
                    path.strip_prefix(root).unwrap_or(path).display(),
                    n + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "processes killed by name (on a monitoring host that takes the site's own daemons down; \
         stop what was started by the pid it got):\n{}",
        found.join("\n")
    );
}
