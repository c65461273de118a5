use super::*;

/// The datagrams of xrootd 5.5.3's capture (tests/data/detailed/README.md).
pub(crate) fn capture() -> Vec<crate::recording::Entry> {
    capture_of("xrootd-5.5.3.jsonl")
}

/// The datagrams of the capture `name` in tests/data/detailed.
pub(crate) fn capture_of(name: &str) -> Vec<crate::recording::Entry> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/detailed")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| crate::recording::parse_entry(l).unwrap())
        .collect()
}

const STOD1: u32 = 1_795_896_130;
const STOD2: u32 = 1_795_896_139;

/// Every record of every detailed packet of the real capture, read as the
/// wire shows it (tests/data/detailed/README.md lists them).
#[test]
fn the_real_capture_decodes_record_by_record() {
    let entries = capture();
    let detailed: Vec<_> = entries
        .iter()
        .filter(|e| is_detailed(&e.datagram))
        .map(|e| decode(&e.datagram).unwrap())
        .collect();
    // 2 '=', 9 'u', 2 'f'; the two summary records are not detailed.
    assert_eq!(detailed.len(), 13);
    assert_eq!(entries.len() - detailed.len(), 2);
    let codes: Vec<u8> = detailed.iter().map(|p| p.header.code).collect();
    assert_eq!(codes, b"=uuuuuuuuf=uf");
    // The map sequence counts '=' (0) and the 'u's (1..8); the f-stream
    // has its own, from 0.
    let seqs: Vec<u8> = detailed.iter().map(|p| p.header.pseq).collect();
    assert_eq!(seqs, [0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 1, 0]);
    assert!(detailed[..10].iter().all(|p| p.header.stod == STOD1));
    assert!(detailed[10..].iter().all(|p| p.header.stod == STOD2));

    let Body::User {
        dictid,
        userid,
        auth,
    } = &detailed[1].body
    else {
        panic!("{:?}", detailed[1]);
    };
    assert_eq!(*dictid, 1);
    let id = UserId::parse(userid);
    assert_eq!(
        (id.protocol, id.user, id.host),
        (&b"xroot"[..], &b"root"[..], &b"[::ffff:127.0.0.1]"[..])
    );
    let a = Auth::parse(auth.unwrap());
    assert_eq!(
        (a.protocol, a.name, a.org, a.first_group()),
        (&b"sss"[..], &b"alice"[..], &b""[..], &b"atlas"[..])
    );
    let Body::User { userid, auth, .. } = &detailed[7].body else {
        panic!()
    };
    assert_eq!(UserId::parse(userid).protocol, b"http");
    assert_eq!(Auth::parse(auth.unwrap()).name, b"");

    let Body::Files(records) = &detailed[9].body else {
        panic!()
    };
    assert!(STOD1 < records.t_beg && records.t_beg <= records.t_end);
    let records: Vec<Record> = records.clone().map(Result::unwrap).collect();
    assert_eq!(records.len(), 20);
    assert_eq!(
        records[0],
        Record::Open {
            file: 2,
            size: 3_000_000,
            rw: false,
            user: Some(1),
            lfn: Some(b"/data/f3m"),
        }
    );
    assert_eq!(records[1], close(2, [3_000_000, 0, 0], false));
    assert_eq!(records[2], Record::Disc { user: 1 });
    // The 10 MiB upload: written as 10,496,000 bytes (page writes carry 4
    // checksum bytes per 4 KiB page: 2,560 pages).
    assert_eq!(records[4], close(4, [0, 0, 10_485_760 + 2_560 * 4], false));
    assert!(matches!(records[3], Record::Open { rw: true, .. }));
    // The HTTP PUT of 2,000,000 bytes: its close says 0 written.
    assert_eq!(
        records[18],
        Record::Close {
            file: 14,
            bytes: Bytes::default(),
            forced: false
        }
    );
    let disc: Vec<u32> = records
        .iter()
        .filter_map(|r| match r {
            Record::Disc { user } => Some(*user),
            _ => None,
        })
        .collect();
    // The failed open (9) and the stat (10) left only their logins and
    // disconnects.
    assert_eq!(disc, [1, 3, 5, 7, 9, 10, 11, 13]);
}

/// xrootd 6.1.0's capture of the same traffic (tests/data/detailed/README.md),
/// read as the wire shows it: the same layout; the differences from 5.5.3
/// are an `i` map message (the HTTP client's User-Agent) after each HTTP
/// login, its dictid taken from the shared counter, and the HTTP PUT's
/// close counting the bytes written.
#[test]
fn the_6_1_capture_decodes_record_by_record() {
    const STOD1: u32 = 1_795_906_818;
    const STOD2: u32 = 1_795_906_827;
    let entries = capture_of("xrootd-6.1.0.jsonl");
    let detailed: Vec<_> = entries
        .iter()
        .filter(|e| is_detailed(&e.datagram))
        .map(|e| decode(&e.datagram).unwrap())
        .collect();
    assert_eq!(entries.len() - detailed.len(), 2);
    let codes: Vec<u8> = detailed.iter().map(|p| p.header.code).collect();
    assert_eq!(codes, b"=uuuuuuuiuif=uf");
    // The `i`s share the map messages' sequence.
    let seqs: Vec<u8> = detailed.iter().map(|p| p.header.pseq).collect();
    assert_eq!(seqs, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 0, 1, 0]);
    assert!(detailed[..12].iter().all(|p| p.header.stod == STOD1));
    assert!(detailed[12..].iter().all(|p| p.header.stod == STOD2));
    assert!(matches!(detailed[8].body, Body::Other));
    let Body::Ident { info } = detailed[0].body else {
        panic!("{:?}", detailed[0]);
    };
    assert!(info.ends_with(b"&port=45411&inst=det&pgm=xrootd&ver=v6.1.0"));
    // The userid's middle is a link number now (5.5.3: the client's pid).
    let Body::User {
        dictid,
        userid,
        auth,
    } = &detailed[1].body
    else {
        panic!("{:?}", detailed[1]);
    };
    assert_eq!(*dictid, 1);
    assert_eq!(userid, b"xroot/root.1:232705077063696@[::ffff:127.0.0.1]");
    let a = Auth::parse(auth.unwrap());
    assert_eq!(
        (a.protocol, a.name, a.org, a.first_group()),
        (&b"sss"[..], &b"alice"[..], &b""[..], &b"atlas"[..])
    );
    let Body::Files(records) = &detailed[11].body else {
        panic!()
    };
    let records: Vec<Record> = records.clone().map(Result::unwrap).collect();
    assert_eq!(records.len(), 20);
    // The xrdcp upload: page checksums counted as in 5.5.3.
    assert_eq!(records[4], close(4, [0, 0, 10_485_760 + 2_560 * 4], false));
    // The HTTP PUT of 2,000,000 bytes (file 16: the `i`s took 12 and 15).
    assert_eq!(
        records[17],
        Record::Open {
            file: 16,
            size: 0,
            rw: true,
            user: Some(14),
            lfn: Some(b"/data/put_http"),
        }
    );
    assert_eq!(records[18], close(16, [0, 0, 2_000_000], false));
}

fn packet(code: u8, body: &[u8]) -> Vec<u8> {
    let mut p = vec![code, 7];
    p.extend_from_slice(&((8 + body.len()) as u16).to_be_bytes());
    p.extend_from_slice(&1000u32.to_be_bytes());
    p.extend_from_slice(body);
    p
}

fn rec(kind: u8, flag: u8, id: u32, body: &[u8]) -> Vec<u8> {
    let mut r = vec![kind, flag];
    r.extend_from_slice(&((8 + body.len()) as u16).to_be_bytes());
    r.extend_from_slice(&id.to_be_bytes());
    r.extend_from_slice(body);
    r
}

/// The records of an `f` packet `p`, as decoded.
fn f_records(p: &[u8]) -> Vec<Result<Record<'_>, Error>> {
    let Body::Files(records) = decode(p).unwrap().body else {
        panic!()
    };
    records.collect()
}

fn time_rec() -> Vec<u8> {
    rec(2, 1, 0, &[0; 16])
}

#[test]
fn truncated_and_lying_packets_are_errors() {
    assert_eq!(
        decode(b"f\0\0\x07abc"),
        Err(Error::Truncated { len: 7, need: 8 })
    );
    // plen says 200: the datagram is 12 bytes.
    assert_eq!(
        decode(b"u\0\0\xc8\0\0\0\x01\0\0\0\x01"),
        Err(Error::Length { plen: 200, len: 12 })
    );
    let mut p = packet(b'u', b"\0\0");
    assert_eq!(decode(&p), Err(Error::Truncated { len: 10, need: 12 }));
    // A plen one short of the datagram.
    p = packet(b'u', b"\0\0\0\x05xroot/a.1:2@h");
    p[3] -= 1;
    assert!(matches!(decode(&p), Err(Error::Length { .. })));
    // An f packet without its time record, or with a short one.
    assert_eq!(
        decode(&packet(b'f', &rec(4, 0, 1, &[]))),
        Err(Error::NoTime)
    );
    assert_eq!(decode(&packet(b'f', &[])), Err(Error::NoTime));
    assert_eq!(
        decode(&packet(b'f', &rec(2, 0, 0, &[0; 4]))),
        Err(Error::Record { at: 8, size: 12 })
    );
}

/// A record that does not fit ends the packet's records with one error;
/// the records before it stand; an unknown record type is skipped by its
/// size.
#[test]
fn a_bad_record_loses_only_what_follows_it() {
    let mut body = time_rec();
    body.extend(rec(4, 0, 5, &[]));
    body.extend(rec(9, 0, 5, &[1, 2, 3, 4]));
    // A close of 16 bytes: shorter than its 32.
    body.extend(rec(0, 0, 6, &[0; 8]));
    body.extend(rec(4, 0, 7, &[]));
    let p = packet(b'f', &body);
    assert_eq!(
        f_records(&p),
        [
            Ok(Record::Disc { user: 5 }),
            Ok(Record::Unknown(9)),
            Err(Error::Record { at: 52, size: 16 }),
        ]
    );
    // A record size past the packet's end, and one below the header's.
    for size in [200u16, 4] {
        let mut body = time_rec();
        let mut r = rec(4, 0, 5, &[]);
        r[2..4].copy_from_slice(&size.to_be_bytes());
        body.extend(r);
        let p = packet(b'f', &body);
        assert_eq!(
            f_records(&p),
            [Err(Error::Record {
                at: 32,
                size: size.into()
            })]
        );
    }
    // Three bytes left over: not a record header.
    let mut body = time_rec();
    body.extend([0, 0, 0]);
    let p = packet(b'f', &body);
    assert_eq!(f_records(&p), [Err(Error::Record { at: 32, size: 3 })]);
}

#[test]
fn other_codes_are_read_for_their_sequence_only() {
    let d = packet(
        b'=',
        b"\0\0\0\0=/nobody.1:2@vm\n&site=&port=1094&inst=a&pgm=xrootd&ver=v5",
    );
    let Body::Ident { info } = decode(&d).unwrap().body else {
        panic!()
    };
    let other = b"=/nobody.9:2@vm\n&pgm=xrootd&inst=a&port=1094&ver=v6";
    assert_eq!(server_ident(info), server_ident(other));
    assert_ne!(server_ident(info), server_ident(b"x\n&port=1094&inst=b"));
    assert_eq!(
        decode(&packet(b'=', b"\0\0")),
        Err(Error::Truncated { len: 10, need: 12 })
    );
    for code in *b"irtpxUT" {
        let d = packet(code, b"anything");
        let p = decode(&d).unwrap();
        assert_eq!(
            (p.header.code, p.header.pseq, p.body),
            (code, 7, Body::Other)
        );
    }
    assert!(!is_detailed(b"g\0\0\x08\0\0\0\0"));
    assert!(!is_detailed(b"<statistics"));
    assert!(!is_detailed(b"{\"code\":\"f\"}"));
    assert!(!is_detailed(b""));
}

#[test]
fn user_ids_and_domains() {
    let id = UserId::parse(b"xroot/alice.123:45@node7.cern.ch");
    assert_eq!(
        (id.protocol, id.user, id.host, id.domain()),
        (
            &b"xroot"[..],
            &b"alice"[..],
            &b"node7.cern.ch"[..],
            &b"cern.ch"[..]
        )
    );
    assert_eq!(UserId::parse(b"a.b.c.1:2@x").user, b"a.b.c");
    assert_eq!(UserId::parse(b"nothing").protocol, b"");
    assert_eq!(domain_of(b"10.1.2.3"), b"10.1.2.3");
    assert_eq!(domain_of(b"[::1]"), b"[::1]");
    assert_eq!(domain_of(b"[::ffff:127.0.0.1]"), b"127.0.0.1");
    assert_eq!(domain_of(b"localhost"), b"localhost");
    assert_eq!(domain_of(b"host."), b"host.");
    let a = Auth::parse(b"&p=gsi&n=/DC=ch/CN=x&h=h&o=cms&r=prod&g=/cms /cms/uscms&m=");
    assert_eq!((a.org, a.first_group()), (&b"cms"[..], &b"/cms"[..]));
    assert_eq!(Auth::parse(b"&g=  b c").first_group(), b"b");
}

/// A close record: its file, bytes [read, readv, written], and whether forced.
fn close(file: u32, [read, readv, write]: [u64; 3], forced: bool) -> Record<'static> {
    Record::Close {
        file,
        bytes: Bytes { read, readv, write },
        forced,
    }
}
