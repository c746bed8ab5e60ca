//! `gpufleet keys`: every TUI action (its `[keys]` name), the keys bound to it after the config
//! file's `[keys]` overrides, and what it does.

use clap::Args;

use super::Settings;
use crate::model::text::terminal_safe;

pub(super) const KEYS_HELP: &str = "\
Rebind an action under [keys] in the config file, by its name: rescan = [\"R\", \"f5\"].
Key strings: a character (q, ?, G), a name (enter, esc, tab, up, pagedown, space, f1…f12),
optionally after ctrl- and/or alt- (ctrl-c).";

#[derive(Debug, Args)]
pub struct KeysArgs {
    /// The read-only session's keymap: actions that change nodes are unbound
    #[arg(long)]
    pub read_only: bool,
}

/// Prints the keymap; a bad `[keys]` entry is said on stderr (as the TUI does) and exits 1.
pub(super) fn run(s: &Settings, args: &KeysArgs) -> anyhow::Result<u8> {
    let (keymap, problems) = crate::app::Keymap::new(&s.config.keys, args.read_only);
    let lines = keymap.listing();
    let width = lines.iter().map(|l| l.action.len()).max().unwrap_or(0);
    let keys_width = lines
        .iter()
        .map(|l| l.keys.chars().count())
        .max()
        .unwrap_or(0)
        .max(8);
    let mut out = String::new();
    out.push_str(&format!(
        "{:<width$}  {:<keys_width$}  WHAT\n",
        "ACTION", "KEYS"
    ));
    for l in &lines {
        let keys = if l.keys.is_empty() {
            "(unbound)"
        } else {
            &l.keys
        };
        let help = if l.write {
            format!("{} (changes nodes)", l.help)
        } else {
            l.help.to_string()
        };
        out.push_str(&format!(
            "{:<width$}  {:<keys_width$}  {help}\n",
            l.action,
            terminal_safe(keys)
        ));
    }
    use std::io::Write;
    std::io::stdout().write_all(out.as_bytes())?;
    for p in &problems {
        eprintln!("gpufleet: config: {}", terminal_safe(p));
    }
    Ok(if problems.is_empty() { 0 } else { 1 })
}
