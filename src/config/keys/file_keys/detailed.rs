//! The detailed stream (docs/detailed.md).
//!
//! A piece of the file's key table: `file_keys.rs` says how the pieces
//! join, and the names its entries use are that file's.

/// The entries gathered so far, and this piece's, handed to the next.
macro_rules! detailed_keys {
    ($($before:tt)*) => {
        clusters_keys! {
            $($before)*
            detailed_vo_paths: Vec<String> = Vec::new() => {
                value: "list of \"PATH_PREFIX=VO\"",
                meaning: "The detailed stream's VO of a file whose user's login names neither an \
                    organisation (`o=`) nor a group (`g=`): the VO of the longest prefix of its \
                    path here (`[\"/store/=cms\", \"/atlas/=atlas\"]`); none matching: `other`. \
                    Paths come with `xrootd.monitor ... fstat lfn`. A reload applies it to files \
                    opened after it.",
                shipped: "\n\
                    # ---- the detailed stream (docs/detailed.md) ------------------------------\n\
                    # xrootd's detailed monitoring (xrootd.monitor ... fstat ... user) becomes\n\
                    # metrics per VO, protocol and client domain of each server. The VO of a\n\
                    # file whose login names no organisation (o=) or group (g=): the longest\n\
                    # matching path prefix here, e.g. [\"/store/=cms\", \"/atlas/=atlas\"].\n",
            },
            detailed_max_vos: usize = 10 => {
                range: Some(count(0, 1000)),
                value: "count",
                meaning: "At most this many VOs per server named in the detailed stream's \
                    metrics (`detailed.vo.NAME.*`); the rest count as `other` (docs/detailed.md \
                    says which are named). 0: only `other`. The `detailed_max_*` keys are taken \
                    by each xrootd run when first heard from: a reload applies them to runs \
                    after it.",
                shipped: "\n\
                    # At most this many names per list and server; the rest count as \"other\".\n",
            },
            detailed_max_protocols: usize = 4 => {
                range: Some(count(0, 1000)),
                value: "count",
                meaning: "At most this many transfer protocols (`xroot`, `http`, ...) per server \
                    named in the detailed stream's metrics; the rest count as `other`.",
            },
            detailed_max_domains: usize = 10 => {
                range: Some(count(0, 1000)),
                value: "count",
                meaning: "At most this many client domains per server named in the detailed \
                    stream's metrics, those that move the most bytes; the rest count as `other`.",
            },
            detailed_per_user: bool = false => {
                value: "true or false",
                meaning: "Sends the detailed stream's metrics per user too (`detailed.user.NAME.*`, \
                    at most `detailed_max_users` names). User names are personal data, and \
                    ganglia-web pages are often public: off unless a site turns it on.",
                shipped: "\n\
                    # Per-user metrics (user names are personal data; off by default), and at\n\
                    # most this many users named per server.\n",
            },
            detailed_max_users: usize = 10 => {
                range: Some(count(0, 1000)),
                value: "count",
                meaning: "With `detailed_per_user`: at most this many users per server named, those \
                    that move the most bytes; the rest count as `other`.",
            },
            detailed_max_logins: usize = 100_000 => {
                range: Some(count(1, 10_000_000)),
                value: "count",
                meaning: "At most this many logins, and as many open files, kept per xrootd run \
                    from its detailed stream; beyond, the oldest is forgotten (counted: \
                    `detailed_evicted`), so lost disconnects or a flood of logins cannot grow \
                    the gateway.",
                shipped: "\n\
                    # Logins, and open files, kept per xrootd run at most (the oldest go first).\n",
            },
        }
    };
}
