use std::net::SocketAddr;
use std::path::PathBuf;

use super::settings::channels;
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
/// shipped file, set or commented out, and has its row in README's table;
/// neither names a key the gateway does not take.
#[test]
fn every_key_is_in_the_shipped_file_and_the_readme() {
    let keys = FileConfig::keys();
    assert!(
        keys.len() >= 27 && keys.contains(&"cluster_name"),
        "{keys:?}"
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let shipped = std::fs::read_to_string(root.join("conf/xrd2ganglia.toml")).unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let form = |key: &str| match key {
        "channel" => "[[channel]]".to_string(),
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
            "channel" => "| `[[channel]]`".to_string(),
            k => format!("| `{k}` |"),
        };
        assert!(
            readme.contains(&row),
            "README's config table has no row {row}"
        );
    }
    // README's table names nothing else, and says of each key what a
    // reload does with it, as RESTART_KEYS defines it.
    let table = &readme[readme
        .find("| key | default | on SIGHUP | meaning |")
        .unwrap()..];
    for line in table.lines().skip(2).take_while(|l| l.starts_with('|')) {
        let key = line.split('`').nth(1).unwrap_or("");
        let key = key.trim_start_matches("[[").trim_end_matches("]]");
        assert!(
            keys.contains(&key),
            "README's config table has {key:?}, which is no key"
        );
        let sighup = line.split(" | ").nth(2).unwrap_or("");
        let want = if crate::config::RESTART_KEYS.contains(&key) {
            "restart"
        } else {
            "at once"
        };
        assert_eq!(sighup, want, "README's config table, {key}");
    }
    assert!(
        crate::config::RESTART_KEYS.iter().all(|k| keys.contains(k)),
        "{:?}",
        crate::config::RESTART_KEYS
    );
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
