//! Where the commands' log lines go and how they look: stderr, one line
//! per event; terminal colours only when stderr is a terminal (a file, a
//! pipe or the journal gets plain text a `grep` finds); under systemd,
//! when stderr is the journal's stream (`JOURNAL_STREAM` names its device
//! and inode, systemd.exec(5)), each line starts with its level as an
//! sd-daemon(3) priority prefix (`<3>` error, `<4>` warning, `<6>` info,
//! `<7>` debug and trace), which journald takes as the entry's priority
//! (`journalctl -p warning` shows warnings and errors only), and without
//! a timestamp of its own (the journal stamps each entry).

use std::io::IsTerminal;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Logs to stderr through `filter`, as the module says.
pub fn init(filter: EnvFilter) {
    let stderr = std::io::stderr();
    let journal = journal_stream(std::env::var("JOURNAL_STREAM").ok().as_deref(), &stderr);
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(!journal && stderr.is_terminal());
    if journal {
        let event_format = Priority(
            tracing_subscriber::fmt::format()
                .with_target(false)
                .with_ansi(false)
                .without_time(),
        );
        fmt.event_format(event_format).init();
    } else {
        fmt.init();
    }
}

/// Whether `journal_stream` (`JOURNAL_STREAM`'s value, `DEVICE:INODE`)
/// names the file `stderr` is: systemd sets it for a unit whose stderr is
/// the journal, and it is inherited, so a process whose stderr was since
/// redirected (`xrd2ganglia status 2>file` run from a unit) does not match.
fn journal_stream(journal_stream: Option<&str>, stderr: &impl AsFd) -> bool {
    let Some((dev, ino)) = journal_stream.and_then(|v| v.split_once(':')) else {
        return false;
    };
    let (Ok(dev), Ok(ino)) = (dev.parse::<u64>(), ino.parse::<u64>()) else {
        return false;
    };
    let Ok(fd) = stderr.as_fd().try_clone_to_owned() else {
        return false;
    };
    std::fs::File::from(fd)
        .metadata()
        .is_ok_and(|m| m.dev() == dev && m.ino() == ino)
}

/// The sd-daemon(3) priority of `level`.
pub fn priority(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        Level::DEBUG | Level::TRACE => 7,
    }
}

/// An event's line as `F` writes it, after its `<N>` priority prefix.
struct Priority<F>(F);

impl<S, N, F> FormatEvent<S, N> for Priority<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        write!(writer, "<{}>", priority(event.metadata().level()))?;
        self.0.format_event(ctx, writer, event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_journal_stream_is_the_file_its_variable_names_and_no_other() {
        let dir = xrd2ganglia_testkit::Scratch::new("journal-stream");
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let a = std::fs::File::create(a).unwrap();
        let b = std::fs::File::create(b).unwrap();
        let m = a.metadata().unwrap();
        let value = format!("{}:{}", m.dev(), m.ino());
        assert!(journal_stream(Some(&value), &a));
        assert!(!journal_stream(Some(&value), &b));
        for bad in ["", "1", "x:y", &format!("{}:", m.dev()), ":1"] {
            assert!(!journal_stream(Some(bad), &a), "{bad:?}");
        }
        assert!(!journal_stream(None, &a));
    }

    #[test]
    fn levels_are_sd_daemon_priorities() {
        let all = [
            Level::ERROR,
            Level::WARN,
            Level::INFO,
            Level::DEBUG,
            Level::TRACE,
        ];
        assert_eq!(all.map(|l| priority(&l)), [3, 4, 6, 7, 7]);
    }
}
