//! One golden table of (packet, bytes, text) drives the encoder, the
//! decoder and the one-field-per-line text (`--dry-run`); the bytes were
//! worked out by hand from gm_protocol.x.

use super::*;

const ID_HEX: &str = "0000000c 31302e302e302e313a647331 \
                      0000000e 78726f6f74642e6c696e6b2e696e 0000 \
                      00000001";

fn id() -> MetricId<'static> {
    MetricId::new("10.0.0.1:ds1", "xrootd.link.in", true)
}

pub(crate) fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A packet, its bytes, and its text.
pub(crate) struct Golden {
    pub packet: Packet<'static>,
    pub bytes: Vec<u8>,
    pub text: &'static str,
}

fn value(fmt: &'static str, value: Value<'static>) -> Packet<'static> {
    Packet::Value {
        id: id(),
        fmt: Cow::Borrowed(fmt),
        value,
    }
}

pub(crate) fn golden() -> Vec<Golden> {
    let g = |packet, bytes: String, text| Golden {
        packet,
        bytes: hex(&bytes),
        text,
    };
    vec![
        g(
            Packet::string_value(id(), "42"),
            format!("00000085 {ID_HEX} 00000002 2573 0000 00000002 3432 0000"),
            "gmetric value (133)\n  host   \"10.0.0.1:ds1\"\n  metric \"xrootd.link.in\"\n  spoof  true\n  fmt    \"%s\"\n  value  \"42\"\n",
        ),
        g(
            Packet::Metadata {
                id: id(),
                meta: Metadata {
                    value_type: Cow::Borrowed("double"),
                    units: Cow::Borrowed("bytes/s"),
                    slope: Slope::Positive,
                    tmax: 30,
                    dmax: 3600,
                    extra: Cow::Borrowed(&[(Cow::Borrowed("GROUP"), Cow::Borrowed("xrootd.link"))]),
                },
            },
            format!(
                "00000080 {ID_HEX} 00000006 646f75626c65 0000 \
                 0000000e 78726f6f74642e6c696e6b2e696e 0000 00000007 62797465732f73 00 \
                 00000001 0000001e 00000e10 00000001 \
                 00000005 47524f5550 000000 0000000b 78726f6f74642e6c696e6b 00"
            ),
            "gmetadata_full (128)\n  host   \"10.0.0.1:ds1\"\n  metric \"xrootd.link.in\"\n  spoof  true\n  type   \"double\"\n  name   \"xrootd.link.in\"\n  units  \"bytes/s\"\n  slope  1 (positive)\n  tmax   30\n  dmax   3600\n  extra  GROUP=\"xrootd.link\"\n",
        ),
        g(
            Packet::uint_value(id(), 1_700_000_000),
            format!("00000084 {ID_HEX} 00000002 2575 0000 6553f100"),
            "gmetric value (132)\n  host   \"10.0.0.1:ds1\"\n  metric \"xrootd.link.in\"\n  spoof  true\n  fmt    \"%u\"\n  value  \"1700000000\"\n",
        ),
        g(
            Packet::Request { id: id() },
            format!("00000088 {ID_HEX}"),
            "gmetadata_request (136)\n  host   \"10.0.0.1:ds1\"\n  metric \"xrootd.link.in\"\n  spoof  true\n",
        ),
        g(
            value("%u", Value::UShort(7)),
            format!("00000081 {ID_HEX} 00000002 2575 0000 00000007"),
            "gmetric value (129)\n  host   \"10.0.0.1:ds1\"\n  metric \"xrootd.link.in\"\n  spoof  true\n  fmt    \"%u\"\n  value  \"7\"\n",
        ),
        g(
            value("%d", Value::Short(-5)),
            format!("00000082 {ID_HEX} 00000002 2564 0000 fffffffb"),
            "gmetric value (130)\n  host   \"10.0.0.1:ds1\"\n  metric \"xrootd.link.in\"\n  spoof  true\n  fmt    \"%d\"\n  value  \"-5\"\n",
        ),
        g(
            value("%d", Value::Int(-7)),
            format!("00000083 {ID_HEX} 00000002 2564 0000 fffffff9"),
            "gmetric value (131)\n  host   \"10.0.0.1:ds1\"\n  metric \"xrootd.link.in\"\n  spoof  true\n  fmt    \"%d\"\n  value  \"-7\"\n",
        ),
        g(
            value("%f", Value::Float(1.5)),
            format!("00000086 {ID_HEX} 00000002 2566 0000 3fc00000"),
            "gmetric value (134)\n  host   \"10.0.0.1:ds1\"\n  metric \"xrootd.link.in\"\n  spoof  true\n  fmt    \"%f\"\n  value  \"1.5\"\n",
        ),
        g(
            value("%f", Value::Double(2.25)),
            format!("00000087 {ID_HEX} 00000002 2566 0000 40020000 00000000"),
            "gmetric value (135)\n  host   \"10.0.0.1:ds1\"\n  metric \"xrootd.link.in\"\n  spoof  true\n  fmt    \"%f\"\n  value  \"2.25\"\n",
        ),
    ]
}

#[test]
fn the_golden_packets_encode_to_their_bytes() {
    for (i, g) in golden().iter().enumerate() {
        let mut out = Vec::new();
        encode(&mut out, &g.packet);
        assert_eq!(out, g.bytes, "golden {i}: {}", g.text);
    }
}

#[test]
fn the_golden_bytes_decode_to_their_packets_and_text() {
    for (i, g) in golden().iter().enumerate() {
        let p = decode(&g.bytes).unwrap_or_else(|e| panic!("golden {i}: {e}"));
        // Its text borrows from the bytes: nothing copied.
        assert!(matches!(p.id().host, Cow::Borrowed(_)), "golden {i}");
        assert_eq!(p.to_string(), g.text, "golden {i}");
        assert_eq!(p.into_owned(), g.packet, "golden {i}");
    }
}

#[test]
fn the_fast_path_prefix_and_a_string_make_the_value_packet() {
    let mut out = Vec::new();
    encode_string_value_prefix(&mut out, &id());
    append_string(&mut out, b"42");
    assert_eq!(out, golden()[0].bytes);
}

#[test]
fn the_string_value_tail_is_what_the_prefix_writes() {
    let (mut whole, mut parts) = (Vec::new(), Vec::new());
    encode_string_value_prefix(&mut whole, &id());
    string_value_head(&mut parts, &id().host);
    append_string(&mut parts, id().name.as_bytes());
    parts.extend_from_slice(&STRING_VALUE_TAIL);
    assert_eq!(parts, whole);
    append_string(&mut parts, b"42");
    assert_eq!(parts, golden()[0].bytes);
}

#[test]
fn encoding_matches_xdr_codec() {
    for text in ["", "a", "ab", "abc", "abcd", "abcde", "xrootd.link.in", "é"] {
        let (mut ours, mut reference) = (Vec::new(), Vec::new());
        put_str(&mut ours, text);
        xdr_codec::pack_string(text, None, &mut reference).unwrap();
        assert_eq!(ours, reference, "{text:?}");
    }
    for v in [0u32, 1, 133, 0x0102_0304, u32::MAX] {
        let (mut ours, mut reference) = (Vec::new(), Vec::new());
        put_u32(&mut ours, v);
        xdr_codec::pack(&v, &mut reference).unwrap();
        assert_eq!(ours, reference, "{v}");
    }
}

#[test]
fn decode_rejects_truncated_and_hostile_packets() {
    for g in golden() {
        let mut out = g.bytes.clone();
        for cut in 0..out.len() {
            assert!(decode(&out[..cut]).is_err(), "cut at {cut}: {}", g.text);
        }
        out.push(0);
        assert_eq!(decode(&out), Err(DecodeError::TrailingBytes(1)));
    }
    assert_eq!(decode(&hex("00000099")), Err(DecodeError::UnknownId(0x99)));
    // A string claiming 4 GiB.
    assert!(decode(&hex("00000085 ffffffff 41414141")).is_err());
    let metadata = &golden()[1].bytes;
    // A metadata packet claiming 2^32-1 extras (its last 32 bytes are
    // the count and the one pair).
    let mut m = metadata[..metadata.len() - 32].to_vec();
    m.extend_from_slice(&[0xff; 4]);
    assert_eq!(decode(&m), Err(DecodeError::Truncated));
    // A slope gmond does not know.
    let mut m = metadata.clone();
    let at = m.len() - 32 - 12;
    assert_eq!(m[at..at + 4], 1u32.to_be_bytes());
    m[at..at + 4].copy_from_slice(&9u32.to_be_bytes());
    assert_eq!(decode(&m), Err(DecodeError::UnknownSlope(9)));
    // Another name in the body than in the id.
    let mut m = metadata.clone();
    let at = 4 + 16 + 20 + 4 + 12 + 4;
    assert_eq!(m[at], b'x');
    m[at] = b'y';
    assert_eq!(decode(&m), Err(DecodeError::NamesDiffer));
}

#[test]
fn text_that_is_not_utf8_is_read_lossily() {
    let mut out = Vec::new();
    encode(&mut out, &Packet::string_value(id(), "ab"));
    let n = out.len();
    out[n - 4] = 0xff;
    match decode(&out) {
        Ok(Packet::Value {
            value: Value::Str(v),
            ..
        }) => assert_eq!(v, "\u{fffd}b"),
        other => panic!("{other:?}"),
    }
}
