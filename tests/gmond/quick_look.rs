//! README's quick look into a gmond on this host, run as written against a
//! real gmond with the gmond.conf a distribution installs: Debian's stock
//! one (tests/data/gmond.conf.debian, EPEL's alike), whose channels are
//! multicast (239.2.11.71:8649, gmond's receive channel bound to the
//! group), and a unicast one. The command names no destination: it sends
//! where /etc/ganglia/gmond.conf's `udp_send_channel` says, as the gmonds
//! there do. (It said `--send 127.0.0.1:8649`: refused by a stock gmond.)
//!
//! Each run is in a network namespace of its own (multicast never leaves
//! it; gmond's 8649 and the try-out's 3333 are always free there) and a
//! mount namespace whose /etc/ganglia/gmond.conf is the one tried.

use std::path::Path;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_xrd2ganglia");
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// README's quick look command, with the binary it names.
fn quick_look() -> String {
    let readme = std::fs::read_to_string(Path::new(ROOT).join("README.md")).unwrap();
    let after = readme
        .split("A quick look into a gmond")
        .nth(1)
        .expect("README has a quick look into a gmond");
    after
        .lines()
        .find(|l| l.starts_with("target/release/xrd2ganglia serve "))
        .expect("the quick look's command")
        .to_string()
}

/// The stock gmond.conf with unicast channels instead: gmond hears
/// 127.0.0.1:8649, the gateway sends there.
fn unicast(stock: &str) -> String {
    stock
        .replace(
            "udp_send_channel { \n  mcast_join = 239.2.11.71 \n  port = 8649 \n  ttl = 1 \n}",
            "udp_send_channel { \n  host = 127.0.0.1 \n  port = 8649 \n  ttl = 1 \n}",
        )
        .replace(
            "udp_recv_channel { \n  mcast_join = 239.2.11.71 \n  port = 8649 \n  bind = 239.2.11.71 \n}",
            "udp_recv_channel { \n  port = 8649 \n}",
        )
}

const SCRIPT: &str = r#"
set -u
ip link set lo up && ip link set lo multicast on && ip route add 224.0.0.0/4 dev lo || exit 90
mount --bind "$CONF" /etc/ganglia/gmond.conf || exit 91
gmond -c /etc/ganglia/gmond.conf -f >"$DIR/gmond.log" 2>&1 &
g=$!
x=""
trap 'kill $g $x 2>/dev/null' EXIT
n=0
until "$BIN" poll 127.0.0.1:8649 >/dev/null 2>&1; do
  n=$((n + 1)); [ "$n" -lt 200 ] || { echo "gmond did not answer"; exit 92; }; sleep 0.05
done
sh -c "exec $QUICK_LOOK" 2>"$DIR/gw.log" &
x=$!
n=0
until grep -q serving "$DIR/gw.log"; do
  n=$((n + 1)); [ "$n" -lt 200 ] || { echo "no serving"; cat "$DIR/gw.log"; exit 93; }; sleep 0.05
done
"$BIN" replay tests/data/records/try-out.jsonl --to 127.0.0.1:3333 || exit 94
n=0
until "$BIN" poll --metrics 127.0.0.1:8649 2>/dev/null | grep -q 'xrootd\.'; do
  n=$((n + 1)); [ "$n" -lt 300 ] || { echo "nothing of the gateway's in gmond"; cat "$DIR/gw.log"; exit 95; }; sleep 0.1
done
echo "== in gmond"
"$BIN" poll --metrics 127.0.0.1:8649 | grep -c 'xrootd\.'
echo "== gateway's log"
cat "$DIR/gw.log"
"#;

#[test]
fn readme_s_quick_look_reaches_a_stock_multicast_gmond_and_a_unicast_one() {
    let command = quick_look().replacen("target/release/xrd2ganglia", BIN, 1);
    let stock =
        std::fs::read_to_string(Path::new(ROOT).join("tests/data/gmond.conf.debian")).unwrap();
    let unicast = unicast(&stock);
    assert_ne!(
        unicast, stock,
        "the stock gmond.conf's channels are not as expected"
    );
    assert!(!unicast.contains("239.2.11.71"), "{unicast}");
    for (what, conf) in [("stock (multicast)", stock), ("unicast", unicast)] {
        let dir = xrd2ganglia_testkit::Scratch::new("quick-look");
        let path = dir.path().join("gmond.conf");
        std::fs::write(&path, conf).unwrap();
        let out = Command::new("unshare")
            .args([
                "--net",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                SCRIPT,
            ])
            .env("BIN", BIN)
            .env("CONF", &path)
            .env("DIR", dir.path())
            .env("QUICK_LOOK", &command)
            .current_dir(ROOT)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let said = format!(
            "{}{}\ngmond:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(dir.path().join("gmond.log")).unwrap_or_default()
        );
        assert!(
            out.status.success(),
            "{what}: `{command}`: {}\n{said}",
            out.status
        );
        let metrics: usize = said
            .split("== in gmond\n")
            .nth(1)
            .and_then(|s| s.lines().next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0);
        assert!(metrics > 100, "{what}: {metrics} metrics in gmond\n{said}");
        assert!(!said.contains("gmond is not listening"), "{what}:\n{said}");
        eprintln!("{what}: {metrics} xrootd metrics in gmond");
    }
}
