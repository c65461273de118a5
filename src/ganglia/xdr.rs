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
//! Other value ids (129-131, 134, 135) are decoded (and encoded, for
//! tests) but never sent.
//!
//! One [`Packet`] type serves both directions: its text borrows (from the
//! caller when encoding, from the datagram when decoding) and
//! [`Packet::into_owned`] keeps it. Encoding writes RFC 4506 by hand (see
//! [`append_string`]); a golden table of (packet, bytes) in the tests drives
//! the encoder, the decoder and the one-field-per-line text alike.

use std::borrow::Cow;
use std::fmt;

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

/// Text in a packet: borrowed while encoding or decoding, owned when kept.
pub type Text<'a> = Cow<'a, str>;

/// Which host a metric belongs to. `spoof` is set when `host` is an
/// `ip:name` string naming another host than the sender.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MetricId<'a> {
    pub host: Text<'a>,
    pub name: Text<'a>,
    pub spoof: bool,
}

impl<'a> MetricId<'a> {
    pub fn new(host: &'a str, name: &'a str, spoof: bool) -> MetricId<'a> {
        MetricId {
            host: Cow::Borrowed(host),
            name: Cow::Borrowed(name),
            spoof,
        }
    }

    pub fn into_owned(self) -> MetricId<'static> {
        MetricId {
            host: Cow::Owned(self.host.into_owned()),
            name: Cow::Owned(self.name.into_owned()),
            spoof: self.spoof,
        }
    }
}

/// The body of a 128 packet after the metric id (whose name it repeats).
#[derive(Clone, Debug, PartialEq)]
pub struct Metadata<'a> {
    /// `string`, `uint32`, `double`, ... (gmond copies it into TYPE="").
    pub value_type: Text<'a>,
    pub units: Text<'a>,
    pub slope: Slope,
    pub tmax: u32,
    pub dmax: u32,
    /// Extra data in send order: SPOOF_HOST, SPOOF_HEARTBEAT, CLUSTER, GROUP, DESC, TITLE.
    pub extra: Cow<'a, [(Text<'a>, Text<'a>)]>,
}

impl Metadata<'_> {
    pub fn into_owned(self) -> Metadata<'static> {
        let own = |t: &Text<'_>| -> Text<'static> { Cow::Owned(t.to_string()) };
        Metadata {
            value_type: own(&self.value_type),
            units: own(&self.units),
            slope: self.slope,
            tmax: self.tmax,
            dmax: self.dmax,
            extra: Cow::Owned(self.extra.iter().map(|(k, v)| (own(k), own(v))).collect()),
        }
    }

    /// The value of extra element `key`, if any.
    pub fn extra(&self, key: &str) -> Option<&str> {
        self.extra
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_ref())
    }
}

/// A value packet's value; its variant is its packet id (129-135).
#[derive(Clone, Debug, PartialEq)]
pub enum Value<'a> {
    UShort(u16),
    Short(i16),
    Int(i32),
    UInt(u32),
    Str(Text<'a>),
    Float(f32),
    Double(f64),
}

impl Value<'_> {
    pub fn packet_id(&self) -> u32 {
        match self {
            Value::UShort(_) => ID_USHORT,
            Value::Short(_) => ID_SHORT,
            Value::Int(_) => ID_INT,
            Value::UInt(_) => ID_UINT,
            Value::Str(_) => ID_STRING,
            Value::Float(_) => ID_FLOAT,
            Value::Double(_) => ID_DOUBLE,
        }
    }
}

impl fmt::Display for Value<'_> {
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

/// A gmond packet, either direction.
#[derive(Clone, Debug, PartialEq)]
pub enum Packet<'a> {
    /// 128 gmetadata_full.
    Metadata {
        id: MetricId<'a>,
        meta: Metadata<'a>,
    },
    /// 129-135 gmetric_*: `fmt` is gmetric's printf format (`%s`, `%u`).
    Value {
        id: MetricId<'a>,
        fmt: Text<'a>,
        value: Value<'a>,
    },
    /// 136 gmetadata_request.
    Request { id: MetricId<'a> },
}

impl<'a> Packet<'a> {
    /// A 133 `%s` value, as gmetric sends every value.
    pub fn string_value(id: MetricId<'a>, value: &'a str) -> Packet<'a> {
        Packet::Value {
            id,
            fmt: Cow::Borrowed("%s"),
            value: Value::Str(Cow::Borrowed(value)),
        }
    }

    /// A 132 `%u` value (gmond reads a heartbeat's value as an unsigned int).
    pub fn uint_value(id: MetricId<'a>, value: u32) -> Packet<'a> {
        Packet::Value {
            id,
            fmt: Cow::Borrowed("%u"),
            value: Value::UInt(value),
        }
    }

    pub fn id(&self) -> &MetricId<'a> {
        match self {
            Packet::Metadata { id, .. } | Packet::Value { id, .. } | Packet::Request { id } => id,
        }
    }

    /// The packet id on the wire.
    pub fn packet_id(&self) -> u32 {
        match self {
            Packet::Metadata { .. } => ID_METADATA,
            Packet::Value { value, .. } => value.packet_id(),
            Packet::Request { .. } => ID_METADATA_REQUEST,
        }
    }

    pub fn into_owned(self) -> Packet<'static> {
        let own = |t: Text<'_>| -> Text<'static> { Cow::Owned(t.into_owned()) };
        match self {
            Packet::Metadata { id, meta } => Packet::Metadata {
                id: id.into_owned(),
                meta: meta.into_owned(),
            },
            Packet::Value { id, fmt, value } => Packet::Value {
                id: id.into_owned(),
                fmt: own(fmt),
                value: match value {
                    Value::Str(s) => Value::Str(own(s)),
                    Value::UShort(v) => Value::UShort(v),
                    Value::Short(v) => Value::Short(v),
                    Value::Int(v) => Value::Int(v),
                    Value::UInt(v) => Value::UInt(v),
                    Value::Float(v) => Value::Float(v),
                    Value::Double(v) => Value::Double(v),
                },
            },
            Packet::Request { id } => Packet::Request {
                id: id.into_owned(),
            },
        }
    }
}

/// Appends `packet`'s bytes.
pub fn encode(out: &mut Vec<u8>, packet: &Packet<'_>) {
    put_u32(out, packet.packet_id());
    put_metric_id(out, packet.id());
    match packet {
        Packet::Metadata { id, meta } => {
            put_str(out, &meta.value_type);
            put_str(out, &id.name);
            put_str(out, &meta.units);
            put_u32(out, meta.slope as u32);
            put_u32(out, meta.tmax);
            put_u32(out, meta.dmax);
            put_u32(out, meta.extra.len() as u32);
            for (k, v) in meta.extra.iter() {
                put_str(out, k);
                put_str(out, v);
            }
        }
        Packet::Value { fmt, value, .. } => {
            put_str(out, fmt);
            match value {
                Value::UShort(v) => put_u32(out, u32::from(*v)),
                Value::Short(v) => put_u32(out, i32::from(*v) as u32),
                Value::Int(v) => put_u32(out, *v as u32),
                Value::UInt(v) => put_u32(out, *v),
                Value::Str(v) => put_str(out, v),
                Value::Float(v) => put_u32(out, v.to_bits()),
                Value::Double(v) => out.extend_from_slice(&v.to_bits().to_be_bytes()),
            }
        }
        Packet::Request { .. } => {}
    }
}

/// A 133 `%s` packet up to its value: [`encode`] of a
/// [`Packet::string_value`] is this followed by [`append_string`] of the
/// value. It is three parts, which the fast path caches apart: the head
/// ([`string_value_head`]: the same for every metric of a host), the
/// metric's name ([`append_string`]), and the tail ([`STRING_VALUE_TAIL`]
/// for a spoofed one: the same for every metric).
pub fn encode_string_value_prefix(out: &mut Vec<u8>, id: &MetricId<'_>) {
    string_value_head(out, &id.host);
    put_str(out, &id.name);
    put_u32(out, id.spoof as u32);
    put_str(out, "%s");
}

/// A 133 packet's first part: its id and its host.
pub fn string_value_head(out: &mut Vec<u8>, host: &str) {
    put_u32(out, ID_STRING);
    put_str(out, host);
}

/// A spoofed 133 `%s` packet's part between the name and the value: the
/// spoof flag (1) and the format `%s` as an XDR string
/// (`tests::the_string_value_tail_is_what_the_prefix_writes`).
pub const STRING_VALUE_TAIL: [u8; 12] = [0, 0, 0, 1, 0, 0, 0, 2, b'%', b's', 0, 0];

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

fn put_metric_id(out: &mut Vec<u8>, id: &MetricId<'_>) {
    put_str(out, &id.host);
    put_str(out, &id.name);
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
    /// A metadata packet's slope is none of gmond's (0-5).
    UnknownSlope(u32),
    /// A metadata packet names another metric in its body than in its id.
    NamesDiffer,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Truncated => write!(f, "truncated packet"),
            DecodeError::UnknownId(id) => write!(f, "unknown packet id {id}"),
            DecodeError::BadString => write!(f, "string longer than the packet"),
            DecodeError::TrailingBytes(n) => write!(f, "{n} bytes after the packet"),
            DecodeError::UnknownSlope(s) => write!(f, "unknown slope {s}"),
            DecodeError::NamesDiffer => write!(f, "metadata names two metrics"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Reads one packet; its text borrows from `bytes` (text that is not
/// UTF-8 is read lossily, as an owned copy).
#[inline]
pub fn decode(bytes: &[u8]) -> Result<Packet<'_>, DecodeError> {
    let mut r = Reader { bytes, at: 0 };
    let id = r.u32()?;
    let packet = match id {
        ID_METADATA => {
            let mid = r.metric_id()?;
            let value_type = r.text()?;
            if r.text()? != mid.name {
                return Err(DecodeError::NamesDiffer);
            }
            let units = r.text()?;
            let slope = r.u32()?;
            let slope = Slope::from_u32(slope).ok_or(DecodeError::UnknownSlope(slope))?;
            let (tmax, dmax) = (r.u32()?, r.u32()?);
            let n = r.u32()? as usize;
            // Each pair takes at least 8 bytes: refuse counts the packet cannot hold.
            if n > bytes.len() / 8 {
                return Err(DecodeError::Truncated);
            }
            let mut extra = Vec::with_capacity(n);
            for _ in 0..n {
                extra.push((r.text()?, r.text()?));
            }
            Packet::Metadata {
                id: mid,
                meta: Metadata {
                    value_type,
                    units,
                    slope,
                    tmax,
                    dmax,
                    extra: Cow::Owned(extra),
                },
            }
        }
        ID_USHORT..=ID_DOUBLE => {
            let mid = r.metric_id()?;
            let fmt = r.text()?;
            let value = match id {
                ID_USHORT => Value::UShort(r.u32()? as u16),
                ID_SHORT => Value::Short(r.u32()? as i16),
                ID_INT => Value::Int(r.u32()? as i32),
                ID_UINT => Value::UInt(r.u32()?),
                ID_STRING => Value::Str(r.text()?),
                ID_FLOAT => Value::Float(f32::from_bits(r.u32()?)),
                _ => {
                    let hi = u64::from(r.u32()?);
                    let lo = u64::from(r.u32()?);
                    Value::Double(f64::from_bits(hi << 32 | lo))
                }
            };
            Packet::Value {
                id: mid,
                fmt,
                value,
            }
        }
        ID_METADATA_REQUEST => Packet::Request { id: r.metric_id()? },
        other => return Err(DecodeError::UnknownId(other)),
    };
    if r.at != bytes.len() {
        return Err(DecodeError::TrailingBytes(bytes.len() - r.at));
    }
    Ok(packet)
}

/// A cursor over a datagram, bounds-checked at every read.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn u32(&mut self) -> Result<u32, DecodeError> {
        let w = self
            .bytes
            .get(self.at..self.at + 4)
            .ok_or(DecodeError::Truncated)?;
        self.at += 4;
        Ok(u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
    }

    /// An XDR string, its padding included.
    fn text(&mut self) -> Result<Text<'a>, DecodeError> {
        let len = self.u32()? as usize;
        let remaining = self.bytes.len() - self.at;
        if len > remaining {
            return Err(if len > self.bytes.len() {
                DecodeError::BadString
            } else {
                DecodeError::Truncated
            });
        }
        let padded = len.div_ceil(4) * 4;
        if padded > remaining {
            return Err(DecodeError::Truncated);
        }
        let s = &self.bytes[self.at..self.at + len];
        self.at += padded;
        Ok(String::from_utf8_lossy(s))
    }

    fn metric_id(&mut self) -> Result<MetricId<'a>, DecodeError> {
        Ok(MetricId {
            host: self.text()?,
            name: self.text()?,
            spoof: self.u32()? != 0,
        })
    }
}

impl fmt::Display for Packet<'_> {
    /// One field per line, for `--dry-run` and test failure messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Packet::Metadata { .. } => writeln!(f, "gmetadata_full (128)")?,
            Packet::Value { .. } => writeln!(f, "gmetric value ({})", self.packet_id())?,
            Packet::Request { .. } => writeln!(f, "gmetadata_request (136)")?,
        }
        let id = self.id();
        writeln!(f, "  host   {:?}", id.host)?;
        writeln!(f, "  metric {:?}", id.name)?;
        writeln!(f, "  spoof  {}", id.spoof)?;
        match self {
            Packet::Metadata { id, meta } => {
                writeln!(f, "  type   {:?}", meta.value_type)?;
                writeln!(f, "  name   {:?}", id.name)?;
                writeln!(f, "  units  {:?}", meta.units)?;
                writeln!(
                    f,
                    "  slope  {} ({})",
                    meta.slope as u32,
                    meta.slope.as_str()
                )?;
                writeln!(f, "  tmax   {}", meta.tmax)?;
                writeln!(f, "  dmax   {}", meta.dmax)?;
                for (k, v) in meta.extra.iter() {
                    writeln!(f, "  extra  {k}={v:?}")?;
                }
                Ok(())
            }
            Packet::Value { fmt, value, .. } => {
                writeln!(f, "  fmt    {fmt:?}")?;
                writeln!(f, "  value  {:?}", value.to_string())
            }
            Packet::Request { .. } => Ok(()),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
