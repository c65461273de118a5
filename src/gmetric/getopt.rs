//! gmetric's command line, parsed the way gmetric 3.7.2 parses it: a
//! gengetopt 2.22 parser over glibc `getopt_long` (optstring
//! `hVc:n:v:t:u:s:x:d:g:C:D:T:S:H`). Every quirk of that pair is here and
//! nowhere else (measured on Debian's /usr/bin/gmetric 3.7.2):
//!
//! * `--opt=v`, `--opt v`, `-nv`, `-n v`, clustered flags (`-Hnm`), and any
//!   unique prefix of a long option (`--na`); an exact name wins over a prefix.
//! * Non-option arguments are ignored wherever they stand; `--` ends options.
//! * The first mistake in command-line order is reported, as
//!   `ARGV0: invalid option -- 'Z'`, `ARGV0: unrecognized option '--x'`,
//!   `ARGV0: option requires an argument -- 't'`, `ARGV0: option '--type'
//!   requires an argument`, `ARGV0: option '--heartbeat' doesn't allow an
//!   argument`, `ARGV0: option '--t' is ambiguous; possibilities: ...`,
//!   ``ARGV0: `--name' (`-n') option given more than once`` (any option,
//!   flags included), `ARGV0: invalid numeric value: X` (-x, -d).
//! * `-h`/`-V` act when reached: `-V -h` prints the version.
//! * `-x`/`-d` are `strtol(arg, 0)` (whole text, base prefixes), cut to a C
//!   int, then sent as u32.
//!
//! Ours adds one long option, `--dry-run`.

use super::cnum;

/// The parsed options (None: not given).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub conf: Option<String>,
    pub name: Option<String>,
    pub value: Option<String>,
    pub value_type: Option<String>,
    pub units: Option<String>,
    pub slope: Option<String>,
    pub tmax: Option<u32>,
    pub dmax: Option<u32>,
    pub group: Option<String>,
    pub cluster: Option<String>,
    pub desc: Option<String>,
    pub title: Option<String>,
    pub spoof: Option<String>,
    pub heartbeat: bool,
    pub dry_run: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(clippy::large_enum_variant)] // parsed once per process
pub enum Parsed {
    Run(Options),
    Help,
    Version,
}

struct Opt {
    short: Option<char>,
    long: &'static str,
    /// The argument's placeholder (`STRING`, `INT`); None for a flag.
    arg: Option<&'static str>,
    help: &'static str,
}

impl Opt {
    const fn takes_arg(&self) -> bool {
        self.arg.is_some()
    }
}

const fn opt(
    short: char,
    long: &'static str,
    arg: Option<&'static str>,
    help: &'static str,
) -> Opt {
    Opt {
        short: Some(short),
        long,
        arg,
        help,
    }
}

const STRING: Option<&str> = Some("STRING");
const INT: Option<&str> = Some("INT");

/// In gmetric's table order (it decides the order of "possibilities" and of
/// the help). The one source for parsing, `-h` and the man page.
// One row an option, as in gmetric's table: rustfmt would spread the long ones.
#[rustfmt::skip]
const OPTIONS: &[Opt] = &[
    opt('h', "help", None, "Print help and exit"),
    opt('V', "version", None, "Print version and exit"),
    opt('c', "conf", STRING, "The configuration file to use for finding send channels (default=`/etc/ganglia/gmond.conf')"),
    opt('n', "name", STRING, "Name of the metric"),
    opt('v', "value", STRING, "Value of the metric"),
    opt('t', "type", STRING, "Either string|int8|uint8|int16|uint16|int32|uint32|float|double"),
    opt('u', "units", STRING, "Unit of measure for the value e.g. Kilobytes, Celcius (default=`')"),
    opt('s', "slope", STRING, "Either zero|positive|negative|both|derivative (default=`both')"),
    opt('x', "tmax", INT, "The maximum time in seconds between gmetric calls (default=`60')"),
    opt('d', "dmax", INT, "The lifetime in seconds of this metric (default=`0')"),
    opt('g', "group", STRING, "Group(s) of the metric (comma-separated)"),
    opt('C', "cluster", STRING, "Cluster of the metric"),
    opt('D', "desc", STRING, "Description of the metric"),
    opt('T', "title", STRING, "Title of the metric"),
    opt('S', "spoof", STRING, "IP address and name of host/device (colon separated) we are spoofing (default=`')"),
    opt('H', "heartbeat", None, "spoof a heartbeat message (use with spoof option)"),
    Opt {
        short: None,
        long: "dry-run",
        arg: None,
        help: "Print the packets decoded, field by field, instead of sending them (xrd2ganglia)",
    },
];

/// gmetric's `-h` text, from [`OPTIONS`].
pub fn help_text(version_line: &str) -> String {
    let mut out = format!(
        "{version_line}\n\nThe Ganglia Metric Client (gmetric) announces a metric\non the list of defined send channels defined in a configuration file\n\nUsage: gmetric [OPTIONS]...\n\n"
    );
    for o in OPTIONS {
        let flag = match (o.short, o.arg) {
            (Some(c), Some(a)) => format!("-{c}, --{}={a}", o.long),
            (Some(c), None) => format!("-{c}, --{}", o.long),
            (None, Some(a)) => format!("    --{}={a}", o.long),
            (None, None) => format!("    --{}", o.long),
        };
        out.push_str(&format!("  {flag:<20}  {}\n", o.help));
    }
    out
}

/// gmetric's options as a clap command, for the man page and completions
/// only (parsing is [`parse`]'s).
pub fn documentation_command() -> clap::Command {
    let mut cmd = clap::Command::new("gmetric")
        .about("Announce a metric to gmond, as Ganglia 3.7's gmetric (xrd2ganglia gmetric)")
        .disable_help_flag(true)
        .disable_version_flag(true);
    for o in OPTIONS {
        let mut a = clap::Arg::new(o.long).long(o.long).help(o.help);
        if let Some(c) = o.short {
            a = a.short(c);
        }
        a = match o.arg {
            Some(v) => a.value_name(v).action(clap::ArgAction::Set),
            None => a.action(clap::ArgAction::SetTrue),
        };
        cmd = cmd.arg(a);
    }
    cmd
}

/// Parses `args` (without argv[0]); `argv0` prefixes the messages.
pub fn parse(argv0: &str, args: &[String]) -> Result<Parsed, String> {
    let mut o = Options::default();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if arg == "--" {
            break;
        }
        if let Some(body) = arg.strip_prefix("--") {
            let (opt, value) = long_option(argv0, arg, body, args, &mut i)?;
            if let Some(done) = apply(argv0, &mut o, opt, value)? {
                return Ok(done);
            }
        } else if arg.len() > 1 && arg.starts_with('-') {
            let chars: Vec<char> = arg[1..].chars().collect();
            let mut k = 0;
            while k < chars.len() {
                let c = chars[k];
                k += 1;
                let Some(opt) = OPTIONS.iter().find(|o| o.short == Some(c)) else {
                    return Err(format!("{argv0}: invalid option -- '{c}'"));
                };
                let value = if opt.takes_arg() {
                    if k < chars.len() {
                        let v: String = chars[k..].iter().collect();
                        k = chars.len();
                        Some(v)
                    } else if i < args.len() {
                        i += 1;
                        Some(args[i - 1].clone())
                    } else {
                        return Err(format!("{argv0}: option requires an argument -- '{c}'"));
                    }
                } else {
                    None
                };
                if let Some(done) = apply(argv0, &mut o, opt, value)? {
                    return Ok(done);
                }
            }
        }
        // Anything else is a non-option argument: ignored, as getopt's permutation does.
    }
    Ok(Parsed::Run(o))
}

/// The long option `arg` (`--` and `body`) and its argument: inline
/// (`--name=v`) or the next of `args` (at `*i`, then stepped over).
fn long_option(
    argv0: &str,
    arg: &str,
    body: &str,
    args: &[String],
    i: &mut usize,
) -> Result<(&'static Opt, Option<String>), String> {
    let (name, inline) = match body.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (body, None),
    };
    let opt = long_named(argv0, arg, name)?;
    if !opt.takes_arg() {
        if inline.is_some() {
            return Err(format!(
                "{argv0}: option '--{}' doesn't allow an argument",
                opt.long
            ));
        }
        return Ok((opt, None));
    }
    match inline {
        Some(v) => Ok((opt, Some(v.to_string()))),
        None if *i < args.len() => {
            *i += 1;
            Ok((opt, Some(args[*i - 1].clone())))
        }
        None => Err(format!(
            "{argv0}: option '--{}' requires an argument",
            opt.long
        )),
    }
}

/// The option `name` names: exactly, else as the only option it begins.
fn long_named(argv0: &str, arg: &str, name: &str) -> Result<&'static Opt, String> {
    if let Some(opt) = OPTIONS.iter().find(|o| o.long == name) {
        return Ok(opt);
    }
    let matches: Vec<&'static Opt> = OPTIONS
        .iter()
        .filter(|o| o.long.starts_with(name))
        .collect();
    match matches[..] {
        [] => Err(format!("{argv0}: unrecognized option '{arg}'")),
        [one] => Ok(one),
        _ => {
            let list: Vec<String> = matches.iter().map(|o| format!("'--{}'", o.long)).collect();
            Err(format!(
                "{argv0}: option '{arg}' is ambiguous; possibilities: {}",
                list.join(" ")
            ))
        }
    }
}

/// Records one option; Some(..) for -h/-V, which end parsing at once.
fn apply(
    argv0: &str,
    o: &mut Options,
    opt: &Opt,
    value: Option<String>,
) -> Result<Option<Parsed>, String> {
    let again = || match opt.short {
        Some(c) => format!(
            "{argv0}: `--{}' (`-{c}') option given more than once",
            opt.long
        ),
        None => format!("{argv0}: `--{}' option given more than once", opt.long),
    };
    let value = value.unwrap_or_default();
    let slot = match opt.long {
        "help" => return Ok(Some(Parsed::Help)),
        "version" => return Ok(Some(Parsed::Version)),
        "heartbeat" | "dry-run" => {
            let flag = if opt.long == "heartbeat" {
                &mut o.heartbeat
            } else {
                &mut o.dry_run
            };
            if *flag {
                return Err(again());
            }
            *flag = true;
            return Ok(None);
        }
        "tmax" | "dmax" => {
            let slot = if opt.long == "tmax" {
                &mut o.tmax
            } else {
                &mut o.dmax
            };
            if slot.is_some() {
                return Err(again());
            }
            let (v, used) = cnum::strtol(&value);
            if used != value.len() {
                return Err(format!("{argv0}: invalid numeric value: {value}"));
            }
            // C: long -> int (low 32 bits) -> sent as unsigned.
            *slot = Some(v as i32 as u32);
            return Ok(None);
        }
        "conf" => &mut o.conf,
        "name" => &mut o.name,
        "value" => &mut o.value,
        "type" => &mut o.value_type,
        "units" => &mut o.units,
        "slope" => &mut o.slope,
        "group" => &mut o.group,
        "cluster" => &mut o.cluster,
        "desc" => &mut o.desc,
        "title" => &mut o.title,
        _ => &mut o.spoof,
    };
    if slot.is_some() {
        return Err(again());
    }
    *slot = Some(value);
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Parsed, String> {
        parse(
            "gmetric",
            &args.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
    }

    fn run(args: &[&str]) -> Options {
        match p(args) {
            Ok(Parsed::Run(o)) => o,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn forms_of_options() {
        let o = run(&["--name=m", "--value", "1", "-tuint32", "-Hx5", "", "extra"]);
        assert_eq!(
            (
                o.name.as_deref(),
                o.value.as_deref(),
                o.value_type.as_deref()
            ),
            (Some("m"), Some("1"), Some("uint32"))
        );
        assert!(o.heartbeat);
        assert_eq!(o.tmax, Some(5));
        let o = run(&["--na", "m", "--val=1", "--ty", "string", "-"]);
        assert_eq!(o.name.as_deref(), Some("m"));
        // A separate argument may start with '-'.
        assert_eq!(run(&["-v", "-1"]).value.as_deref(), Some("-1"));
        // After `--` nothing is an option.
        assert_eq!(run(&["-n", "m", "--", "-x", "5"]).tmax, None);
        assert!(run(&["--dry-run"]).dry_run);
        assert_eq!(run(&["-x", "-1", "-d", "0x10"]).tmax, Some(4294967295));
        assert_eq!(run(&["-d", "99999999999"]).dmax, Some(1215752191));
        assert_eq!(run(&["-d", "-99999999999999999999"]).dmax, Some(0));
    }

    #[test]
    fn help_and_version_act_when_reached() {
        assert_eq!(p(&["-V", "-h"]), Ok(Parsed::Version));
        assert_eq!(p(&["-hV"]), Ok(Parsed::Help));
        assert_eq!(p(&["-h", "-Z"]), Ok(Parsed::Help));
        assert_eq!(p(&["--vers"]), Ok(Parsed::Version));
        assert_eq!(
            p(&["-Z", "-h"]),
            Err("gmetric: invalid option -- 'Z'".into())
        );
    }

    /// The exact messages of gmetric 3.7.2 (glibc getopt + gengetopt).
    #[test]
    fn mistakes_and_their_messages() {
        let cases: &[(&[&str], &str)] = &[
            (&["-Z"], "gmetric: invalid option -- 'Z'"),
            (&["--bogus"], "gmetric: unrecognized option '--bogus'"),
            (&["--bogus=1"], "gmetric: unrecognized option '--bogus=1'"),
            (&["-t"], "gmetric: option requires an argument -- 't'"),
            (&["--type"], "gmetric: option '--type' requires an argument"),
            (
                &["--heartbeat=x"],
                "gmetric: option '--heartbeat' doesn't allow an argument",
            ),
            (&["-H=x"], "gmetric: invalid option -- '='"),
            (
                &["--t=uint32"],
                "gmetric: option '--t=uint32' is ambiguous; possibilities: '--type' '--tmax' '--title'",
            ),
            (
                &["-n", "a", "--name", "b"],
                "gmetric: `--name' (`-n') option given more than once",
            ),
            (
                &["-g", "a", "-g", "b"],
                "gmetric: `--group' (`-g') option given more than once",
            ),
            (
                &["-H", "-H"],
                "gmetric: `--heartbeat' (`-H') option given more than once",
            ),
            (&["-x", "abc", "-Z"], "gmetric: invalid numeric value: abc"),
            (&["-x", "5 "], "gmetric: invalid numeric value: 5 "),
            (&["-d", "1.5"], "gmetric: invalid numeric value: 1.5"),
        ];
        for (args, msg) in cases {
            assert_eq!(p(args), Err(msg.to_string()), "{args:?}");
        }
    }
}
