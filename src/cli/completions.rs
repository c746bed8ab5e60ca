//! `gpufleet completions SHELL` and `gpufleet man`, both generated from the clap definition
//! (`clap_complete`, `clap_mangen`), so they never drift from the flags.

use clap::{Args, CommandFactory};

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell
    #[arg(value_enum, value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

pub const COMPLETIONS_HELP: &str = "\
Install:
  bash  mkdir -p ~/.local/share/bash-completion/completions &&
        gpufleet completions bash > ~/.local/share/bash-completion/completions/gpufleet
  zsh   gpufleet completions zsh > ~/.zfunc/_gpufleet   (with fpath+=~/.zfunc before compinit)
  fish  gpufleet completions fish > ~/.config/fish/completions/gpufleet.fish";

pub(super) fn completions(args: &CompletionsArgs) -> anyhow::Result<u8> {
    use std::io::Write;
    let mut cmd = super::Cli::command();
    // Into memory first: clap_complete panics on a write error (`| head` closing the pipe);
    // a write error here is returned and said like any other.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "gpufleet", &mut script);
    let mut out = std::io::stdout().lock();
    out.write_all(&script)?;
    out.flush()?;
    Ok(0)
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write gpufleet.1 and one page per subcommand (gpufleet-snapshot.1, …) into DIR instead
    /// of printing gpufleet.1
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
}

pub const MAN_HELP: &str = "\
Examples:
  gpufleet man | man -l -
  gpufleet man --dir ~/.local/share/man/man1 && man gpufleet-snapshot";

/// The man page (roff) on stdout, or every page into `--dir`.
pub(super) fn man(args: &ManArgs) -> anyhow::Result<u8> {
    let cmd = super::Cli::command();
    match &args.dir {
        Some(dir) => {
            // As `install -D` would: the folder is made when it is missing.
            std::fs::create_dir_all(dir)
                .and_then(|()| clap_mangen::generate_to(cmd, dir))
                .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
        }
        None => clap_mangen::Man::new(cmd).render(&mut std::io::stdout().lock())?,
    }
    Ok(0)
}
