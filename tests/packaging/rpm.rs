//! The RPM: built offline from this checkout by packaging/build-rpm.sh (the
//! source RPM, then the binary RPM rebuilt from it, with %check), then
//! inspected (every path, the glibc floor against README's table of
//! targets, scriptlets, rpmlint) and installed into a scratch root.

use xrd2ganglia_testkit as common;

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

/// Where the RPM puts README and the pages it links (with the `/`).
const DOC_DIR: &str = "/usr/share/doc/xrd2ganglia/";

/// The files README's relative links lead to (anchors cut off).
fn readme_link_targets(readme: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = readme;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = rest[..end].split('#').next().unwrap_or("");
        if !target.is_empty() && !target.contains("://") {
            out.push(target.to_string());
        }
        rest = &rest[end..];
    }
    out
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

/// Every message rpmlint may report on the spec and the RPMs, with why
/// it stays; the spec's header explains each too (checked below). Anything
/// else rpmlint says fails the test.
const RPMLINT_ACCEPTED: &[(&str, &str, &str)] = &[
    ("E", "no-signature", "a site signs its own builds"),
    ("E", "no-packager-tag", "a site labels its own builds"),
    ("E", "no-group-tag", "Group is obsolete on EL and Fedora"),
    ("W", "no-url-tag", "no public home page yet"),
    (
        "W",
        "invalid-url",
        "Source0/1 are made from the checkout by build-rpm.sh",
    ),
    (
        "W",
        "no-buildroot-tag",
        "rpm >= 4.6 sets the build root; Fedora drops the tag",
    ),
    (
        "W",
        "invalid-license",
        "BSD-3-Clause is SPDX; Debian's rpmlint has no license list",
    ),
    (
        "W",
        "no-documentation",
        "xrd2ganglia-gweb: README (in the main package) documents it",
    ),
    (
        "W",
        "non-standard-gid",
        "xrd2ganglia-gweb: group apache, EL's web server, rewrites the view; Debian's rpmlint does not know it",
    ),
    (
        "W",
        "manpage-not-compressed",
        "gzipped as EL's brp-compress does; Debian's rpmlint wants bz2",
    ),
    (
        "W",
        "no-manual-page-for-binary",
        "xrd2ganglia.1.gz is there; Debian's rpmlint looks for .1.bz2",
    ),
];

/// rpmlint's report on `paths` (the spec first): no error or warning but
/// the accepted ones. rpmlint missing fails the test, as rpmbuild missing
/// does (CI installs both; a skipped check would pass unseen).
fn rpmlint_accepts_only_the_explained(paths: &[PathBuf]) {
    let out = Command::new("rpmlint")
        .args(paths)
        .output()
        .unwrap_or_else(|e| panic!("rpmlint: {e} (Debian package rpmlint; .ci/run installs it)"));
    let text = String::from_utf8_lossy(&out.stdout);
    let spec = std::fs::read_to_string(&paths[0]).unwrap();
    let mut reported = Vec::new();
    for line in text.lines() {
        // `name.arch: E: code details` or `name.spec:7: W: code details`.
        let Some((level, code)) = ["E", "W"].iter().find_map(|level| {
            let rest = line.split(&format!(": {level}: ")).nth(1)?;
            Some((*level, rest.split_whitespace().next()?))
        }) else {
            continue;
        };
        assert!(
            RPMLINT_ACCEPTED
                .iter()
                .any(|(l, c, _)| (*l, *c) == (level, code)),
            "rpmlint: {line}\n(not among the accepted; the whole report:)\n{text}"
        );
        assert!(
            spec.contains(code),
            "rpmlint's {code} is accepted but the spec does not explain it"
        );
        reported.push(code);
    }
    // Not vacuous: rpmlint ran on all four and said what it always says of
    // unsigned packages; its own totals agree with the lines read.
    assert!(
        reported.iter().filter(|c| **c == "no-signature").count() == 3,
        "{text}"
    );
    let errors = reported
        .iter()
        .filter(|c| ["no-signature", "no-packager-tag", "no-group-tag"].contains(c))
        .count();
    assert!(
        text.contains(&format!(
            "3 packages and 1 specfiles checked; {errors} errors, {} warnings",
            reported.len() - errors
        )),
        "{text}"
    );
}

/// The glibc version a target ships, from docs/install.md's row for it ("2.34",
/// "2.39+"), and whether the page says the RPM built here installs there.
fn readme_targets(readme: &str) -> Vec<(String, Vec<u32>, bool)> {
    let section = readme
        .split("**Which RPM installs where.**")
        .nth(1)
        .expect("docs/install.md: no \"Which RPM installs where\" paragraph");
    section
        .lines()
        .skip_while(|l| !l.starts_with("| target |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|row| {
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let glibc = version(cells[2].trim_end_matches('+'));
            let installs = cells[3].starts_with("installs");
            assert!(
                installs || cells[3].starts_with("**does not install**"),
                "README row: {row}"
            );
            (cells[1].to_string(), glibc, installs)
        })
        .collect()
}

fn version(v: &str) -> Vec<u32> {
    v.split('.')
        .map(|n| n.parse().unwrap_or_else(|_| panic!("version {v}")))
        .collect()
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
    // The binary RPM is the source RPM rebuilt, as a site rebuilds it on
    // its EL8, EL9 or Fedora host: the SRPM alone is enough.
    assert!(log.contains("build-rpm: rpmbuild --rebuild"), "{log}");

    let rpm = find_rpm(top.path(), ".x86_64.rpm");
    let gweb = find_rpm(top.path(), ".noarch.rpm");
    let srpm = find_rpm(top.path(), ".src.rpm");

    // Files: exactly these, at the paths EL and Fedora use whatever rpm
    // built the package (Debian's puts _sharedstatedir in /usr/com and the
    // README in a versioned doc directory). Nothing under /var: the state
    // directory is systemd's (StateDirectory=).
    let files = run(Command::new("rpm").arg("-qpl").arg(&rpm));
    let (build_ids, listed): (Vec<&str>, Vec<&str>) = files
        .lines()
        .filter(|l| !l.starts_with(DOC_DIR))
        .partition(|l| l.starts_with("/usr/lib/.build-id"));
    // The documentation: README, CHANGELOG, docs/ and the records' README,
    // laid out as in the source tree (checked below once installed).
    for doc in files.lines().filter_map(|l| l.strip_prefix(DOC_DIR)) {
        assert!(
            ["README.md", "CHANGELOG.md", "docs", "tests"]
                .iter()
                .any(|top| doc == *top || doc.starts_with(&format!("{top}/"))),
            "{DOC_DIR}{doc}: not documentation\n{files}"
        );
    }
    assert_eq!(
        listed,
        [
            "/etc/sysconfig/xrd2ganglia",
            "/etc/xrd2ganglia",
            "/etc/xrd2ganglia/xrd2ganglia.toml",
            "/usr/bin/xrd2ganglia",
            "/usr/lib/firewalld/services/xrd2ganglia.xml",
            "/usr/lib/systemd/system/xrd2ganglia.service",
            "/usr/lib/sysusers.d/xrd2ganglia.conf",
            "/usr/libexec/xrd2ganglia",
            "/usr/libexec/xrd2ganglia/gmetric",
            "/usr/libexec/xrd2ganglia/mpxstats",
            "/usr/share/bash-completion/completions/xrd2ganglia",
            "/usr/share/doc/xrd2ganglia",
            "/usr/share/fish/vendor_completions.d/xrd2ganglia.fish",
            "/usr/share/man/man1/xrd2ganglia-check-config.1.gz",
            "/usr/share/man/man1/xrd2ganglia-dump.1.gz",
            "/usr/share/man/man1/xrd2ganglia-gmetric.1.gz",
            "/usr/share/man/man1/xrd2ganglia-gweb.1.gz",
            "/usr/share/man/man1/xrd2ganglia-mpxstats.1.gz",
            "/usr/share/man/man1/xrd2ganglia-poll.1.gz",
            "/usr/share/man/man1/xrd2ganglia-replay.1.gz",
            "/usr/share/man/man1/xrd2ganglia-serve.1.gz",
            "/usr/share/man/man1/xrd2ganglia-status.1.gz",
            "/usr/share/man/man1/xrd2ganglia.1.gz",
            "/usr/share/man/man5/xrd2ganglia.toml.5.gz",
            "/usr/share/zsh/site-functions/_xrd2ganglia",
        ],
        "{files}"
    );
    // The binary's build-id links, as EL's and Fedora's rpm make them
    // (/usr/lib/.build-id/xx/yyyy...): the directory, one subdirectory,
    // one link.
    assert_eq!(build_ids.len(), 3, "{files}");
    let link = build_ids[2].strip_prefix("/usr/lib/.build-id/").unwrap();
    assert!(
        link.len() > 3
            && link.as_bytes()[2] == b'/'
            && link.chars().all(|c| c == '/' || c.is_ascii_hexdigit()),
        "{files}"
    );
    for bad in [
        "/usr/com",
        "/usr/local",
        "/var",
        "/opt",
        "/lib/",
        "/usr/lib64",
    ] {
        assert!(
            !files.lines().any(|l| l.starts_with(bad)),
            "{bad}: not a path EL or Fedora would use:\n{files}"
        );
    }

    // The platform floor: the highest glibc symbol version the binary
    // needs, as rpm found it, is the one README states for this build host,
    // and README's table says the RPM installs on exactly the targets whose
    // glibc is at least that.
    let requires = run(Command::new("rpm").args(["-qp", "--requires"]).arg(&rpm));
    let floor = requires
        .lines()
        .filter_map(|l| l.strip_prefix("libc.so.6(GLIBC_")?.strip_suffix(")(64bit)"))
        .max_by_key(|v| version(v))
        .unwrap_or_else(|| panic!("no glibc requirement:\n{requires}"));
    assert_eq!(floor, "2.34", "{requires}");
    let readme = std::fs::read_to_string(Path::new(manifest).join("docs/install.md")).unwrap();
    assert!(
        readme.contains(&format!("`GLIBC_{floor}`")),
        "docs/install.md does not state the floor GLIBC_{floor}"
    );
    let targets = readme_targets(&readme);
    for name in ["EL8", "EL9", "Fedora"] {
        assert!(
            targets.iter().any(|(t, _, _)| t.starts_with(name)),
            "README's table has no {name} row: {targets:?}"
        );
    }
    for (target, glibc, installs) in &targets {
        assert_eq!(
            *installs,
            *glibc >= version(floor),
            "README says of {target} (glibc {glibc:?}) installs={installs}, \
             but the RPM needs GLIBC_{floor}"
        );
    }
    // Shared libraries: glibc's and libgcc_s only, in every EL and Fedora
    // base system; nothing a site would have to find in another repository.
    let libs: Vec<&str> = requires
        .lines()
        .filter_map(|l| l.split_once(".so").map(|(lib, _)| lib))
        .collect();
    for lib in &libs {
        assert!(
            [
                "libc",
                "libm",
                "libgcc_s",
                "ld-linux-x86-64",
                "libpthread",
                "libdl",
                "librt"
            ]
            .contains(lib),
            "{lib}: a library beyond glibc and libgcc:\n{requires}"
        );
    }
    assert!(
        libs.contains(&"libc") && libs.contains(&"libgcc_s"),
        "{requires}"
    );

    // The gweb subpackage: packaging/gweb's files, exactly, where EPEL's
    // and Fedora's ganglia-web looks (code in /usr/share/ganglia, conf
    // directory /var/lib/ganglia/conf); the view and the cluster's report
    // list are config(noreplace), since ganglia-web's UI edits views.
    let shipped = Path::new(manifest).join("packaging/gweb");
    let mut expected: Vec<String> = ["graph.d", "conf"]
        .iter()
        .flat_map(|dir| {
            std::fs::read_dir(shipped.join(dir)).unwrap().map(move |e| {
                let name = e.unwrap().file_name().into_string().unwrap();
                match *dir {
                    "graph.d" => format!("/usr/share/ganglia/graph.d/{name}"),
                    _ => format!("/var/lib/ganglia/conf/{name}"),
                }
            })
        })
        .collect();
    // 14 reports (9 JSON, 5 PHP: the detailed stream's bytes by VO and by
    // protocol among them), the view and the cluster's report list.
    assert_eq!(expected.len(), 16, "{expected:?}");
    expected.sort();
    let gweb_files = run(Command::new("rpm").arg("-qpl").arg(&gweb));
    assert_eq!(
        gweb_files.lines().collect::<Vec<_>>(),
        expected,
        "{gweb_files}"
    );
    let gweb_flags = run(Command::new("rpm")
        .args(["-qp", "--qf", "[%{FILEFLAGS:fflags} %{FILENAMES}\n]"])
        .arg(&gweb));
    for f in &expected {
        let config = f.starts_with("/var/");
        assert!(
            gweb_flags
                .lines()
                .any(|l| l == format!("{} {f}", if config { "cn" } else { "" })),
            "{f}: config(noreplace) should be {config}:\n{gweb_flags}"
        );
    }
    // The view and the cluster file are the web server's to rewrite (group
    // apache, EPEL's and Fedora's httpd, writable); the reports are not.
    let gweb_modes = run(Command::new("rpm")
        .args([
            "-qp",
            "--qf",
            "[%{FILEMODES:perms} %{FILEUSERNAME} %{FILEGROUPNAME} %{FILENAMES}\n]",
        ])
        .arg(&gweb));
    for f in &expected {
        let want = if f.starts_with("/var/lib/ganglia/conf/") {
            format!("-rw-rw-r-- root apache {f}")
        } else {
            format!("-rw-r--r-- root root {f}")
        };
        assert!(
            gweb_modes.lines().any(|l| l == want),
            "not {want}:\n{gweb_modes}"
        );
    }
    let gweb_requires = run(Command::new("rpm").args(["-qp", "--requires"]).arg(&gweb));
    assert!(
        gweb_requires.lines().any(|l| l.trim() == "ganglia-web"),
        "{gweb_requires}"
    );

    // rpmlint on the spec and the RPMs: nothing but what the spec's
    // header accepts, each for its reason.
    rpmlint_accepts_only_the_explained(&[
        Path::new(manifest).join("packaging/xrd2ganglia.spec"),
        rpm.clone(),
        gweb.clone(),
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
    // Each scriptlet handles the unit itself: the spec's own lines, or
    // where the build host defines them, systemd's macros (EL's
    // systemd-update-helper). A mention of systemd elsewhere is not enough.
    for (name, own, helper) in [
        (
            "postinstall",
            "systemctl --no-reload preset xrd2ganglia.service",
            "install-system-units xrd2ganglia.service",
        ),
        (
            "preuninstall",
            "systemctl --no-reload disable --now xrd2ganglia.service",
            "remove-system-units xrd2ganglia.service",
        ),
        (
            "postuninstall",
            "systemctl try-restart xrd2ganglia.service",
            "mark-restart-system-units xrd2ganglia.service",
        ),
    ] {
        let body = scriptlet(&scripts, name);
        assert!(
            body.contains(own) || body.contains(helper),
            "{name}: {body}"
        );
    }
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
    run(Command::new("rpm")
        .args(["-i", "--nodeps", "--noscripts", "--root"])
        .arg(root.path())
        .arg(&gweb));
    // README's relative links work where it is installed.
    let installed_readme = root.path().join(&DOC_DIR[1..]).join("README.md");
    let readme_text = std::fs::read_to_string(&installed_readme).unwrap();
    let targets = readme_link_targets(&readme_text);
    assert!(targets.len() > 10, "{targets:?}");
    for target in targets {
        let path = installed_readme.parent().unwrap().join(&target);
        assert!(path.exists(), "README links {target}: not in {DOC_DIR}");
    }
    for f in &expected {
        let (dir, name) = f.rsplit_once('/').unwrap();
        let sub = if dir.ends_with("graph.d") {
            "graph.d"
        } else {
            "conf"
        };
        assert_eq!(
            std::fs::read(root.path().join(&f[1..])).unwrap(),
            std::fs::read(shipped.join(sub).join(name)).unwrap(),
            "{f} differs from packaging/gweb/{sub}/{name}"
        );
    }
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
    // firewalld's service (README: firewall-cmd --add-service=xrd2ganglia):
    // well-formed, and it opens the UDP port the installed config listens on.
    let service = root
        .path()
        .join("usr/lib/firewalld/services/xrd2ganglia.xml");
    let lint = Command::new("xmllint")
        .arg("--noout")
        .arg(&service)
        .output()
        .expect("xmllint (Debian package libxml2-utils)");
    assert!(lint.status.success(), "{lint:?}");
    let service = std::fs::read_to_string(&service).unwrap();
    let listen_port = effective
        .split("listen = [\"0.0.0.0:")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap_or_else(|| panic!("{effective}"));
    assert!(
        service.contains("<service>")
            && service.contains(&format!("<port protocol=\"udp\" port=\"{listen_port}\"/>")),
        "{service}"
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
    // The control socket's directory (control_socket's default), the
    // service's and its group's only.
    let unit_text = std::fs::read_to_string(&unit).unwrap();
    for line in ["RuntimeDirectory=xrd2ganglia", "RuntimeDirectoryMode=0750"] {
        assert!(
            unit_text.lines().any(|l| l == line),
            "the unit has no line {line}"
        );
    }
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

/// The body of one scriptlet in `rpm -qp --scripts`' output: the lines
/// after its `NAME scriptlet (using ...):` header, up to the next header.
fn scriptlet(scripts: &str, name: &str) -> String {
    let header = format!("{name} scriptlet (using ");
    let start = scripts
        .lines()
        .position(|l| l.starts_with(&header))
        .unwrap_or_else(|| panic!("no {name} scriptlet:\n{scripts}"));
    scripts
        .lines()
        .skip(start + 1)
        .take_while(|l| !l.contains(" scriptlet (using "))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn scriptlets_are_read_one_by_one() {
    let scripts = "preinstall scriptlet (using /bin/sh):\ngetent group x\n\
        postinstall scriptlet (using /bin/sh):\n\nsystemctl --no-reload preset a.service\n\
        preuninstall scriptlet (using /bin/sh):\nsystemctl disable\n\
        postuninstall scriptlet (using /bin/sh):\nsystemctl try-restart a.service";
    assert_eq!(
        scriptlet(scripts, "postinstall"),
        "\nsystemctl --no-reload preset a.service"
    );
    assert_eq!(scriptlet(scripts, "preuninstall"), "systemctl disable");
    assert_eq!(
        scriptlet(scripts, "postuninstall"),
        "systemctl try-restart a.service"
    );
}
