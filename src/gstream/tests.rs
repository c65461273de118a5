use super::*;

fn capture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/gstream")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What a binary g-stream datagram (no instance name) adds up to.
fn closes(stod: u32, files: u64, hit: u64, miss: u64) -> Datagram {
    let c = PfcTotals {
        stod,
        files,
        bytes_hit: hit,
        bytes_miss: miss,
        bytes_bypass: 0,
        bad_records: 0,
    };
    Datagram::Pfc(c, None)
}

/// Real xrootd 5.5.3 XCache datagrams (tests/data/gstream/README.md has
/// each record): their file_close records, added up.
#[test]
fn real_pfc_gstream_datagrams_add_up() {
    const STOD: u32 = 1_795_582_051;
    assert_eq!(
        read(&capture("pfc_1.bin")),
        Ok(closes(
            STOD,
            3,
            3_655_360 + 7_208_960,
            196_608 + 327_680 + 200_000
        ))
    );
    assert_eq!(
        read(&capture("pfc_2.bin")),
        Ok(closes(STOD, 2, 3_000_000 + 2_368_928, 131_072))
    );
    assert_eq!(
        read(&capture("pfc_3.bin")),
        Ok(closes(STOD, 3, 2_155_360 + 1_500_000 + 100_000, 131_072))
    );
    // `send json insthdr`: a JSON header line instead of the binary one,
    // with the instance name.
    let Datagram::Pfc(c, _) = closes(STOD, 3, 8_570_560, 724_288) else {
        unreachable!()
    };
    assert_eq!(
        read(&capture("pfc_json_1.bin")),
        Ok(Datagram::Pfc(c, Some("pfcB".into())))
    );
}

#[test]
fn summary_records_are_not_monitoring_data() {
    for d in [
        &capture("pfc_summary.xml")[..],
        br#"{"statistics":{"tod":1}}"#,
        b"  <statistics/>",
        b"",
        b"g",
        b"garbage that starts with g",
    ] {
        assert_eq!(read(d), Ok(Datagram::NotMonitoring), "{d:?}");
    }
}

/// A binary packet: code, pseq, plen (the datagram's length), stod.
fn packet(code: u8, rest: &[u8]) -> Vec<u8> {
    let len = (8 + rest.len()) as u16;
    let mut d = vec![code, 1];
    d.extend_from_slice(&len.to_be_bytes());
    d.extend_from_slice(&1_795_582_051u32.to_be_bytes());
    d.extend_from_slice(rest);
    d
}

#[test]
fn other_monitoring_data_is_told_apart() {
    // The binary route's server identification packet.
    assert_eq!(
        read(&packet(b'=', b"&site=X&host=h")),
        Ok(Datagram::Other(Kind::Packet(b'=')))
    );
    // Another provider's g-stream (tcpmon), binary and JSON.
    let mut tcpmon = [0u8; 16];
    tcpmon[8] = b'T';
    assert_eq!(
        read(&packet(b'g', &tcpmon)),
        Ok(Datagram::Other(Kind::Gstream(b'T')))
    );
    assert_eq!(
        read(br#"{"code":"g","pseq":1,"stod":5,"gs":{"type":"T"}}"#),
        Ok(Datagram::Other(Kind::Gstream(b'T')))
    );
    // `send json`'s server identification, sent at start unless `noident`.
    assert_eq!(
        read(br#"{"code":"=","pseq":0,"stod":5,"src":{"site":"S","host":"h","inst":"x"}}"#),
        Ok(Datagram::Other(Kind::Packet(b'=')))
    );
    // A length that is not the datagram's: not monitoring data.
    let mut d = packet(b'=', b"x");
    d[3] += 1;
    assert_eq!(read(&d), Ok(Datagram::NotMonitoring));
}

#[test]
fn broken_gstream_datagrams_are_errors_or_counted() {
    assert_eq!(read(&packet(b'g', b"short")), Err(Error::Truncated(13)));
    for d in [
        &br#"{"code":"g","pseq":1}"#[..],
        br#"{"code":"g","stod":-1,"gs":{"type":"C"}}"#,
        br#"{"code":"g","stod":1,"gs":{"type":"CC"}}"#,
        br#"{"code":"g" not json"#,
    ] {
        assert_eq!(read(d), Err(Error::BadHeader), "{d:?}");
    }
    // Bad records are counted and left out; the good ones are taken.
    let body = b"{\"code\":\"g\",\"stod\":7,\"gs\":{\"type\":\"C\"}}\n\
        {\"event\":\"file_close\",\"b_hit\":10,\"b_miss\":2,\"b_bypass\":1}\n\
        {\"event\":\"file_close\",\"b_hit\":-1}\n\
        not json\n\
        {\"event\":\"other\",\"b_hit\":99}\n\
        {\"event\":\"file_close\",\"b_hit\":5}\0";
    assert_eq!(
        read(body),
        Ok(Datagram::Pfc(
            PfcTotals {
                stod: 7,
                files: 2,
                bytes_hit: 15,
                bytes_miss: 2,
                bytes_bypass: 1,
                bad_records: 2,
            },
            None
        ))
    );
    // Sums saturate rather than wrap.
    let body = format!(
        "{{\"code\":\"g\",\"stod\":7,\"gs\":{{\"type\":\"C\"}}}}\n{{\"event\":\"file_close\",\"b_hit\":{m}}}\n{{\"event\":\"file_close\",\"b_hit\":{m}}}",
        m = u64::MAX
    );
    let Ok(Datagram::Pfc(c, _)) = read(body.as_bytes()) else {
        panic!()
    };
    assert_eq!(c.bytes_hit, u64::MAX);
}
