//! The ganglia-web reports, defined once: which variables each shows and
//! how. Metric names, labels, units and colours are derived from this
//! table, the catalog and the naming settings by [`super::generate`].

/// Which program's record a variable comes from (the `{pgm}` of its name).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Pgm {
    Xrootd,
    Cmsd,
}

impl Pgm {
    pub fn as_str(self) -> &'static str {
        match self {
            Pgm::Xrootd => "xrootd",
            Pgm::Cmsd => "cmsd",
        }
    }
}

/// How the series are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// One line each: values that do not add up (in and out, threads and queue).
    Line,
    /// Stacked areas: parts of one whole (operations by kind, CPU).
    Stack,
}

/// One series: a variable (catalog name) of one program's records.
#[derive(Debug)]
pub struct Series {
    pub pgm: Pgm,
    pub var: &'static str,
    pub label: &'static str,
    /// For a `cache.*` variable: the cache type whose metric it is (`rmc`:
    /// `cache.rmc.rd.hits`; the mapping puts the record's
    /// `<stats id="cache" type>` after the section).
    pub cache: Option<&'static str>,
}

impl Series {
    /// The variable as metric names carry it (`cache.rmc.rd.hits`).
    pub fn name_var(&self) -> String {
        match (self.cache, self.var.strip_prefix("cache.")) {
            (Some(t), Some(rest)) => format!("cache.{t}.{rest}"),
            _ => self.var.to_string(),
        }
    }
}

/// A report over fixed variables: a JSON report in graph.d.
#[derive(Debug)]
pub struct Report {
    /// `xrootd_<tag><key>_report` is the report's name.
    pub key: &'static str,
    pub title: &'static str,
    /// None: the catalog units of its series, each once.
    pub vertical_label: Option<&'static str>,
    pub style: Style,
    pub series: &'static [Series],
    /// None: a JSON report, whose legend ganglia-web prints as
    /// `%5.1lf%s` (an SI prefix for numbers below 1 or from 1,000: right
    /// for bytes/s). Some(format): a PHP report drawing the same series
    /// with this rrdtool GPRINT format in its legend, for counts, whose
    /// averages `%5.1lf%s` shows as milli-units (2/3 open connections read
    /// `666.7m`).
    pub legend: Option<&'static str>,
}

/// A list field (`oss.paths`' `free`): one series per list entry, by key.
#[derive(Debug)]
pub struct ListField {
    pub pgm: Pgm,
    pub list: &'static str,
    pub field: &'static str,
    /// Put before the entry's key in the legend.
    pub label: &'static str,
}

impl ListField {
    /// The catalog name: `oss.paths.i.free`.
    pub fn catalog_name(&self) -> String {
        format!("{}.i.{}", self.list, self.field)
    }
}

/// A report over list entries, which differ per site (paths, space names):
/// a PHP report in graph.d that finds the entries' RRDs when drawn.
#[derive(Debug)]
pub struct ListReport {
    pub key: &'static str,
    pub title: &'static str,
    pub fields: &'static [ListField],
    /// Line (each entry on its own) or Stack (parts of one whole).
    pub style: Style,
}

const fn x(var: &'static str, label: &'static str) -> Series {
    Series {
        pgm: Pgm::Xrootd,
        var,
        label,
        cache: None,
    }
}

/// A memory cache's (`type="rmc"`) variable of an xrootd's cache section.
const fn rmc(var: &'static str, label: &'static str) -> Series {
    Series {
        pgm: Pgm::Xrootd,
        var,
        label,
        cache: Some("rmc"),
    }
}

const fn c(var: &'static str, label: &'static str) -> Series {
    Series {
        pgm: Pgm::Cmsd,
        var,
        label,
        cache: None,
    }
}

/// Shown on every host and cluster page of the cluster, in this order.
/// ganglia-web's medium graph fits about 47 characters of title after
/// it puts the cluster (`XRootD Cluster `) or host name before it and
/// `last custom` after: titles stay within 20. They do not say "XRootD":
/// the cluster's name (the default `XRootD`) or the server's host comes
/// first ("XRootD Cluster Throughput", not "XRootD Cluster XRootD
/// throughput").
pub const REPORTS: &[Report] = &[
    Report {
        key: "throughput",
        title: "Throughput",
        vertical_label: None,
        style: Style::Line,
        series: &[x("link.in", "in"), x("link.out", "out")],
        legend: None,
    },
    Report {
        key: "connections",
        title: "Connections",
        vertical_label: None,
        style: Style::Line,
        series: &[x("link.num", "open"), x("link.tot", "new")],
        legend: Some(COUNT_LEGEND),
    },
    Report {
        key: "operations",
        title: "Operations",
        vertical_label: None,
        style: Style::Stack,
        series: &[
            x("xrootd.ops.open", "open"),
            x("xrootd.ops.rd", "read"),
            x("xrootd.ops.rv", "readv"),
            x("xrootd.ops.pr", "preread"),
            x("xrootd.ops.wr", "write"),
            x("xrootd.ops.wv", "writev"),
            x("xrootd.ops.sync", "sync"),
            x("xrootd.ops.rf", "refresh"),
            x("xrootd.ops.getf", "getfile"),
            x("xrootd.ops.putf", "putfile"),
            x("xrootd.ops.misc", "other"),
        ],
        legend: None,
    },
    Report {
        key: "problems",
        title: "Errors, redirects",
        vertical_label: None,
        style: Style::Line,
        series: &[
            x("xrootd.err", "errors"),
            x("xrootd.rdr", "redirects"),
            x("xrootd.dly", "delays"),
        ],
        legend: None,
    },
    Report {
        key: "scheduler",
        title: "Scheduler",
        vertical_label: None,
        style: Style::Line,
        series: &[
            x("sched.threads", "threads"),
            x("sched.idle", "idle threads"),
            x("sched.inq", "queued jobs"),
            c("sched.threads", "threads"),
            c("sched.idle", "idle threads"),
            c("sched.inq", "queued jobs"),
        ],
        legend: None,
    },
    Report {
        key: "selections",
        title: "cmsd node selections",
        vertical_label: None,
        style: Style::Line,
        series: &[c("cmsm.sel.t", "selections")],
        legend: None,
    },
    // XCache's disk cache (pfc): from its g-stream (src/gstream.rs),
    // where its hits and misses are bytes of closed files.
    Report {
        key: "xcache",
        title: "XCache bytes",
        vertical_label: None,
        style: Style::Stack,
        series: &[
            x("pfc.bytes_hit", "from the cache"),
            x("pfc.bytes_miss", "from the origin"),
            x("pfc.bytes_bypass", "past the cache"),
        ],
        legend: None,
    },
    // A proxy's memory cache (the `cache` section, type="rmc"): only it
    // fills these (pss.memcache); XCache's disk cache (type="pfc") leaves
    // them at 0 in every xrootd release (see the catalog). The series are
    // the rmc names (`cache.rmc.rd.hits`), so an XCache's zeros are not
    // drawn as a memory cache that never hits; XCache's own report is the
    // one above, from its g-stream (`pfc.*`).
    Report {
        key: "cache_reads",
        title: "Memory cache hits",
        vertical_label: Some("reads/s"),
        style: Style::Stack,
        series: &[rmc("cache.rd.hits", "hits"), rmc("cache.rd.miss", "misses")],
        legend: None,
    },
    Report {
        key: "cache_bytes",
        title: "Memory cache bytes",
        vertical_label: None,
        style: Style::Line,
        series: &[
            rmc("cache.rd.out", "served from cache"),
            rmc("cache.rd.in", "read into cache"),
            rmc("cache.pass", "read, not cached"),
        ],
        legend: None,
    },
    Report {
        key: "cpu",
        title: "Server CPU",
        vertical_label: None,
        style: Style::Stack,
        series: &[
            x("proc.cpu.usr", "user"),
            x("proc.cpu.sys", "system"),
            c("proc.cpu.usr", "user"),
            c("proc.cpu.sys", "system"),
        ],
        legend: None,
    },
];

/// After [`REPORTS`], in this order.
pub const LIST_REPORTS: &[ListReport] = &[
    ListReport {
        key: "space",
        title: "Free space",
        style: Style::Line,
        fields: &[
            ListField {
                pgm: Pgm::Xrootd,
                list: "oss.paths",
                field: "free",
                label: "path",
            },
            ListField {
                pgm: Pgm::Xrootd,
                list: "oss.space",
                field: "free",
                label: "space",
            },
        ],
    },
    // The detailed stream (src/engine/detailed.rs): what each VO, and
    // each protocol, read and wrote, stacked: the total is what the
    // servers moved.
    ListReport {
        key: "vo_bytes",
        title: "Bytes by VO",
        style: Style::Stack,
        fields: &[
            ListField {
                pgm: Pgm::Xrootd,
                list: "detailed.vo",
                field: "bytes_read",
                label: "read",
            },
            ListField {
                pgm: Pgm::Xrootd,
                list: "detailed.vo",
                field: "bytes_written",
                label: "written",
            },
        ],
    },
    ListReport {
        key: "protocol_bytes",
        title: "Bytes by protocol",
        style: Style::Stack,
        fields: &[
            ListField {
                pgm: Pgm::Xrootd,
                list: "detailed.protocol",
                field: "bytes_read",
                label: "read",
            },
            ListField {
                pgm: Pgm::Xrootd,
                list: "detailed.protocol",
                field: "bytes_written",
                label: "written",
            },
        ],
    },
];

/// The legend format of a count (connections): a plain number with two
/// decimals, never an SI prefix. ganglia-web prints every series of a
/// JSON report and of an aggregate graph as `%5.1lf%s` (`legendEntry` in
/// its functions.php), which shows an average of 2/3 open connection as
/// `666.7m`; its own graph of one metric stacked per host (`stacked.php`)
/// prints its totals as `%5.2lf`, plain. The width is 6, that of
/// `%5.1lf%s`'s widest: at `%8.2lf` the medium graph cut off its Max.
pub const COUNT_LEGEND: &str = "%6.2lf";

/// A per-server graph of the view: one series per server (every host
/// but the gateway's own, of every cluster), stacked.
#[derive(Debug)]
pub struct PerServer {
    pub title: &'static str,
    /// The catalog variable: its units are the vertical label.
    pub var: &'static str,
    /// The variable as metric names have it (`*`: a list entry's key).
    pub name_var: &'static str,
    /// None: ganglia-web's aggregate graph, whose legend is `%5.1lf%s`
    /// (right for bytes). Some(key): a count, drawn by the PHP report
    /// `xrootd_<tag><key>_report` with [`COUNT_LEGEND`].
    pub report: Option<&'static str>,
}

/// The view's per-server graphs, in order.
pub const PER_SERVER: &[PerServer] = &[
    PerServer {
        title: "Throughput out per server",
        var: "link.out",
        name_var: "link.out",
        report: None,
    },
    PerServer {
        title: "Throughput in per server",
        var: "link.in",
        name_var: "link.in",
        report: None,
    },
    PerServer {
        title: "Open connections per server",
        var: "link.num",
        name_var: "link.num",
        report: Some("connections_per_server"),
    },
    PerServer {
        title: "Free space per server and path",
        var: "oss.paths.i.free",
        name_var: "oss.paths.*.free",
        report: None,
    },
];

/// Series colours, in order (rrdtool's `#RRGGBB` without `#`).
pub const COLORS: &[&str] = &[
    "3366cc", "dc3912", "ff9900", "109618", "990099", "0099c6", "dd4477", "66aa00", "b82e2e",
    "316395", "994499", "22aa99",
];

/// The reports ganglia-web shows by default (`conf/default.json`): they
/// show nothing for the gateway's hosts, which carry only XRootD metrics.
pub const STANDARD_REPORTS: &[&str] =
    &["load_report", "mem_report", "cpu_report", "network_report"];
