//! The RPM: built offline from this checkout by packaging/build-rpm.sh (with
//! %check), then inspected and installed into a scratch root.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::Scratch;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn find_rpm(dir: &Path, suffix: &str) -> PathBuf {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.to_string_lossy().ends_with(suffix) {
                return p;
            }
        }
    }
    panic!("no *{suffix} under {}", dir.display());
}

/// What rpmlint may report, each explained in the spec's header: signing,
/// packager and group are the site's (errors); the rest are warnings.
const RPMLINT_ACCEPTED: &[(&str, &str)] = &[
    ("E", "no-signature"),
    ("E", "no-packager-tag"),
    ("E", "no-group-tag"),
    ("W", "no-url-tag"),
    ("W", "invalid-url"),
    ("W", "no-buildroot-tag"),
    ("W", "invalid-license"),
    ("W", "manpage-not-compressed"),
    ("W", "no-manual-page-for-binary"),
];

fn rpmlint_accepts_only_the_explained(paths: &[PathBuf]) {
    let out = Command::new("rpmlint")
        .args(paths)
        .output()
        .expect("rpmlint (Debian package rpmlint; .ci/run installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    let spec = std::fs::read_to_string(&paths[0]).unwrap();
    let mut reported = 0;
    for line in text.lines() {
        // `name.arch: E: code details` or `name.spec:7: W: code details`.
        let Some((level, code)) = ["E", "W"].iter().find_map(|level| {
            let rest = line.split(&format!(": {level}: ")).nth(1)?;
            Some((*level, rest.split_whitespace().next()?))
        }) else {
            continue;
        };
        reported += 1;
        assert!(
            RPMLINT_ACCEPTED.contains(&(level, code)),
            "rpmlint: {line}\n(not among the accepted; the whole report:)\n{text}"
        );
        assert!(
            spec.contains(code),
            "rpmlint's {code} is accepted but the spec does not explain it"
        );
    }
    // Not vacuous: rpmlint ran and said what it always says of these.
    assert!(reported >= 6 && text.contains("checked"), "{text}");
}

#[test]
fn rpm_builds_offline_installs_and_runs() {
    let top = Scratch::new("rpm");
    let manifest = env!("CARGO_MANIFEST_DIR");
    // A clean environment: nothing from the cargo running this test leaks in.
    let mut build = Command::new("bash");
    build
        .arg(Path::new(manifest).join("packaging/build-rpm.sh"))
        .current_dir(manifest)
        .env_clear();
    for var in ["PATH", "HOME", "CARGO_HOME", "RUSTUP_HOME", "TMPDIR"] {
        if let Ok(v) = std::env::var(var) {
            build.env(var, v);
        }
    }
    build.env("RPM_TOPDIR", top.path());
    let log = run(&mut build);
    assert!(
        log.contains("xrd2ganglia 0.1.0")
            || log.contains("+ ./target/release/xrd2ganglia --version"),
        "%check did not run:\n{log}"
    );

    let rpm = find_rpm(top.path(), ".x86_64.rpm");
    let srpm = find_rpm(top.path(), ".src.rpm");

    // Files.
    let files = run(Command::new("rpm").arg("-qpl").arg(&rpm));
    for f in [
        "/usr/bin/xrd2ganglia",
        "/usr/lib/systemd/system/xrd2ganglia.service",
        "/etc/xrd2ganglia/xrd2ganglia.toml",
        "/etc/sysconfig/xrd2ganglia",
        "/usr/lib/sysusers.d/xrd2ganglia.conf",
        "/usr/share/man/man1/xrd2ganglia.1",
        "/usr/share/man/man1/xrd2ganglia-serve.1",
        "/usr/share/man/man1/xrd2ganglia-gmetric.1",
        "/usr/share/bash-completion/completions/xrd2ganglia",
        "/usr/share/zsh/site-functions/_xrd2ganglia",
        "/usr/libexec/xrd2ganglia/gmetric",
    ] {
        assert!(
            files.lines().any(|l| l.starts_with(f)),
            "{f} not in the RPM:\n{files}"
        );
    }
    // Every path is where EL and Fedora put it, whatever rpm built the
    // package (Debian's rpm puts _sharedstatedir in /usr/com): nothing
    // outside these, nothing under /var (the state directory is systemd's).
    let allowed = [
        "/etc/xrd2ganglia",
        "/etc/sysconfig/xrd2ganglia",
        "/usr/bin/xrd2ganglia",
        "/usr/lib/systemd/system/xrd2ganglia.service",
        "/usr/lib/sysusers.d/xrd2ganglia.conf",
        "/usr/lib/.build-id",
        "/usr/libexec/xrd2ganglia",
        "/usr/share/man/man1/xrd2ganglia",
        "/usr/share/doc/xrd2ganglia",
        "/usr/share/bash-completion/completions/xrd2ganglia",
        "/usr/share/zsh/site-functions/_xrd2ganglia",
        "/usr/share/fish/vendor_completions.d/xrd2ganglia.fish",
    ];
    for f in files.lines() {
        assert!(
            allowed.iter().any(|a| f.starts_with(a)),
            "{f}: not a path EL or Fedora would use:\n{files}"
        );
    }
    // Man pages gzipped, as EL's and Fedora's brp-compress leaves them.
    assert!(
        files
            .lines()
            .any(|l| l == "/usr/share/man/man1/xrd2ganglia-serve.1.gz"),
        "{files}"
    );

    // The platform floor: the highest glibc symbol version the binary
    // needs, as rpm found it, is the one README states for this build host.
    let requires = run(Command::new("rpm").args(["-qp", "--requires"]).arg(&rpm));
    let floor = requires
        .lines()
        .filter_map(|l| l.strip_prefix("libc.so.6(GLIBC_")?.strip_suffix(")(64bit)"))
        .max_by_key(|v| {
            v.split('.')
                .map(|n| n.parse::<u32>().unwrap_or(0))
                .collect::<Vec<_>>()
        })
        .unwrap_or_else(|| panic!("no glibc requirement:\n{requires}"));
    assert_eq!(floor, "2.34", "{requires}");
    let readme = std::fs::read_to_string(Path::new(manifest).join("README.md")).unwrap();
    assert!(
        readme.contains(&format!("`GLIBC_{floor}`")),
        "README does not state the floor GLIBC_{floor}"
    );

    // rpmlint on the spec and both RPMs: nothing but what the spec's
    // header accepts, each for its reason.
    rpmlint_accepts_only_the_explained(&[
        Path::new(manifest).join("packaging/xrd2ganglia.spec"),
        rpm.clone(),
        srpm.clone(),
    ]);

    // Both configuration files are %config(noreplace).
    let flags = run(Command::new("rpm")
        .args(["-qp", "--qf", "[%{FILEFLAGS:fflags} %{FILENAMES}\n]"])
        .arg(&rpm));
    for f in [
        "/etc/xrd2ganglia/xrd2ganglia.toml",
        "/etc/sysconfig/xrd2ganglia",
    ] {
        assert!(
            flags.lines().any(|l| l == format!("cn {f}")),
            "{f} not config(noreplace):\n{flags}"
        );
    }
    // Scriptlets: the user is created before install, the unit handled after.
    let scripts = run(Command::new("rpm").args(["-qp", "--scripts"]).arg(&rpm));
    assert!(scripts.contains("preinstall scriptlet"), "{scripts}");
    assert!(
        scripts.contains("useradd -r -g xrd2ganglia") || scripts.contains("sysusers"),
        "{scripts}"
    );
    assert!(
        scripts.contains("systemctl --no-reload preset xrd2ganglia.service")
            || scripts.contains("systemd"),
        "{scripts}"
    );
    assert!(
        scripts.contains("try-restart xrd2ganglia.service") || scripts.contains("systemd"),
        "{scripts}"
    );
    // The source RPM carries the sources and the vendored crates.
    let sources = run(Command::new("rpm").arg("-qpl").arg(&srpm));
    for f in [
        "xrd2ganglia-0.1.0.tar.gz",
        "xrd2ganglia-0.1.0-vendor.tar.gz",
        "xrd2ganglia.spec",
        "xrd2ganglia.sysusers",
    ] {
        assert!(
            sources.lines().any(|l| l == f),
            "{f} not in the SRPM:\n{sources}"
        );
    }

    // Install into a scratch root and run what was installed.
    let root = Scratch::new("rpmroot");
    run(Command::new("rpm")
        .arg("--root")
        .arg(root.path())
        .arg("--initdb"));
    run(Command::new("rpm")
        .args(["-i", "--nodeps", "--noscripts", "--root"])
        .arg(root.path())
        .arg(&rpm));
    let bin = root.path().join("usr/bin/xrd2ganglia");
    assert_eq!(
        run(Command::new(&bin).arg("--version")).trim(),
        format!("xrd2ganglia {}", env!("CARGO_PKG_VERSION"))
    );
    let conf = root.path().join("etc/xrd2ganglia/xrd2ganglia.toml");
    let effective = run(Command::new(&bin)
        .args(["check-config", "--config"])
        .arg(&conf)
        .args(["--send", "127.0.0.1:8649"]));
    assert!(
        effective.contains("listen = [\"0.0.0.0:3333\", \"[::]:3333\"]"),
        "{effective}"
    );
    assert!(
        effective.contains("allow = [\"127.0.0.0/8\""),
        "{effective}"
    );
    let gmetric = run(Command::new(root.path().join("usr/libexec/xrd2ganglia/gmetric")).arg("-V"));
    assert!(
        gmetric.starts_with("gmetric 3.7.2 (xrd2ganglia "),
        "{gmetric}"
    );

    // The installed unit's hardening, as systemd scores it.
    let unit = root
        .path()
        .join("usr/lib/systemd/system/xrd2ganglia.service");
    let out = Command::new("systemd-analyze")
        .args(["security", "--offline=yes"])
        .arg(&unit)
        .output()
        .expect("systemd-analyze (Debian package systemd; .ci/run installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    let score: f64 = text
        .lines()
        .find_map(|l| {
            l.split("Overall exposure level for xrd2ganglia.service: ")
                .nth(1)
        })
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in:\n{text}"));
    assert!(score <= 2.0, "exposure level {score} (want <= 2.0)");
}
