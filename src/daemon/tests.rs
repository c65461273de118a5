//! The daemon in this process: its receive tasks' dispatch, and whole
//! gateways run on port 0 with their shutdown and reload handles.

use std::sync::Arc;
use std::time::Duration;

use super::receive::answer;
use super::sender::Outbox;
use super::{InForce, open_channels};
use crate::engine::answer::{ANSWER_HOLDOFF, MetricRequest, Request};
use crate::engine::tests::Harness;
use crate::engine::tests::requests::server;
use crate::events::Events;

#[test]
fn a_quiet_spell_then_a_request_answers_every_host_once() {
    let mut r = Harness::new("metadata_requests = [\"127.0.0.1:8650\"]\n");
    for i in 0..50u32 {
        let (from, rec) = server(i, 5000);
        let at = r.at(0);
        r.feed_at(rec, from, at);
    }
    let outbox = Arc::new(Outbox::idle(open_channels(&r.settings).unwrap()));
    let in_force = InForce {
        settings: r.settings.clone(),
        outbox: outbox.clone(),
        table: None,
    };
    let at = r.at(3);
    let mut ev = Events::new(&r.counters, Duration::from_secs(60));
    answer(&mut r.engine, &Request::Everything, at, &in_force, &mut ev);
    // 50 hosts: heartbeat metadata and value, 11 metadata and 11 values each.
    assert_eq!(outbox.stats(at).packets, 50 * 24);
    assert_eq!(r.snapshot().requests_answered, 50);
    // The requests that follow (one per value gmond cannot show) are
    // already answered.
    let request = MetricRequest {
        host: "10.0.0.7:ds7.example.org".into(),
        name: "xrootd.link.in".into(),
    };
    let metric = Request::Metric(request.clone());
    answer(&mut r.engine, &metric, at, &in_force, &mut ev);
    assert_eq!(outbox.stats(at).packets, 50 * 24);
    assert!(r.engine.answer(&request, at + ANSWER_HOLDOFF));
}
