//! The quick tier: what needs neither root nor a real component (gmond,
//! gmetad, gmetric, mpxstats, xrootd, cmsd, rrdtool), run as any user on a
//! contributor's machine beside the unit tests:
//! `cargo test --lib --bins --test quick` (README, docs/development.md).
//! The gateway binary runs here on loopback ports of its own; what it is
//! compared with is captured (tests/data), never our own parser.
//!
//! One binary, one link: each file was a test binary of its own.

mod bounded_inputs;
mod doc_commands;
mod docs;
mod dump;
mod json;
mod log_limits;
mod names;
mod no_kill_by_name;
mod properties;
mod records;
mod startup;
mod status;
mod try_out;
