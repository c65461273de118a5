//! The gmond.conf every test and benchmark gmond runs with (the kit's
//! `Gmond` and the load lab's).

/// gmond in the foreground, without modules, muted (its own metrics are
/// not wanted; it still sends its 136 requests on a `udp_send_channel`),
/// keeping hosts forever and sending no metadata of its own. `globals` goes
/// into the globals section, `sections` (its channels) after the cluster.
pub fn gmond_conf(cluster: &str, globals: &str, sections: &str) -> String {
    format!(
        r#"globals {{
  daemonize = no
  setuid = no
  user = nobody
  debug_level = 0
  mute = yes
  deaf = no
  host_dmax = 0
  cleanup_threshold = 300
  send_metadata_interval = 0
  {globals}
}}
cluster {{ name = "{cluster}" }}
{sections}
"#
    )
}
