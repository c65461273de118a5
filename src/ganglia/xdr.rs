//! gmond's XDR packets (Ganglia 3.x `lib/gm_protocol.x`), encode and decode.
//!
//! ```text
//! every packet:    u32 id
//! metric_id:       string host | string name | bool spoof
//! 128 metadata:    metric_id | string type | string name | string units |
//!                  u32 slope | u32 tmax | u32 dmax | u32 n | n x (string k | string v)
//! 132 uint value:  metric_id | string fmt ("%u") | u32 value
//! 133 str value:   metric_id | string fmt ("%s") | string value
//! 136 request:     metric_id
//! string = u32 length, bytes, zero padding to a multiple of 4 (RFC 4506)
//! ```
//!
//! gmetric sends 128 + 133 for every metric; gmond reads at most
//! `max_udp_msg_len` = 1472 bytes and gmetric keeps packets to
//! [`MAX_PACKET`] = 1464 (1500 - IP - UDP headers), so we do too.
//! Other value ids (129-131, 134, 135) are decoded but never sent.

use std::fmt;
use std::io::Cursor;

use xdr_codec::unpack;

/// Largest datagram we send (and the largest gmetric sends).
pub const MAX_PACKET: usize = 1464;

pub const ID_METADATA: u32 = 128;
pub const ID_USHORT: u32 = 129;
pub const ID_SHORT: u32 = 130;
pub const ID_INT: u32 = 131;
pub const ID_UINT: u32 = 132;
pub const ID_STRING: u32 = 133;
pub const ID_FLOAT: u32 = 134;
pub const ID_DOUBLE: u32 = 135;
pub const ID_METADATA_REQUEST: u32 = 136;

/// How gmetad stores a metric: positive -> RRD COUNTER, derivative -> DERIVE,
/// anything else -> GAUGE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Slope {
    Zero = 0,
    Positive = 1,
    Negative = 2,
    Both = 3,
    Unspecified = 4,
    Derivative = 5,
}

impl Slope {
    pub fn from_u32(v: u32) -> Option<Slope> {
        Some(match v {
            0 => Slope::Zero,
            1 => Slope::Positive,
            2 => Slope::Negative,
            3 => Slope::Both,
            4 => Slope::Unspecified,
            5 => Slope::Derivative,
            _ => return None,
        })
    }

    /// The word gmetric's `-s` takes and gmond prints in `SLOPE="..."`.
    pub fn as_str(self) -> &'static str {
        match self {
            Slope::Zero => "zero",
            Slope::Positive => "positive",
            Slope::Negative => "negative",
            Slope::Both => "both",
            Slope::Unspecified => "unspecified",
            Slope::Derivative => "derivative",
        }
    }
}

/// Which host a metric belongs to. `spoof` is set when `host` is an
/// `ip:name` string naming another host than the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetricId<'a> {
    pub host: &'a str,
    pub name: &'a str,
    pub spoof: bool,
}

/// The body of a 128 packet after the metric id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Metadata<'a> {
    /// `string`, `uint32`, `double`, ... (gmond copies it into TYPE="").
    pub value_type: &'a str,
    pub units: &'a str,
    pub slope: Slope,
    pub tmax: u32,
    pub dmax: u32,
    /// Extra data in send order: SPOOF_HOST, SPOOF_HEARTBEAT, CLUSTER, GROUP, DESC, TITLE.
    pub extra: &'a [(&'a str, &'a str)],
}

/// Appends a 128 gmetadata_full packet.
pub fn encode_metadata(out: &mut Vec<u8>, id: &MetricId<'_>, meta: &Metadata<'_>) {
    put_u32(out, ID_METADATA);
    put_metric_id(out, id);
    put_str(out, meta.value_type);
    put_str(out, id.name);
    put_str(out, meta.units);
    put_u32(out, meta.slope as u32);
    put_u32(out, meta.tmax);
    put_u32(out, meta.dmax);
    put_u32(out, meta.extra.len() as u32);
    for (k, v) in meta.extra {
        put_str(out, k);
        put_str(out, v);
    }
}

/// Appends a 133 gmetric_string packet with format `%s`, as gmetric does for
/// every type (gmond converts by the metadata's type).
pub fn encode_string_value(out: &mut Vec<u8>, id: &MetricId<'_>, value: &str) {
    encode_string_value_prefix(out, id);
    put_str(out, value);
}

/// A 133 packet up to its value: [`encode_string_value`] is this followed
/// by [`append_string`] of the value (cached per metric on the fast path).
pub fn encode_string_value_prefix(out: &mut Vec<u8>, id: &MetricId<'_>) {
    put_u32(out, ID_STRING);
    put_metric_id(out, id);
    put_str(out, "%s");
}

/// Appends an XDR string (given as bytes: the caller knows they are text).
pub fn append_string(out: &mut Vec<u8>, s: &[u8]) {
    let len = s.len();
    out.reserve(4 + len + 3);
    out.extend_from_slice(&(len as u32).to_be_bytes());
    out.extend_from_slice(s);
    for _ in 0..(4 - len % 4) % 4 {
        out.push(0);
    }
}

/// Appends a 132 gmetric_uint packet with format `%u`. gmond reads a spoofed
/// heartbeat's value as an unsigned int for GMOND_STARTED, so heartbeats use this.
pub fn encode_uint_value(out: &mut Vec<u8>, id: &MetricId<'_>, value: u32) {
    put_u32(out, ID_UINT);
    put_metric_id(out, id);
    put_str(out, "%u");
    put_u32(out, value);
}

/// Appends a 136 gmetadata_request packet.
pub fn encode_metadata_request(out: &mut Vec<u8>, id: &MetricId<'_>) {
    put_u32(out, ID_METADATA_REQUEST);
    put_metric_id(out, id);
}

fn put_metric_id(out: &mut Vec<u8>, id: &MetricId<'_>) {
    put_str(out, id.host);
    put_str(out, id.name);
    put_u32(out, id.spoof as u32);
}

// Encoding is written out here rather than through xdr-codec's `pack`:
// every value packet is encoded on the hot path, and `pack` goes through
// io::Write per field (about 430 instructions per value packet against 90).
// The format is RFC 4506's: a big-endian u32; a string as its u32 length,
// its bytes and zero padding to a multiple of four.
// `tests::encoding_matches_xdr_codec` checks both give the same bytes.

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    append_string(out, s.as_bytes());
}

/// A decoded packet (owned; used by tests, `--dry-run` and for gmond's 136 requests).
#[derive(Clone, Debug, PartialEq)]
pub enum Packet {
    Metadata {
        id: OwnedMetricId,
        value_type: String,
        name: String,
        units: String,
        slope: u32,
        tmax: u32,
        dmax: u32,
        extra: Vec<(String, String)>,
    },
    Value {
        id: OwnedMetricId,
        packet_id: u32,
        fmt: String,
        value: Value,
    },
    MetadataRequest {
        id: OwnedMetricId,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnedMetricId {
    pub host: String,
    pub name: String,
    pub spoof: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    UShort(u16),
    Short(i16),
    Int(i32),
    UInt(u32),
    Str(String),
    Float(f32),
    Double(f64),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::UShort(v) => write!(f, "{v}"),
            Value::Short(v) => write!(f, "{v}"),
            Value::Int(v) => write!(f, "{v}"),
            Value::UInt(v) => write!(f, "{v}"),
            Value::Str(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v}"),
            Value::Double(v) => write!(f, "{v}"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// The datagram ended inside the packet.
    Truncated,
    /// The first word is not a packet id gmond knows.
    UnknownId(u32),
    /// A string's length runs past the datagram.
    BadString,
    /// Bytes left after the packet.
    TrailingBytes(usize),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated => write!(f, "truncated packet"),
            DecodeError::UnknownId(id) => write!(f, "unknown packet id {id}"),
            DecodeError::BadString => write!(f, "string longer than the packet"),
            DecodeError::TrailingBytes(n) => write!(f, "{n} bytes after the packet"),
        }
    }
}

impl std::error::Error for DecodeError {}

pub fn decode(bytes: &[u8]) -> Result<Packet, DecodeError> {
    let mut cur = Cursor::new(bytes);
    let id = get_u32(&mut cur)?;
    let packet = match id {
        ID_METADATA => {
            let mid = get_metric_id(&mut cur)?;
            let value_type = get_str(&mut cur)?;
            let name = get_str(&mut cur)?;
            let units = get_str(&mut cur)?;
            let slope = get_u32(&mut cur)?;
            let tmax = get_u32(&mut cur)?;
            let dmax = get_u32(&mut cur)?;
            let n = get_u32(&mut cur)? as usize;
            // Each pair takes at least 8 bytes: refuse counts the packet cannot hold.
            if n > bytes.len() / 8 {
                return Err(DecodeError::Truncated);
            }
            let mut extra = Vec::with_capacity(n);
            for _ in 0..n {
                extra.push((get_str(&mut cur)?, get_str(&mut cur)?));
            }
            Packet::Metadata {
                id: mid,
                value_type,
                name,
                units,
                slope,
                tmax,
                dmax,
                extra,
            }
        }
        ID_USHORT..=ID_DOUBLE => {
            let mid = get_metric_id(&mut cur)?;
            let fmt = get_str(&mut cur)?;
            let value = match id {
                ID_USHORT => Value::UShort(get_u32(&mut cur)? as u16),
                ID_SHORT => Value::Short(get_u32(&mut cur)? as i16),
                ID_INT => Value::Int(get_u32(&mut cur)? as i32),
                ID_UINT => Value::UInt(get_u32(&mut cur)?),
                ID_STRING => Value::Str(get_str(&mut cur)?),
                ID_FLOAT => Value::Float(f32::from_bits(get_u32(&mut cur)?)),
                _ => {
                    let hi = get_u32(&mut cur)? as u64;
                    let lo = get_u32(&mut cur)? as u64;
                    Value::Double(f64::from_bits(hi << 32 | lo))
                }
            };
            Packet::Value {
                id: mid,
                packet_id: id,
                fmt,
                value,
            }
        }
        ID_METADATA_REQUEST => Packet::MetadataRequest {
            id: get_metric_id(&mut cur)?,
        },
        other => return Err(DecodeError::UnknownId(other)),
    };
    let rest = bytes.len() - cur.position() as usize;
    if rest != 0 {
        return Err(DecodeError::TrailingBytes(rest));
    }
    Ok(packet)
}

fn get_u32(cur: &mut Cursor<&[u8]>) -> Result<u32, DecodeError> {
    unpack::<_, u32>(cur).map_err(|_| DecodeError::Truncated)
}

/// An XDR string, bounds-checked by hand: xdr-codec's `unpack_opaque_flex`
/// accepts a short read, so a truncated packet would decode.
fn get_str(cur: &mut Cursor<&[u8]>) -> Result<String, DecodeError> {
    let len = get_u32(cur)? as usize;
    let bytes = *cur.get_ref();
    let start = cur.position() as usize;
    let remaining = bytes.len() - start;
    if len > remaining {
        return Err(if len > bytes.len() {
            DecodeError::BadString
        } else {
            DecodeError::Truncated
        });
    }
    let padded = len.div_ceil(4) * 4;
    if padded > remaining {
        return Err(DecodeError::Truncated);
    }
    cur.set_position((start + padded) as u64);
    Ok(String::from_utf8_lossy(&bytes[start..start + len]).into_owned())
}

fn get_metric_id(cur: &mut Cursor<&[u8]>) -> Result<OwnedMetricId, DecodeError> {
    Ok(OwnedMetricId {
        host: get_str(cur)?,
        name: get_str(cur)?,
        spoof: get_u32(cur)? != 0,
    })
}

/// A value packet's value, borrowed from the packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueRef<'a> {
    /// A 133 string: the text as sent.
    Text(&'a [u8]),
    /// A 132 uint (the heartbeat's).
    UInt(u32),
}

/// Reads a 132 or 133 value packet without copying: the XML port's table
/// reads every value packet the gateway sends ([`decode`] allocates).
/// Other packets, and names that are not UTF-8, are errors.
pub fn decode_value(bytes: &[u8]) -> Result<(MetricId<'_>, ValueRef<'_>), DecodeError> {
    let mut at = 0;
    let word = |at: &mut usize| -> Result<u32, DecodeError> {
        let w = bytes.get(*at..*at + 4).ok_or(DecodeError::Truncated)?;
        *at += 4;
        Ok(u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
    };
    let string = |at: &mut usize| -> Result<&[u8], DecodeError> {
        let len = word(at)? as usize;
        let s = bytes.get(*at..*at + len).ok_or(DecodeError::BadString)?;
        *at += len.div_ceil(4) * 4;
        Ok(s)
    };
    fn text(b: &[u8]) -> Result<&str, DecodeError> {
        std::str::from_utf8(b).map_err(|_| DecodeError::BadString)
    }
    let id = word(&mut at)?;
    let host = text(string(&mut at)?)?;
    let name = text(string(&mut at)?)?;
    let spoof = word(&mut at)? != 0;
    string(&mut at)?; // fmt
    let value = match id {
        ID_STRING => ValueRef::Text(string(&mut at)?),
        ID_UINT => ValueRef::UInt(word(&mut at)?),
        other => return Err(DecodeError::UnknownId(other)),
    };
    if at != bytes.len() {
        return Err(if at > bytes.len() {
            DecodeError::Truncated
        } else {
            DecodeError::TrailingBytes(bytes.len() - at)
        });
    }
    Ok((MetricId { host, name, spoof }, value))
}

impl fmt::Display for Packet {
    /// One field per line, for `--dry-run` and test failure messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Packet::Metadata {
                id,
                value_type,
                name,
                units,
                slope,
                tmax,
                dmax,
                extra,
            } => {
                writeln!(f, "gmetadata_full (128)")?;
                write_id(f, id)?;
                writeln!(f, "  type   {value_type:?}")?;
                writeln!(f, "  name   {name:?}")?;
                writeln!(f, "  units  {units:?}")?;
                let word = Slope::from_u32(*slope).map(Slope::as_str).unwrap_or("?");
                writeln!(f, "  slope  {slope} ({word})")?;
                writeln!(f, "  tmax   {tmax}")?;
                writeln!(f, "  dmax   {dmax}")?;
                for (k, v) in extra {
                    writeln!(f, "  extra  {k}={v:?}")?;
                }
                Ok(())
            }
            Packet::Value {
                id,
                packet_id,
                fmt,
                value,
            } => {
                writeln!(f, "gmetric value ({packet_id})")?;
                write_id(f, id)?;
                writeln!(f, "  fmt    {fmt:?}")?;
                writeln!(f, "  value  {:?}", value.to_string())
            }
            Packet::MetadataRequest { id } => {
                writeln!(f, "gmetadata_request (136)")?;
                write_id(f, id)
            }
        }
    }
}

fn write_id(f: &mut fmt::Formatter<'_>, id: &OwnedMetricId) -> fmt::Result {
    writeln!(f, "  host   {:?}", id.host)?;
    writeln!(f, "  metric {:?}", id.name)?;
    writeln!(f, "  spoof  {}", id.spoof)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: MetricId<'static> = MetricId {
        host: "10.0.0.1:ds1",
        name: "xrootd.link.in",
        spoof: true,
    };

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

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Exact bytes, worked out by hand from gm_protocol.x.
    #[test]
    fn encodes_exact_bytes_and_decodes_them_back() {
        let mut out = Vec::new();
        encode_string_value(&mut out, &ID, "42");
        let expected = hex("00000085 \
             0000000c 31302e302e302e313a647331 \
             0000000e 78726f6f74642e6c696e6b2e696e 0000 \
             00000001 \
             00000002 2573 0000 \
             00000002 3432 0000");
        assert_eq!(out, expected);
        assert_eq!(
            decode(&out).unwrap(),
            Packet::Value {
                id: OwnedMetricId {
                    host: "10.0.0.1:ds1".into(),
                    name: "xrootd.link.in".into(),
                    spoof: true
                },
                packet_id: 133,
                fmt: "%s".into(),
                value: Value::Str("42".into()),
            }
        );

        out.clear();
        let meta = Metadata {
            value_type: "double",
            units: "bytes/s",
            slope: Slope::Positive,
            tmax: 30,
            dmax: 3600,
            extra: &[("GROUP", "xrootd.link")],
        };
        encode_metadata(&mut out, &ID, &meta);
        let mut expected = hex(
            "00000080 0000000c 31302e302e302e313a647331 0000000e 78726f6f74642e6c696e6b2e696e 0000 00000001",
        );
        expected.extend(hex("00000006 646f75626c65 0000"));
        expected.extend(hex("0000000e 78726f6f74642e6c696e6b2e696e 0000"));
        expected.extend(hex("00000007 62797465732f73 00"));
        expected.extend(hex("00000001 0000001e 00000e10 00000001"));
        expected.extend(hex(
            "00000005 47524f5550 000000 0000000b 78726f6f74642e6c696e6b 00",
        ));
        assert_eq!(out, expected);
        match decode(&out).unwrap() {
            Packet::Metadata {
                value_type,
                units,
                slope,
                tmax,
                dmax,
                extra,
                ..
            } => {
                assert_eq!(
                    (value_type.as_str(), units.as_str(), slope, tmax, dmax),
                    ("double", "bytes/s", 1, 30, 3600)
                );
                assert_eq!(
                    extra,
                    vec![("GROUP".to_string(), "xrootd.link".to_string())]
                );
            }
            other => panic!("{other:?}"),
        }

        out.clear();
        encode_uint_value(&mut out, &ID, 1_700_000_000);
        assert_eq!(
            &out[out.len() - 12..],
            &hex("00000002 2575 0000 6553f100")[..]
        );
        assert!(matches!(
            decode(&out).unwrap(),
            Packet::Value {
                value: Value::UInt(1_700_000_000),
                ..
            }
        ));

        out.clear();
        encode_metadata_request(&mut out, &ID);
        assert_eq!(&out[..4], &hex("00000088")[..]);
        assert!(matches!(
            decode(&out).unwrap(),
            Packet::MetadataRequest { .. }
        ));
    }

    #[test]
    fn decode_rejects_truncated_and_hostile_packets() {
        let mut out = Vec::new();
        encode_string_value(&mut out, &ID, "42");
        for cut in 0..out.len() {
            assert!(decode(&out[..cut]).is_err(), "cut at {cut}");
        }
        out.push(0);
        assert_eq!(decode(&out), Err(DecodeError::TrailingBytes(1)));
        assert_eq!(decode(&hex("00000099")), Err(DecodeError::UnknownId(0x99)));
        // A string claiming 4 GiB.
        assert!(decode(&hex("00000085 ffffffff 41414141")).is_err());
        // A metadata packet claiming 2^32-1 extras.
        let mut m = Vec::new();
        encode_metadata(
            &mut m,
            &ID,
            &Metadata {
                value_type: "x",
                units: "",
                slope: Slope::Both,
                tmax: 0,
                dmax: 0,
                extra: &[],
            },
        );
        let n = m.len();
        m[n - 4..].copy_from_slice(&[0xff; 4]);
        assert_eq!(decode(&m), Err(DecodeError::Truncated));
    }

    #[test]
    fn decode_value_borrows_what_decode_reads() {
        let mut text = Vec::new();
        encode_string_value(&mut text, &ID, "4242");
        assert_eq!(decode_value(&text), Ok((ID, ValueRef::Text(b"4242"))));
        let mut uint = Vec::new();
        encode_uint_value(&mut uint, &ID, 1_700_000_000);
        assert_eq!(decode_value(&uint), Ok((ID, ValueRef::UInt(1_700_000_000))));
        for cut in 0..text.len() {
            assert!(decode_value(&text[..cut]).is_err(), "cut at {cut}");
        }
        text.extend_from_slice(&[0; 4]);
        assert_eq!(decode_value(&text), Err(DecodeError::TrailingBytes(4)));
        let mut req = Vec::new();
        encode_metadata_request(&mut req, &ID);
        assert!(decode_value(&req).is_err());
    }
}
