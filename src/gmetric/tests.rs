use super::*;

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn args(a: &[&str]) -> getopt::Options {
    match getopt::parse(
        "gmetric",
        &a.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
    ) {
        Ok(getopt::Parsed::Run(o)) => o,
        other => panic!("{other:?}"),
    }
}

fn vm() -> String {
    "vm".to_string()
}

fn packets(a: &[&str], conf: &GmondConf) -> (Vec<u8>, Vec<u8>) {
    match Metric::from_options(&args(a), conf, &vm) {
        Ok(m) => m.encode(),
        Err(e) => panic!("{a:?}: {}", e.message),
    }
}

fn refused(a: &[&str]) -> String {
    match Metric::from_options(&args(a), &GmondConf::default(), &vm) {
        Ok(m) => panic!("{a:?} accepted: {m:?}"),
        Err(e) => {
            assert_eq!(e.code, 1);
            e.message
        }
    }
}

/// Datagrams captured from the real gmetric 3.7.2 on a host named `vm`.
#[test]
fn packets_equal_real_gmetric() {
    let conf = GmondConf::default();
    let (m, v) = packets(&["-n", "m", "-v", "1", "-t", "uint32"], &conf);
    assert_eq!(
        m,
        hex(
            "0000008000000002766d0000000000016d000000000000000000000675696e7433320000000000016d00000000000000000000030000003c0000000000000000"
        )
    );
    assert_eq!(
        v,
        hex("0000008500000002766d0000000000016d0000000000000000000002257300000000000131000000")
    );
    let (m, _) = packets(&["-n", "m", "-v", "1", "-t", "int8"], &conf);
    assert_eq!(
        m,
        hex(
            "0000008000000002766d0000000000016d0000000000000000000004696e7438000000016d00000000000000000000030000003c0000000000000000"
        )
    );
    let (_, v) = packets(&["-n", "m", "-v", "hello", "-t", "string"], &conf);
    assert_eq!(
        v,
        hex(
            "0000008500000002766d0000000000016d0000000000000000000002257300000000000568656c6c6f000000"
        )
    );
    // Every extra, in gmetric's fixed order, with -S and -H.
    let (m, v) = packets(
        &[
            "-n",
            "m",
            "-v",
            "1",
            "-t",
            "uint32",
            "-T",
            "t",
            "-D",
            "d",
            "-g",
            "g1,g2",
            "-C",
            "c",
            "-H",
            "-S",
            "1.2.3.4:sh",
        ],
        &conf,
    );
    assert_eq!(
        m,
        hex(
            "000000800000000a312e322e332e343a7368000000000009686561727462656174000000000000010000000675696e74333200000000000968656172746265617400000000000000000000000000000000000000000000070000000a53504f4f465f484f535400000000000a312e322e332e343a736800000000000f53504f4f465f48454152544245415400000000037965730000000007434c55535445520000000001630000000000000547524f555000000000000002673100000000000547524f5550000000000000026732000000000004444553430000000164000000000000055449544c450000000000000174000000"
        )
    );
    assert_eq!(
        v,
        hex(
            "000000850000000a312e322e332e343a73680000000000096865617274626561740000000000000100000002257300000000000130000000"
        )
    );
    // override_hostname/override_ip from gmond.conf.
    let conf = GmondConf {
        override_hostname: Some("ovh".into()),
        override_ip: Some("10.9.8.7".into()),
        ..Default::default()
    };
    let (m, v) = packets(&["-n", "m", "-v", "1", "-t", "uint32"], &conf);
    assert_eq!(
        m,
        hex(
            "000000800000000c31302e392e382e373a6f7668000000016d000000000000010000000675696e7433320000000000016d00000000000000000000030000003c00000000000000010000000a53504f4f465f484f535400000000000c31302e392e382e373a6f7668"
        )
    );
    assert_eq!(
        v,
        hex(
            "000000850000000c31302e392e382e373a6f7668000000016d0000000000000100000002257300000000000131000000"
        )
    );
}

#[test]
fn slopes_groups_and_defaults() {
    let m = Metric::from_options(
        &args(&[
            "-n", "m", "-v", "1", "-t", "float", "-s", "bogus", "-g", ",a, ,b,", "-x", "-5",
        ]),
        &GmondConf::default(),
        &vm,
    )
    .ok()
    .unwrap();
    assert_eq!(m.slope, Slope::Unspecified);
    assert_eq!(m.tmax, 4294967291);
    assert_eq!(
        m.extra,
        vec![("GROUP", "a".to_string()), ("GROUP", "b".to_string())]
    );
    for (word, slope) in [
        ("zero", Slope::Zero),
        ("positive", Slope::Positive),
        ("negative", Slope::Negative),
        ("both", Slope::Both),
        ("derivative", Slope::Derivative),
        ("ZERO", Slope::Unspecified),
    ] {
        assert_eq!(super::slope(word), slope);
    }
    // -C given empty is still sent.
    let m = Metric::from_options(
        &args(&["-n", "m", "-v", "1", "-t", "float", "-C", ""]),
        &GmondConf::default(),
        &vm,
    )
    .ok()
    .unwrap();
    assert_eq!(m.extra, vec![("CLUSTER", String::new())]);
}

/// gmetric 3.7.2's messages for the same mistakes.
#[test]
fn gmetric_messages() {
    let incorrect = "Incorrect options supplied, exiting.\n";
    let quote = "one of your parameters has an invalid character '\"'. exiting.\n";
    let cases: &[(&[&str], &str)] = &[
        (&[], incorrect),
        (&["-n", "m", "-v", "1"], incorrect),
        (&["-H"], incorrect),
        (&["-n", "a\"b", "-v", "1", "-t", "uint32"], quote),
        (&["-n", "m", "-v", "1", "-t", "uint32", "-u", "\""], quote),
        (
            &["-n", "m", "-v", "1", "-t", "int64"],
            "the type parameter \"int64\" is not a valid type. exiting.\n",
        ),
        (
            &["-n", "m", "-v", "abc", "-t", "uint32"],
            "the value parameter \"abc\" does not represent a number. exiting.\n",
        ),
        (
            &["-n", "m", "-v", "1", "-t", "uint32", "-S", "nocolon"],
            "Incorrect format for spoof argument. exiting.\n",
        ),
    ];
    for (argv, message) in cases {
        assert_eq!(refused(argv), *message, "{argv:?}");
    }
    // Heartbeat mode ignores -n/-v/-t entirely: the same packets as
    // without them.
    let conf = GmondConf::default();
    assert_eq!(
        packets(
            &["-S", "1.2.3.4:h", "-H", "-t", "int64", "-n", "a\"b"],
            &conf
        ),
        packets(&["-S", "1.2.3.4:h", "-H"], &conf)
    );
}

/// Where gmetric is wrong: refused, with a reason.
#[test]
fn deliberate_refusals() {
    assert!(
        refused(&["-n", "m", "-v", "1", "-t", "uint32", "-H"])
            .starts_with("-H (--heartbeat) needs -S (--spoof)")
    );
    assert!(
        refused(&["-n", "", "-v", "1", "-t", "uint32"]).starts_with("the name parameter is empty")
    );
    for (opt, bad) in [
        ("-T", "a<b"),
        ("-D", "a&b"),
        ("-g", "a\"b"),
        ("-C", "x>y"),
        ("-S", "1.2.3.4:a&b"),
    ] {
        let msg = refused(&["-n", "m", "-v", "1", "-t", "uint32", opt, bad]);
        assert!(msg.contains("unescaped"), "{opt} {bad}: {msg}");
    }
    assert!(
        refused(&["-n", "a<b", "-v", "1", "-t", "uint32"])
            .starts_with("the name parameter \"a<b\" has the character '<'")
    );
    assert!(refused(&["-n", "m", "-v", "1", "-t", "uint32", "-u", "a&b"]).contains("'&'"));
    assert!(
        refused(&["-n", "m", "-v", "\u{e9}t\u{e9}", "-t", "string"])
            .starts_with("the value parameter has the character '\u{e9}'")
    );
    assert!(refused(&["-n", "m", "-v", "a\u{1}b", "-t", "string"]).contains("'\\u{1}'"));
    assert!(
        refused(&["-n", "m", "-v", "1", "-t", "uint32", "-S", "hostonly:"])
            .contains("needs both parts")
    );
    assert!(
        refused(&["-n", "m", "-v", "1", "-t", "uint32", "-S", ":name"])
            .contains("needs both parts")
    );
    // gmond escapes these in a string VAL: accepted, and sent as given.
    let (_, value) = packets(
        &["-n", "m", "-v", "a<b>&'c", "-t", "string"],
        &GmondConf::default(),
    );
    match crate::ganglia::xdr::decode(&value) {
        Ok(crate::ganglia::xdr::Packet::Value { id, value, .. }) => {
            assert_eq!((&*id.name, value.to_string()), ("m", "a<b>&'c".to_string()));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn long_values_are_sent_with_a_warning() {
    let ok = Metric::from_options(
        &args(&["-n", "m", "-v", &"x".repeat(800), "-t", "string"]),
        &GmondConf::default(),
        &vm,
    )
    .ok()
    .unwrap();
    assert!(ok.gmond_line_warnings().is_empty());
    let long = Metric::from_options(
        &args(&["-n", "m", "-v", &"x".repeat(1428), "-t", "string"]),
        &GmondConf::default(),
        &vm,
    )
    .ok()
    .unwrap();
    let (_, v) = long.encode();
    assert_eq!(v.len(), 1464, "the largest value that fits");
    assert_eq!(long.gmond_line_warnings().len(), 1);
}

#[test]
fn config_and_channels() {
    // No -c and no default file: gmond's built-in default channel.
    let (_, specs) = channels_from(&args(&[]), "/nonexistent/gmond.conf")
        .ok()
        .unwrap();
    assert_eq!(
        specs,
        vec![ChannelSpec {
            host: "239.2.11.71".into(),
            port: 8649,
            ttl: 1,
            mcast_if: None,
            bind: None
        }]
    );
    // -c naming a missing file: gmetric's message.
    let e = channels_from(
        &args(&["-c", "/nonexistent/x.conf"]),
        "/nonexistent/gmond.conf",
    )
    .err()
    .unwrap();
    assert_eq!(
        (e.code, e.message.as_str()),
        (1, "Configuration file '/nonexistent/x.conf' not found.\n\n")
    );
    // A directory: gmetric's flex error, exit 2.
    let e = channels_from(&args(&["-c", "/"]), "/nonexistent")
        .err()
        .unwrap();
    assert_eq!(
        (e.code, e.message.as_str()),
        (2, "input in flex scanner failed\n")
    );
    // No channel in the file.
    let dir = std::env::temp_dir().join(format!("x2g-gm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("g.conf");
    std::fs::write(&f, "globals { override_hostname = h }").unwrap();
    let e = channels_from(&args(&["-c", f.to_str().unwrap()]), "/nonexistent")
        .err()
        .unwrap();
    assert_eq!(
        e.message,
        "Unable to create ganglia send channels. Exiting.\n"
    );
    std::fs::write(
        &f,
        "udp_send_channel { host = 127.0.0.1 port = 9 bind = 127.0.0.1 bind_hostname = yes }",
    )
    .unwrap();
    let e = channels_from(&args(&["-c", f.to_str().unwrap()]), "/nonexistent")
        .err()
        .unwrap();
    assert!(
        e.message
            .starts_with("udp_send_channel: bind and bind_hostname are mutually exclusive"),
        "{}",
        e.message
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
