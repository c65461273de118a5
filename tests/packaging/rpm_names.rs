//! The RPM's names on each target, from the spec as rpm reads it with
//! that target's dist tag (`rpmspec -q --define 'dist .el9'`), and the
//! commands README and the docs show for them; the firewalld reload of
//! `%post`. Fast: nothing is built (tests/packaging/rpm.rs builds and installs).

use std::path::Path;
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const SPEC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/packaging/xrd2ganglia.spec");

/// The file names rpmbuild gives the packages (binary ones, or with
/// `srpm` the source RPM) with `dist` as the dist tag ("" for none).
fn names(dist: &str, srpm: bool) -> Vec<String> {
    let mut cmd = Command::new("rpmspec");
    cmd.arg("-q");
    if srpm {
        cmd.arg("--srpm");
    }
    if !dist.is_empty() {
        cmd.args(["--define", &format!("dist {dist}")]);
    }
    let out = cmd
        .args(["--qf", "%{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}.rpm\\n", SPEC])
        .output()
        .expect("rpmspec (Debian package rpm; .ci/run installs it)");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .map(|l| {
            if srpm {
                l.replace(".x86_64.rpm", ".src.rpm")
            } else {
                l.to_string()
            }
        })
        .collect()
}

/// Whether the shell glob `pattern` matches `name` (sh's own `case`).
fn glob_matches(pattern: &str, name: &str) -> bool {
    Command::new("sh")
        .args([
            "-c",
            "case \"$1\" in $2) exit 0;; esac; exit 1",
            "sh",
            name,
            pattern,
        ])
        .status()
        .unwrap()
        .success()
}

/// Every RPM file named in a code block of README or docs/ after
/// `dnf install`, `rpmbuild --rebuild` or `mock ... --rebuild`.
fn documented_rpm_paths() -> Vec<(String, String)> {
    let mut pages = vec![Path::new(ROOT).join("README.md")];
    for e in std::fs::read_dir(Path::new(ROOT).join("docs"))
        .unwrap()
        .flatten()
    {
        if e.path().extension().is_some_and(|x| x == "md") {
            pages.push(e.path());
        }
    }
    let mut out = Vec::new();
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        for line in text.lines() {
            let words: Vec<&str> = line
                .split(" #")
                .next()
                .unwrap_or("")
                .split_whitespace()
                .collect();
            let installs = words.starts_with(&["dnf", "install"])
                || words.starts_with(&["rpmbuild", "--rebuild"])
                || (words.first() == Some(&"mock") && words.contains(&"--rebuild"));
            if !installs {
                continue;
            }
            for w in words.iter().filter(|w| w.ends_with(".rpm")) {
                out.push((format!("{}: {line}", page.display()), w.to_string()));
            }
        }
    }
    out
}

/// On EL8, EL9, Fedora and a host without a dist tag (Debian, where the
/// tests build it), every RPM path README and the docs tell a reader to
/// install or rebuild matches exactly one of the packages that build
/// makes, and the right one (the gateway, its gweb subpackage, the SRPM).
#[test]
fn documented_rpm_names_hold_on_every_target() {
    let paths = documented_rpm_paths();
    assert!(paths.len() >= 4, "{paths:?}");
    for dist in [".el8", ".el9", ".fc41", ""] {
        let binary = names(dist, false);
        let source = names(dist, true);
        assert_eq!(
            binary,
            [
                format!("xrd2ganglia-0.1.0-1{dist}.x86_64.rpm"),
                format!("xrd2ganglia-gweb-0.1.0-1{dist}.noarch.rpm"),
            ]
        );
        assert_eq!(source, [format!("xrd2ganglia-0.1.0-1{dist}.src.rpm")]);
        for (at, path) in &paths {
            let file = path.rsplit('/').next().unwrap();
            let all: Vec<&String> = binary.iter().chain(&source).collect();
            let matched: Vec<&&String> = all.iter().filter(|n| glob_matches(file, n)).collect();
            let want = if path.contains("/noarch/") {
                &binary[1]
            } else if path.ends_with(".src.rpm") {
                &source[0]
            } else {
                &binary[0]
            };
            assert_eq!(matched, [&want], "dist {dist:?}: {at}");
        }
    }
}

/// `%post` reloads a running firewalld, so that the shipped service is
/// known to `firewall-cmd --add-service` right after the install.
#[test]
fn post_reloads_a_running_firewalld() {
    let out = Command::new("rpmspec")
        .args(["-P", "--define", "dist .el9", SPEC])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let post = text
        .split("\n%post\n")
        .nth(1)
        .and_then(|p| p.split("\n%preun").next())
        .expect("a %post");
    let guard = post.find("systemctl is-active --quiet firewalld");
    let reload = post.find("firewall-cmd --reload");
    assert!(
        matches!((guard, reload), (Some(g), Some(r)) if g < r),
        "%post:\n{post}"
    );
}
