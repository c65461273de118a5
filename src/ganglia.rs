//! The Ganglia side: gmond's wire format, send channels, gmond.conf.

pub mod channel;
pub mod gmond_conf;
pub mod path_name;
pub mod sanitize;
pub mod xdr;
pub mod xml;

/// `v` in decimal, written at the end of `buf` (no allocation: per value on
/// the hot path, and per attribute when writing gmond's XML).
pub fn format_u64(buf: &mut [u8; 20], mut v: u64) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    &buf[i..]
}

/// This host's name as gethostname(2) gives it (what gmetric puts in the
/// host field of an unspoofed packet: not shortened, no DNS).
pub fn local_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim_end_matches('\n').to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_string())
}
