//! The detailed stream (logins, opens, closes) as metrics of the server's
//! own host: totals equal to what the clients moved (the real capture of
//! tests/data/detailed), continuous through an xrootd restart, and hostile
//! input counted and bounded.

use super::*;

const CONFIG: &str = "detailed_vo_paths = [\"/data/store/=cms\", \"/data/=dteam\"]\n";

fn capture() -> Vec<crate::recording::Entry> {
    crate::detailed::tests::capture()
}

/// The detailed metrics of the last datagram: name -> value.
fn detailed_values(r: &Harness) -> BTreeMap<String, String> {
    r.values()
        .into_iter()
        .filter(|(n, _)| n.contains(".detailed."))
        .collect()
}

fn v(values: &BTreeMap<String, String>, name: &str) -> u64 {
    values
        .get(&format!("xrootd.det.detailed.{name}"))
        .unwrap_or_else(|| panic!("no {name} in {values:#?}"))
        .parse()
        .unwrap()
}

/// Feeds the capture from entry `*next` up to (and with) its next summary
/// record; returns that record's detailed values.
fn feed_until_summary(
    r: &mut Harness,
    entries: &[crate::recording::Entry],
    next: &mut usize,
) -> BTreeMap<String, String> {
    while let Some(e) = entries.get(*next) {
        let at = r.at(*next as u64);
        r.feed_at(&e.datagram, e.from, at);
        *next += 1;
        if e.datagram.starts_with(b"<") {
            return detailed_values(r);
        }
    }
    panic!("no summary record after {next}");
}

/// The files the clients moved (tests/data/detailed/README.md): the
/// independent source of every total below.
const F3M: u64 = 3_000_000;
const F10M: u64 = 10_485_760;
const F1M: u64 = 1_000_000;
const UPLOAD: u64 = 10_485_760;
const PUT: u64 = 2_000_000;

/// What xrootd counts for an xrdcp upload of `size` bytes: 4 checksum
/// bytes per 4 KiB page.
fn page_written(size: u64) -> u64 {
    size + 4 * size.div_ceil(4096)
}

/// Every total equals what the clients moved (tests/data/detailed/README.md):
/// per VO (sss groups, the unix login's group, the path rule for anonymous
/// HTTP), per protocol and per client domain; the quirks as xrootd 5.5.3
/// counts them (the upload's page checksums, the PUT's 0 bytes); and after
/// xrootd's restart the counters go on from where they were.
#[test]
fn real_traffic_adds_up_to_what_the_clients_moved() {
    // 5.5.3: the HTTP PUT's close says 0 bytes written; the two `=` are
    // read for their sequence numbers only.
    replay_adds_up("xrootd-5.5.3.jsonl", 0, 2, 1_795_896_130);
}

/// The same traffic into xrootd 6.1.0 (built from its v6.1.0 tag): the
/// same totals, but the HTTP PUT's bytes are written now; its two `i`
/// map messages (the HTTP clients' User-Agent) are ignored beside the
/// two `=`; nothing lost.
#[test]
fn real_traffic_into_xrootd_6_1_adds_up_too() {
    replay_adds_up("xrootd-6.1.0.jsonl", PUT, 4, 1_795_906_818);
}

/// Replays the capture `file` (the traffic of the README's table, an
/// xrootd restart, its summary records) and checks every total against
/// the files moved; `put_written`: what that xrootd counts for the HTTP
/// PUT; `ignored`: its packets read for their sequence only; `stod1`: the
/// first run's start.
fn replay_adds_up(file: &str, put_written: u64, ignored: u64, stod1: u32) {
    let mut r = Harness::new(CONFIG);
    let entries = crate::detailed::tests::capture_of(file);
    let mut next = 0;
    let run1 = feed_until_summary(&mut r, &entries, &mut next);
    // atlas: alice read f3m and uploaded 10 MiB (10,485,760 + 4 bytes per
    // 4 KiB page); her failed open opened nothing.
    assert_eq!(page_written(UPLOAD), 10_496_000);
    assert_eq!(v(&run1, "vo.atlas.bytes_read"), F3M);
    assert_eq!(v(&run1, "vo.atlas.bytes_written"), page_written(UPLOAD));
    assert_eq!(v(&run1, "vo.atlas.files_opened"), 2);
    assert_eq!(v(&run1, "vo.atlas.files_closed"), 2);
    // cms: bob read f10m (his stat opened nothing).
    assert_eq!(v(&run1, "vo.cms.bytes_read"), F10M);
    assert_eq!(v(&run1, "vo.cms.bytes_written"), 0);
    assert_eq!(v(&run1, "vo.cms.files_opened"), 1);
    assert_eq!(v(&run1, "vo.cms.files_closed"), 1);
    // The unix login's group is `root`: `g=` comes before the path rule.
    assert_eq!(v(&run1, "vo.root.bytes_read"), F1M);
    assert_eq!(v(&run1, "vo.root.files_opened"), 1);
    // Anonymous HTTP (no o=, no g=): the path rule, /data/ -> dteam.
    assert_eq!(v(&run1, "vo.dteam.bytes_read"), F3M);
    assert_eq!(v(&run1, "vo.dteam.bytes_written"), put_written);
    assert_eq!(v(&run1, "vo.dteam.files_opened"), 2);
    assert_eq!(v(&run1, "vo.dteam.files_closed"), 2);
    assert_eq!(v(&run1, "vo.other.bytes_read"), 0);
    assert_eq!(v(&run1, "vo.other.files_opened"), 0);
    // By protocol: xroot's four transfers, http's two.
    assert_eq!(v(&run1, "protocol.xroot.bytes_read"), F3M + F10M + F1M);
    assert_eq!(
        v(&run1, "protocol.xroot.bytes_written"),
        page_written(UPLOAD)
    );
    assert_eq!(v(&run1, "protocol.xroot.files_opened"), 4);
    assert_eq!(v(&run1, "protocol.xroot.files_closed"), 4);
    assert_eq!(v(&run1, "protocol.http.bytes_read"), F3M);
    assert_eq!(v(&run1, "protocol.http.bytes_written"), put_written);
    assert_eq!(v(&run1, "protocol.http.files_opened"), 2);
    assert_eq!(v(&run1, "protocol.http.files_closed"), 2);
    // Every client on loopback: one domain, the (IPv4-mapped) address.
    let domain = "domain.127_0_0_1";
    assert_eq!(
        v(&run1, &format!("{domain}.bytes_read")),
        F3M + F10M + F1M + F3M
    );
    assert_eq!(
        v(&run1, &format!("{domain}.bytes_written")),
        page_written(UPLOAD) + put_written
    );
    assert_eq!(v(&run1, &format!("{domain}.files_opened")), 6);
    assert_eq!(v(&run1, &format!("{domain}.files_closed")), 6);
    // Everything closed and disconnected: the gauges are 0.
    for (name, value) in &run1 {
        if name.ends_with(".files_open") || name.ends_with(".users") {
            assert_eq!(value, "0", "{name}");
        }
    }
    // No user names without detailed_per_user.
    assert!(run1.keys().all(|n| !n.contains(".user.")));
    let s = r.snapshot();
    assert_eq!(
        (
            s.detailed_packets,
            s.detailed_records,
            s.detailed_lost,
            s.detailed_unmatched
        ),
        (9, 20, 0, 0)
    );
    // xrootd restarted (new stod, dictids from 1): alice reads f3m again;
    // the counters go on from the first run's.
    let run2 = feed_until_summary(&mut r, &entries, &mut next);
    assert_eq!(v(&run2, "vo.atlas.bytes_read"), 2 * F3M);
    assert_eq!(v(&run2, "vo.atlas.bytes_written"), page_written(UPLOAD));
    assert_eq!(v(&run2, "vo.atlas.files_opened"), 3);
    assert_eq!(v(&run2, "protocol.xroot.bytes_read"), 2 * F3M + F10M + F1M);
    let s = r.snapshot();
    assert_eq!(
        (
            s.detailed_packets,
            s.detailed_records,
            s.detailed_lost,
            s.parse_errors,
            s.monitoring_ignored
        ),
        (11, 23, 0, 0, ignored)
    );
    // The first run's state went with its `=` of the new start.
    assert_eq!(s.detailed_servers, 1);
    assert!(
        r.engine
            .detailed
            .server("127.0.0.1".parse().unwrap(), stod1)
            .is_none()
    );
    // And `status` shows the one run left, nothing lost.
    let status = r
        .engine
        .status(r.at(next as u64), std::time::SystemTime::now(), None);
    assert_eq!(
        status
            .detailed
            .iter()
            .map(|d| (d.address.to_string(), d.lost, d.logins, d.files_open))
            .collect::<Vec<_>>(),
        [("127.0.0.1".to_string(), 0, 0, 0)]
    );
}

// ---- hostile input, on packets made here (the wire layout of src/detailed.rs) ----

const SERVER: &str = "10.0.0.5:40000";
const STOD: u32 = 1_700_000_000;

/// Builds the packets of one server run, numbering each stream's packets.
#[derive(Default)]
struct Stream {
    map_seq: u8,
    f_seq: u8,
}

impl Stream {
    fn packet(code: u8, pseq: u8, body: &[u8]) -> Vec<u8> {
        let mut p = vec![code, pseq];
        p.extend_from_slice(&((8 + body.len()) as u16).to_be_bytes());
        p.extend_from_slice(&STOD.to_be_bytes());
        p.extend_from_slice(body);
        p
    }

    fn login(&mut self, dictid: u32, userid: &str, auth: &str) -> Vec<u8> {
        let mut body = dictid.to_be_bytes().to_vec();
        body.extend_from_slice(format!("{userid}\n{auth}").as_bytes());
        self.map_seq = self.map_seq.wrapping_add(1);
        Self::packet(b'u', self.map_seq.wrapping_sub(1), &body)
    }

    fn files(&mut self, records: &[Vec<u8>]) -> Vec<u8> {
        let mut body = rec(2, 1, 0, &[0; 16]);
        for r in records {
            body.extend_from_slice(r);
        }
        self.f_seq = self.f_seq.wrapping_add(1);
        Self::packet(b'f', self.f_seq.wrapping_sub(1), &body)
    }
}

fn rec(kind: u8, flag: u8, id: u32, body: &[u8]) -> Vec<u8> {
    let mut r = vec![kind, flag];
    r.extend_from_slice(&((8 + body.len()) as u16).to_be_bytes());
    r.extend_from_slice(&id.to_be_bytes());
    r.extend_from_slice(body);
    r
}

fn open(file: u32, user: u32, path: &str) -> Vec<u8> {
    let mut body = 0u64.to_be_bytes().to_vec();
    body.extend_from_slice(&user.to_be_bytes());
    body.extend_from_slice(path.as_bytes());
    body.push(0);
    rec(1, 1, file, &body)
}

fn close(file: u32, read: u64, write: u64) -> Vec<u8> {
    let mut body = read.to_be_bytes().to_vec();
    body.extend_from_slice(&0u64.to_be_bytes());
    body.extend_from_slice(&write.to_be_bytes());
    rec(0, 0, file, &body)
}

fn xfr(file: u32, read: u64, write: u64) -> Vec<u8> {
    let mut r = close(file, read, write);
    r[0] = 3;
    r
}

fn disc(user: u32) -> Vec<u8> {
    rec(4, 0, user, &[])
}

fn sss(name: &str, group: &str, host: &str) -> (String, String) {
    (
        format!("xroot/{name}.1:2@{host}"),
        format!("&p=sss&n={name}&h={host}&o=&r=&g={group}&m="),
    )
}

/// A list's (name, read, written, opened, closed, open, users), as sent.
fn list(r: &Harness, which: usize) -> Vec<(String, u64, u64, u64, u64, u64, u64)> {
    let server = r
        .engine
        .detailed
        .server(SERVER.parse::<SocketAddr>().unwrap().ip(), STOD)
        .expect("server state");
    server
        .sent(which)
        .map(|(n, c, open, users)| {
            (
                n.to_string(),
                c.read,
                c.written,
                c.opened,
                c.closed,
                open,
                users,
            )
        })
        .collect()
}

/// Logins beyond detailed_max_logins: the oldest go, counted; the state
/// holds the bound; the newest login's transfer counts in full.
#[test]
fn a_login_flood_is_bounded_and_loses_nothing_else() {
    let mut r = Harness::new("detailed_max_logins = 100\n");
    let mut s = Stream::default();
    for id in 1..=1000u32 {
        let (u, a) = sss(&format!("u{id}"), "atlas", "h.example.org");
        r.feed(s.login(id, &u, &a), SERVER, 0);
    }
    let server = r
        .engine
        .detailed
        .server("10.0.0.5".parse().unwrap(), STOD)
        .unwrap();
    assert_eq!(server.logins(), 100);
    assert_eq!(r.snapshot().detailed_evicted, 900);
    r.feed(
        s.files(&[open(2000, 1000, "/f"), close(2000, 5_000, 0), disc(1000)]),
        SERVER,
        1,
    );
    assert_eq!(
        list(&r, 0),
        [
            ("atlas".into(), 5_000, 0, 1, 1, 0, 99),
            ("other".into(), 0, 0, 0, 0, 0, 0)
        ]
    );
    let snap = r.snapshot();
    assert_eq!(
        (
            snap.detailed_unmatched,
            snap.detailed_lost,
            snap.parse_errors
        ),
        (0, 0, 0)
    );
    // Opens never closed (lost closes): as bounded.
    let opens: Vec<Vec<u8>> = (0..150).map(|f| open(3000 + f, 999, "/g")).collect();
    r.feed(s.files(&opens), SERVER, 2);
    let server = r
        .engine
        .detailed
        .server("10.0.0.5".parse().unwrap(), STOD)
        .unwrap();
    assert_eq!(server.open_files(), 100);
    assert_eq!(r.snapshot().detailed_evicted, 950);
}

/// A close of a file never opened counts its bytes under `other` (they
/// moved); an open by a user never announced counts under `other` (or the
/// path rule's VO); a dictid announced again replaces the first; a
/// disconnect of dictid 0 (a failed login) is no mismatch.
#[test]
fn unmatched_and_reused_dictids_are_counted_and_attributed() {
    let mut r = Harness::new("detailed_vo_paths = [\"/store/=cms\"]\n");
    let mut s = Stream::default();
    let (u, a) = sss("alice", "atlas", "node1.cern.ch");
    r.feed(s.login(1, &u, &a), SERVER, 0);
    // Dictid 1 again, now bob of cms.
    let (u, a) = sss("bob", "cms", "node2.fnal.gov");
    r.feed(s.login(1, &u, &a), SERVER, 0);
    r.feed(
        s.files(&[
            close(77, 1_000, 0),
            open(5, 42, "/store/x"),
            close(5, 300, 0),
            open(6, 43, "/elsewhere"),
            close(6, 20, 0),
            open(7, 1, "/data"),
            close(7, 4, 0),
            disc(0),
            disc(1),
        ]),
        SERVER,
        1,
    );
    // atlas was named at alice's login (there was room), and kept its place.
    assert_eq!(
        list(&r, 0),
        [
            ("atlas".into(), 0, 0, 0, 0, 0, 0),
            ("cms".into(), 304, 0, 2, 2, 0, 0),
            ("other".into(), 1_020, 0, 1, 2, 0, 0)
        ]
    );
    assert_eq!(
        list(&r, 2),
        [
            ("cern.ch".into(), 0, 0, 0, 0, 0, 0),
            ("fnal.gov".into(), 4, 0, 1, 1, 0, 0),
            ("other".into(), 1_320, 0, 2, 3, 0, 0)
        ]
    );
    // The close of 77, the opens by 42 and 43, the second login of 1.
    assert_eq!(r.snapshot().detailed_unmatched, 4);
}

/// Transfer records count what moved so far; the close adds the rest:
/// each byte once.
#[test]
fn transfer_records_and_the_close_count_each_byte_once() {
    let mut r = Harness::new("");
    let mut s = Stream::default();
    let (u, a) = sss("carol", "dteam", "x.example.org");
    r.feed(s.login(1, &u, &a), SERVER, 0);
    r.feed(s.files(&[open(2, 1, "/f"), xfr(2, 1_000, 10)]), SERVER, 1);
    assert_eq!(list(&r, 0)[0], ("dteam".into(), 1_000, 10, 1, 0, 1, 1));
    r.feed(
        s.files(&[xfr(2, 2_500, 10), close(2, 4_000, 30), disc(1)]),
        SERVER,
        2,
    );
    assert_eq!(list(&r, 0)[0], ("dteam".into(), 4_000, 30, 1, 1, 0, 0));
    assert_eq!(list(&r, 1)[0], ("xroot".into(), 4_000, 30, 1, 1, 0, 0));
}

/// Gaps in either sequence are lost packets; a late packet is not; the
/// f-stream and the map messages are numbered apart.
#[test]
fn lost_packets_are_counted_per_stream() {
    let mut r = Harness::new("");
    let mut s = Stream::default();
    let (u, a) = sss("d", "g", "h.example.org");
    r.feed(s.login(1, &u, &a), SERVER, 0);
    // Two map messages lost.
    s.map_seq += 2;
    r.feed(s.login(2, &u, &a), SERVER, 0);
    r.feed(s.files(&[]), SERVER, 0);
    let late = s.files(&[]);
    let after = s.files(&[]);
    // f pseq 0, then 2 (1 lost), then 1 arriving late.
    r.feed(after, SERVER, 0);
    r.feed(late, SERVER, 0);
    assert_eq!(r.snapshot().detailed_lost, 3);
    // Wrapping at 256 is no loss.
    for _ in 0..300 {
        let p = s.files(&[]);
        r.feed(p, SERVER, 0);
    }
    assert_eq!(r.snapshot().detailed_lost, 3);
    assert_eq!(r.snapshot().detailed_packets, 2 + 3 + 300);
}

/// A truncated packet, a plen that lies and a record that runs past the
/// packet are rejected (counted, logged); unknown codes are ignored;
/// valid packets around them count in full.
#[test]
fn bad_packets_lose_only_themselves() {
    let mut r = Harness::new("");
    let mut s = Stream::default();
    let (u, a) = sss("e", "atlas", "h.example.org");
    r.feed(s.login(1, &u, &a), SERVER, 0);
    let good = s.files(&[open(2, 1, "/f"), close(2, 700, 0)]);
    r.feed(&good[..good.len() - 3], SERVER, 0);
    let mut lying = good.clone();
    lying[3] = lying[3].wrapping_add(9);
    r.feed(&lying, SERVER, 0);
    r.feed(b"f\0\0", SERVER, 0);
    r.feed(Stream::packet(b'r', 9, b"redirects"), SERVER, 0);
    r.feed(Stream::packet(b't', 9, b"trace"), SERVER, 0);
    // A close past the end after a good open/close pair: those count.
    let mut body = good.clone();
    let mut broken = close(9, 5, 5);
    broken[3] = 200;
    body.extend_from_slice(&broken);
    let len = body.len() as u16;
    body[2..4].copy_from_slice(&len.to_be_bytes());
    r.feed(&body, SERVER, 0);
    let snap = r.snapshot();
    assert_eq!(
        (
            snap.parse_errors,
            snap.monitoring_ignored,
            snap.detailed_packets
        ),
        (4, 2, 2)
    );
    assert_eq!(list(&r, 0)[0], ("atlas".into(), 700, 0, 1, 1, 0, 1));
}

/// At most detailed_max_domains named: the first while there is room, then
/// one that moved more than twice the smallest's bytes takes its place;
/// the list's sum stays the server's total.
#[test]
fn client_domains_are_the_top_n_by_bytes() {
    let mut r = Harness::new("detailed_max_domains = 1\n");
    let mut s = Stream::default();
    let (u, a) = sss("a", "atlas", "n1.small.org");
    r.feed(s.login(1, &u, &a), SERVER, 0);
    let (u, a) = sss("b", "atlas", "n2.big.org");
    r.feed(s.login(2, &u, &a), SERVER, 0);
    r.feed(s.files(&[open(3, 1, "/f"), close(3, 100, 0)]), SERVER, 0);
    r.feed(s.files(&[open(4, 2, "/f"), close(4, 150, 0)]), SERVER, 0);
    assert_eq!(
        list(&r, 2),
        [
            ("small.org".into(), 100, 0, 1, 1, 0, 1),
            ("other".into(), 150, 0, 1, 1, 0, 1)
        ]
    );
    r.feed(s.files(&[open(5, 2, "/f"), close(5, 1_000, 0)]), SERVER, 0);
    let now = list(&r, 2);
    assert_eq!(now[0].0, "big.org");
    let total: u64 = now.iter().map(|e| e.1).sum::<u64>() + 100;
    // small.org's 100 went quiet with it: the named and other add up to
    // the server's 1,250 with what small.org counted while named.
    assert_eq!(total, 1_250);
    assert_eq!(now.len(), 2);
}

/// With max_sources servers kept, a new one evicts the least recently
/// heard from (counted); users of another run never mix.
#[test]
fn server_runs_are_bounded() {
    let mut r = Harness::new("max_sources = 2\n");
    let mut s = Stream::default();
    let (u, a) = sss("a", "atlas", "h.example.org");
    for (i, from) in ["10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1"]
        .into_iter()
        .enumerate()
    {
        let p = s.login(1, &u, &a);
        r.feed(p, from, i as u64);
    }
    let snap = r.snapshot();
    assert_eq!((snap.detailed_servers, snap.detailed_evicted), (2, 1));
    assert!(
        r.engine
            .detailed
            .server("10.0.0.1".parse().unwrap(), STOD)
            .is_none()
    );
}

/// gmond's metadata request for the xrootd's host is answered with the
/// detailed metrics too, each value as last sent.
#[test]
fn a_metadata_request_answers_the_detailed_metrics_too() {
    let mut r = Harness::new(&format!(
        "{CONFIG}metadata_requests = [\"127.0.0.1:8650\"]\n"
    ));
    let entries = capture();
    let mut next = 0;
    let sent = feed_until_summary(&mut r, &entries, &mut next);
    let host = r
        .packets()
        .into_iter()
        .find_map(|p| match p {
            crate::ganglia::xdr::Packet::Value { id, .. } => Some(id.host.into_owned()),
            _ => None,
        })
        .unwrap();
    let request = super::super::answer::MetricRequest {
        host,
        name: "xrootd.det.detailed.vo.atlas.bytes_read".into(),
    };
    let at = r.at(100);
    assert!(r.engine.answer(&request, at));
    let answered = detailed_values(&r);
    assert_eq!(answered, sent);
    assert_eq!(v(&answered, "vo.atlas.bytes_written"), 10_496_000);
}

/// A gateway restart in the middle of an xrootd run: the new gateway's
/// reading of the run starts from 0, and the counters go on from what the
/// state file says was sent. The first packet the new gateway hears holds
/// bytes already (a file of a user who logged in before it started: its
/// path makes it dteam's): 5,000,000 read after the restart go on from
/// the 3,000,000 sent before, to 8,000,000, not back to 5,000,000.
#[test]
fn counters_go_on_through_a_gateway_restart() {
    use super::super::saved::SavedState;
    let entries = capture();
    let mut first = Harness::with_saved(CONFIG, Arc::new(SavedState::from_text("").unwrap()));
    let mut next = 0;
    let run1 = feed_until_summary(&mut first, &entries, &mut next);
    assert_eq!(v(&run1, "vo.dteam.bytes_read"), 3_000_000);
    first.engine.hand_in_state();
    let text = first.engine.saved.as_ref().unwrap().0.to_text();

    let mut second = Harness::with_saved(CONFIG, Arc::new(SavedState::from_text(&text).unwrap()));
    let summary = entries
        .iter()
        .find(|e| e.datagram.starts_with(b"<"))
        .unwrap();
    second.feed_at(&summary.datagram, summary.from, second.at(1));
    // The same xrootd run (its stod), from its address.
    let mut s = Stream::default();
    let mut p = s.files(&[open(101, 100, "/data/f5m"), close(101, 5_000_000, 0)]);
    p[4..8].copy_from_slice(&1_795_896_130u32.to_be_bytes());
    second.feed(p, "127.0.0.1:53000", 3);
    let after = detailed_values(&second);
    assert_eq!(v(&after, "vo.dteam.bytes_read"), 8_000_000);
    assert_eq!(v(&after, "vo.dteam.files_opened"), 3);
    // The protocol of an unknown login: other, from 0 on (it had nothing).
    assert_eq!(v(&after, "protocol.other.bytes_read"), 5_000_000);
    assert_eq!(second.snapshot().detailed_unmatched, 1);
}

/// `status` shows each server run's lost packets apart (issue 44): a gap
/// in one server's sequence shows for that server only, with the host of
/// its summary records; and a run's line goes with its state.
#[test]
fn status_shows_the_lost_packets_of_each_server() {
    use std::time::SystemTime;
    let mut r = Harness::new("max_sources = 2\n");
    let (u, a) = sss("a", "atlas", "h.example.org");
    let (mut loses, mut whole) = (Stream::default(), Stream::default());
    for _ in 0..3 {
        r.feed(whole.files(&[]), "10.0.0.6:1", 0);
    }
    r.feed(loses.login(1, &u, &a), SERVER, 0);
    // Three map messages lost, then one f packet.
    loses.map_seq += 3;
    r.feed(loses.login(2, &u, &a), SERVER, 1);
    r.feed(loses.files(&[]), SERVER, 1);
    loses.f_seq += 1;
    r.feed(loses.files(&[]), SERVER, 1);
    // 10.0.0.5's summary record of the same run names its host.
    let summary = format!(
        r#"<statistics tod="{}" ver="v5.5.3" src="ds5.example.org:1094" tos="{STOD}" pgm="xrootd" ins="anon" pid="7"><stats id="link"><num>3</num></stats></statistics>"#,
        STOD + 10
    );
    r.feed(summary, SERVER, 1);
    let lines = |r: &Harness| {
        let mut st = r.engine.status(r.at(2), SystemTime::now(), None);
        st.sort();
        st.detailed
            .iter()
            .map(|d| {
                (
                    d.address.to_string(),
                    d.started,
                    d.host.clone(),
                    d.logins,
                    d.lost,
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        lines(&r),
        [
            (
                "10.0.0.5".to_string(),
                STOD,
                Some("10.0.0.5:ds5.example.org".to_string()),
                2,
                4
            ),
            ("10.0.0.6".to_string(), STOD, None, 0, 0),
        ]
    );
    assert_eq!(r.snapshot().detailed_lost, 4);
    // A third server at max_sources = 2: the least recently heard
    // (10.0.0.6) is dropped, and its line with it.
    r.feed(Stream::default().files(&[]), "10.0.0.7:1", 3);
    assert_eq!(
        lines(&r)
            .into_iter()
            .map(|l| (l.0, l.4))
            .collect::<Vec<_>>(),
        [("10.0.0.5".to_string(), 4), ("10.0.0.7".to_string(), 0)]
    );
}
