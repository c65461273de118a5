//! The cargo-fuzz targets (fuzz/), run briefly as a smoke test: they build,
//! and a short run from the seed corpora finds no crash. Longer runs are
//! for developers: see README.
//!
//! Needs cargo-fuzz (`cargo install cargo-fuzz`; .ci/run installs it). It
//! runs on the stable toolchain with RUSTC_BOOTSTRAP=1 for libFuzzer's flags.

use std::path::Path;
use std::process::Command;

fn fuzz(target: &str, seconds: u32) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let seed = Command::new("bash")
        .arg(dir.join("seed.sh"))
        .status()
        .expect("run fuzz/seed.sh");
    assert!(seed.success());
    let out = Command::new("cargo")
        .current_dir(&dir)
        .env("RUSTC_BOOTSTRAP", "1")
        .args(["fuzz", "run", "-O", "-s", "none", target])
        .arg(format!("corpus/{target}"))
        .args([
            "--",
            &format!("-max_total_time={seconds}"),
            "-print_final_stats=1",
        ])
        .output()
        .expect("cargo fuzz (install it with `cargo install cargo-fuzz`)");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "fuzz target {target} failed:\n{}",
        &err[err.len().saturating_sub(4000)..]
    );
    let runs = err
        .lines()
        .find_map(|l| l.strip_prefix("stat::number_of_executed_units:"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    assert!(runs > 100, "{target}: only {runs} runs:\n{err}");
    println!("fuzz {target}: {runs} runs in {seconds} s, no crash");
}

#[test]
fn fuzz_targets_smoke() {
    fuzz("summary", 20);
    fuzz("xdr", 10);
}
