//! The cargo-fuzz targets (fuzz/), run briefly as a smoke test: they build,
//! the seeds (real records, g-streams and packets) reach the code under
//! test, the fuzzer finds new paths from them, and a short run finds no
//! crash. Longer runs are for developers: see README.
//!
//! Needs cargo-fuzz (`cargo install cargo-fuzz`; .ci/run installs it). It
//! runs on the stable toolchain with RUSTC_BOOTSTRAP=1 for libFuzzer's flags.

use xrd2ganglia_testkit as common;

use std::path::Path;
use std::process::Command;

use common::Scratch;

/// What one target must show in its short run.
struct Floors {
    seconds: u32,
    /// Seeds libFuzzer keeps (those that add coverage).
    corpus: u64,
    /// Edges the seeds alone cover (INITED).
    seed_cov: u64,
    /// Inputs run in `seconds`.
    runs: u64,
}

/// A number after `key` in one of libFuzzer's lines.
fn field(line: &str, key: &str) -> Option<u64> {
    let rest = &line[line.find(key)? + key.len()..];
    let digits: String = rest
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

fn fuzz(target: &str, floors: Floors) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    // A fresh corpus of the seeds only: what earlier runs found would
    // make the seeds' figures mean nothing.
    let scratch = Scratch::new(&format!("fuzz-{target}"));
    let seed = Command::new("bash")
        .arg(dir.join("seed.sh"))
        .arg(scratch.path())
        .status()
        .expect("run fuzz/seed.sh");
    assert!(seed.success());
    let corpus = scratch.path().join(target);
    let seeds = std::fs::read_dir(&corpus).unwrap().count() as u64;
    let out = Command::new("cargo")
        .current_dir(&dir)
        .env("RUSTC_BOOTSTRAP", "1")
        .args(["fuzz", "run", "-O", "-s", "none", target])
        .arg(&corpus)
        .args([
            "--",
            &format!("-max_total_time={}", floors.seconds),
            "-print_final_stats=1",
        ])
        .output()
        .expect("cargo fuzz (install it with `cargo install cargo-fuzz`)");
    let err = String::from_utf8_lossy(&out.stderr);
    let tail = &err[err.len().saturating_sub(4000)..];
    assert!(out.status.success(), "fuzz target {target} failed:\n{tail}");
    let inited = err
        .lines()
        .find(|l| l.contains("INITED"))
        .unwrap_or_else(|| panic!("{target}: no INITED line:\n{tail}"));
    let done = err
        .lines()
        .find(|l| l.contains("DONE"))
        .unwrap_or_else(|| panic!("{target}: no DONE line:\n{tail}"));
    let (kept, seed_cov) = (field(inited, "corp:"), field(inited, "cov:"));
    let end_cov = field(done, "cov:");
    let runs = err
        .lines()
        .find_map(|l| field(l, "stat::number_of_executed_units:"))
        .unwrap_or(0);
    let found = err
        .lines()
        .find_map(|l| field(l, "stat::new_units_added:"))
        .unwrap_or(0);
    println!(
        "fuzz {target}: {seeds} seeds, {kept:?} kept, cov {seed_cov:?} -> {end_cov:?}, {runs} runs in {} s, {found} new inputs, no crash",
        floors.seconds
    );
    assert!(
        kept >= Some(floors.corpus),
        "{target}: seeds kept {kept:?} of {seeds}:\n{inited}"
    );
    assert!(
        seed_cov >= Some(floors.seed_cov),
        "{target}: the seeds cover {seed_cov:?}:\n{inited}"
    );
    assert!(end_cov > seed_cov, "{target}: nothing new covered:\n{done}");
    assert!(found > 0, "{target}: no new input found:\n{tail}");
    assert!(runs >= floors.runs, "{target}: only {runs} runs:\n{tail}");
}

/// Floors at about half of what was measured, the seeds' coverage at 92%
/// (without the real records it is 1,488) (2-core VM under load,
/// 2026-11-25: summary 41 of 44 seeds kept, cov 1786 -> 2751, 16,535 runs
/// in 20 s; xdr 5 of 5, cov 117 -> 243, 7,047,978 runs in 10 s).
#[test]
fn fuzz_targets_smoke() {
    fuzz(
        "summary",
        Floors {
            seconds: 20,
            corpus: 30,
            seed_cov: 1650,
            runs: 2000,
        },
    );
    fuzz(
        "xdr",
        Floors {
            seconds: 10,
            corpus: 4,
            seed_cov: 80,
            runs: 100_000,
        },
    );
    // Issue 46 (2-core VM shared with other builds, 2026-11-28, 60 s
    // each: state_file 2 of 2 seeds, cov 511 -> 2563, 4,930,719 runs;
    // peer 1 of 1, cov 364 -> 1601, 13,565,009 runs; no crash).
    fuzz(
        "state_file",
        Floors {
            seconds: 10,
            corpus: 2,
            seed_cov: 470,
            runs: 50_000,
        },
    );
    fuzz(
        "peer",
        Floors {
            seconds: 10,
            corpus: 1,
            seed_cov: 330,
            runs: 300_000,
        },
    );
}
