//! What names a source's metrics: the `pgm`, `ins` and `site` of its last
//! record, kept to name its XCache totals as its own metrics
//! ([`super::super::xcache`]) and to place it in a cluster.

use crate::summary::Header;

/// What names a source's metrics in its last record: its `pgm`, `ins` and
/// `site`, as sent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(in crate::engine) struct Naming {
    pgm: Option<Box<str>>,
    ins: Option<Box<str>>,
    site: Option<Box<str>>,
}

impl Naming {
    /// The `site` its last record named.
    pub(in crate::engine) fn site(&self) -> Option<&str> {
        self.site.as_deref()
    }

    /// `pgm`, `ins` and `site`, as the mapping takes them.
    pub(in crate::engine) fn parts(&self) -> (Option<&str>, Option<&str>, Option<&str>) {
        (
            self.pgm.as_deref(),
            self.ins.as_deref(),
            self.site.as_deref(),
        )
    }

    /// Takes what names the metrics of a record with this header (no
    /// allocation while it stays the same, as it does between reports).
    pub(in crate::engine) fn note(naming: &mut Option<Naming>, header: &Header<'_>) {
        let n = naming.get_or_insert_default();
        for (kept, sent) in [
            (&mut n.pgm, header.pgm),
            (&mut n.ins, header.ins),
            (&mut n.site, header.site),
        ] {
            if kept.as_deref() != sent {
                *kept = sent.map(Into::into);
            }
        }
    }
}
