//! Every command's exit codes, defined once: docs/configuration.md and
//! the man pages show them ([`super::docs`]), and tests/quick/docs.rs runs the
//! binary into each one that is not 0.

/// One exit code of one command, as docs/configuration.md lists it
/// (tests/quick/docs.rs runs the binary into each that is not 0).
pub struct ExitCode {
    pub command: &'static str,
    pub code: u8,
    /// When the command ends with it (`code` in backticks).
    pub when: &'static str,
}

/// Every command's exit codes. The rule for the gateway's own commands
/// (src/cli.rs): 2 when it cannot start as configured, 3 when it cannot
/// start now for a reason outside the config that may pass, 1 when
/// something fails after the start; the gmetric and mpxstats drop-ins keep their
/// originals' codes. A command-line mistake (an unknown option, a missing
/// value) is 2 for every command but the drop-ins; `--help` and
/// `--version` are 0.
pub const EXIT_CODES: &[ExitCode] = &[
    ExitCode {
        command: "serve",
        code: 0,
        when: "stopped by SIGTERM or SIGINT",
    },
    ExitCode {
        command: "serve",
        code: 1,
        when: "failed after the start: the runtime could not be made (`cannot start the \
            runtime`), or serving failed",
    },
    ExitCode {
        command: "serve",
        code: 2,
        when: "cannot start as configured (the unit does not restart it): a bad option; \
            the config file cannot be read or is invalid (the message names the key and \
            the value); a `gmond_conf` named but missing; a `control_socket` set in the \
            config that cannot be made; a `state_file` another process owns (the message \
            names its pid), or one named (in the file or by `--state-file`) whose \
            directory cannot be made (a full disk is no reason: the gateway serves, says \
            in the log and `status` that its state is not saved, and saves once there is \
            room); a `--log-level` that is no log filter",
    },
    ExitCode {
        command: "serve",
        code: 3,
        when: "cannot start now, for a reason outside the config that may pass (the unit \
            restarts it): an address of `listen`, `metadata_requests` or `xml_listen` that \
            cannot be bound (in use: the message says how to find who holds it; or not \
            yet assigned to this host); a send host that does not resolve",
    },
    ExitCode {
        command: "check-config",
        code: 0,
        when: "valid: the effective settings are printed",
    },
    ExitCode {
        command: "check-config",
        code: 2,
        when: "what stops `serve` from starting, but for the addresses and the state \
            file (a running gateway may hold them): a bad option (a `--log-level` that is \
            no log filter too: it takes `serve`'s options), an invalid file or value",
    },
    ExitCode {
        command: "check-config",
        code: 3,
        when: "a send host that does not resolve (as `serve`, which may start once it \
            does)",
    },
    ExitCode {
        command: "status",
        code: 0,
        when: "the gateway answered: its status is printed",
    },
    ExitCode {
        command: "status",
        code: 1,
        when: "no gateway answered on the control socket: no such socket (`no gateway \
            answers on PATH: no such socket`), connection refused (a socket left by a \
            gateway that is not running), permission denied (not root nor in the \
            service's group), no answer within 10 s; or the gateway answered with an \
            error (`the gateway on PATH answered with an error: ...`: too many requests at \
            once, a receive task too slow)",
    },
    ExitCode {
        command: "status",
        code: 2,
        when: "a bad option; the config file cannot be read or is invalid, or its \
            `control_socket` is `\"\"` (no socket to ask)",
    },
    ExitCode {
        command: "dump",
        code: 0,
        when: "every record was a summary record; with `--listen`, stdout was closed",
    },
    ExitCode {
        command: "dump",
        code: 1,
        when: "some records were not summary records (each is reported on stderr), or \
            reading failed, or a line is longer than 64 KiB, more than one record can be \
            (`record N: longer than 65536 bytes (64 KiB)...`: the reading stops there)",
    },
    ExitCode {
        command: "dump",
        code: 2,
        when: "a bad option or config; the input file cannot be read, or the `--record` \
            file cannot be made",
    },
    ExitCode {
        command: "dump",
        code: 3,
        when: "the `--listen` address cannot be bound",
    },
    ExitCode {
        command: "replay",
        code: 0,
        when: "every entry of the recording was sent",
    },
    ExitCode {
        command: "replay",
        code: 1,
        when: "some lines were not entries (each is reported on stderr with its line \
            number, the rest was sent), or reading or sending failed, or a line is longer \
            than 512 KiB, which no entry is (`line N: longer than 524288 bytes (512 KiB)...`: \
            the reading stops there)",
    },
    ExitCode {
        command: "replay",
        code: 2,
        when: "a bad option (a `--speed` not above 0); the recording cannot be read",
    },
    ExitCode {
        command: "poll",
        code: 0,
        when: "the port's document was read: its clusters and hosts are printed",
    },
    ExitCode {
        command: "poll",
        code: 1,
        when: "nothing answered at the address (connection refused), the whole exchange \
            took longer than `--timeout` (10 s unless given: `no whole document within \
            --timeout S s`), the document is longer than 256 MiB or cut before its \
            `</GANGLIA_XML>`, or what answered is not gmond's XML",
    },
    ExitCode {
        command: "poll",
        code: 2,
        when: "a bad option (a `--timeout` not above 0)",
    },
    ExitCode {
        command: "gweb",
        code: 0,
        when: "the files are written (their paths are printed)",
    },
    ExitCode {
        command: "gweb",
        code: 1,
        when: "the files cannot be written into `--out`",
    },
    ExitCode {
        command: "gweb",
        code: 2,
        when: "a bad option or config, or the files cannot be made for these settings: \
            an `--instance` given twice, `metric_name` with `{site}` but no `--site`, a \
            bad cluster name, a report's variable left out by `exclude`",
    },
    ExitCode {
        command: "gmetric",
        code: 0,
        when: "sent (or `--dry-run`, `-h`, `-V`)",
    },
    ExitCode {
        command: "gmetric",
        code: 1,
        when: "gmetric's errors, with its messages: a bad option or value, a `-c` file \
            that is missing or unreadable, a channel that cannot be opened, a send that \
            failed",
    },
    ExitCode {
        command: "gmetric",
        code: 2,
        when: "the `-c` path is a directory (gmetric 3.7.2: `input in flex scanner \
            failed`)",
    },
    ExitCode {
        command: "mpxstats",
        code: 0,
        when: "stdout was closed (the reader went away)",
    },
    ExitCode {
        command: "mpxstats",
        code: 1,
        when: "a bad option, or the port cannot be bound",
    },
];
