//! Full tier, into a real gmond: the gateway's packets reach gmond (and real
//! xrootd and cmsd report to the gateway), through restarts, floods,
//! hostile input and a pair of gateways. Needs root and the real
//! components (`.ci/run` installs them).
//!
//! One binary per area: one link instead of eleven, and the tests still
//! run two at a time as each file's did.

mod beyond_gmetric;
mod delivery;
mod detailed;
mod gmond;
mod hostile;
mod json;
mod multicast;
mod quick_look;
mod records;
mod standby;
mod state;
mod xrootd;
