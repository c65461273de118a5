//! The Ganglia side: gmond's wire format, send channels, gmond.conf.

pub mod channel;
pub mod gmond_conf;
pub mod sanitize;
pub mod xdr;

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
