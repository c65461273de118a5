//! Full tier, gmetad and ganglia-web: real gmetads polling the gateway's
//! XML port (or a gmond), their RRDs, clusters, a pair of gateways, and
//! ganglia-web's pages drawn. Needs root and the real components
//! (`.ci/run` installs them).

mod clusters;
mod federation;
mod gmetad;
mod gweb;
mod names;
mod pair;
mod xml_port;
