//! What every known summary variable is, for Ganglia.
//!
//! Sources: XRootD System Monitoring Reference section 2.2 (2018 edition,
//! `shared/reference/000_*`), its 2009 edition (`003_*`, which adds the
//! legacy `toe` end-tag attribute), and what xrootd 5.x actually prints
//! (read in the xrootd source and seen in records captured from xrootd 5.5.3:
//! buff.xl*, xrootd.ops.wv/ws, xrootd.sig.*, ofs.tpc.*, pss.*, cache.*).
//! The catalog is held to `tests/data/xrootd-releases.tsv`, what every
//! release from 3.0.0 to 6.1 sends, read from XRootD's source: entries
//! no release sends are not here (the 2018 reference's `xrootd.prr`, a typo
//! for `err`, and `cmsc.role`/`cmss.role`), entries only old releases send
//! say so ([`MetricSpec::until`]), and so do fields whose width changed
//! ([`MetricSpec::old_width`]).
//!
//! Slope follows meaning, not the reference's arrows:
//! * cumulative counters are `positive` (gmetad stores them as RRD COUNTER
//!   and graphs the rate, so their units are rates);
//! * gauges, high-water marks (link.maxn, sched.maxinq, xrootd.aio.max) and
//!   counters that xrootd itself resets (buff.reqs, cmsm.sel.r/w) are `both`:
//!   a COUNTER would read each reset as a 32-bit wrap and draw a spike;
//! * text is `zero`.
//!
//! Types: C `int` fields (printed with `%d`, so they go negative past 2^31)
//! are `uint32` and sent as their unsigned value; `long long` fields are
//! `double` with integer text; timestamps are `double`; the one `char`
//! counter (`cmsm.node.i.shr.use`, 5.4.0+) is [`Kind::Counter8`].
//!
//! List entries are written with `i` for the index (`oss.paths.i.free`);
//! [`LIST_KEYS`] says which field names an entry.

use std::sync::LazyLock;

use crate::ganglia::xdr::Slope;

/// What a variable is, which fixes its Ganglia type and slope.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Cumulative 32-bit counter (C `int`): double with integer text,
    /// positive. The gateway keeps it continuous across wraps and restarts
    /// (`engine/series.rs`), so what it sends outgrows 32 bits.
    Counter32,
    /// Cumulative 64-bit counter (C `long long`): double with integer text, positive.
    Counter64,
    /// Cumulative 8-bit counter (a C `char` printed with `%d`): double with
    /// integer text, positive. It wraps 127 -> -128 where `char` is signed
    /// (x86) and 255 -> 0 where it is unsigned (ARM, POWER); the value
    /// reader takes -128..-1 as 128..255 and the gateway reads a drop of
    /// less than 128 as a wrap (`engine/series.rs`), so either counts on
    /// steadily. Readings above 255 are taken as they are: they come from
    /// releases that had an `int` there (see [`MetricSpec::old_width`]).
    Counter8,
    /// 32-bit value that goes up and down, or a high-water mark: uint32, both.
    Gauge32,
    /// 64-bit value that goes up and down: double, both.
    Gauge64,
    /// Unix time in seconds: double, both.
    Timestamp,
    /// A size xrootd reports in KiB: sent in bytes (times 1024), so that
    /// ganglia-web's prefixes read right ("82.7 GB", not "82.72M KiB"):
    /// double, both.
    SizeKiB,
    /// Text: string, zero.
    Text,
}

impl Kind {
    /// The TYPE gmond is told.
    pub fn value_type(self) -> &'static str {
        match self {
            Kind::Gauge32 => "uint32",
            Kind::Counter8
            | Kind::Counter32
            | Kind::Counter64
            | Kind::Gauge64
            | Kind::Timestamp
            | Kind::SizeKiB => "double",
            Kind::Text => "string",
        }
    }

    pub fn slope(self) -> Slope {
        match self {
            Kind::Counter8 | Kind::Counter32 | Kind::Counter64 => Slope::Positive,
            Kind::Gauge32 | Kind::Gauge64 | Kind::Timestamp | Kind::SizeKiB => Slope::Both,
            Kind::Text => Slope::Zero,
        }
    }

    pub fn is_counter(self) -> bool {
        self.slope() == Slope::Positive
    }
}

/// One catalog entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetricSpec {
    /// Flat variable name with `i` for list indexes: `oss.paths.i.free`.
    pub var: &'static str,
    pub kind: Kind,
    pub units: &'static str,
    /// Short graph title.
    pub title: &'static str,
    /// One sentence for DESC.
    pub desc: &'static str,
    /// The last XRootD release that sends it, when no current one does
    /// (`tests/data/xrootd-releases.tsv`); None: current releases send it.
    pub until: Option<&'static str>,
    /// (last release, bits): up to that release its field had this width,
    /// not the one [`kind`](Self::kind) says.
    pub old_width: Option<(&'static str, u8)>,
    /// Why the default set leaves it out although releases send it: the
    /// value is always 0 (or wrong) upstream, with the XRootD source
    /// (file:line at v6.1.0) that shows it. Each is in [`DEFAULT_EXCLUDE`]
    /// (a test holds them together) and in docs/metrics.md.
    ///
    /// [`DEFAULT_EXCLUDE`]: crate::mapping::DEFAULT_EXCLUDE
    pub left_out: Option<&'static str>,
}

/// The field that names a list entry, per list ("index only to break ties").
pub const LIST_KEYS: &[(&str, &str)] = &[
    ("oss.paths", "lp"),
    ("oss.space", "name"),
    ("cmsm.node", "host"),
];

/// The key field of a list, if it has one.
pub fn list_key(list: &str) -> Option<&'static str> {
    LIST_KEYS.iter().find(|(l, _)| *l == list).map(|(_, k)| *k)
}

/// Variables the gateway derives from others (documented in README).
/// Whether `var` is one the gateway derives (never left out by a filter:
/// its inputs may be).
pub fn is_derived(var: &str) -> bool {
    [
        DERIVED_CPU_USR,
        DERIVED_CPU_SYS,
        DERIVED_CPU_TOTAL,
        DERIVED_UPTIME,
    ]
    .contains(&var)
}

/// Whether `var` is one the gateway makes from XCache's g-stream
/// (`engine/xcache.rs`: `pfc.*`), not from a summary record.
pub fn is_from_gstream(var: &str) -> bool {
    var.starts_with("pfc.")
}

/// Variables made from the detailed stream (src/engine/detailed.rs), not
/// sent in any summary record.
pub fn is_from_detailed(var: &str) -> bool {
    var.starts_with("detailed.")
}

pub const DERIVED_CPU_USR: &str = "proc.cpu.usr";
pub const DERIVED_CPU_SYS: &str = "proc.cpu.sys";
pub const DERIVED_CPU_TOTAL: &str = "proc.cpu.total";
pub const DERIVED_UPTIME: &str = "uptime";

/// Units used for unknown numeric variables.
pub const UNKNOWN_UNITS: &str = "";

macro_rules! spec {
    ($var:literal, $kind:ident, $units:literal, $title:literal, $desc:literal) => {
        spec!(@ $var, $kind, $units, $title, $desc, None, None, None)
    };
    ($var:literal, $kind:ident, $units:literal, $title:literal, $desc:literal, until = $until:literal) => {
        spec!(@ $var, $kind, $units, $title, $desc, Some($until), None, None)
    };
    ($var:literal, $kind:ident, $units:literal, $title:literal, $desc:literal, old_width = ($last:literal, $bits:literal)) => {
        spec!(@ $var, $kind, $units, $title, $desc, None, Some(($last, $bits)), None)
    };
    ($var:literal, $kind:ident, $units:literal, $title:literal, $desc:literal, left_out = $why:literal) => {
        spec!(@ $var, $kind, $units, $title, $desc, None, None, Some($why))
    };
    ($var:literal, $kind:ident, $units:literal, $title:literal, $desc:literal, old_width = ($last:literal, $bits:literal), left_out = $why:literal) => {
        spec!(@ $var, $kind, $units, $title, $desc, None, Some(($last, $bits)), Some($why))
    };
    (@ $var:literal, $kind:ident, $units:literal, $title:literal, $desc:literal, $until:expr, $old:expr, $left_out:expr) => {
        MetricSpec {
            var: $var,
            kind: Kind::$kind,
            units: $units,
            title: $title,
            desc: $desc,
            until: $until,
            old_width: $old,
            left_out: $left_out,
        }
    };
}

/// Every known variable.
pub static CATALOG: &[MetricSpec] = &[
    // Header (<statistics ...>). The reference marks tod/tos with an up-arrow:
    // they only grow, but they are points in time, not counts, so `both`.
    // What identifies a program run (tos, pid, info.port, sgen.as) is sent
    // as text: ganglia-web lists string metrics in a host's overview
    // instead of graphing them as numbers; tod, toe and sgen.toe (when a
    // report was made) are left out by default (mapping/filter.rs).
    spec!(
        "tod",
        Timestamp,
        "s",
        "Report start time",
        "Unix time when statistics gathering started."
    ),
    spec!(
        "toe",
        Timestamp,
        "s",
        "Report end time",
        "Unix time when statistics gathering ended: an attribute of the end tag, sent from 2009-07 to 2010-02 (before any release tag); sgen.toe since.",
        until = "2010-02"
    ),
    spec!(
        "tos",
        Text,
        "s",
        "Program start time",
        "Unix time when the program was started."
    ),
    spec!(
        "ver",
        Text,
        "",
        "Version",
        "Version name of the server code."
    ),
    spec!(
        "src",
        Text,
        "",
        "Reporting host and port",
        "Host and port reporting data (hostname:port)."
    ),
    spec!(
        "pgm",
        Text,
        "",
        "Program",
        "Name of the program (xrootd or cmsd)."
    ),
    spec!(
        "ins",
        Text,
        "",
        "Instance",
        "Instance name given with -n (anon if none)."
    ),
    spec!("pid", Text, "", "Process ID", "Process ID of the program."),
    spec!(
        "site",
        Text,
        "",
        "Site",
        "Site name given with all.sitename."
    ),
    spec!(
        "host",
        Text,
        "",
        "Host attribute",
        "Host attribute: the name of the sender, added by mpxstats -s; the dCache xrootd monitor plug-in sends it too."
    ),
    // Derived by the gateway.
    spec!(
        "uptime",
        Gauge64,
        "s",
        "Uptime",
        "Seconds since the program started (tod - tos), derived by xrd2ganglia."
    ),
    spec!(
        "proc.cpu.usr",
        Counter64,
        "ms/s",
        "CPU time, user",
        "Cumulative user CPU time in milliseconds (proc.usr.s and .u), derived by xrd2ganglia; graphed as a rate, 1000 ms/s is one full core."
    ),
    spec!(
        "proc.cpu.sys",
        Counter64,
        "ms/s",
        "CPU time, system",
        "Cumulative system CPU time in milliseconds (proc.sys.s and .u), derived by xrd2ganglia; graphed as a rate, 1000 ms/s is one full core."
    ),
    spec!(
        "proc.cpu.total",
        Counter64,
        "ms/s",
        "CPU time, total",
        "Cumulative user+system CPU time in milliseconds, derived by xrd2ganglia; graphed as a rate, 1000 ms/s is one full core."
    ),
    // buff (2.2.1). buff.reqs is reset by the buffer reshaper: not a COUNTER.
    spec!(
        "buff.reqs",
        Gauge32,
        "requests",
        "Buffer requests",
        "Requests for a buffer since the last buffer-profile adjustment (reset by xrootd, so not a counter)."
    ),
    spec!(
        "buff.mem",
        Gauge64,
        "bytes",
        "Buffer memory",
        "Bytes allocated to buffers."
    ),
    spec!(
        "buff.buffs",
        Gauge32,
        "buffers",
        "Buffers allocated",
        "Number of allocated buffers."
    ),
    spec!(
        "buff.adj",
        Counter32,
        "adjustments/s",
        "Buffer profile adjustments",
        "Adjustments to the buffer profile."
    ),
    spec!(
        "buff.xlreqs",
        Counter32,
        "requests/s",
        "Large buffer requests",
        "Requests for an extra-large buffer (never reset, unlike buff.reqs)."
    ),
    spec!(
        "buff.xlmem",
        Gauge64,
        "bytes",
        "Large buffer memory",
        "Bytes allocated to large buffers."
    ),
    spec!(
        "buff.xlbuffs",
        Gauge32,
        "buffers",
        "Large buffers allocated",
        "Number of allocated large buffers."
    ),
    // cms (2.2.2): role only.
    spec!(
        "cms.role",
        Text,
        "",
        "CMS role",
        "Role code of a data server cmsd (S server, R supervisor, ...): xrootd sends cms where the reference says cmsc or cmss."
    ),
    // cmsm (2.2.2.2). sel.r/w are resummed every 60 s by cmsd, so they can drop.
    spec!(
        "cmsm.role",
        Text,
        "",
        "CMS manager role",
        "Role identification of the cms manager."
    ),
    spec!(
        "cmsm.sel.t",
        Counter64,
        "selections/s",
        "Node selections",
        "Number of node selections."
    ),
    spec!(
        "cmsm.sel.r",
        Gauge64,
        "selections",
        "Node selections for read",
        "Node selections for read access (resummed every 60 s by cmsd, so not a counter)."
    ),
    spec!(
        "cmsm.sel.w",
        Gauge64,
        "selections",
        "Node selections for write",
        "Node selections for write access (resummed every 60 s by cmsd, so not a counter)."
    ),
    spec!(
        "cmsm.node",
        Gauge32,
        "nodes",
        "Nodes",
        "Number of subscribed nodes reported."
    ),
    spec!(
        "cmsm.node.i.host",
        Text,
        "",
        "Node host",
        "DNS name or IPv6 address of the node."
    ),
    spec!(
        "cmsm.node.i.role",
        Text,
        "",
        "Node role",
        "Role identification of the node."
    ),
    spec!(
        "cmsm.node.i.run",
        Text,
        "",
        "Node run status",
        "Run status: a active, s suspended, d disabled, o offline, then w if writable and n if not staging."
    ),
    spec!(
        "cmsm.node.i.ref.r",
        Counter32,
        "selections/s",
        "Node read selections",
        "Number of times the node was selected for read access."
    ),
    spec!(
        "cmsm.node.i.ref.w",
        Counter32,
        "selections/s",
        "Node write selections",
        "Number of times the node was selected for write access."
    ),
    // The reference marks shr with an up-arrow, but it is a configured share: a gauge.
    spec!(
        "cmsm.node.i.shr",
        Gauge32,
        "requests",
        "Node share",
        "Desired share of requests, if so configured (meta managers)."
    ),
    spec!(
        "cmsm.node.i.shr.use",
        Counter8,
        "exhaustions/s",
        "Node share exhausted",
        "Number of times the share of the node was exhausted (a char since 5.4.0: wraps at 8 bits).",
        old_width = ("5.3.4", 32)
    ),
    spec!(
        "cmsm.frq.add",
        Counter64,
        "additions/s",
        "Fast response queue additions",
        "Additions to the fast response queue."
    ),
    spec!(
        "cmsm.frq.add.d",
        Counter64,
        "additions/s",
        "Duplicate fast response queue additions",
        "Fast response queue additions that were duplicates."
    ),
    spec!(
        "cmsm.frq.rsp",
        Counter64,
        "responses/s",
        "Fast responses received",
        "Responses received."
    ),
    spec!(
        "cmsm.frq.rsp.m",
        Counter64,
        "responses/s",
        "Multiple responses fielded",
        "Multiple responses fielded."
    ),
    spec!(
        "cmsm.frq.lf",
        Counter64,
        "lookups/s",
        "Lookups without wait",
        "Lookups dispatched that required no wait.",
        left_out = "inflated: running totals added again on each pass (XrdCmsRRQ.cc:250-251)"
    ),
    spec!(
        "cmsm.frq.ls",
        Counter64,
        "lookups/s",
        "Lookups with full wait",
        "Lookups dispatched that required a full wait.",
        left_out = "inflated: running totals added again on each pass (XrdCmsRRQ.cc:250-251)"
    ),
    spec!(
        "cmsm.frq.rf",
        Counter64,
        "redirects/s",
        "Redirects without wait",
        "Redirects dispatched that required no wait.",
        left_out = "inflated: running totals added again on each pass (XrdCmsRRQ.cc:250-251)"
    ),
    spec!(
        "cmsm.frq.rs",
        Counter64,
        "redirects/s",
        "Redirects with full wait",
        "Redirects dispatched that required a full wait.",
        left_out = "inflated: running totals added again on each pass (XrdCmsRRQ.cc:250-251)"
    ),
    // info (2.2.3, deprecated).
    spec!(
        "info.host",
        Text,
        "",
        "Host name",
        "Host name that generated the information."
    ),
    spec!(
        "info.name",
        Text,
        "",
        "Instance name",
        "Instance name given with -n (anon if none)."
    ),
    spec!(
        "info.port",
        Text,
        "",
        "Port",
        "Port used for server requests."
    ),
    // link (2.2.4).
    spec!(
        "link.num",
        Gauge32,
        "connections",
        "Connections",
        "Current connections."
    ),
    spec!(
        "link.maxn",
        Gauge32,
        "connections",
        "Peak connections",
        "Maximum number of simultaneous connections (high-water mark)."
    ),
    spec!(
        "link.tot",
        Counter64,
        "connections/s",
        "New connections",
        "Connections since start-up."
    ),
    spec!(
        "link.in",
        Counter64,
        "bytes/s",
        "Bytes received",
        "Bytes received."
    ),
    spec!(
        "link.out",
        Counter64,
        "bytes/s",
        "Bytes sent",
        "Bytes sent."
    ),
    spec!(
        "link.ctime",
        Counter64,
        "s/s",
        "Connect time",
        "Cumulative connect seconds; ctime/tot is the average session time."
    ),
    spec!(
        "link.tmo",
        Counter32,
        "timeouts/s",
        "Read timeouts",
        "Read request timeouts."
    ),
    spec!(
        "link.stall",
        Counter32,
        "stalls/s",
        "Partial receives",
        "Number of times partial data was received."
    ),
    spec!(
        "link.sfps",
        Counter32,
        "operations/s",
        "Partial sendfiles",
        "Partial sendfile() operations."
    ),
    // ofs (2.2.5).
    spec!(
        "ofs.role",
        Text,
        "",
        "Role",
        "Role of the reporter (manager, server, ...)."
    ),
    spec!(
        "ofs.opr",
        Gauge32,
        "files",
        "Files open for read",
        "Files open in read mode."
    ),
    spec!(
        "ofs.opw",
        Gauge32,
        "files",
        "Files open for write",
        "Files open in read/write mode."
    ),
    spec!(
        "ofs.opp",
        Gauge32,
        "files",
        "Files open in POSC mode",
        "Files open in read/write POSC mode."
    ),
    spec!(
        "ofs.ups",
        Counter32,
        "files/s",
        "POSC files un-persisted",
        "Number of times a POSC mode file was un-persisted."
    ),
    spec!(
        "ofs.han",
        Gauge32,
        "handles",
        "File handles",
        "Active file handles."
    ),
    spec!(
        "ofs.rdr",
        Counter32,
        "redirects/s",
        "Redirects",
        "Redirects processed."
    ),
    spec!(
        "ofs.bxq",
        Counter32,
        "tasks/s",
        "Background tasks",
        "Background tasks processed."
    ),
    spec!(
        "ofs.rep",
        Counter32,
        "replies/s",
        "Background replies",
        "Background replies processed."
    ),
    spec!(
        "ofs.err",
        Counter32,
        "errors/s",
        "Errors",
        "Errors encountered."
    ),
    spec!(
        "ofs.dly",
        Counter32,
        "delays/s",
        "Delays",
        "Delays imposed."
    ),
    spec!(
        "ofs.sok",
        Counter32,
        "events/s",
        "Success events",
        "Events received that indicated success."
    ),
    spec!(
        "ofs.ser",
        Counter32,
        "events/s",
        "Failure events",
        "Events received that indicated failure.",
        left_out = "always 0: numSeventER (XrdOfsStats.hh:53) is never incremented; XrdOfsEvr.cc:291-303 counts only numSeventOK"
    ),
    spec!(
        "ofs.tpc.grnt",
        Counter32,
        "copies/s",
        "Third party copies allowed",
        "Number of third party copies allowed."
    ),
    spec!(
        "ofs.tpc.deny",
        Counter32,
        "copies/s",
        "Third party copies denied",
        "Number of third party copies denied."
    ),
    spec!(
        "ofs.tpc.err",
        Counter32,
        "copies/s",
        "Third party copies failed",
        "Number of third party copies that failed."
    ),
    spec!(
        "ofs.tpc.exp",
        Counter32,
        "copies/s",
        "Third party copies expired",
        "Number of third party copies whose authorization expired."
    ),
    // oss (2.2.6). Sizes in KiB (sent in bytes), quota in bytes.
    spec!(
        "oss.paths",
        Gauge32,
        "paths",
        "Exported paths",
        "Number of exported paths reported."
    ),
    spec!(
        "oss.paths.i.lp",
        Text,
        "",
        "Logical path",
        "Minimally reduced logical file system path."
    ),
    spec!(
        "oss.paths.i.rp",
        Text,
        "",
        "Real path",
        "Minimally reduced real file system path."
    ),
    spec!(
        "oss.paths.i.tot",
        SizeKiB,
        "bytes",
        "Path space total",
        "Space allocated (xrootd reports KiB; sent in bytes)."
    ),
    spec!(
        "oss.paths.i.free",
        SizeKiB,
        "bytes",
        "Path space free",
        "Space available (xrootd reports KiB; sent in bytes)."
    ),
    spec!(
        "oss.paths.i.ino",
        Gauge64,
        "inodes",
        "Path inodes",
        "Number of inodes."
    ),
    spec!(
        "oss.paths.i.ifr",
        Gauge64,
        "inodes",
        "Path inodes free",
        "Number of free inodes."
    ),
    spec!(
        "oss.space",
        Gauge32,
        "spaces",
        "Spaces",
        "Number of oss spaces reported."
    ),
    spec!(
        "oss.space.i.name",
        Text,
        "",
        "Space name",
        "Name of the space."
    ),
    spec!(
        "oss.space.i.tot",
        SizeKiB,
        "bytes",
        "Space total",
        "Space allocated (xrootd reports KiB; sent in bytes)."
    ),
    spec!(
        "oss.space.i.free",
        SizeKiB,
        "bytes",
        "Space free",
        "Space available (xrootd reports KiB; sent in bytes)."
    ),
    spec!(
        "oss.space.i.maxf",
        SizeKiB,
        "bytes",
        "Space largest free extent",
        "Most space available in one file system extent (xrootd reports KiB; sent in bytes)."
    ),
    spec!(
        "oss.space.i.fsn",
        Gauge32,
        "extents",
        "Space extents",
        "Number of file system extents."
    ),
    spec!(
        "oss.space.i.usg",
        SizeKiB,
        "bytes",
        "Space usage",
        "Usage associated with the space name (xrootd reports KiB; sent in bytes; 0 when usage is not tracked)."
    ),
    spec!(
        "oss.space.i.qta",
        Gauge64,
        "bytes",
        "Space quota",
        "Total space quota, if configured."
    ),
    // poll (2.2.7).
    spec!(
        "poll.att",
        Gauge32,
        "descriptors",
        "Polled descriptors",
        "File descriptors attached for polling."
    ),
    spec!(
        "poll.en",
        Counter32,
        "operations/s",
        "Poll enables",
        "Poll enable operations."
    ),
    spec!(
        "poll.ev",
        Counter32,
        "events/s",
        "Poll events",
        "Polling events."
    ),
    spec!(
        "poll.int",
        Counter32,
        "events/s",
        "Unsolicited poll events",
        "Unsolicited polling events.",
        left_out = "always 0 on Linux: only the poll(2) back end counts numInterrupts (XrdPollPoll.icc:294); Linux builds the epoll one (XrdPoll.cc:365)"
    ),
    // proc (2.2.8). `u` is only the microsecond part of the time: it wraps
    // every second, so it is a gauge whatever the arrow says; the cumulative
    // time is the derived proc.cpu.*.
    spec!(
        "proc.usr.s",
        Counter64,
        "s/s",
        "User CPU seconds",
        "Whole seconds of user CPU time (getrusage)."
    ),
    spec!(
        "proc.usr.u",
        Gauge32,
        "us",
        "User CPU microseconds part",
        "Microsecond part of the user CPU time; see proc.cpu.usr for the whole."
    ),
    spec!(
        "proc.sys.s",
        Counter64,
        "s/s",
        "System CPU seconds",
        "Whole seconds of system CPU time (getrusage)."
    ),
    spec!(
        "proc.sys.u",
        Gauge32,
        "us",
        "System CPU microseconds part",
        "Microsecond part of the system CPU time; see proc.cpu.sys for the whole."
    ),
    // rootd (2.2.9).
    spec!(
        "rootd.num",
        Counter32,
        "selections/s",
        "rootd protocol selections",
        "Number of times the rootd protocol was selected (a C int; releases up to 5.3.4).",
        until = "5.3.4"
    ),
    // sched (2.2.10). The reference gives threads an up-arrow; it is the
    // current thread count, a gauge.
    spec!(
        "sched.jobs",
        Counter32,
        "jobs/s",
        "Scheduled jobs",
        "Jobs requiring a thread."
    ),
    spec!(
        "sched.inq",
        Gauge32,
        "jobs",
        "Run queue",
        "Jobs currently in the run queue."
    ),
    spec!(
        "sched.maxinq",
        Gauge32,
        "jobs",
        "Longest run queue",
        "Longest run-queue length (high-water mark)."
    ),
    spec!(
        "sched.threads",
        Gauge32,
        "threads",
        "Scheduler threads",
        "Current scheduler threads."
    ),
    spec!(
        "sched.idle",
        Gauge32,
        "threads",
        "Idle threads",
        "Scheduler threads waiting for work."
    ),
    spec!(
        "sched.tcr",
        Counter32,
        "threads/s",
        "Thread creations",
        "Thread creations."
    ),
    spec!(
        "sched.tde",
        Counter32,
        "threads/s",
        "Thread destructions",
        "Thread destructions."
    ),
    spec!(
        "sched.tlimr",
        Counter32,
        "events/s",
        "Thread limit reached",
        "Number of times the thread limit was reached."
    ),
    // sgen (2.2.11).
    spec!(
        "sgen.as",
        Text,
        "",
        "Gathered asynchronously",
        "1 if the data was gathered asynchronously, 0 otherwise."
    ),
    spec!(
        "sgen.et",
        Gauge64,
        "ms",
        "Gathering time",
        "Elapsed milliseconds from start to completion of statistics gathering."
    ),
    spec!(
        "sgen.toe",
        Timestamp,
        "s",
        "Report end time",
        "Unix time when statistics gathering ended."
    ),
    // xrootd (2.2.12).
    spec!(
        "xrootd.num",
        Counter32,
        "selections/s",
        "xrootd protocol selections",
        "Number of times the xrootd protocol was selected."
    ),
    spec!(
        "xrootd.ops.open",
        Counter32,
        "requests/s",
        "Open requests",
        "File open requests."
    ),
    spec!(
        "xrootd.ops.rf",
        Counter32,
        "requests/s",
        "Cache refresh requests",
        "Cache refresh requests."
    ),
    spec!(
        "xrootd.ops.rd",
        Counter64,
        "requests/s",
        "Read requests",
        "Read requests.",
        old_width = ("3.0.5", 32)
    ),
    spec!(
        "xrootd.ops.pr",
        Counter64,
        "requests/s",
        "Pre-read requests",
        "Pre-read requests.",
        old_width = ("3.0.5", 32)
    ),
    spec!(
        "xrootd.ops.rv",
        Counter64,
        "requests/s",
        "Readv requests",
        "Readv requests."
    ),
    spec!(
        "xrootd.ops.rs",
        Counter64,
        "segments/s",
        "Readv segments",
        "Readv segments."
    ),
    spec!(
        "xrootd.ops.wv",
        Counter64,
        "requests/s",
        "Writev requests",
        "Writev requests."
    ),
    spec!(
        "xrootd.ops.ws",
        Counter64,
        "segments/s",
        "Writev segments",
        "Writev segments."
    ),
    spec!(
        "xrootd.ops.wr",
        Counter64,
        "requests/s",
        "Write requests",
        "Write requests.",
        old_width = ("3.0.5", 32)
    ),
    spec!(
        "xrootd.ops.sync",
        Counter32,
        "requests/s",
        "Sync requests",
        "Sync requests."
    ),
    spec!(
        "xrootd.ops.getf",
        Counter32,
        "requests/s",
        "Getfile requests",
        "Getfile requests."
    ),
    spec!(
        "xrootd.ops.putf",
        Counter32,
        "requests/s",
        "Putfile requests",
        "Putfile requests."
    ),
    spec!(
        "xrootd.ops.misc",
        Counter32,
        "requests/s",
        "Other requests",
        "Number of other requests."
    ),
    spec!(
        "xrootd.sig.ok",
        Counter32,
        "requests/s",
        "Signed requests verified",
        "Requests whose signature was verified."
    ),
    spec!(
        "xrootd.sig.bad",
        Counter32,
        "requests/s",
        "Signed requests rejected",
        "Requests whose signature was bad."
    ),
    spec!(
        "xrootd.sig.ign",
        Counter32,
        "requests/s",
        "Signatures ignored",
        "Requests whose signature was not checked."
    ),
    spec!(
        "xrootd.aio.num",
        Counter64,
        "requests/s",
        "Async I/O requests",
        "Async I/O requests processed.",
        old_width = ("3.0.5", 32),
        left_out = "always 0: set to 0 at XrdXrootdStats.cc:63 and never updated"
    ),
    spec!(
        "xrootd.aio.max",
        Gauge32,
        "requests",
        "Peak async I/O",
        "Maximum simultaneous async I/O requests (high-water mark).",
        left_out = "always 0: set to 0 at XrdXrootdStats.cc:64 and never updated"
    ),
    spec!(
        "xrootd.aio.rej",
        Counter64,
        "requests/s",
        "Async I/O converted to sync",
        "Async I/O requests converted to sync I/O.",
        old_width = ("3.0.5", 32)
    ),
    spec!(
        "xrootd.err",
        Counter32,
        "requests/s",
        "Requests ending in error",
        "Number of requests that ended with an error."
    ),
    spec!(
        "xrootd.rdr",
        Counter64,
        "requests/s",
        "Redirected requests",
        "Number of requests that were redirected."
    ),
    spec!(
        "xrootd.dly",
        Counter32,
        "requests/s",
        "Delayed requests",
        "Number of requests that ended with a delay."
    ),
    spec!(
        "xrootd.lgn.num",
        Counter32,
        "logins/s",
        "Login attempts",
        "Number of login attempts."
    ),
    spec!(
        "xrootd.lgn.af",
        Counter32,
        "logins/s",
        "Authentication failures",
        "Number of authentication failures."
    ),
    spec!(
        "xrootd.lgn.au",
        Counter32,
        "logins/s",
        "Authenticated logins",
        "Number of successful authenticated logins."
    ),
    spec!(
        "xrootd.lgn.ua",
        Counter32,
        "logins/s",
        "Unauthenticated logins",
        "Number of successful unauthenticated logins."
    ),
    // pss: the proxy's POSIX layer (XrdPosixConfig, id "pss"); xrootd 5.x.
    spec!(
        "pss.open",
        Counter64,
        "opens/s",
        "Proxy opens",
        "Files opened through the proxy."
    ),
    spec!(
        "pss.open.errs",
        Counter64,
        "errors/s",
        "Proxy open errors",
        "Opens through the proxy that failed."
    ),
    spec!(
        "pss.close",
        Counter64,
        "closes/s",
        "Proxy closes",
        "Files closed through the proxy."
    ),
    spec!(
        "pss.close.errs",
        Counter64,
        "errors/s",
        "Proxy close errors",
        "Closes through the proxy that failed."
    ),
    // cache: a proxy's cache, type="pfc" (XCache's disk cache) or "rmc"
    // (the memory cache, pss.memcache); xrootd 5.x. Only rmc counts the
    // bytes, hits and misses (prerd.*, rd.*, pass): pfc leaves them at 0
    // in every release up to 6.1 (it sets only store.size and mem.* up
    // to 5.7, nothing from 5.8), and no release counts pass.cnt. Every
    // release from 5.0.0 to 5.6.9 sends `<rd><hits>N></hits>` (pfc and rmc
    // alike; fixed in 5.7.0); the parser drops the stray '>'. Metric names
    // carry the type after the section (`cache.rmc.rd.hits`, mapping.rs);
    // these entries describe both.
    spec!(
        "cache.prerd.in",
        Counter64,
        "bytes/s",
        "Cache preread bytes",
        "Bytes read into the cache by preread."
    ),
    spec!(
        "cache.prerd.hits",
        Counter64,
        "pages/s",
        "Cache preread hits",
        "Preread pages that were then wanted."
    ),
    spec!(
        "cache.prerd.miss",
        Counter64,
        "pages/s",
        "Cache preread misses",
        "Preread pages that were not wanted."
    ),
    spec!(
        "cache.rd.in",
        Counter64,
        "bytes/s",
        "Cache bytes in",
        "Bytes read into the cache."
    ),
    spec!(
        "cache.rd.out",
        Counter64,
        "bytes/s",
        "Cache bytes out",
        "Bytes delivered from the cache."
    ),
    spec!(
        "cache.rd.hits",
        Counter64,
        "hits/s",
        "Cache hits",
        "Reads served from the cache."
    ),
    spec!(
        "cache.rd.miss",
        Counter64,
        "misses/s",
        "Cache misses",
        "Reads not found in the cache."
    ),
    spec!(
        "cache.pass",
        Counter64,
        "bytes/s",
        "Cache pass-through bytes",
        "Bytes read without being cached."
    ),
    spec!(
        "cache.pass.cnt",
        Counter64,
        "reads/s",
        "Cache pass-through reads",
        "Reads that were not cached.",
        left_out = "always 0: X.Pass is only summed from another stats object's Pass (XrdOucCacheStats.hh:108), which nothing increments"
    ),
    spec!(
        "cache.wr.out",
        Counter64,
        "bytes/s",
        "Cache bytes written",
        "Bytes written from the cache."
    ),
    spec!(
        "cache.wr.updt",
        Counter64,
        "bytes/s",
        "Cache bytes updated",
        "Bytes updated in the cache."
    ),
    spec!(
        "cache.saved",
        Counter64,
        "bytes/s",
        "Cache bytes saved",
        "Bytes written from memory to disk."
    ),
    spec!(
        "cache.purge",
        Counter64,
        "bytes/s",
        "Cache bytes purged",
        "Bytes purged from the cache."
    ),
    spec!(
        "cache.files.opened",
        Counter64,
        "files/s",
        "Cache files opened",
        "Cache files opened.",
        left_out = "always 0: only XrdOucCacheStats::Set(XrdOucCacheStats&) writes it (XrdOucCacheStats.hh:113-120), and nothing calls it"
    ),
    spec!(
        "cache.files.closed",
        Counter64,
        "files/s",
        "Cache files closed",
        "Cache files closed.",
        left_out = "always 0: only XrdOucCacheStats::Set(XrdOucCacheStats&) writes it (XrdOucCacheStats.hh:113-120), and nothing calls it"
    ),
    spec!(
        "cache.files.new",
        Counter64,
        "files/s",
        "Cache files created",
        "Cache files created.",
        left_out = "always 0: only XrdOucCacheStats::Set(XrdOucCacheStats&) writes it (XrdOucCacheStats.hh:113-120), and nothing calls it"
    ),
    spec!(
        "cache.files.del",
        Counter64,
        "files/s",
        "Cache files purged",
        "Cache files purged.",
        left_out = "always 0: only XrdOucCacheStats::Set(XrdOucCacheStats&) writes it (XrdOucCacheStats.hh:113-120), and nothing calls it"
    ),
    spec!(
        "cache.files.now",
        Gauge64,
        "files",
        "Files in cache",
        "Files in the cache now.",
        left_out = "always 0: only XrdOucCacheStats::Set(XrdOucCacheStats&) writes it (XrdOucCacheStats.hh:113-120), and nothing calls it"
    ),
    spec!(
        "cache.files.full",
        Gauge64,
        "files",
        "Fully cached files",
        "Files in the cache now that are complete.",
        left_out = "always 0: only XrdOucCacheStats::Set(XrdOucCacheStats&) writes it (XrdOucCacheStats.hh:113-120), and nothing calls it"
    ),
    spec!(
        "cache.store.size",
        Gauge64,
        "bytes",
        "Cache disk size",
        "Size of the disk cache."
    ),
    spec!(
        "cache.store.used",
        Gauge64,
        "bytes",
        "Cache disk used",
        "Disk cache in use.",
        left_out = "always 0: only XrdOucCacheStats::Set(XrdOucCacheStats&) writes it (XrdOucCacheStats.hh:113-120), and nothing calls it"
    ),
    spec!(
        "cache.store.min",
        Gauge64,
        "bytes",
        "Cache disk used, lowest",
        "Least disk cache in use (low-water mark).",
        left_out = "always 0: only XrdOucCacheStats::Set(XrdOucCacheStats&) writes it (XrdOucCacheStats.hh:113-120), and nothing calls it"
    ),
    spec!(
        "cache.store.max",
        Gauge64,
        "bytes",
        "Cache disk used, highest",
        "Most disk cache in use (high-water mark).",
        left_out = "always 0: only XrdOucCacheStats::Set(XrdOucCacheStats&) writes it (XrdOucCacheStats.hh:113-120), and nothing calls it"
    ),
    spec!(
        "cache.mem.size",
        Gauge64,
        "bytes",
        "Cache memory size",
        "Memory limit of the cache."
    ),
    spec!(
        "cache.mem.used",
        Gauge64,
        "bytes",
        "Cache memory used",
        "Memory in use by the cache."
    ),
    spec!(
        "cache.mem.wq",
        Gauge64,
        "bytes",
        "Cache write queue",
        "Bytes waiting in the write queue."
    ),
    spec!(
        "cache.opcl.odefer",
        Counter64,
        "opens/s",
        "Deferred opens",
        "Opens that were deferred."
    ),
    spec!(
        "cache.opcl.defero",
        Counter64,
        "opens/s",
        "Deferred opens done",
        "Deferred opens that were then opened.",
        left_out = "always 0: DeferOpens (XrdOucCacheStats.hh:90) is never written"
    ),
    spec!(
        "cache.opcl.cdefer",
        Counter64,
        "closes/s",
        "Deferred closes",
        "Closes that were deferred."
    ),
    spec!(
        "cache.opcl.clost",
        Counter64,
        "files/s",
        "Closed files lost",
        "Closed file objects that were lost."
    ),
    // pfc: not a section of the summary record but XCache's own g-stream
    // (`xrootd.mongstream pfc`), whose file_close records the gateway adds
    // up per xrootd run and sends with that xrootd's metrics
    // (src/gstream.rs): the hits, misses and bytes its `cache` section
    // leaves at 0.
    spec!(
        "pfc.files",
        Counter64,
        "files/s",
        "XCache files closed",
        "Files XCache closed, from the file_close records of its g-stream."
    ),
    spec!(
        "pfc.bytes_hit",
        Counter64,
        "bytes/s",
        "XCache bytes from the cache",
        "Bytes XCache served from its disk cache: b_hit of the file_close records of its g-stream."
    ),
    spec!(
        "pfc.bytes_miss",
        Counter64,
        "bytes/s",
        "XCache bytes from the origin",
        "Bytes XCache fetched from the origin for reads its disk cache could not serve: b_miss of its g-stream."
    ),
    spec!(
        "pfc.bytes_bypass",
        Counter64,
        "bytes/s",
        "XCache bytes past the cache",
        "Bytes XCache read from the origin without caching them: b_bypass of its g-stream."
    ),
    // detailed: not a section of the summary record but xrootd's detailed
    // monitoring stream (`xrootd.monitor ... fstat ... user`), whose logins,
    // opens, closes and disconnects the gateway adds up per server instance
    // (src/detailed.rs, src/engine/detailed.rs) and sends with that
    // xrootd's metrics, per entry of four lists: VO, protocol, client domain
    // and (when a site turns it on) user.
    spec!(
        "detailed.vo.i.bytes_read",
        Counter64,
        "bytes/s",
        "Bytes read by VO",
        "Bytes read from files (read and readv), by VO, from the close and transfer records of the detailed stream."
    ),
    spec!(
        "detailed.vo.i.bytes_written",
        Counter64,
        "bytes/s",
        "Bytes written by VO",
        "Bytes written to files, by VO, as the detailed stream counts them (docs/detailed.md: page checksums, HTTP PUT)."
    ),
    spec!(
        "detailed.vo.i.files_opened",
        Counter64,
        "opens/s",
        "Files opened by VO",
        "Files opened, by VO: open records of the detailed stream."
    ),
    spec!(
        "detailed.vo.i.files_closed",
        Counter64,
        "closes/s",
        "Files closed by VO",
        "Files closed, by VO (forced closes at disconnect included): close records of the detailed stream."
    ),
    spec!(
        "detailed.vo.i.files_open",
        Gauge64,
        "files",
        "Files open by VO",
        "Files open now, by VO: opened and not closed yet."
    ),
    spec!(
        "detailed.vo.i.users",
        Gauge64,
        "users",
        "Users connected by VO",
        "Users logged in now, by VO: logins not disconnected yet."
    ),
    spec!(
        "detailed.protocol.i.bytes_read",
        Counter64,
        "bytes/s",
        "Bytes read by protocol",
        "Bytes read from files (read and readv), by transfer protocol, from the close and transfer records of the detailed stream."
    ),
    spec!(
        "detailed.protocol.i.bytes_written",
        Counter64,
        "bytes/s",
        "Bytes written by protocol",
        "Bytes written to files, by transfer protocol, as the detailed stream counts them (docs/detailed.md: page checksums, HTTP PUT)."
    ),
    spec!(
        "detailed.protocol.i.files_opened",
        Counter64,
        "opens/s",
        "Files opened by protocol",
        "Files opened, by transfer protocol: open records of the detailed stream."
    ),
    spec!(
        "detailed.protocol.i.files_closed",
        Counter64,
        "closes/s",
        "Files closed by protocol",
        "Files closed, by transfer protocol (forced closes at disconnect included): close records of the detailed stream."
    ),
    spec!(
        "detailed.protocol.i.files_open",
        Gauge64,
        "files",
        "Files open by protocol",
        "Files open now, by transfer protocol: opened and not closed yet."
    ),
    spec!(
        "detailed.protocol.i.users",
        Gauge64,
        "users",
        "Users connected by protocol",
        "Users logged in now, by transfer protocol: logins not disconnected yet."
    ),
    spec!(
        "detailed.domain.i.bytes_read",
        Counter64,
        "bytes/s",
        "Bytes read by client domain",
        "Bytes read from files (read and readv), by client domain, from the close and transfer records of the detailed stream."
    ),
    spec!(
        "detailed.domain.i.bytes_written",
        Counter64,
        "bytes/s",
        "Bytes written by client domain",
        "Bytes written to files, by client domain, as the detailed stream counts them (docs/detailed.md: page checksums, HTTP PUT)."
    ),
    spec!(
        "detailed.domain.i.files_opened",
        Counter64,
        "opens/s",
        "Files opened by client domain",
        "Files opened, by client domain: open records of the detailed stream."
    ),
    spec!(
        "detailed.domain.i.files_closed",
        Counter64,
        "closes/s",
        "Files closed by client domain",
        "Files closed, by client domain (forced closes at disconnect included): close records of the detailed stream."
    ),
    spec!(
        "detailed.domain.i.files_open",
        Gauge64,
        "files",
        "Files open by client domain",
        "Files open now, by client domain: opened and not closed yet."
    ),
    spec!(
        "detailed.domain.i.users",
        Gauge64,
        "users",
        "Users connected by client domain",
        "Users logged in now, by client domain: logins not disconnected yet."
    ),
    spec!(
        "detailed.user.i.bytes_read",
        Counter64,
        "bytes/s",
        "Bytes read by user",
        "Bytes read from files (read and readv), by user, from the close and transfer records of the detailed stream."
    ),
    spec!(
        "detailed.user.i.bytes_written",
        Counter64,
        "bytes/s",
        "Bytes written by user",
        "Bytes written to files, by user, as the detailed stream counts them (docs/detailed.md: page checksums, HTTP PUT)."
    ),
    spec!(
        "detailed.user.i.files_opened",
        Counter64,
        "opens/s",
        "Files opened by user",
        "Files opened, by user: open records of the detailed stream."
    ),
    spec!(
        "detailed.user.i.files_closed",
        Counter64,
        "closes/s",
        "Files closed by user",
        "Files closed, by user (forced closes at disconnect included): close records of the detailed stream."
    ),
    spec!(
        "detailed.user.i.files_open",
        Gauge64,
        "files",
        "Files open by user",
        "Files open now, by user: opened and not closed yet."
    ),
    spec!(
        "detailed.user.i.users",
        Gauge64,
        "users",
        "Users connected by user",
        "Users logged in now, by user: logins not disconnected yet."
    ),
    // ssi: the scalable service interface (XrdSsiStats). SSI sends
    // `<mdb>N</mdb</rsp>`; the parser closes both elements.
    spec!(
        "ssi.err",
        Counter32,
        "errors/s",
        "SSI errors",
        "Errors SSI detected."
    ),
    spec!(
        "ssi.req.bytes",
        Counter64,
        "bytes/s",
        "SSI request bytes",
        "Total request bytes."
    ),
    spec!(
        "ssi.req.maxsz",
        Gauge64,
        "bytes",
        "SSI largest request",
        "Largest request (high-water mark)."
    ),
    spec!(
        "ssi.req.ab",
        Counter32,
        "requests/s",
        "SSI request aborts",
        "Request aborts."
    ),
    spec!(
        "ssi.req.al",
        Counter32,
        "alerts/s",
        "SSI request alerts",
        "Request alerts."
    ),
    spec!(
        "ssi.req.bnd",
        Gauge32,
        "requests",
        "SSI requests bound",
        "Requests bound now."
    ),
    spec!(
        "ssi.req.can",
        Counter32,
        "requests/s",
        "SSI requests cancelled",
        "Requests cancelled."
    ),
    spec!(
        "ssi.req.cnt",
        Counter32,
        "requests/s",
        "SSI requests",
        "Total requests."
    ),
    spec!(
        "ssi.req.fin",
        Counter32,
        "requests/s",
        "SSI requests finished",
        "Requests finished."
    ),
    spec!(
        "ssi.req.finf",
        Counter32,
        "requests/s",
        "SSI requests forced to finish",
        "Requests forced to finish."
    ),
    spec!(
        "ssi.req.gets",
        Counter32,
        "requests/s",
        "SSI requests retrieved",
        "Requests retrieved."
    ),
    spec!(
        "ssi.req.perr",
        Counter32,
        "errors/s",
        "SSI prepare errors",
        "Request prepare errors."
    ),
    spec!(
        "ssi.req.proc",
        Counter32,
        "requests/s",
        "SSI requests started",
        "Requests started."
    ),
    spec!(
        "ssi.req.rdr",
        Counter32,
        "requests/s",
        "SSI requests redirected",
        "Requests redirected."
    ),
    spec!(
        "ssi.req.relb",
        Counter32,
        "releases/s",
        "SSI buffer releases",
        "Request buffer releases."
    ),
    spec!(
        "ssi.req.dly",
        Counter32,
        "requests/s",
        "SSI requests delayed",
        "Requests delayed."
    ),
    spec!(
        "ssi.rsp.bad",
        Counter32,
        "responses/s",
        "SSI invalid responses",
        "Invalid responses."
    ),
    spec!(
        "ssi.rsp.cbk",
        Counter32,
        "callbacks/s",
        "SSI response callbacks",
        "Response callbacks."
    ),
    spec!(
        "ssi.rsp.data",
        Counter32,
        "responses/s",
        "SSI data responses",
        "Data responses."
    ),
    spec!(
        "ssi.rsp.errs",
        Counter32,
        "responses/s",
        "SSI error responses",
        "Error responses."
    ),
    spec!(
        "ssi.rsp.file",
        Counter32,
        "responses/s",
        "SSI file responses",
        "File responses."
    ),
    spec!(
        "ssi.rsp.rdy",
        Counter32,
        "responses/s",
        "SSI responses ready",
        "Responses ready without delay."
    ),
    spec!(
        "ssi.rsp.str",
        Counter32,
        "responses/s",
        "SSI stream responses",
        "Stream responses."
    ),
    spec!(
        "ssi.rsp.unr",
        Counter32,
        "responses/s",
        "SSI delayed responses",
        "Responses with delay."
    ),
    spec!(
        "ssi.rsp.mdb",
        Counter64,
        "bytes/s",
        "SSI metadata bytes",
        "Metadata response bytes."
    ),
    spec!(
        "ssi.res.add",
        Counter32,
        "resources/s",
        "SSI resources added",
        "Resources added."
    ),
    spec!(
        "ssi.res.rem",
        Counter32,
        "resources/s",
        "SSI resources removed",
        "Resources removed."
    ),
    // http_plugin (xrootd 6.0+, cumulative 64-bit). 6.0-6.1 use numeric tag
    // names (`<200>`), which the parser accepts.
    spec!(
        "http_plugin.request.Unknown",
        Counter64,
        "requests/s",
        "HTTP Unknown requests",
        "HTTP requests with method Unknown."
    ),
    spec!(
        "http_plugin.request.Malformed",
        Counter64,
        "requests/s",
        "HTTP Malformed requests",
        "HTTP requests with method Malformed."
    ),
    spec!(
        "http_plugin.request.GET",
        Counter64,
        "requests/s",
        "HTTP GET requests",
        "HTTP requests with method GET."
    ),
    spec!(
        "http_plugin.request.HEAD",
        Counter64,
        "requests/s",
        "HTTP HEAD requests",
        "HTTP requests with method HEAD."
    ),
    spec!(
        "http_plugin.request.PUT",
        Counter64,
        "requests/s",
        "HTTP PUT requests",
        "HTTP requests with method PUT."
    ),
    spec!(
        "http_plugin.request.OPTIONS",
        Counter64,
        "requests/s",
        "HTTP OPTIONS requests",
        "HTTP requests with method OPTIONS."
    ),
    spec!(
        "http_plugin.request.PATCH",
        Counter64,
        "requests/s",
        "HTTP PATCH requests",
        "HTTP requests with method PATCH."
    ),
    spec!(
        "http_plugin.request.DELETE",
        Counter64,
        "requests/s",
        "HTTP DELETE requests",
        "HTTP requests with method DELETE."
    ),
    spec!(
        "http_plugin.request.PROPFIND",
        Counter64,
        "requests/s",
        "HTTP PROPFIND requests",
        "HTTP requests with method PROPFIND."
    ),
    spec!(
        "http_plugin.request.MKCOL",
        Counter64,
        "requests/s",
        "HTTP MKCOL requests",
        "HTTP requests with method MKCOL."
    ),
    spec!(
        "http_plugin.request.MOVE",
        Counter64,
        "requests/s",
        "HTTP MOVE requests",
        "HTTP requests with method MOVE."
    ),
    spec!(
        "http_plugin.request.POST",
        Counter64,
        "requests/s",
        "HTTP POST requests",
        "HTTP requests with method POST."
    ),
    spec!(
        "http_plugin.request.COPY",
        Counter64,
        "requests/s",
        "HTTP COPY requests",
        "HTTP requests with method COPY."
    ),
    spec!(
        "http_plugin.response.100",
        Counter64,
        "responses/s",
        "HTTP 100 responses",
        "HTTP responses with status 100.",
        left_out = "always 0: codes under 200 return before being counted (XrdHttpMon.cc:112)"
    ),
    spec!(
        "http_plugin.response.200",
        Counter64,
        "responses/s",
        "HTTP 200 responses",
        "HTTP responses with status 200."
    ),
    spec!(
        "http_plugin.response.201",
        Counter64,
        "responses/s",
        "HTTP 201 responses",
        "HTTP responses with status 201."
    ),
    spec!(
        "http_plugin.response.202",
        Counter64,
        "responses/s",
        "HTTP 202 responses",
        "HTTP responses with status 202."
    ),
    spec!(
        "http_plugin.response.206",
        Counter64,
        "responses/s",
        "HTTP 206 responses",
        "HTTP responses with status 206."
    ),
    spec!(
        "http_plugin.response.207",
        Counter64,
        "responses/s",
        "HTTP 207 responses",
        "HTTP responses with status 207."
    ),
    spec!(
        "http_plugin.response.302",
        Counter64,
        "responses/s",
        "HTTP 302 responses",
        "HTTP responses with status 302."
    ),
    spec!(
        "http_plugin.response.307",
        Counter64,
        "responses/s",
        "HTTP 307 responses",
        "HTTP responses with status 307."
    ),
    spec!(
        "http_plugin.response.400",
        Counter64,
        "responses/s",
        "HTTP 400 responses",
        "HTTP responses with status 400."
    ),
    spec!(
        "http_plugin.response.401",
        Counter64,
        "responses/s",
        "HTTP 401 responses",
        "HTTP responses with status 401."
    ),
    spec!(
        "http_plugin.response.403",
        Counter64,
        "responses/s",
        "HTTP 403 responses",
        "HTTP responses with status 403."
    ),
    spec!(
        "http_plugin.response.404",
        Counter64,
        "responses/s",
        "HTTP 404 responses",
        "HTTP responses with status 404."
    ),
    spec!(
        "http_plugin.response.405",
        Counter64,
        "responses/s",
        "HTTP 405 responses",
        "HTTP responses with status 405."
    ),
    spec!(
        "http_plugin.response.409",
        Counter64,
        "responses/s",
        "HTTP 409 responses",
        "HTTP responses with status 409."
    ),
    spec!(
        "http_plugin.response.416",
        Counter64,
        "responses/s",
        "HTTP 416 responses",
        "HTTP responses with status 416."
    ),
    spec!(
        "http_plugin.response.423",
        Counter64,
        "responses/s",
        "HTTP 423 responses",
        "HTTP responses with status 423."
    ),
    spec!(
        "http_plugin.response.500",
        Counter64,
        "responses/s",
        "HTTP 500 responses",
        "HTTP responses with status 500."
    ),
    spec!(
        "http_plugin.response.502",
        Counter64,
        "responses/s",
        "HTTP 502 responses",
        "HTTP responses with status 502."
    ),
    spec!(
        "http_plugin.response.504",
        Counter64,
        "responses/s",
        "HTTP 504 responses",
        "HTTP responses with status 504."
    ),
    spec!(
        "http_plugin.response.507",
        Counter64,
        "responses/s",
        "HTTP 507 responses",
        "HTTP responses with status 507."
    ),
    spec!(
        "http_plugin.response.OTHERS",
        Counter64,
        "responses/s",
        "HTTP OTHERS responses",
        "HTTP responses with status OTHERS."
    ),
];

/// The catalog by name; FNV-hashed (short fixed keys, see [`crate::fnv`]).
static INDEX: LazyLock<crate::fnv::FnvMap<&'static str, &'static MetricSpec>> =
    LazyLock::new(|| CATALOG.iter().map(|s| (s.var, s)).collect());

/// The spec of a variable by its catalog name (`i` for list indexes).
pub fn lookup(var: &str) -> Option<&'static MetricSpec> {
    INDEX.get(var).copied()
}

/// The Ganglia group a variable belongs to: its section (`link`, `oss`,
/// ...); header attributes and derived uptime are in `info`.
pub fn section(var: &str) -> &str {
    match var.split_once('.') {
        Some((section, _)) => section,
        None => "info",
    }
}

#[cfg(test)]
mod tests;
