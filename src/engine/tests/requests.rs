//! gmond's metadata requests (136), and metadata spread over time.

use std::net::SocketAddr;
use std::time::Duration;

use super::super::answer::MetricRequest;
use super::{Harness, link_record};

/// The request gmond sends for `name` of ds1.example.org at 10.0.0.1.
fn request(name: &str) -> MetricRequest {
    MetricRequest {
        host: "10.0.0.1:ds1.example.org".into(),
        name: name.into(),
    }
}

#[test]
fn a_metadata_request_is_answered_with_the_hosts_metadata_once_per_holdoff() {
    let mut r = Harness::new("metadata_requests = [\"127.0.0.1:8650\"]\n");
    let rec = |pid, inb| link_record(1_700_000_000, pid, inb, 1, 4);
    r.feed(rec(77, 5000), "10.0.0.1:40000", 0);
    r.feed(rec(78, 10), "10.0.0.1:40000", 10);
    let answer = |r: &mut Harness, req: &MetricRequest, secs| {
        let at = r.at(secs);
        r.engine.answer(req, at)
    };
    // Unknown host or metric: nothing.
    let other = MetricRequest {
        host: "10.0.0.2:other".into(),
        name: "xrootd.link.in".into(),
    };
    assert!(!answer(&mut r, &other, 11));
    assert!(!answer(&mut r, &request("xrootd.nope"), 11));
    assert_eq!(r.engine.packets().count(), 0);
    // A known one: every metadata of the host, each with its value as last sent.
    assert!(answer(&mut r, &request("xrootd.link.in"), 11));
    assert_eq!(r.metadata_count(), 12);
    assert_eq!(r.values()["xrootd.link.in"], "5010");
    // Asked again at once (gmond asks once per value): already answered.
    assert!(!answer(&mut r, &request("xrootd.link.num"), 12));
    assert!(answer(&mut r, &request("xrootd.link.num"), 17));
    // A heartbeat's request stands for the whole host.
    assert!(answer(&mut r, &request("heartbeat"), 23));
    assert_eq!(r.metadata_count(), 12);
}

#[test]
fn an_answer_repeats_what_was_sent_and_counts_nothing() {
    let mut r = Harness::new("metadata_requests = [\"127.0.0.1:8650\"]\n");
    r.feed(
        link_record(1_700_000_000, 77, 5000, 1, 4),
        "10.0.0.1:40000",
        0,
    );
    // Restarted (new pid), and a record naming link.in twice: its first
    // reading is the one sent (5000 + 10).
    let twice = link_record(1_700_000_000, 78, 10, 1, 4).replace(
        "</statistics>",
        r#"<stats id="link"><in>3</in></stats></statistics>"#,
    );
    r.feed(&twice, "10.0.0.1:40000", 10);
    assert_eq!(r.values()["xrootd.link.in"], "5010");
    let at = r.at(11);
    assert!(r.engine.answer(&request("xrootd.link.in"), at));
    let sent: Vec<_> = r
        .packets()
        .into_iter()
        .filter_map(|p| match p {
            crate::ganglia::xdr::Packet::Value { id, value, .. } if id.name == "xrootd.link.in" => {
                Some(value)
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        sent,
        [crate::ganglia::xdr::Value::Str("5010".into())],
        "the answer sends each metric once, as last sent"
    );
    // The answer took nothing into the count: the next reading continues.
    r.feed(
        link_record(1_700_000_000, 78, 25, 1, 4),
        "10.0.0.1:40000",
        20,
    );
    assert_eq!(r.values()["xrootd.link.in"], "5025");
}

#[test]
fn an_answer_does_not_postpone_the_periodic_metadata() {
    let mut r = Harness::new("metadata_requests = [\"127.0.0.1:8650\"]\n");
    let rec = link_record(1_700_000_000, 77, 5000, 1, 4);
    // Reports every 10 s; the metadata goes out with the first and, once
    // TMAX is known, with one record within the next 30 s.
    let mut sent_at = Vec::new();
    let mut answered = false;
    for n in 0..20u64 {
        r.feed(&rec, "10.0.0.1:40000", 10 * n);
        if r.metadata_count() > 0 {
            sent_at.push(10 * n);
        }
        // Right after the second sending, gmond asks: answered in full...
        if sent_at.len() == 2 && !answered {
            let at = r.at(10 * n) + Duration::from_secs(1);
            assert!(r.engine.answer(&request("xrootd.link.in"), at));
            assert_eq!(r.metadata_count(), 12);
            answered = true;
        }
    }
    // ...and the periodic resend still comes metadata_interval (60 s)
    // after the second sending, not 60 s after the answer.
    assert!(sent_at.len() >= 3, "{sent_at:?}");
    assert_eq!(sent_at[2] - sent_at[1], 60, "{sent_at:?}");
}

/// Server `i` of a fleet: its address and its link record.
pub(crate) fn server(i: u32, inb: u64) -> (SocketAddr, String) {
    let from = SocketAddr::from((u32::to_be_bytes(0x0a00_0000 + i), 40000));
    let rec = link_record(1_700_000_000, 77, inb, 1, 4)
        .replace("ds1.example.org", &format!("ds{i}.example.org"));
    (from, rec)
}

#[test]
fn sources_that_start_together_send_their_metadata_apart() {
    let mut r = Harness::new("");
    // 200 servers, all restarted together, reporting every 10 s in phase.
    let servers = 200u32;
    let mut per_report: Vec<usize> = Vec::new();
    for n in 0..16u64 {
        let mut metadata = 0;
        for i in 0..servers {
            let (from, rec) = server(i, 1000 * n);
            let at = r.at(10 * n);
            metadata += r.feed_at(rec, from, at).metadata_count();
        }
        per_report.push(metadata);
    }
    let all = servers as usize * 12;
    // First sight: all of it, necessarily (values need their metadata).
    assert_eq!(per_report[0], all);
    // The second report, which makes TMAX known, does not resend it; the
    // first periodic resend comes 30 to 60 s after the first sight,
    // spread over the reports in between, and so do the ones after it.
    assert_eq!(per_report[1..4].iter().sum::<usize>(), 0, "{per_report:?}");
    assert_eq!(
        per_report[4..7].iter().sum::<usize>(),
        all,
        "{per_report:?}"
    );
    assert!(
        per_report[1..].iter().all(|&n| n < all / 2),
        "{per_report:?}"
    );
    assert_eq!(
        per_report[7..13].iter().sum::<usize>(),
        all,
        "{per_report:?}"
    );
}
