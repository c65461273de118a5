//! Issue 42, item 5 (the rule of item 1, `src/ganglia/path_name.rs`): the
//! real `check-config` refuses a cluster name gmetad would make a
//! misplaced directory of, with exit 2 and a message naming the key.

use std::process::Command;

use xrd2ganglia_testkit::Scratch;

const BIN: &str = env!("CARGO_BIN_EXE_xrd2ganglia");

#[test]
fn check_config_refuses_blank_and_reserved_cluster_names_with_exit_2() {
    let dir = Scratch::new("names");
    let file = dir.path().join("x.toml");
    for (config, starts) in [
        (
            "cluster_name = \" \"",
            "cluster_name = \" \": must not be blank",
        ),
        (
            "cluster_name = \"__summaryinfo__\"",
            "cluster_name = \"__summaryinfo__\": __SummaryInfo__ is gmetad's summary directory",
        ),
        (
            "[[cluster]]\nname = \" x\"\nsites = [\"A\"]",
            "cluster[0] \" x\": name = \" x\": must not be blank",
        ),
    ] {
        std::fs::write(
            &file,
            format!("send = false\nxml_listen = [\"127.0.0.1:0\"]\n{config}\n"),
        )
        .unwrap();
        let out = Command::new(BIN)
            .args(["check-config", "--config"])
            .arg(&file)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{config}: {err}");
        assert!(
            err.contains(&format!("xrd2ganglia: {starts}")),
            "{config}: {err}"
        );
    }
}
