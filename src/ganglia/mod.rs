//! The Ganglia side: gmond's wire format, send channels, gmond.conf.

pub mod channel;
pub mod gmond_conf;
pub mod sanitize;
pub mod xdr;
