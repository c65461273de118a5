//! The release table `tests/data/xrootd-releases.tsv`: what each XRootD
//! release sends in its summary records, read from XRootD's source (its
//! header says which files, lines and tags). It is the independent oracle
//! the catalog (`src/catalog/tests.rs`) and the real-xrootd test
//! (`tests/gmond/xrootd.rs`) are held to.

/// A release as an ordered key: `5.5.3` is [5, 5, 3]; a date before any
/// release tag (`2009-07`) is [0, 2009, 7]; `current` sorts after all.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Release(pub Vec<u32>);

impl Release {
    pub fn parse(text: &str) -> Release {
        if text == "current" {
            return Release(vec![u32::MAX]);
        }
        let number = |p: &str| {
            p.parse::<u32>()
                .unwrap_or_else(|_| panic!("release {text:?}: {p:?} is not a number"))
        };
        if let Some((year, month)) = text.split_once('-') {
            return Release(vec![0, number(year), number(month)]);
        }
        Release(text.split('.').map(number).collect())
    }

    pub fn is_current(&self) -> bool {
        self.0 == [u32::MAX]
    }
}

/// One row: a variable over a range of releases in which its field kept
/// one width.
#[derive(Clone, Debug)]
pub struct Row {
    pub section: String,
    pub variable: String,
    /// As written (`3.0.0`, `2009-07`).
    pub first_text: String,
    /// As written (`5.3.4`, `current`).
    pub last_text: String,
    pub first: Release,
    pub last: Release,
    /// A running total, only ever incremented.
    pub cumulative: bool,
    /// Bits of the C value printed; None for text.
    pub width: Option<u8>,
    /// Sent only under this condition beyond its section; None: always.
    pub when: Option<String>,
    pub source: String,
    /// What reading the code that fills it showed ('' if nothing).
    pub note: String,
}

impl Row {
    /// Whether release `release` (`5.5.3`) sends it.
    pub fn sent_by(&self, release: &str) -> bool {
        let r = Release::parse(release);
        self.first <= r && r <= self.last
    }

    pub fn is_current(&self) -> bool {
        self.last.is_current()
    }

    /// A list entry's variable (`oss.paths.i.free`): its list and field.
    pub fn list_entry(&self) -> Option<(&str, &str)> {
        self.variable.split_once(".i.")
    }
}

pub const COLUMNS: &[&str] = &[
    "section",
    "variable",
    "first",
    "last",
    "cumulative",
    "width",
    "when",
    "source",
    "note",
];

/// The table, from the crate's `tests/data`.
pub fn load() -> Vec<Row> {
    let path = crate::checkout().join("tests/data/xrootd-releases.tsv");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse(&text)
}

/// Parses the table; panics on anything malformed (it is checked in).
pub fn parse(text: &str) -> Vec<Row> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with('#') && !l.trim().is_empty());
    let (_, header) = lines.next().expect("the table has a column line");
    assert_eq!(header.split('\t').collect::<Vec<_>>(), COLUMNS);
    let rows: Vec<Row> = lines
        .map(|(n, line)| {
            let f: Vec<&str> = line.split('\t').collect();
            assert_eq!(f.len(), COLUMNS.len(), "line {}: {line:?}", n + 1);
            let row = Row {
                section: f[0].to_string(),
                variable: f[1].to_string(),
                first_text: f[2].to_string(),
                last_text: f[3].to_string(),
                first: Release::parse(f[2]),
                last: Release::parse(f[3]),
                cumulative: match f[4] {
                    "yes" => true,
                    "no" => false,
                    other => panic!("line {}: cumulative {other:?}", n + 1),
                },
                width: match f[5] {
                    "-" => None,
                    w => Some(
                        w.parse()
                            .unwrap_or_else(|_| panic!("line {}: width {w:?}", n + 1)),
                    ),
                },
                when: (f[6] != "-").then(|| f[6].to_string()),
                source: f[7].to_string(),
                note: f[8].to_string(),
            };
            assert!(
                row.first <= row.last,
                "line {}: first after last: {line:?}",
                n + 1
            );
            assert!(
                row.source.contains(".cc:") || row.source.contains(".icc:"),
                "line {}: a source file:line: {line:?}",
                n + 1
            );
            row
        })
        .collect();
    // A variable's ranges do not overlap.
    for a in &rows {
        for b in &rows {
            if !std::ptr::eq(a, b) && a.variable == b.variable {
                assert!(
                    a.last < b.first || b.last < a.first,
                    "{}: {}..{} overlaps {}..{}",
                    a.variable,
                    a.first_text,
                    a.last_text,
                    b.first_text,
                    b.last_text
                );
            }
        }
    }
    rows
}

/// The rows of variables release `release` sends.
pub fn sent_by<'t>(rows: &'t [Row], release: &'t str) -> impl Iterator<Item = &'t Row> + 't {
    rows.iter().filter(move |r| r.sent_by(release))
}

/// The newest row of each variable.
pub fn newest(rows: &[Row]) -> Vec<&Row> {
    let mut out: Vec<&Row> = Vec::new();
    for r in rows {
        match out.iter_mut().find(|o| o.variable == r.variable) {
            Some(o) if o.last < r.last => *o = r,
            Some(_) => {}
            None => out.push(r),
        }
    }
    out
}
