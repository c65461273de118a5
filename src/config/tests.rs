use std::net::SocketAddr;
use std::path::PathBuf;

use super::channels::channels;
use super::*;
use crate::ganglia::channel::ChannelSpec;

fn from(text: &str) -> Result<Settings, ConfigError> {
    validate(
        FileConfig::parse(text, Path::new("t.toml"))?,
        "t.toml".into(),
        &Overrides::default(),
    )
}

fn err(text: &str) -> String {
    from(text).unwrap_err().to_string()
}

#[test]
fn shipped_config_is_valid_and_documented() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/xrd2ganglia.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let file = FileConfig::parse(&text, &path).unwrap();
    let s = validate(
        file,
        "shipped".into(),
        &Overrides {
            send: vec!["127.0.0.1:8649".into()],
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        s.listen,
        [
            "0.0.0.0:3333".parse().unwrap(),
            "[::]:3333".parse::<SocketAddr>().unwrap()
        ]
    );
    assert!(
        s.allow
            .iter()
            .any(|n| n.contains(&"127.0.0.1".parse::<std::net::IpAddr>().unwrap()))
    );
    assert!(
        s.allow
            .iter()
            .any(|n| n.contains(&"10.1.2.3".parse::<std::net::IpAddr>().unwrap()))
    );
}

/// Every key of [`FileConfig`] (the one definition) is documented in the
/// shipped file, set or commented out, and has its row in
/// docs/configuration.md's table; neither names a key the gateway does
/// not take.
#[test]
fn every_key_is_in_the_shipped_file_and_the_docs() {
    let keys = FileConfig::keys();
    assert!(
        keys.len() >= 27 && keys.contains(&"cluster_name"),
        "{keys:?}"
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shipped = std::fs::read_to_string(root.join("conf/xrd2ganglia.toml")).unwrap();
    let docs = std::fs::read_to_string(root.join("docs/configuration.md")).unwrap();
    let form = |key: &str| match key {
        "channel" => "[[channel]]".to_string(),
        "metric" => "[[metric]]".to_string(),
        "cluster" => "[[cluster]]".to_string(),
        k => format!("{k} ="),
    };
    let shipped_keys: Vec<&str> = shipped
        .lines()
        .map(|l| l.trim_start_matches("# ").trim())
        .filter_map(|l| {
            let key = l.strip_prefix("[[").map_or(l, |t| t.trim_end_matches("]]"));
            let key = key.split([' ', '=']).next()?;
            keys.contains(&key).then_some(key)
        })
        .collect();
    for key in keys {
        assert!(
            shipped_keys.contains(key),
            "conf/xrd2ganglia.toml does not document {}",
            form(key)
        );
        let row = match *key {
            "channel" => "| `[[channel]]` |".to_string(),
            "metric" => "| `[[metric]]` |".to_string(),
            "cluster" => "| `[[cluster]]` |".to_string(),
            k => format!("| `{k}` |"),
        };
        assert!(
            docs.contains(&row),
            "docs/configuration.md's key table has no row {row}"
        );
    }
    // The table names nothing else, and says of each key what a reload
    // does with it, as its OnSighup defines it.
    let table = &docs[docs
        .find("| key | value | default | on SIGHUP | meaning |")
        .unwrap()..];
    let mut rows = 0;
    for line in table.lines().skip(2).take_while(|l| l.starts_with('|')) {
        let key = line.split('`').nth(1).unwrap_or("");
        let key = key.trim_start_matches("[[").trim_end_matches("]]");
        assert!(
            keys.contains(&key),
            "docs/configuration.md's key table has {key:?}, which is no key"
        );
        let sighup = line.split(" | ").nth(3).unwrap_or("");
        let want = if crate::config::waits_for_restart(key) {
            "restart"
        } else {
            "at once"
        };
        assert!(
            sighup.starts_with(want),
            "docs/configuration.md's key table, {key}: {sighup:?}, not {want:?}"
        );
        rows += 1;
    }
    assert_eq!(rows, keys.len(), "docs/configuration.md's key table");
}

/// The facts of each key ([`KEYS`], [`CHANNEL_KEYS`]) are held to the
/// structs: one entry per field, both ways, in the fields' order. Each
/// entry makes its field, so what can still part them is a serde rename
/// (`match`, `type`) that the entry's `name` does not say.
#[test]
fn the_key_tables_are_the_structs_fields() {
    let names = |keys: &[Key]| keys.iter().map(|k| k.name).collect::<Vec<_>>();
    assert_eq!(names(KEYS), FileConfig::keys(), "KEYS against FileConfig");
    assert_eq!(
        names(CHANNEL_KEYS),
        ChannelConfig::keys(),
        "CHANNEL_KEYS against ChannelConfig"
    );
    assert_eq!(
        names(METRIC_KEYS),
        MetricConfig::keys(),
        "METRIC_KEYS against MetricConfig"
    );
    // What the reload's warnings go by.
    let restart: Vec<&str> = restart_keys().collect();
    assert!(restart.contains(&"listen") && restart.contains(&"state_file"));
    assert!(waits_for_restart("xml_listen") && !waits_for_restart("max_send_rate"));
    assert!(!waits_for_restart("no_such_key"));
    // Every key says what its value looks like and what it does (an entry
    // that leaves either out gets `Key::named`'s empty text).
    for k in KEYS.iter().chain(CHANNEL_KEYS).chain(METRIC_KEYS) {
        assert!(!k.value.is_empty() && !k.meaning.is_empty(), "{}", k.name);
    }
    // The shipped config shows a key after another that is written:
    // following `shipped_after` from any key ends at one in the table's
    // order (else neither would be written).
    for k in KEYS {
        let mut at = k;
        for _ in 0..KEYS.len() {
            let Some(after) = at.shipped_after else {
                break;
            };
            at = KEYS
                .iter()
                .find(|o| o.name == after)
                .unwrap_or_else(|| panic!("{}: shipped_after {after:?} is no key", k.name));
        }
        assert!(
            at.shipped_after.is_none(),
            "{}: shipped_after goes round",
            k.name
        );
    }
    // Every text is one paragraph of balanced `code` spans (the man page
    // makes them bold), with nothing that would break a table row.
    for k in KEYS.iter().chain(CHANNEL_KEYS).chain(METRIC_KEYS) {
        for text in [k.value, k.meaning].into_iter().chain(k.option) {
            assert!(
                !text.contains(['\n', '|']) && text.matches('`').count() % 2 == 0,
                "{}: {text:?}",
                k.name
            );
        }
    }
}

/// A default shown in the docs is the real one (serialised from
/// `FileConfig::default()` or a channel with only its host), and a key
/// says what leaving it out means exactly when it has no such value.
#[test]
fn the_docs_show_the_real_defaults() {
    let shown = docs::defaults_shown();
    assert_eq!(
        shown.len(),
        KEYS.len() + CHANNEL_KEYS.len() + METRIC_KEYS.len()
    );
    for (k, (name, text, serialised)) in KEYS
        .iter()
        .chain(CHANNEL_KEYS)
        .chain(METRIC_KEYS)
        .zip(&shown)
    {
        assert_eq!(k.name, *name);
        assert!(text.is_some(), "{name}: no default to show");
        assert_eq!(
            matches!(k.absent, Absent::Default),
            *serialised,
            "{name}: Absent::Default if and only if it has a default value"
        );
    }
    let of = |name: &str| {
        let (_, text, _) = shown.iter().find(|(n, ..)| *n == name).unwrap();
        text.clone().unwrap()
    };
    let listen = DEFAULT_LISTEN
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>();
    assert_eq!(of("listen"), format!("`[{}]`", listen.join(", ")));
    assert_eq!(of("max_send_rate"), format!("`{DEFAULT_SEND_RATE}`"));
    assert_eq!(of("port"), format!("`{}`", DEFAULT_SEND.1));
    assert!(of("gmond_conf").contains(DEFAULT_GMOND_CONF));
    assert_eq!(of("host"), "required");
}

/// docs/configuration.md is the generated page, as it is now.
#[test]
fn the_configuration_page_is_up_to_date() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md");
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == docs::markdown(),
        "docs/configuration.md is not what the key definitions make: run\n  {}",
        docs::REGENERATE
    );
}

/// conf/xrd2ganglia.toml is the generated file, as it is now.
#[test]
fn the_shipped_config_is_up_to_date() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/xrd2ganglia.toml");
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == shipped::text(),
        "conf/xrd2ganglia.toml is not what the key definitions make: run\n  {}",
        shipped::REGENERATE
    );
}

/// The man page xrd2ganglia.toml(5): a man(7) page with a tagged
/// paragraph per key, each key's name in bold (tests/quick/docs.rs renders it).
#[test]
fn the_man_page_has_every_key() {
    let page = docs::man_page();
    let body = page
        .lines()
        .skip_while(|l| !l.starts_with(".TH "))
        .collect::<Vec<_>>();
    assert!(
        body.first()
            .is_some_and(|l| l.starts_with(".TH XRD2GANGLIA.TOML 5 ")),
        "{page}"
    );
    for section in [
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "KEYS",
        "CHANNELS",
        "RELOAD",
    ] {
        assert!(
            body.contains(&format!(".SH {section}").as_str()),
            "{section}"
        );
    }
    // Its KEYS and CHANNELS sections: a tagged paragraph per key, in order.
    for (section, keys) in [
        ("KEYS", KEYS),
        ("CHANNELS", CHANNEL_KEYS),
        ("METRICS", METRIC_KEYS),
    ] {
        let lines: Vec<&str> = body
            .iter()
            .skip_while(|l| **l != format!(".SH {section}"))
            .skip(1)
            .take_while(|l| !l.starts_with(".SH "))
            .copied()
            .collect();
        let tagged: Vec<&str> = lines
            .windows(2)
            .filter(|w| w[0] == ".TP")
            .filter_map(|w| w[1].strip_prefix("\\fB")?.split("\\fR").next())
            .collect();
        let names: Vec<&str> = keys.iter().map(|k| k.name).collect();
        assert_eq!(tagged, names, "the man page's {section}");
    }
}

#[test]
fn a_reload_names_the_keys_that_changed() {
    let file = |text: &str| FileConfig::parse(text, Path::new("t")).unwrap();
    let started = file("stats_interval = 300\nmax_send_rate = 40000\n");
    // Written differently, the same values: nothing changed.
    assert_eq!(
        started.changed_keys(&file("max_send_rate = 40_000\n")),
        Vec::<&str>::new()
    );
    let now = file(
        "stats_interval = 10\nmax_send_rate = 50000\nlisten = [\"127.0.0.1:1\"]\nvalue_heartbeat = 90\n",
    );
    assert_eq!(
        started.changed_keys(&now),
        [
            "listen",
            "stats_interval",
            "max_send_rate",
            "value_heartbeat"
        ]
    );
}

#[test]
fn defaults_without_a_file() {
    let s = validate(
        FileConfig {
            gmond_conf: Some("/nonexistent/gmond.conf".into()),
            ..Default::default()
        },
        "x".into(),
        &Overrides::default(),
    );
    // An explicitly named gmond.conf that is missing is an error...
    assert!(s.unwrap_err().to_string().contains("file not found"));
    // ...the default one missing means unicast to 127.0.0.1:8649.
    let (chs, from) = channels(&FileConfig::default(), &Overrides::default()).unwrap();
    if !Path::new(DEFAULT_GMOND_CONF).exists() {
        assert_eq!(chs, [ChannelSpec::unicast("127.0.0.1", 8649)]);
        assert!(from.contains("built-in"));
    } else {
        assert!(from.contains(DEFAULT_GMOND_CONF), "{from}");
    }
    let s = from_text_with_send("");
    assert_eq!(s.listen.len(), 2);
    assert_eq!(
        (s.metadata_interval.as_secs(), s.dmax, s.tmax),
        (60, 3600, 60)
    );
    assert!(s.allow.is_empty());
}

fn from_text_with_send(text: &str) -> Settings {
    validate(
        FileConfig::parse(text, Path::new("t")).unwrap(),
        "t".into(),
        &Overrides {
            send: vec!["127.0.0.1:9".into()],
            ..Default::default()
        },
    )
    .unwrap()
}

#[test]
fn gmond_conf_channels_are_used() {
    let dir = std::env::temp_dir().join(format!("x2g-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let g = dir.join("gmond.conf");
    std::fs::write(&g, "udp_send_channel { host = 127.0.0.1 port = 8650 }\nudp_send_channel { mcast_join = 239.2.11.71 port = 8649 ttl = 2 }").unwrap();
    let s = from(&format!("gmond_conf = {:?}", g.display().to_string())).unwrap();
    assert_eq!(s.channels.len(), 2);
    assert_eq!(s.channels[0], ChannelSpec::unicast("127.0.0.1", 8650));
    assert_eq!(
        (s.channels[1].host.as_str(), s.channels[1].ttl),
        ("239.2.11.71", 2)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn cli_overrides_win() {
    let s = validate(
        FileConfig::parse(
            "listen = [\"127.0.0.1:1\"]\n[[channel]]\nhost = \"10.0.0.1\"",
            Path::new("t"),
        )
        .unwrap(),
        "t".into(),
        &Overrides {
            listen: vec!["127.0.0.1:2".into()],
            send: vec!["127.0.0.1:3".into(), "[::1]:4".into()],
            state_file: Some("here/state".into()),
            xml_listen: vec!["127.0.0.1:8659".into()],
            no_send: false,
        },
    )
    .unwrap();
    assert_eq!(s.state_file, Some(PathBuf::from("here/state")));
    assert_eq!(
        s.xml_listen,
        ["127.0.0.1:8659".parse::<SocketAddr>().unwrap()]
    );
    assert_eq!(s.listen, ["127.0.0.1:2".parse::<SocketAddr>().unwrap()]);
    assert_eq!(
        s.channels,
        [
            ChannelSpec::unicast("127.0.0.1", 3),
            ChannelSpec::unicast("::1", 4)
        ]
    );
    assert_eq!(s.channels_from, "--send");
    let with_state = |text: &str, state: &str| {
        validate(
            FileConfig::parse(text, Path::new("t")).unwrap(),
            "t".into(),
            &Overrides {
                send: vec!["127.0.0.1:3".into()],
                state_file: Some(state.into()),
                ..Default::default()
            },
        )
    };
    // --state-file "" keeps nothing, whatever the file says.
    let s = with_state("state_file = \"/x/state\"", "").unwrap();
    assert_eq!(s.state_file, None);
    assert_eq!(
        with_state("", "/").unwrap_err().to_string(),
        "--state-file = \"/\": is a directory; name a file in it"
    );
}

#[test]
fn bad_values_name_key_and_value() {
    assert_eq!(
        err("listen = [\"0.0.0.0:99999\"]"),
        "listen = \"0.0.0.0:99999\": not an ADDRESS:PORT (write IPv6 as [::]:3333)"
    );
    assert_eq!(
        err("allow = [\"10.0.0.0/33\"]"),
        "allow = \"10.0.0.0/33\": not a network (10.0.0.0/8, 2001:db8::/32) or address"
    );
    assert_eq!(
        err("metric_name = \"{pgm}.{x}\""),
        "metric_name = \"{pgm}.{x}\": unknown placeholder {x} in \"{pgm}.{x}\" (known: {pgm} {ins} {site} {section} {var})"
    );
    assert_eq!(
        err("metric_name = \"{pgm}\""),
        "metric_name = \"{pgm}\": must contain {var}, or every variable gets the same name"
    );
    assert!(err("metric_name = \"a/b.{var}\"").starts_with("metric_name = \"a/b.{var}\": \"a/b\""));
    assert!(err("dmax = 30").starts_with(
        "dmax = 30: must be 0 (never expire) or longer than metadata_interval (60 s)"
    ));
    assert_eq!(
        err("metadata_interval = 0"),
        "metadata_interval = 0: must be at least 1 second"
    );
    assert_eq!(
        err("max_sources = 0"),
        "max_sources = 0: must be at least 1"
    );
    assert_eq!(
        err("resend_after = 61"),
        "resend_after = 61: must be at most 60 (seconds; 0: never)"
    );
    assert!(err("follow_gmond_queue = \"yes\"").contains("follow_gmond_queue"));
    assert!(
        err("[[channel]]\nhost = \"h\"\nbind = \"nope\"").starts_with("channel.bind = \"nope\"")
    );
    assert_eq!(
        err("send_values = \"some\""),
        "send_values = \"some\": must be \"all\" (every value of every report) or \"changed\" (values that changed, and the rest every value_heartbeat)"
    );
    assert_eq!(
        err("value_heartbeat = 30"),
        "value_heartbeat = 30: only applies with send_values = \"changed\""
    );
    assert_eq!(
        err("send_values = \"changed\"\nvalue_heartbeat = 0"),
        "value_heartbeat = 0: must be at least 1 second"
    );
    assert_eq!(
        err("state_file = \"/\""),
        "state_file = \"/\": is a directory; name a file in it"
    );
    assert!(
        err("metadata_requests = [\"8650\"]")
            .starts_with("metadata_requests = \"8650\": not an ADDRESS:PORT")
    );
    let s = from_text_with_send(
        "send_values = \"changed\"\nstate_file = \"\"\nmetadata_requests = [\"239.2.11.71:8649\"]",
    );
    assert_eq!(
        (
            s.value_heartbeat,
            s.state_file.clone(),
            s.metadata_requests.len()
        ),
        (Some(60), None, 1)
    );
    assert_eq!(
        from_text_with_send("").state_file,
        Some(PathBuf::from(DEFAULT_STATE_FILE))
    );
    // serde: unknown keys and wrong types name the key and line.
    let e = err("lisen = []");
    assert!(e.contains("lisen") && e.contains("t.toml"), "{e}");
    let e = err("dmax = \"x\"");
    assert!(e.contains("dmax") && e.contains("line 1"), "{e}");
    let e = validate(
        FileConfig::default(),
        "t".into(),
        &Overrides {
            send: vec!["nope".into()],
            ..Default::default()
        },
    )
    .unwrap_err()
    .to_string();
    assert_eq!(e, "--send = \"nope\": \"nope\" is not HOST:PORT");
}

#[test]
fn xml_port_settings_and_their_errors() {
    let s = from_text_with_send("");
    assert!(s.send && s.xml_listen.is_empty());
    assert_eq!(s.cluster_name, "XRootD");
    let ips = |s: &Settings, ip: &str| {
        s.xml_allow
            .iter()
            .any(|n| n.contains(&ip.parse::<std::net::IpAddr>().unwrap()))
    };
    // Loopback only, unless said otherwise.
    assert!(ips(&s, "127.0.0.1") && ips(&s, "::1") && !ips(&s, "10.0.0.1"));
    let s = from(
        "send = false\nxml_listen = [\"0.0.0.0:8649\"]\nxml_allow = [\"10.0.0.0/8\", \"192.0.2.7\"]\ncluster_name = \"T2 Site\"",
    )
    .unwrap();
    assert!(!s.send && s.channels.is_empty());
    assert_eq!(s.channels_from, "send = false");
    assert!(ips(&s, "10.9.9.9") && ips(&s, "192.0.2.7") && !ips(&s, "127.0.0.1"));
    assert_eq!(s.cluster_name, "T2 Site");
    assert!(
        s.to_string()
            .contains("send = false\nxml_listen = [\"0.0.0.0:8649\"]"),
        "{s}"
    );

    assert_eq!(
        err("send = false"),
        "send = false and no xml_listen: the data would go nowhere (poll the gateway with xml_listen, or send to gmond)"
    );
    assert!(
        err("xml_listen = [\"8649\"]").starts_with("xml_listen = \"8649\": not an ADDRESS:PORT")
    );
    assert!(err("xml_allow = []").contains("no client could poll"));
    assert!(err("xml_allow = [\"nowhere\"]").starts_with("xml_allow = \"nowhere\": not a network"));
    assert!(err("cluster_name = \"a/b\"").contains("without '/'"));
    assert!(err("cluster_name = \"\"").starts_with("cluster_name"));
    assert!(
        err("send = false\nxml_listen = [\"127.0.0.1:1\"]\nmetadata_requests = [\"0.0.0.0:8650\"]")
            .contains("only applies when sending to gmond")
    );
    // --no-send on the command line, and --send with it is a contradiction.
    let no_send = |send: Vec<String>| {
        validate(
            FileConfig::parse("xml_listen = [\"127.0.0.1:1\"]", Path::new("t")).unwrap(),
            "t".into(),
            &Overrides {
                send,
                no_send: true,
                ..Default::default()
            },
        )
    };
    assert!(no_send(vec![]).is_ok_and(|s| !s.send && s.channels_from == "--no-send"));
    assert!(
        no_send(vec!["127.0.0.1:9".into()])
            .unwrap_err()
            .to_string()
            .contains("contradicts --no-send")
    );
}

#[test]
fn control_socket_default_set_and_off() {
    let default = from("").unwrap().control_socket.unwrap();
    assert_eq!(default.path, PathBuf::from(DEFAULT_CONTROL_SOCKET));
    assert!(!default.required, "the default is made where it can be");
    // Written out, the default is still the default.
    let written = from("control_socket = \"/run/xrd2ganglia/control\"\n").unwrap();
    assert!(!written.control_socket.unwrap().required);
    let set = from("control_socket = \"/tmp/x2g/ctl\"\n").unwrap();
    let set = set.control_socket.unwrap();
    assert_eq!(set.path, PathBuf::from("/tmp/x2g/ctl"));
    assert!(set.required, "one set in the config must be bound");
    assert_eq!(
        from("control_socket = \"\"\n").unwrap().control_socket,
        None
    );
    let long = format!("control_socket = \"/{}\"\n", "x".repeat(120));
    assert!(
        err(&long).contains("longer than a Unix socket path may be"),
        "{}",
        err(&long)
    );
    assert!(err("control_socket = \"/tmp\"\n").contains("is a directory"));
}

/// `[[metric]]` tables: what they describe, and each mistake refused with
/// the table named (check-config exits 2 on any of these).
#[test]
fn metric_tables_are_checked_and_name_the_table() {
    let s = from(
        "[[metric]]\nmatch = \"myplug.*_total\"\nslope = \"counter\"\nunits = \"requests/s\"\n\n[[metric]]\nmatch = \"myplug.*\"\ntype = \"uint32\"\n",
    )
    .unwrap();
    let spec = s
        .site_metrics
        .lookup("myplug.req_total", "myplug.req_total")
        .unwrap();
    assert_eq!(
        (spec.kind, spec.units),
        (crate::catalog::Kind::Counter64, "requests/s")
    );
    let spec = s
        .site_metrics
        .lookup("myplug.level", "myplug.level")
        .unwrap();
    assert_eq!(spec.kind, crate::catalog::Kind::Gauge32);
    for (text, want) in [
        (
            "[[metric]]\nmatch = \"a\"\n[[metric]]\nmatch = \"b\"\ntype = \"float\"\n",
            "[[metric]] #2 (match = \"b\"): type = \"float\": must be \"double\", \"uint32\" or \"string\"",
        ),
        (
            "[[metric]]\nmatch = \"a/b\"\n",
            "[[metric]] #1 (match = \"a/b\"): match: '/' cannot stand",
        ),
        (
            "[[metric]]\nmatch = \"a.*\"\n[[metric]]\nmatch = \"a.*\"\nslope = \"counter\"\n",
            "[[metric]] #2 (match = \"a.*\"): a [[metric]] with the same match",
        ),
        (
            "[[metric]]\nmatch = \"a\"\nslope = \"up\"\n",
            "[[metric]] #1 (match = \"a\"): slope = \"up\": must be \"counter\"",
        ),
    ] {
        let e = err(text);
        assert!(e.starts_with(want), "{e}");
    }
    // A table without match, or with a key it does not take, is refused
    // by the file's reader.
    assert!(err("[[metric]]\nslope = \"counter\"\n").contains("match"));
    assert!(err("[[metric]]\nmatch = \"a\"\nunit = \"x\"\n").contains("unit"));
}

/// `[[cluster]]` rules are checked one by one; each error names the rule.
#[test]
fn cluster_rules_are_validated_naming_the_rule() {
    let rule = |body: &str| err(&format!("[[cluster]]\n{body}"));
    assert_eq!(
        rule("name = \"disk\""),
        "cluster[0] \"disk\": matches nothing: give sites, networks or hosts"
    );
    assert_eq!(
        rule("name = \"../x\"\nsites = [\"A\"]"),
        "cluster[0] \"../x\": name = \"../x\": must not contain '/' or control characters (it is a directory under gmetad's rrd_rootdir)"
    );
    assert!(rule("name = \"..\"\nsites = [\"A\"]").contains("must not be '.' or '..'"));
    assert!(
        rule("name = \"__summaryinfo__\"\nsites = [\"A\"]")
            .contains("__SummaryInfo__ is gmetad's summary directory")
    );
    assert!(
        rule("name = \"xrootd\"\nsites = [\"A\"]")
            .contains("differs from cluster_name \"XRootD\" only by case")
    );
    assert_eq!(
        rule("name = \"x\"\nnetworks = [\"10.0.0.0/33\"]"),
        "cluster[0] \"x\": networks = \"10.0.0.0/33\": not a network (10.0.0.0/8, 2001:db8::/32) or address"
    );
    assert!(
        rule("name = \"x\"\nsites = [\"a/b\"]").starts_with("cluster[0] \"x\": sites = \"a/b\"")
    );
    assert!(
        err("[[cluster]]\nname = \"a\"\nsites = [\"A\"]\n[[cluster]]\nname = \"A\"\nhosts = [\"h*\"]")
            .starts_with("cluster[1] \"A\": name = \"A\": a rule before it is named \"a\"")
    );
    assert!(
        rule("name = \"x\"\nsites = [\"A\"]\n[[cluster.channel]]\nhost = \"h\"\nport = 0")
            .starts_with("cluster[0] \"x\": channel.port = 0")
    );
    assert!(rule("name = \"x\"\nsites = [\"A\"]\nowner = \"a\\nb\"").contains("owner"));
    assert!(err("max_clusters = 0").starts_with("max_clusters = 0"));
    assert!(err("[[cluster]]\nname = \"x\"\nsite = [\"A\"]").contains("unknown field `site`"));
    // A good one.
    let s = from(
        "cluster_by_site = true\n[[cluster]]\nname = \"SITEA xcache\"\nsites = [\"SITEA\"]\nnetworks = [\"10.1.2.0/24\"]\n[[cluster.channel]]\nhost = \"127.0.0.1\"\nport = 8650\n",
    )
    .unwrap();
    assert!(s.grouping.by_site);
    assert_eq!(s.grouping.rules[0].channels[0].port, 8650);
    assert_eq!(s.grouping.max_clusters, 1000);
}

/// Every number key has its range, given in its entry (a key added
/// without one fails here), and no key that is not a number has one.
#[test]
fn every_number_key_has_a_range() {
    fn numbers<T: serde::Serialize>(t: &T) -> serde_json::Map<String, serde_json::Value> {
        match serde_json::to_value(t).unwrap() {
            serde_json::Value::Object(m) => m,
            other => panic!("{other:?}"),
        }
    }
    let hold = |values: serde_json::Map<String, serde_json::Value>, keys: &[Key]| {
        for key in keys {
            let number = values.get(key.name).is_some_and(|v| v.is_u64());
            let range = key.range;
            assert_eq!(
                number,
                range.is_some(),
                "{}: number {number}, range {range:?}",
                key.name
            );
            if let Some(r) = range {
                let default = values[key.name].as_u64().unwrap();
                assert!(
                    r.check(default).is_ok(),
                    "{}'s default {default} is out of {r:?}",
                    key.name
                );
            }
        }
    };
    let file = FileConfig {
        value_heartbeat: Some(super::file::DEFAULT_VALUE_HEARTBEAT),
        ..FileConfig::default()
    };
    hold(numbers(&file), KEYS);
    let channel: ChannelConfig = toml::from_str("host = \"h\"").unwrap();
    hold(numbers(&channel), CHANNEL_KEYS);
}

/// Issue 34, items 8-11: what passed check-config and then failed or
/// panicked `serve` (or failed it with exit 3) is refused, naming the key.
#[test]
fn values_serve_cannot_use_are_refused_by_name() {
    // 8: u64::MAX seconds panicked at SIGHUP and SIGTERM (Instant + it).
    assert_eq!(
        err("drain_timeout = 18446744073709551615"),
        "drain_timeout = 18446744073709551615: must be at most 3600 (seconds)"
    );
    assert_eq!(
        err("stats_interval = 86401"),
        "stats_interval = 86401: must be at most 86400 (seconds; 0: never)"
    );
    assert_eq!(
        err("state_interval = 0"),
        "state_interval = 0: must be at least 1 second"
    );
    // 9: gmetad wrote the hosts' RRDs into <rrd_rootdir>/../.
    for name in ["..", ".", "__SummaryInfo__", "__summaryinfo__"] {
        let e = err(&format!("cluster_name = {name:?}"));
        assert!(e.starts_with(&format!("cluster_name = {name:?}: ")), "{e}");
    }
    assert!(from("cluster_name = \"..x\"").is_ok());
    // 10: "cannot resolve :", exit 3, retried for ever by the unit.
    for host in [
        "\"\"",
        "\" \"",
        "\"a\\u0000b\"",
        &format!("{:?}", "h".repeat(254)),
        "\"gmond example\"",
    ] {
        let e = err(&format!("[[channel]]\nhost = {host}"));
        assert!(e.starts_with("channel.host = "), "{host}: {e}");
    }
    assert!(err("[[channel]]\nhost = \"239.2.11.71\"\nttl = 256").starts_with("channel.ttl = 256"));
    // 11: a NUL byte in a path: serve exited 2 where check-config said 0.
    assert_eq!(
        err("state_file = \"/tmp/a\\u0000b\""),
        "state_file = \"/tmp/a\\0b\": contains a NUL byte, which no path may"
    );
    assert_eq!(
        err("control_socket = \"/tmp/a\\u0000b\""),
        "control_socket = \"/tmp/a\\0b\": contains a NUL byte, which no path may"
    );
    assert!(err(&format!("state_file = \"/tmp/{}\"", "s".repeat(251))).contains("longer than 250"));
}

/// A `state_file` that is a FIFO (or a socket, a device) is refused by
/// `check-config` as by `serve`, exit 2: `serve` waited on the FIFO for
/// ever at its start, SIGTERM unheard (found trying issue 34's fixes).
#[test]
fn a_state_file_that_is_a_fifo_is_refused() {
    let dir = std::env::temp_dir().join(format!("x2g-cfg-fifo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("state");
    let _ = std::fs::remove_file(&path);
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path and a mode; no memory is shared.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let shown = path.display().to_string();
    assert_eq!(
        err(&format!(
            "send = false\nxml_listen = [\"127.0.0.1:0\"]\nstate_file = {shown:?}"
        )),
        format!(
            "state_file = {shown:?}: is not a regular file (a FIFO, socket or device); name a file"
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A value of 10 MB (or a TOML line of 10 MB) is named in an error of a
/// few hundred bytes, not printed whole: a 100 MB `cluster_name` printed
/// 100 MB to stderr, a 10 MB line the TOML parser quoted 20 MB (found
/// trying issue 34's fixes).
#[test]
fn a_huge_value_is_cut_in_its_error() {
    let huge = "a".repeat(10 << 20);
    let named = err(&format!("cluster_name = \"{huge}\""));
    assert!(named.len() < 1024, "{} bytes", named.len());
    assert!(named.starts_with("cluster_name = \"aaaa"), "{named}");
    assert!(
        named.contains(&format!("... ({} bytes)", huge.len() + 2)),
        "{named}"
    );
    // Why, at the end of the line, is still said.
    assert!(
        named.ends_with("(gmetad and ganglia-web use it in paths)"),
        "{named}"
    );
    // And the key after a rule's name.
    let rule = err(&format!(
        "send = false\nxml_listen = [\"127.0.0.1:0\"]\n[[cluster]]\nname = \"{huge}\"\nhosts = [\"*\"]"
    ));
    assert!(rule.len() < 1024, "{} bytes", rule.len());
    assert!(rule.starts_with("cluster[0] \"aaaa"), "{rule}");
    assert!(rule.contains(": name = \"aaaa"), "{rule}");
    // The TOML parser's quote of a line of 10 MB: its start and its end.
    let quoted = err(&format!("cluster_name = \"{huge}\" x"));
    assert!(quoted.len() < 8192, "{} bytes", quoted.len());
    assert!(
        quoted.starts_with("t.toml: TOML parse error at line 1"),
        "{quoted}"
    );
    assert!(quoted.contains(" bytes left out) ... "), "{quoted}");
}

/// Issue 42, item 5 (and item 1's rule): a cluster name gmetad would make
/// a misplaced directory of is refused naming the key, never changed:
/// blank, white space at an end, `.`, `..`, `__SummaryInfo__` in any
/// case, over 128 bytes (`ganglia/path_name.rs`).
#[test]
fn cluster_names_that_break_the_path_rule_are_refused() {
    for (name, why) in [
        (" ", "must not be blank"),
        ("   ", "must not be blank"),
        ("\u{a0}", "must not be blank"),
        (" prod", "must not be blank"),
        ("prod ", "must not be blank"),
        ("..", "must not be '.' or '..'"),
        (
            "__SUMMARYINFO__",
            "__SummaryInfo__ is gmetad's summary directory",
        ),
        ("a\u{1}b", "without '/' or control characters"),
    ] {
        // As TOML writes it (Rust's `{:?}` writes `\u{a0}`, TOML `\u00A0`).
        let toml: String = name
            .chars()
            .map(|c| match c {
                ' '..='~' => c.to_string(),
                c => format!("\\u{:04X}", c as u32),
            })
            .collect();
        let e = err(&format!("cluster_name = \"{toml}\""));
        assert!(
            e.starts_with(&format!("cluster_name = {name:?}: ")) && e.contains(why),
            "{name:?}: {e}"
        );
        let e = err(&format!("[[cluster]]\nname = \"{toml}\"\nsites = [\"A\"]"));
        assert!(
            e.starts_with(&format!("cluster[0] {name:?}: name = {name:?}: ")),
            "{name:?}: {e}"
        );
    }
    let long = "x".repeat(129);
    assert!(err(&format!("cluster_name = {long:?}")).contains("1 to 128 bytes"));
    assert!(from(&format!("cluster_name = {:?}", &long[1..])).is_ok());
    assert!(from("cluster_name = \"T2 Site\"").is_ok());
}

/// `recover_from`: each entry a HOST:PORT, refused by name otherwise.
#[test]
fn recover_from_takes_host_port_entries_only() {
    let ok = from("recover_from = [\"gmetad.example.org:8651\", \"127.0.0.1:8649\"]").unwrap();
    assert_eq!(
        ok.recover_from,
        ["gmetad.example.org:8651", "127.0.0.1:8649"]
    );
    assert!(from("").unwrap().recover_from.is_empty());
    for bad in [
        "gmetad",
        "gmetad:0",
        ":8651",
        "gmetad:86510",
        "gm etad:8651",
    ] {
        assert_eq!(
            err(&format!("recover_from = [{bad:?}]")),
            format!(
                "recover_from = {bad:?}: not a HOST:PORT (gmetad's xml_port or a gmond's tcp_accept_channel)"
            ),
            "{bad}"
        );
    }
}
