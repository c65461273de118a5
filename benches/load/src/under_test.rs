//! The gateway binary under test and the repository the lab reads its
//! records from: the lab is a crate of its own, so the gateway is not one
//! of its targets (no `CARGO_BIN_EXE_xrd2ganglia`); it is the
//! `xrd2ganglia` that `cargo build --workspace` put beside the lab's own
//! executable (the same target/<profile>/), or `--gateway PATH`.
//!
//! A stale gateway is the risk: a figure taken from a binary older than
//! the source it is reported for. So the one found beside the lab is
//! refused when any of its build inputs was modified after it was built:
//! the files cargo recorded for it (its dep-info, `xrd2ganglia.d` beside
//! it) and the test cargo itself makes (modification times) when it
//! decides whether to rebuild, so `cargo build` always cures a refusal;
//! one `stat` per file, about eighty. A binary named with `--gateway` is
//! taken as it is: it may come from another checkout, whose sources are
//! not these.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::SystemTime;

/// The repository's root (the lab's manifest is benches/load/Cargo.toml).
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

static GATEWAY: OnceLock<PathBuf> = OnceLock::new();

/// The gateway under test, as [`locate`] chose it.
pub(crate) fn gateway() -> &'static Path {
    GATEWAY.get().expect("the gateway is located first")
}

/// Finds the gateway under test (`--gateway`, else beside the lab) and
/// checks it; on a missing or stale one, says why and exits with 2.
pub(crate) fn locate(given: Option<PathBuf>) -> &'static Path {
    let path = match given {
        Some(path) => {
            if !path.is_file() {
                refuse(&format!("--gateway {}: no such file", path.display()));
            }
            path
        }
        None => beside_the_lab(),
    };
    GATEWAY.get_or_init(|| path)
}

fn beside_the_lab() -> PathBuf {
    let exe = std::env::current_exe()
        .unwrap_or_else(|e| refuse(&format!("cannot tell where the lab runs from: {e}")));
    let path = exe.with_file_name("xrd2ganglia");
    // The build command that cures a refusal, for the lab's own profile.
    let build = match exe.parent().and_then(Path::file_name) {
        Some(dir) if dir == "release" => "cargo build --release --workspace",
        _ => "cargo build --workspace",
    };
    let built = match std::fs::metadata(&path).and_then(|m| m.modified()) {
        Ok(t) => t,
        Err(_) => refuse(&format!(
            "no gateway binary at {} (build it with the lab: `{build}`, \
             or name one with --gateway PATH)",
            path.display()
        )),
    };
    if let Some((input, changed)) = newest_input(&path)
        && changed > built
    {
        refuse(&format!(
            "{} is older than {}, one of its build inputs: it would measure \
             a stale gateway (rebuild it: `{build}`, or name a binary with \
             --gateway PATH)",
            path.display(),
            input.display()
        ));
    }
    path
}

/// The most recently modified of the files cargo recorded as `gateway`'s
/// inputs (its dep-info, `xrd2ganglia.d` beside it: every source of the
/// binary and of the library; a path with a space is written `\ `).
/// None when there is no such record (then nothing can be told cheaply).
fn newest_input(gateway: &Path) -> Option<(PathBuf, SystemTime)> {
    let text = std::fs::read_to_string(gateway.with_extension("d")).ok()?;
    let (_, inputs) = text.lines().next()?.split_once(": ")?;
    inputs
        .replace("\\ ", "\0")
        .split_whitespace()
        .map(|f| PathBuf::from(f.replace('\0', " ")))
        .filter_map(|f| Some((std::fs::metadata(&f).ok()?.modified().ok()?, f)))
        .max()
        .map(|(t, f)| (f, t))
}

fn refuse(why: &str) -> ! {
    eprintln!("load: {why}");
    std::process::exit(2);
}
