//! `xrd2ganglia generate-docs` (hidden, for packaging): man pages, shell
//! completions and the configuration page.

use std::path::Path;

use clap::CommandFactory;
use clap_complete::Shell;

use xrd2ganglia::config;

use super::{Failed, Outcome};
use crate::Cli;

/// Writes the man pages and completions into `dir` (created if missing).
pub fn run(dir: &Path) -> Outcome {
    generate(dir).map_err(|error| {
        let dir = dir.to_owned();
        Failed::Docs { dir, error }.into()
    })
}

/// Man pages (xrd2ganglia.1 and one per command) and bash/zsh/fish
/// completions, from the clap definitions; gmetric's and mpxstats' pages
/// from their own option tables; the config file's man page
/// (xrd2ganglia.toml.5), docs/configuration.md and the shipped config
/// (xrd2ganglia.toml, conf/'s) from the key definitions.
fn generate(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut cli = Cli::command();
    cli.build();
    let page = |cmd: clap::Command, file: &str| -> std::io::Result<()> {
        let mut out = std::fs::File::create(dir.join(file))?;
        clap_mangen::Man::new(cmd).render(&mut out)
    };
    page(cli.clone(), "xrd2ganglia.1")?;
    for sub in cli
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
    {
        let name = format!("xrd2ganglia-{}", sub.get_name());
        let cmd = match sub.get_name() {
            "gmetric" => xrd2ganglia::gmetric::documentation_command(),
            "mpxstats" => xrd2ganglia::mpxstats::documentation_command(),
            _ => sub.clone(),
        };
        page(
            cmd.name(name.clone()).version(env!("CARGO_PKG_VERSION")),
            &format!("{name}.1"),
        )?;
    }
    std::fs::write(dir.join("xrd2ganglia.toml.5"), config::docs::man_page())?;
    std::fs::write(dir.join("configuration.md"), config::docs::markdown())?;
    std::fs::write(dir.join("xrd2ganglia.toml"), config::shipped::text())?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        clap_complete::generate_to(shell, &mut cli, "xrd2ganglia", dir)?;
    }
    Ok(())
}
