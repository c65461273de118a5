//! The state file: what keeps counters continuous across gateway restarts
//! (its text and why it exists: [`crate::engine::saved`]).
//!
//! Each receive task hands in its engine's counter state every
//! `state_interval`; the gateway writes the file (atomically: a temporary
//! file renamed over the old one) then and at exit, and reads it at start.
//!
//! One process owns a state file: two gateways saving the same file would
//! each overwrite the other's sources, and the loser's counters would
//! drop to their bare readings at its next restart (the spike the file is
//! there to prevent). [`StateLock`] holds an flock(2) on `<state_file>.lock`
//! for the life of the process; the kernel releases it when the process
//! dies, however it dies, so a crash never blocks the restart.

use std::fmt;
use std::fs::File;
use std::io::{self, Read as _, Write as _};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;

use crate::engine::saved::{Limits, SavedState, Skipped};

/// `path` if it is a regular file: at most `max` bytes of it, cut after
/// their last newline, and how many bytes were left unread. Opened
/// without blocking and checked on the open descriptor: a FIFO put there
/// after `check-config` (which refuses one) must not hold the start for
/// ever.
fn read_regular(path: &Path, max: u64) -> io::Result<(Vec<u8>, u64)> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::other(
            "not a regular file (a FIFO, socket or device)",
        ));
    }
    let mut bytes = Vec::new();
    io::Read::by_ref(&mut file)
        .take(max)
        .read_to_end(&mut bytes)?;
    let mut rest = [0u8; 1];
    if file.read(&mut rest)? == 0 {
        return Ok((bytes, 0));
    }
    // More than `max`: up to the last whole line read.
    let whole = bytes
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |at| at + 1);
    bytes.truncate(whole);
    let size = file.metadata()?.len();
    Ok((bytes, size.saturating_sub(whole as u64).max(1)))
}

/// The file and the state read from it (shared with the engines).
pub struct StateStore {
    path: Option<PathBuf>,
    state: Arc<SavedState>,
    /// How the saves go (for `status` and the log's once-per-change lines).
    health: Mutex<SaveHealth>,
    /// Some when `serve` could not take the file's lock for lack of space
    /// ([`StateStore::lock_at_save`]): a save takes it first, and keeps it.
    lock: Option<Mutex<Option<StateLock>>>,
}

/// How the state file's saves go: what `status` shows of them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SaveHealth {
    /// When a save last worked in this run (None: none yet).
    pub last_saved: Option<Instant>,
    /// Since when the saves fail and the last one's error (None: the last
    /// one worked, or none was tried).
    pub failing: Option<(Instant, String)>,
}

/// Whether `e` says the file system is full (or the user's quota is):
/// a bad day that passes, not a setting to change.
pub fn no_space(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
}

impl StateStore {
    /// A store that keeps nothing (no `state_file`).
    pub fn none() -> StateStore {
        StateStore {
            path: None,
            state: Arc::default(),
            health: Mutex::default(),
            lock: None,
        }
    }

    /// The file's lock is not held yet (`serve` could not make it: no
    /// space): each save tries to take it first, and saves nothing until
    /// it has it (another gateway that took the file meanwhile keeps it).
    pub fn lock_at_save(&mut self) {
        self.lock = Some(Mutex::new(None));
    }

    /// How the saves go.
    pub fn health(&self) -> SaveHealth {
        self.health.lock().map(|h| h.clone()).unwrap_or_default()
    }

    /// [`StateStore::save`], remembered for `status` and logged when it
    /// changes: the first failure of a run of them at warn (with why), the
    /// first save that works after them at info. Whether it worked.
    pub fn save_and_say(&self) -> bool {
        let result = self.save();
        let Ok(mut health) = self.health.lock() else {
            return result.is_ok();
        };
        let now = Instant::now();
        match result {
            Ok(()) => {
                if health.failing.take().is_some() {
                    tracing::info!("state file {} written again", self.display());
                }
                health.last_saved = Some(now);
                true
            }
            Err(e) => {
                if health.failing.is_none() {
                    warn_unwritable(self, &e);
                }
                let since = health.failing.as_ref().map_or(now, |f| f.0);
                health.failing = Some((since, e.to_string()));
                false
            }
        }
    }

    /// Reads `path` (a missing file is an empty state), at most
    /// `max_bytes` of it (`max_sources` x [`BYTES_PER_SOURCE`]: a file
    /// no gateway wrote must not take the memory it is large): how many
    /// sources it restored and which lines it skipped
    /// ([`crate::engine::saved`] checks each on its own) or left unread.
    /// An unreadable or foreign file is reported and then overwritten at
    /// the next save.
    ///
    /// [`BYTES_PER_SOURCE`]: crate::engine::saved::BYTES_PER_SOURCE
    pub fn open(path: &Path, max_bytes: u64) -> (StateStore, Result<(usize, Skipped), String>) {
        // A `tos` may not lie after when the file was written (nor after
        // now): a gateway host booted with its clock behind (before NTP)
        // must not take every saved start for one in the future.
        let written = std::fs::metadata(path).and_then(|m| m.modified());
        let limits = Limits::at(written.map_or(SystemTime::now(), |w| w.max(SystemTime::now())));
        // A temporary file left by a crash mid-save (this process owns the
        // file now, [`StateLock`]): it only takes room.
        let _ = std::fs::remove_file(tmp_path(path));
        let read = match read_regular(path, max_bytes) {
            // Not UTF-8: what is is read, a bad byte spoils its line only.
            Ok((bytes, unread)) => SavedState::read(&String::from_utf8_lossy(&bytes), limits)
                .map(|(state, skipped)| (state, Skipped { unread, ..skipped }))
                .map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                Ok((SavedState::default(), Skipped::default()))
            }
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        };
        let (state, result) = match read {
            Ok((s, skipped)) => {
                let n = s.unclaimed();
                (s, Ok((n, skipped)))
            }
            Err(e) => (SavedState::default(), Err(e)),
        };
        let store = StateStore {
            path: Some(path.to_path_buf()),
            state: Arc::new(state),
            health: Mutex::default(),
            lock: None,
        };
        (store, result)
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The state, for the engines to claim from and hand in to.
    pub fn state(&self) -> &Arc<SavedState> {
        &self.state
    }

    /// The file's path, for messages (empty when nothing is kept, and
    /// then nothing is ever written either).
    pub fn display(&self) -> std::path::Display<'_> {
        self.path.as_deref().unwrap_or(Path::new("")).display()
    }

    /// Writes the file from what was handed in and what is still
    /// unclaimed: into `<file>.tmp`, flushed to the disk, renamed over the
    /// file, the directory flushed too. A write that fails (a full disk, an
    /// I/O error, a read-only file system) leaves the last good file as it
    /// was and removes the temporary file: a partial one would keep the
    /// disk full for everyone else, after the gateway's stop too.
    pub fn save(&self) -> io::Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        if let Some(slot) = &self.lock {
            let mut slot = slot
                .lock()
                .map_err(|_| io::Error::other("the lock's holder panicked"))?;
            if slot.is_none() {
                let lock = StateLock::acquire(path).map_err(|e| match e {
                    LockError::Io { error, .. } if no_space(&error) => error,
                    other => io::Error::other(other.to_string()),
                })?;
                tracing::info!(
                    "state file {}: its lock {} taken",
                    self.display(),
                    lock.path().display()
                );
                *slot = Some(lock);
            }
        }
        let text = self.state.to_text();
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = dir {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = tmp_path(path);
        let written =
            write_synced(&tmp, text.as_bytes()).and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        // The rename itself reaches the disk with its directory (a file
        // system that cannot flush a directory has nothing more to do).
        match File::open(dir.unwrap_or(Path::new("."))).and_then(|d| d.sync_all()) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(()),
            other => other,
        }
    }
}

/// Where a save writes first: `<state_file>.tmp` (appended, not an
/// extension replaced: a state file named `x.tmp` must not be its own
/// temporary file).
pub fn tmp_path(state_file: &Path) -> PathBuf {
    let mut name = state_file.as_os_str().to_owned();
    name.push(".tmp");
    PathBuf::from(name)
}

/// Writes `bytes` to a new `path`, flushed to the disk before it returns.
fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Logs that the state file cannot be written.
pub(super) fn warn_unwritable(store: &StateStore, e: &io::Error) {
    if let Some(path) = store.path() {
        tracing::warn!(
            "cannot write the state file {}: {e} (counters will not stay continuous across a gateway restart)",
            path.display()
        );
    }
}

/// Writes the state file every `every` (what the receive tasks handed in),
/// until `stop`.
pub(super) async fn save_every(
    store: Arc<StateStore>,
    mut stop: watch::Receiver<bool>,
    every: Duration,
) {
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = tick.tick() => {
                // Receive tasks hand in on the same period; give them a moment.
                tokio::time::sleep(Duration::from_millis(200)).await;
                let s = store.clone();
                // Logged by the store when it changes (a failure, a recovery).
                let _ = tokio::task::spawn_blocking(move || s.save_and_say()).await;
            }
        }
    }
}

/// Ownership of a state file for as long as this value lives (the whole
/// `serve` process): an exclusive flock(2) on [`lock_path`], which holds
/// the owner's pid for the message another process gets. The lock file is
/// left in place at exit: removing it would race with a process that has
/// just opened it, which would then lock the removed file while the next
/// one creates and locks a new one (two owners).
#[derive(Debug)]
pub struct StateLock {
    /// Open for as long as the lock is held; closing it releases the lock.
    _file: File,
    path: PathBuf,
}

/// Why a state file could not be owned.
#[derive(Debug)]
pub enum LockError {
    /// Another process holds the lock.
    Held {
        state_file: PathBuf,
        lock: PathBuf,
        /// The holder's pid, as it wrote it in the lock file (None: not
        /// written yet, or not readable).
        pid: Option<u32>,
    },
    /// The lock file cannot be made or locked (its directory missing and
    /// not creatable, not writable, ...).
    Io {
        state_file: PathBuf,
        /// What failed: "cannot create the directory ...", "cannot lock ...".
        doing: String,
        error: io::Error,
    },
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LockError::Held {
                state_file,
                lock,
                pid,
            } => {
                write!(
                    f,
                    "state file {} is in use by another process (",
                    state_file.display()
                )?;
                match pid {
                    Some(pid) => write!(f, "pid {pid}")?,
                    None => write!(f, "pid unknown")?,
                }
                write!(
                    f,
                    ", which holds {}): give each gateway a state_file of its own",
                    lock.display()
                )
            }
            // A full disk: no setting to change (the caller says what follows).
            LockError::Io {
                state_file,
                doing,
                error,
            } if no_space(error) => {
                write!(f, "state file {}: {doing}: {error}", state_file.display())
            }
            LockError::Io {
                state_file,
                doing,
                error,
            } => write!(
                f,
                "state file {}: {doing}: {error} (set state_file or --state-file to a file in a writable directory, or to \"\" to keep no counter state)",
                state_file.display(),
            ),
        }
    }
}

impl std::error::Error for LockError {}

impl LockError {
    /// The lock could not be made for lack of space (or quota): a bad day,
    /// not a bad config; `serve` starts without it and takes it at a save.
    pub fn is_no_space(&self) -> bool {
        matches!(self, LockError::Io { error, .. } if no_space(error))
    }
}

/// Where the lock of `state_file` lives: next to it, `<state_file>.lock`,
/// so in the same directory (the RPM unit's `StateDirectory`).
pub fn lock_path(state_file: &Path) -> PathBuf {
    let mut name = state_file.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

impl StateLock {
    /// Takes the lock of `state_file` without waiting, creating its
    /// directory if needed (as [`StateStore::save`] would), and writes
    /// this process's pid into the lock file.
    pub fn acquire(state_file: &Path) -> Result<StateLock, LockError> {
        let lock = lock_path(state_file);
        let io_error = |doing: String| {
            move |error| LockError::Io {
                state_file: state_file.to_path_buf(),
                doing,
                error,
            }
        };
        let cannot_lock = || io_error(format!("cannot lock {}", lock.display()));
        if let Some(dir) = state_file.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io_error(format!(
                "cannot create its directory {}",
                dir.display()
            )))?;
        }
        // Not truncated on open: a holder's pid must stay readable.
        let mut file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&lock)
            .map_err(cannot_lock())?;
        // SAFETY: flock takes a file descriptor we own (open for the call's
        // duration) and flags; no pointers.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::WouldBlock {
                let mut text = String::new();
                let pid = file
                    .read_to_string(&mut text)
                    .ok()
                    .and_then(|_| text.trim().parse().ok());
                return Err(LockError::Held {
                    state_file: state_file.to_path_buf(),
                    lock,
                    pid,
                });
            }
            return Err(cannot_lock()(error));
        }
        // Written over the old pid, then cut to its length: writing over
        // a previous owner's pid takes no new space on most file systems.
        // On a full disk the lock is held all the same, its pid unwritten
        // (another process is told "pid unknown"): the gateway serves, and
        // its saves say the disk is full ([`StateStore::save_and_say`]).
        let pid = format!("{}\n", std::process::id());
        if let Err(error) = file
            .write_all_at(pid.as_bytes(), 0)
            .and_then(|()| file.set_len(pid.len() as u64))
        {
            if !no_space(&error) {
                return Err(cannot_lock()(error));
            }
            // No one must read a previous owner's pid as this one's.
            let _ = file.set_len(0);
        }
        Ok(StateLock {
            _file: file,
            path: lock,
        })
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::saved::{SavedSource, write_entry, write_header};
    use std::net::IpAddr;

    #[test]
    fn saves_and_reads_back_what_was_handed_in_and_unclaimed() {
        let dir = std::env::temp_dir().join(format!("x2g-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state");
        let _ = std::fs::remove_file(&path);
        let (store, read) = StateStore::open(&path, u64::MAX);
        assert_eq!(read, Ok((0, Skipped::default())));
        let mut part = Vec::new();
        write_entry(
            &mut part,
            "10.0.0.1".parse().unwrap(),
            "xrootd",
            Some((1700000000, 77)),
            [(0xdead_beef, 5000, 120), (7, 1, 0)].into_iter(),
            None,
        );
        store.state().hand_in(1, part);
        store.save().unwrap();

        let (again, read) = StateStore::open(&path, u64::MAX);
        assert_eq!(read, Ok((1, Skipped::default())));
        // Saved again unclaimed: a second restart keeps it.
        again.save().unwrap();
        let (third, _) = StateStore::open(&path, u64::MAX);
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(
            third.state().claim(ip, "cmsd", std::time::Instant::now()),
            None
        );
        assert_eq!(
            third.state().claim(ip, "xrootd", std::time::Instant::now()),
            Some(SavedSource {
                started: Some((1700000000, 77)),
                counters: vec![(0xdead_beef, 5000, 120), (7, 1, 0)],
            })
        );
        assert_eq!(
            third.state().claim(ip, "xrootd", std::time::Instant::now()),
            None
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A FIFO where the state file should be (put there after
    /// `check-config`, which refuses one) is refused at once: reading it
    /// waited for a writer for ever, before SIGTERM was handled (`serve`
    /// had to be killed; found trying issue 34's fixes).
    #[test]
    fn a_fifo_for_a_state_file_is_refused_not_waited_on() {
        let dir = std::env::temp_dir().join(format!("x2g-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state");
        let _ = std::fs::remove_file(&path);
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path and a mode; no memory is shared.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let opening = path.clone();
        std::thread::spawn(move || {
            let _ = tx.send(StateStore::open(&opening, u64::MAX).1);
        });
        let read = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("opening a FIFO as the state file still waits after 5 s");
        let e = read.unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A gateway host whose clock is behind when it starts (booted before
    /// NTP set it) keeps the saved starts: a `tos` is checked against when
    /// the file was written, if that is later than now.
    #[test]
    fn a_clock_behind_the_files_time_keeps_its_starts() {
        let dir = std::env::temp_dir().join(format!("x2g-state-clock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state");
        let now = SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        // Written "20 days from now" by this clock, of a start 10 days on.
        let tos = now + 10 * 86_400;
        std::fs::write(
            &path,
            format!(
                "{{\"format\":\"xrd2ganglia-state\",\"version\":2}}\n\
                 {{\"ip\":\"10.0.0.1\",\"program\":\"xrootd\",\"start\":[{tos},7],\"counters\":[[\"0000000000000001\",5,6]]}}\n"
            ),
        )
        .unwrap();
        let file = File::options().write(true).open(&path).unwrap();
        file.set_modified(SystemTime::now() + Duration::from_secs(20 * 86_400))
            .unwrap();
        drop(file);
        let (store, read) = StateStore::open(&path, u64::MAX);
        assert_eq!(read, Ok((1, Skipped::default())));
        let ip = "10.0.0.1".parse().unwrap();
        let kept = store
            .state()
            .claim(ip, "xrootd", std::time::Instant::now())
            .unwrap();
        assert_eq!(kept.started, Some((tos as u32, 7)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A file larger than `max_sources` x 16 KiB (no gateway writes one:
    /// a 1 GB file once took 1 GB at start) is read up to the last whole
    /// line within the bound: the sources there are kept, the rest is
    /// named as unread, and what is held does not grow with the file.
    #[test]
    fn a_state_file_over_its_bound_is_read_up_to_it() {
        let dir = std::env::temp_dir().join(format!("x2g-state-big-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("state");
        let mut bytes = Vec::new();
        write_header(&mut bytes);
        for i in 0..1000u32 {
            let ip = IpAddr::from([10, 0, (i >> 8) as u8, i as u8]);
            let counter = std::iter::once((1, u64::from(i), 0));
            write_entry(
                &mut bytes,
                ip,
                "xrootd",
                Some((1_700_000_000, 7)),
                counter,
                None,
            );
        }
        let text = String::from_utf8(bytes).unwrap();
        std::fs::write(&path, &text).unwrap();
        // The bound falls 5 bytes into the 11th source's line: the read
        // stops at that line's start.
        let eleventh = text.match_indices("\n{").nth(10).unwrap().0 + 1;
        let (store, read) = StateStore::open(&path, eleventh as u64 + 5);
        let (restored, skipped) = read.unwrap();
        assert_eq!(restored, 10);
        assert_eq!(skipped.lines, 0);
        let unread = (text.len() - eleventh) as u64;
        assert_eq!(skipped.unread, unread);
        assert_eq!(
            skipped.to_string(),
            format!("its last {unread} bytes unread (more than max_sources x 16 KiB)")
        );
        let at = std::time::Instant::now();
        for i in 0..10u8 {
            let kept = store
                .state()
                .claim(IpAddr::from([10, 0, 0, i]), "xrootd", at);
            assert_eq!(kept.map(|k| k.counters), Some(vec![(1, u64::from(i), 0)]));
        }
        assert_eq!(
            store
                .state()
                .claim(IpAddr::from([10, 0, 0, 10]), "xrootd", at),
            None
        );
        // Within the bound, the whole file.
        let (_, read) = StateStore::open(&path, text.len() as u64);
        assert_eq!(read, Ok((1000, Skipped::default())));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Issue 42, item 9, without root: /dev/full answers every write with
    /// ENOSPC, as a full disk does. The lock on a lock file whose pid
    /// cannot be written is held all the same (it stopped the start,
    /// exit 2); a save into a full disk fails, is remembered (for
    /// `status`), and the next one with room works and clears it.
    #[test]
    fn a_full_disk_holds_the_lock_and_fails_saves_until_there_is_room() {
        use std::os::unix::fs::symlink;
        let dir = std::env::temp_dir().join(format!("x2g-full-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let state = dir.join("state");
        symlink("/dev/full", lock_path(&state)).unwrap();
        let lock = StateLock::acquire(&state).unwrap();
        drop(lock);

        let (store, _) = StateStore::open(&state, u64::MAX);
        assert_eq!(store.health(), SaveHealth::default());
        // The save's temporary file is where the disk is full.
        symlink("/dev/full", tmp_path(&state)).unwrap();
        assert!(!store.save_and_say());
        let h = store.health();
        assert_eq!(h.last_saved, None);
        let (since, error) = h.failing.clone().unwrap();
        assert!(error.starts_with("No space left on device"), "{error}");
        assert!(!state.exists());
        // Failing again keeps when it started.
        symlink("/dev/full", tmp_path(&state)).unwrap();
        assert!(!store.save_and_say());
        assert_eq!(store.health().failing.unwrap().0, since);
        // Room again (the failed save removed its temporary file).
        assert!(store.save_and_say());
        let h = store.health();
        assert!(h.failing.is_none() && h.last_saved.is_some());
        assert!(state.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn one_owner_per_state_file_until_it_lets_go() {
        let dir = std::env::temp_dir().join(format!("x2g-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // The directory is made, as a save would make it.
        let state = dir.join("sub/state");
        assert_eq!(lock_path(&state), dir.join("sub/state.lock"));
        let first = StateLock::acquire(&state).unwrap();
        assert_eq!(first.path(), dir.join("sub/state.lock"));
        let pid = std::process::id();
        assert_eq!(
            std::fs::read_to_string(first.path()).unwrap(),
            format!("{pid}\n")
        );
        // flock belongs to the open file, so a second open in this very
        // process is refused as another process would be.
        let e = StateLock::acquire(&state).unwrap_err();
        assert!(
            matches!(e, LockError::Held { pid: Some(p), .. } if p == pid),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!(
                "state file {} is in use by another process (pid {pid}, which holds {}): give each gateway a state_file of its own",
                state.display(),
                dir.join("sub/state.lock").display()
            )
        );
        drop(first);
        // Released: the lock file stays, the next owner writes its pid over.
        std::fs::write(dir.join("sub/state.lock"), "999999\n").unwrap();
        let again = StateLock::acquire(&state).unwrap();
        assert_eq!(
            std::fs::read_to_string(again.path()).unwrap(),
            format!("{pid}\n")
        );
        drop(again);

        // A directory that cannot be made: named, with what to do.
        std::fs::write(dir.join("file"), "").unwrap();
        let e = StateLock::acquire(&dir.join("file/state")).unwrap_err();
        assert!(matches!(e, LockError::Io { .. }), "{e:?}");
        let text = e.to_string();
        assert!(
            text.starts_with(&format!(
                "state file {}: cannot create its directory {}: ",
                dir.join("file/state").display(),
                dir.join("file").display()
            )) && text.ends_with("or to \"\" to keep no counter state)"),
            "{text}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn display_is_the_plain_path() {
        let dir = std::env::temp_dir().join(format!("x2g-state-display-{}", std::process::id()));
        let (store, _) = StateStore::open(&dir.join("state"), u64::MAX);
        assert_eq!(
            store.display().to_string(),
            dir.join("state").display().to_string()
        );
        assert_eq!(StateStore::none().display().to_string(), "");
    }
}
