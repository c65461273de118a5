//! One list of a server's detailed metrics (its VOs, protocols, client
//! domains or users): the names tallied, at most `cap` of them named, the
//! rest counted under `other` (the rule is in [`super`]'s doc).

use std::collections::HashMap;

use super::OTHER;

/// Cumulative counts of one name (or of `other`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub read: u64,
    pub written: u64,
    pub opened: u64,
    pub closed: u64,
}

/// One name of a list.
#[derive(Debug)]
pub(super) struct Name {
    pub(super) text: Box<str>,
    /// Bytes moved under it (read + written), named or not: its rank.
    bytes: u64,
    pub(super) named: bool,
    /// What moved while it was named.
    pub(super) counts: Counts,
    /// Files open and users logged in under it now.
    pub(super) open: u64,
    pub(super) users: u64,
}

/// One list: its names (id 0 is `other`), at most `cap` of them named.
#[derive(Debug)]
pub(super) struct List {
    cap: usize,
    pub(super) names: Vec<Name>,
    index: HashMap<Box<str>, u32>,
    named: usize,
    /// What moved under names not named.
    pub(super) other: Counts,
    /// A lower bound of the smallest named name's bytes.
    min_named: u64,
}

impl List {
    pub(super) fn new(cap: usize) -> List {
        let mut l = List {
            cap,
            names: Vec::new(),
            index: HashMap::new(),
            named: 0,
            other: Counts::default(),
            min_named: 0,
        };
        l.push(OTHER);
        l
    }

    fn push(&mut self, text: &str) -> u32 {
        let id = self.names.len() as u32;
        self.names.push(Name {
            text: text.into(),
            bytes: 0,
            named: false,
            counts: Counts::default(),
            open: 0,
            users: 0,
        });
        self.index.insert(text.into(), id);
        id
    }

    /// The id of `text` (0, `other`, for an empty one or when the list
    /// tallies as many names as it may).
    pub(super) fn id(&mut self, text: &[u8]) -> u32 {
        if self.cap == 0 || text.is_empty() {
            return 0;
        }
        let text = String::from_utf8_lossy(text);
        if let Some(&id) = self.index.get(&*text) {
            return id;
        }
        if self.names.len() >= self.cap * 4 + 16 {
            return 0;
        }
        let id = self.push(&text);
        self.rank(id);
        id
    }

    /// Names `id` if there is room, or if it moved more than twice the
    /// bytes of the smallest named name (which then gives up its place).
    fn rank(&mut self, id: u32) {
        let i = id as usize;
        if i == 0 || self.names[i].named {
            return;
        }
        if self.named < self.cap {
            self.names[i].named = true;
            self.named += 1;
            return;
        }
        let bytes = self.names[i].bytes;
        if bytes / 2 <= self.min_named {
            return;
        }
        let Some((weakest, least)) = self
            .names
            .iter()
            .enumerate()
            .filter(|(_, n)| n.named)
            .map(|(j, n)| (j, n.bytes))
            .min_by_key(|&(_, b)| b)
        else {
            return;
        };
        self.min_named = least;
        if bytes / 2 > least {
            self.names[weakest].named = false;
            self.names[i].named = true;
            self.min_named = self
                .names
                .iter()
                .filter(|n| n.named)
                .map(|n| n.bytes)
                .min()
                .unwrap_or(0);
        }
    }

    /// Adds to what `id` moved: to its own counts while it is named, else
    /// to `other`'s.
    #[inline]
    pub(super) fn add(&mut self, id: u32, bytes: u64, f: impl FnOnce(&mut Counts)) {
        let n = &mut self.names[id as usize];
        n.bytes = n.bytes.saturating_add(bytes);
        if id != 0 && !n.named && bytes > 0 {
            self.rank(id);
        }
        let n = &mut self.names[id as usize];
        if id != 0 && n.named {
            f(&mut n.counts);
        } else {
            f(&mut self.other);
        }
    }
}
