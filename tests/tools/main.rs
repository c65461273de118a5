//! Full tier, the commands beside `serve`: the `gmetric` and `mpxstats`
//! drop-ins against the real tools, `status`, the start and its refusals,
//! and the docs' commands run as written. Needs root (runs as `nobody`,
//! mounts) and the real components (`.ci/run` installs them); except
//! `config_values`, every key at its extremes, which needs neither but
//! takes 85-135 s of two cores by itself, more than the quick tier's
//! whole budget leaves (docs/development.md).

mod config_values;
mod doc_commands;
mod full_disk;
mod gmetric;
mod mpxstats;
mod startup;
mod status;
