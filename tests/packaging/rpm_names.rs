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

/// The spec as rpm reads it for a target (`defines`: `rhel 9`, `fedora 41`...).
fn parsed(defines: &[&str]) -> String {
    let mut cmd = Command::new("rpmspec");
    cmd.arg("-P");
    for d in defines {
        cmd.args(["--define", d]);
    }
    let out = cmd.arg(SPEC).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The lines of a section (`%post`, `%install`) of a parsed spec.
fn section<'a>(spec: &'a str, name: &str) -> &'a str {
    spec.split(&format!("\n{name}\n"))
        .nth(1)
        .and_then(|p| p.split("\n%").next())
        .unwrap_or_else(|| panic!("no {name}:\n{spec}"))
}

/// `%post` reloads a running firewalld at the first install only, so that
/// the shipped service is known to `firewall-cmd --add-service` right
/// after it; never at an upgrade (`$1` = 2), where a reload would drop the
/// site's runtime-only rules for nothing. The scriptlet is run by sh as
/// rpm runs it, with `systemctl` saying firewalld is active and
/// `firewall-cmd` writing down what it is asked (firewalld does not run
/// here).
#[test]
fn post_reloads_a_running_firewalld_at_the_first_install_only() {
    let spec = parsed(&["dist .el9", "rhel 9"]);
    let post = section(&spec, "%post");
    let dir = xrd2ganglia_testkit::Scratch::new("post");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let asked = dir.path().join("asked");
    for (tool, body) in [
        ("systemctl", "exit 0".to_string()),
        (
            "firewall-cmd",
            format!("echo \"firewall-cmd $*\" >> {}", asked.display()),
        ),
    ] {
        let path = bin.join(tool);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for (arg, reloads) in [("1", true), ("2", false)] {
        let _ = std::fs::remove_file(&asked);
        let out = Command::new("sh")
            .args(["-c", post, "post", arg])
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .output()
            .unwrap();
        assert!(out.status.success(), "%post {arg}: {out:?}\n{post}");
        let said = std::fs::read_to_string(&asked).unwrap_or_default();
        assert_eq!(
            said.contains("firewall-cmd --reload"),
            reloads,
            "%post {arg} (1: install, 2: upgrade) asked {said:?}:\n{post}"
        );
    }
}

/// On EL9 and Fedora the spec's build needs systemd-rpm-macros (its
/// `%systemd_post`, `%sysusers_create_compat`), and the package needs
/// firewalld-filesystem, the owner of /usr/lib/firewalld/services, on
/// every target.
#[test]
fn build_dependencies_and_directory_owners_are_listed() {
    for target in ["rhel 9", "fedora 41"] {
        let out = Command::new("rpmspec")
            .args(["-q", "--buildrequires", "--define", target, SPEC])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.lines().any(|l| l.trim() == "systemd-rpm-macros"),
            "{target}: {text}"
        );
    }
    for target in ["rhel 8", "rhel 9", "fedora 41"] {
        let out = Command::new("rpmspec")
            .args(["-q", "--requires", "--define", target, SPEC])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.lines().any(|l| l.trim() == "firewalld-filesystem"),
            "{target}: {text}"
        );
    }
}

/// The unit's directives that EL8's systemd 239 does not know, with the
/// systemd release that brought each (systemd's NEWS).
const NEWER_THAN_EL8: &[(&str, u32)] = &[
    ("ProtectHostname", 242),
    ("RestrictSUIDSGID", 242),
    ("ProtectKernelLogs", 244),
    ("ProtectClock", 245),
    ("ProtectProc", 247),
    ("ProcSubset", 247),
];

/// On EL8 the unit installed is the shipped one without the directives
/// systemd 239 does not know (it warns of each at every start); on EL9 and
/// Fedora it is the shipped one. `%install`'s lines run by sh on a copy.
#[test]
fn el8_gets_the_unit_without_what_its_systemd_does_not_know() {
    let shipped =
        std::fs::read_to_string(Path::new(ROOT).join("packaging/xrd2ganglia.service")).unwrap();
    for (name, _) in NEWER_THAN_EL8 {
        assert!(shipped.contains(&format!("\n{name}=")), "{name}");
    }
    for (target, el8) in [("rhel 8", true), ("rhel 9", false), ("fedora 41", false)] {
        let spec = parsed(&[target]);
        let install = section(&spec, "%install");
        // The lines that edit the installed unit, if any.
        let edit: String = install
            .split("\n")
            .skip_while(|l| !l.starts_with("sed -i"))
            .take_while(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("install "))
            .collect::<Vec<_>>()
            .join("\n");
        let dir = xrd2ganglia_testkit::Scratch::new("el8-unit");
        let unit = dir
            .path()
            .join("usr/lib/systemd/system/xrd2ganglia.service");
        std::fs::create_dir_all(unit.parent().unwrap()).unwrap();
        std::fs::write(&unit, &shipped).unwrap();
        if !edit.is_empty() {
            // The build root's unit (the expanded path) is the copy here.
            let built = edit
                .split_whitespace()
                .find(|w| w.ends_with("/xrd2ganglia.service"))
                .unwrap_or_else(|| panic!("{target}: no unit edited: {edit}"));
            let script = edit.replace(built, &unit.display().to_string());
            let out = Command::new("sh").args(["-c", &script]).output().unwrap();
            assert!(out.status.success(), "{target}: {script}: {out:?}");
        }
        let installed = std::fs::read_to_string(&unit).unwrap();
        if el8 {
            let kept: Vec<&str> = shipped
                .lines()
                .filter(|l| {
                    !NEWER_THAN_EL8
                        .iter()
                        .any(|(n, _)| l.starts_with(&format!("{n}=")))
                })
                .collect();
            assert_eq!(
                installed.lines().collect::<Vec<_>>(),
                kept,
                "{target}:\n{edit}"
            );
        } else {
            assert_eq!(installed, shipped, "{target}");
        }
    }
}
