//! gmond's XML document, as gmetad reads it from a `data_source`.
//!
//! What gmond 3.7.2 writes on its `tcp_accept_channel` (seen on the real
//! daemon; `../shared/docs/ganglia-facts.md`): an XML declaration, an
//! inline DTD, then
//!
//! ```text
//! <GANGLIA_XML VERSION="3.7.2" SOURCE="gmond">
//! <CLUSTER NAME LOCALTIME OWNER LATLONG URL>
//! <HOST NAME IP TAGS REPORTED TN TMAX DMAX LOCATION GMOND_STARTED>
//! <METRIC NAME VAL TYPE UNITS TN TMAX DMAX SLOPE>
//! <EXTRA_DATA>
//! <EXTRA_ELEMENT NAME="TITLE" VAL=".."/>   (reverse order of the packet's)
//! </EXTRA_DATA>
//! </METRIC>
//! </HOST>
//! </CLUSTER>
//! </GANGLIA_XML>
//! ```
//!
//! one element per line. Two things gmond gets wrong are done right here:
//! every attribute value is escaped (gmond escapes only string VALs, so a
//! `"` or `&` elsewhere breaks the document and gmetad drops the whole data
//! source), and nothing is cut (gmond cuts a METRIC line at 1023 bytes).
//! The declaration says ISO-8859-1 as gmond's does; every character
//! outside printable ASCII is written as a character reference, so the
//! document is the same text in any encoding.

/// The format version written in `GANGLIA_XML VERSION`: gmond 3.7.2's
/// (gmetad reads the format by it, not the program).
pub const FORMAT_VERSION: &str = "3.7.2";

/// The document's start: declaration, DTD and the root element.
const PROLOGUE: &str = r#"<?xml version="1.0" encoding="ISO-8859-1" standalone="yes"?>
<!DOCTYPE GANGLIA_XML [
<!ELEMENT GANGLIA_XML (GRID|CLUSTER|HOST)*>
<!ATTLIST GANGLIA_XML VERSION CDATA #REQUIRED SOURCE CDATA #REQUIRED>
<!ELEMENT GRID (CLUSTER|GRID|HOSTS|METRICS)*>
<!ATTLIST GRID NAME CDATA #REQUIRED AUTHORITY CDATA #REQUIRED LOCALTIME CDATA #IMPLIED>
<!ELEMENT CLUSTER (HOST|HOSTS|METRICS)*>
<!ATTLIST CLUSTER NAME CDATA #REQUIRED OWNER CDATA #IMPLIED LATLONG CDATA #IMPLIED URL CDATA #IMPLIED LOCALTIME CDATA #REQUIRED>
<!ELEMENT HOST (METRIC)*>
<!ATTLIST HOST NAME CDATA #REQUIRED IP CDATA #REQUIRED LOCATION CDATA #IMPLIED TAGS CDATA #IMPLIED REPORTED CDATA #REQUIRED TN CDATA #IMPLIED TMAX CDATA #IMPLIED DMAX CDATA #IMPLIED GMOND_STARTED CDATA #IMPLIED>
<!ELEMENT METRIC (EXTRA_DATA*)>
<!ATTLIST METRIC NAME CDATA #REQUIRED VAL CDATA #REQUIRED TYPE (string|int8|uint8|int16|uint16|int32|uint32|float|double|timestamp) #REQUIRED UNITS CDATA #IMPLIED TN CDATA #IMPLIED TMAX CDATA #IMPLIED DMAX CDATA #IMPLIED SLOPE (zero|positive|negative|both|unspecified) #IMPLIED SOURCE (gmond) 'gmond'>
<!ELEMENT EXTRA_DATA (EXTRA_ELEMENT*)>
<!ELEMENT EXTRA_ELEMENT EMPTY>
<!ATTLIST EXTRA_ELEMENT NAME CDATA #REQUIRED VAL CDATA #REQUIRED>
<!ELEMENT HOSTS EMPTY>
<!ATTLIST HOSTS UP CDATA #REQUIRED DOWN CDATA #REQUIRED SOURCE (gmond|gmetad) #REQUIRED>
<!ELEMENT METRICS (EXTRA_DATA*)>
<!ATTLIST METRICS NAME CDATA #REQUIRED SUM CDATA #REQUIRED NUM CDATA #REQUIRED TYPE (string|int8|uint8|int16|uint16|int32|uint32|float|double|timestamp) #REQUIRED UNITS CDATA #IMPLIED SLOPE (zero|positive|negative|both|unspecified) #IMPLIED SOURCE (gmond) 'gmond'>
]>
"#;

/// The TYPE values the DTD allows; anything else is written as `string`
/// (gmetad would reject the document otherwise).
const TYPES: &[&str] = &[
    "string",
    "int8",
    "uint8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "float",
    "double",
    "timestamp",
];

/// Appends `text` escaped for a double-quoted attribute value: the five
/// XML specials as entities, tab, newline and carriage return as character
/// references (a parser would fold them to spaces), other control
/// characters (not allowed in XML 1.0 at all) as U+FFFD, and everything
/// outside ASCII as a character reference.
pub fn escape_into(out: &mut Vec<u8>, text: &[u8]) {
    let plain =
        |b: u8| (0x20..0x7f).contains(&b) && !matches!(b, b'&' | b'<' | b'>' | b'"' | b'\'');
    if text.iter().all(|&b| plain(b)) {
        out.extend_from_slice(text);
        return;
    }
    for c in String::from_utf8_lossy(text).chars() {
        match c {
            '&' => out.extend_from_slice(b"&amp;"),
            '<' => out.extend_from_slice(b"&lt;"),
            '>' => out.extend_from_slice(b"&gt;"),
            '"' => out.extend_from_slice(b"&quot;"),
            '\'' => out.extend_from_slice(b"&apos;"),
            ' '..='~' => out.push(c as u8),
            '\t' | '\n' | '\r' => push_ref(out, c as u32),
            c if (c as u32) < 0x20 || c == '\u{7f}' => push_ref(out, 0xFFFD),
            c => push_ref(out, c as u32),
        }
    }
}

fn push_ref(out: &mut Vec<u8>, code: u32) {
    use std::io::Write;
    let _ = write!(out, "&#x{code:X};");
}

fn attr(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.push(b' ');
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"=\"");
    escape_into(out, value);
    out.push(b'"');
}

fn number(out: &mut Vec<u8>, name: &str, value: u64) {
    let mut buf = [0u8; 20];
    attr(out, name, super::format_u64(&mut buf, value));
}

/// The cluster a document is about.
pub struct Cluster<'a> {
    pub name: &'a str,
    /// Unix seconds, now.
    pub localtime: u64,
    /// OWNER, LATLONG and URL ("unspecified" when None, as gmond writes).
    pub owner: Option<&'a str>,
    pub latlong: Option<&'a str>,
    pub url: Option<&'a str>,
}

/// A HOST element's attributes.
pub struct Host<'a> {
    pub name: &'a str,
    pub ip: &'a str,
    /// Unix seconds of its last report.
    pub reported: u64,
    /// Seconds since then.
    pub tn: u64,
    pub tmax: u32,
    pub dmax: u32,
    /// Unix seconds its program started (gmond: its heartbeat's value).
    pub started: u64,
}

/// A METRIC element's attributes and extra data.
pub struct Metric<'a> {
    pub name: &'a str,
    pub val: &'a [u8],
    pub value_type: &'a str,
    pub units: &'a str,
    pub tn: u64,
    pub tmax: u32,
    pub dmax: u32,
    pub slope: &'a str,
    /// (NAME, VAL) pairs, in the order to write.
    pub extra: &'a [(&'a str, &'a str)],
}

/// The declaration, DTD, `GANGLIA_XML` and `CLUSTER` start tags.
pub fn start(out: &mut Vec<u8>, cluster: &Cluster<'_>) {
    prologue(out);
    cluster_start(out, cluster);
}

/// The `CLUSTER` and `GANGLIA_XML` end tags.
pub fn finish(out: &mut Vec<u8>) {
    cluster_end(out);
    end(out);
}

/// The declaration, DTD and `GANGLIA_XML` start tag: a document may then
/// hold several `CLUSTER`s (gmetad 3.7.2 takes each as a cluster of its
/// grid; ../shared/docs/ganglia-facts.md).
pub fn prologue(out: &mut Vec<u8>) {
    out.extend_from_slice(PROLOGUE.as_bytes());
    out.extend_from_slice(b"<GANGLIA_XML");
    attr(out, "VERSION", FORMAT_VERSION.as_bytes());
    attr(out, "SOURCE", b"gmond");
    out.extend_from_slice(b">\n");
}

/// One `CLUSTER` start tag.
pub fn cluster_start(out: &mut Vec<u8>, cluster: &Cluster<'_>) {
    fn or_unspecified(v: Option<&str>) -> &[u8] {
        v.unwrap_or("unspecified").as_bytes()
    }
    out.extend_from_slice(b"<CLUSTER");
    attr(out, "NAME", cluster.name.as_bytes());
    number(out, "LOCALTIME", cluster.localtime);
    attr(out, "OWNER", or_unspecified(cluster.owner));
    attr(out, "LATLONG", or_unspecified(cluster.latlong));
    attr(out, "URL", or_unspecified(cluster.url));
    out.extend_from_slice(b">\n");
}

pub fn cluster_end(out: &mut Vec<u8>) {
    out.extend_from_slice(b"</CLUSTER>\n");
}

/// The `GANGLIA_XML` end tag.
pub fn end(out: &mut Vec<u8>) {
    out.extend_from_slice(b"</GANGLIA_XML>\n");
}

pub fn host_start(out: &mut Vec<u8>, h: &Host<'_>) {
    out.extend_from_slice(b"<HOST");
    attr(out, "NAME", h.name.as_bytes());
    attr(out, "IP", h.ip.as_bytes());
    attr(out, "TAGS", b"");
    number(out, "REPORTED", h.reported);
    number(out, "TN", h.tn);
    number(out, "TMAX", u64::from(h.tmax));
    number(out, "DMAX", u64::from(h.dmax));
    attr(out, "LOCATION", b"unspecified");
    number(out, "GMOND_STARTED", h.started);
    out.extend_from_slice(b">\n");
}

pub fn host_end(out: &mut Vec<u8>) {
    out.extend_from_slice(b"</HOST>\n");
}

pub fn metric(out: &mut Vec<u8>, m: &Metric<'_>) {
    let value_type = if TYPES.contains(&m.value_type) {
        m.value_type
    } else {
        "string"
    };
    out.extend_from_slice(b"<METRIC");
    attr(out, "NAME", m.name.as_bytes());
    attr(out, "VAL", m.val);
    attr(out, "TYPE", value_type.as_bytes());
    attr(out, "UNITS", m.units.as_bytes());
    number(out, "TN", m.tn);
    number(out, "TMAX", u64::from(m.tmax));
    number(out, "DMAX", u64::from(m.dmax));
    attr(out, "SLOPE", m.slope.as_bytes());
    out.extend_from_slice(b">\n<EXTRA_DATA>\n");
    for (name, val) in m.extra {
        out.extend_from_slice(b"<EXTRA_ELEMENT");
        attr(out, "NAME", name.as_bytes());
        attr(out, "VAL", val.as_bytes());
        out.extend_from_slice(b"/>\n");
    }
    out.extend_from_slice(b"</EXTRA_DATA>\n</METRIC>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn escaped(s: &[u8]) -> String {
        let mut out = Vec::new();
        escape_into(&mut out, s);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn escapes_specials_controls_and_non_ascii() {
        assert_eq!(escaped(b"plain text 1.5"), "plain text 1.5");
        assert_eq!(
            escaped(br#"a"b<c>d&e'f"#),
            "a&quot;b&lt;c&gt;d&amp;e&apos;f"
        );
        assert_eq!(escaped(b"tab\tnl\ncr\r"), "tab&#x9;nl&#xA;cr&#xD;");
        assert_eq!(escaped(b"nul\0del\x7f"), "nul&#xFFFD;del&#xFFFD;");
        assert_eq!(escaped("café €".as_bytes()), "caf&#xE9; &#x20AC;");
        // Bytes that are not UTF-8 become U+FFFD, never raw bytes.
        assert_eq!(escaped(b"a\xffb"), "a&#xFFFD;b");
    }

    #[test]
    fn a_document_is_valid_xml_with_every_attribute() {
        let mut out = Vec::new();
        start(
            &mut out,
            &Cluster {
                name: "Site \"A\" & <B>",
                localtime: 1_700_000_000,
                owner: Some("Ops & Co"),
                latlong: None,
                url: None,
            },
        );
        host_start(
            &mut out,
            &Host {
                name: "xrd1.example.org",
                ip: "2001:db8::7",
                reported: 1_699_999_999,
                tn: 1,
                tmax: 20,
                dmax: 3600,
                started: 1_690_000_000,
            },
        );
        let long = "v".repeat(5000);
        metric(
            &mut out,
            &Metric {
                name: "xrootd.ofs.role",
                val: long.as_bytes(),
                value_type: "string",
                units: "",
                tn: 1,
                tmax: 23,
                dmax: 3600,
                slope: "zero",
                extra: &[("TITLE", "Role (\"ofs\")"), ("GROUP", "xrootd.ofs")],
            },
        );
        host_end(&mut out);
        finish(&mut out);
        let text = String::from_utf8(out).unwrap();
        let doc = roxmltree::Document::parse_with_options(
            &text,
            roxmltree::ParsingOptions {
                allow_dtd: true,
                ..Default::default()
            },
        )
        .unwrap();
        let cluster = doc.root_element().first_element_child().unwrap();
        assert_eq!(cluster.attribute("NAME"), Some("Site \"A\" & <B>"));
        let host = cluster.first_element_child().unwrap();
        assert_eq!(host.attribute("IP"), Some("2001:db8::7"));
        assert_eq!(host.attribute("GMOND_STARTED"), Some("1690000000"));
        let m = host.first_element_child().unwrap();
        // Nothing cut: gmond would stop at 1023 bytes.
        assert_eq!(m.attribute("VAL").map(str::len), Some(5000));
        let title = m
            .descendants()
            .find(|n| n.attribute("NAME") == Some("TITLE"));
        assert_eq!(
            title.and_then(|n| n.attribute("VAL")),
            Some("Role (\"ofs\")")
        );
    }

    #[test]
    fn an_unknown_type_is_written_as_string() {
        let mut out = Vec::new();
        metric(
            &mut out,
            &Metric {
                name: "m",
                val: b"1",
                value_type: "int64",
                units: "",
                tn: 0,
                tmax: 0,
                dmax: 0,
                slope: "both",
                extra: &[],
            },
        );
        assert!(String::from_utf8(out).unwrap().contains(r#"TYPE="string""#));
    }
}
