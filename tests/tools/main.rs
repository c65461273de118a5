//! Full tier, the commands beside `serve`: the `gmetric` and `mpxstats`
//! drop-ins against the real tools, `status`, the start and its refusals,
//! and the docs' commands run as written. Needs root (runs as `nobody`,
//! mounts) and the real components (`.ci/run` installs them).

mod doc_commands;
mod gmetric;
mod mpxstats;
mod startup;
mod status;
