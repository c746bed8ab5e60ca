//! `gpufleet tui` (and plain `gpufleet` in a terminal): the interactive fleet matrix.

use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory};

use super::{ScanArgs, Settings};

pub(super) const TUI_HELP: &str = "\
With no subcommand, gpufleet starts this view when run in a terminal.
Keys: ? help · / filter (status:migrate,blocked !flavor:open label:canary group:a100) ·
enter details · s / S sort · click a header to sort · R rescan · r rescan node · x cancel ·
e / E export JSON / CSV · q quit. Keys can be changed under [keys] in the config file.

Examples:
  gpufleet tui                               this machine
  gpufleet tui -i fleet.toml --read-only     the fleet, read-only
  gpufleet tui -i fleet.toml -g h100 --refresh 300 --theme high-contrast
  gpufleet tui --from fleet.jsonl /collected/*.json   snapshots collected by srun or a DaemonSet
                                             (R reads the files again; read-only)
  gpufleet tui -i fleet.toml --compare yesterday.json   what changed since";

#[derive(Debug, Args, Default)]
pub struct TuiArgs {
    #[command(flatten)]
    pub scan: ScanArgs,

    /// Read-only fleet view: actions that change nodes are unbound and refused
    #[arg(long)]
    pub read_only: bool,

    /// Theme: default, light, high-contrast, or NAME for ~/.config/gpufleet/themes/NAME.toml
    #[arg(long, value_name = "NAME")]
    pub theme: Option<String>,

    /// Show snapshots collected elsewhere instead of probing (JSON or JSON Lines, schema 1 or
    /// 2; merged by node name, newest scanned_at wins); a rescan reads the files again
    #[arg(
        long,
        value_name = "FILE",
        num_args = 1..,
        conflicts_with_all = super::snapshot::FROM_CONFLICTS
    )]
    pub from: Vec<PathBuf>,

    /// With --from: how far after now a report's scanned_at may be before it is a merge finding
    /// and never preferred (clock skew), as seconds (600) or with units (10m) [default: 10m, or
    /// the config's [collected] clock_skew]
    #[arg(long, value_name = "DURATION", requires = "from", value_parser = crate::snapshot::collected::parse_clock_skew)]
    pub clock_skew: Option<std::time::Duration>,

    /// Rescan every SECS seconds after a scan ends [default: off]
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub refresh: Option<u64>,

    /// Mark what changed against an earlier snapshot (`snapshot --format json` or `jsonl`):
    /// changed cells, added nodes (+), changed nodes (*); removed nodes in the legend
    #[arg(long, value_name = "OLD.json")]
    pub compare: Option<std::path::PathBuf>,
}

/// Runs the TUI until the user quits; returns the exit code (0).
pub fn run(s: &Settings, args: &TuiArgs) -> anyhow::Result<u8> {
    let t = TuiSession::new(s, args)?;
    crate::runtime::run(t.app, t.theme, t.target, t.upgrade)?;
    Ok(0)
}

/// What `gpufleet tui` runs: the app over its rows, the theme, what it scans and what it
/// needs to upgrade, resolved from the settings and flags as the command does (the runtime
/// then drives them: [`crate::runtime::run`] on the terminal, [`crate::runtime::drive`] on any
/// backend, as `benches/tui.rs` does).
pub struct TuiSession {
    pub app: crate::app::App,
    pub theme: crate::ui::Theme,
    pub target: crate::runtime::Target,
    pub upgrade: Option<crate::runtime::UpgradeCtx>,
}

impl TuiSession {
    /// Resolves the session of `gpufleet tui` with `args`.
    ///
    /// Errors: as `gpufleet tui`'s before the terminal is touched — an unreadable inventory,
    /// `--from` file or `--compare` snapshot, an unknown theme, invalid scan settings.
    pub fn new(s: &Settings, args: &TuiArgs) -> anyhow::Result<TuiSession> {
        let config = &s.config;
        use crate::app::{App, Keymap, Row};
        use crate::fleet::scan::Source;
        let settings = s.probe(&args.scan)?;
        let (mut source, inventory) =
            s.source(&args.scan, &args.from, args.clock_skew, settings)?;
        // Collected snapshots (--from) change nothing: the session is read-only.
        let read_only_sources =
            s.read_only(args.read_only || !args.from.is_empty(), inventory.as_ref());
        let read_only = crate::actions::permit::WritePermit::new(read_only_sources).is_err();
        let theme_name = args
            .theme
            .clone()
            .unwrap_or_else(|| config.tui.theme.clone());
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let theme = s.theme(&theme_name, no_color)?;
        let (keymap, problems) = Keymap::new(&config.keys, read_only);
        let (rows, what) = match &mut source {
            Source::Files(f) => {
                // One file by its path; many by the first and how many more (a DaemonSet's
                // folder holds one per node: the header would only show the start of a list).
                let first = f.files.first().map(|p| p.display().to_string());
                let files = match f.files.len() {
                    0 | 1 => first.unwrap_or_default(),
                    n => format!("{} and {} more files", first.unwrap_or_default(), n - 1),
                };
                (
                    f.names.iter().map(|n| Row::new(n.clone())).collect(),
                    format!("{files} ({} nodes)", f.names.len()),
                )
            }
            Source::Local(l) => {
                // The row's name before the probe answers: the root's hostname.
                let root = &l.settings.root;
                let name = l.name.get_or_insert_with(|| {
                    std::fs::read_to_string(root.join("proc/sys/kernel/hostname"))
                        .ok()
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty())
                        .unwrap_or_else(|| "localhost".into())
                });
                (vec![Row::new(name.clone())], "local".to_string())
            }
            Source::Fleet(f) => {
                let rows = f
                    .nodes
                    .iter()
                    .map(|n| {
                        let mut r = Row::new(n.name.clone());
                        r.labels = n.labels.clone();
                        r.groups = n.groups.clone();
                        r.canary = n.canary;
                        r.refresh();
                        r
                    })
                    .collect();
                let path = inventory.as_ref().map(|i| i.path.display().to_string());
                let what = format!("{} ({} nodes)", path.unwrap_or_default(), f.nodes.len());
                (rows, what)
            }
        };
        let source_text = what;
        let compare = match &args.compare {
            Some(path) => Some(crate::app::Compare::new(
                path.display().to_string(),
                crate::diff::read(path).map_err(|e| {
                    anyhow::anyhow!("--compare {}", crate::model::text::terminal_safe(&e))
                })?,
                &rows,
            )),
            None => None,
        };
        let mut app = App::new(rows, keymap, read_only, source_text);
        app.compare = compare;
        app.refresh_secs = args.refresh.or(config.tui.refresh);
        if !problems.is_empty() {
            for p in &problems {
                eprintln!("gpufleet: config: {p}");
            }
            app.message = Some(format!(
                "config: {} (and {} more)",
                problems[0],
                problems.len() - 1
            ));
        }
        let upgrade = match (&inventory, &source) {
            (Some(inv), Source::Fleet(f)) => Some(crate::fleet::rollout::Rollouts {
                nodes: f.nodes.clone(),
                cfg: config.upgrade.clone(),
                recipes: config.recipes.clone(),
                state_dir: s.state_dir()?,
                read_only: read_only_sources,
                inventory: Some(inv.path.display().to_string()),
            }),
            _ => None,
        };
        let target = std::sync::Arc::new(source);
        Ok(TuiSession {
            app,
            theme,
            target,
            upgrade,
        })
    }
}

/// Plain `gpufleet` when stdin or stdout is not a terminal: a snapshot of the same nodes (the
/// `tui` flags that only change the screen — `--read-only`, `--theme`, `--refresh` — change
/// nothing in a one-shot read-only report). Returns the snapshot's exit code.
pub fn not_a_terminal(s: &Settings, args: &TuiArgs) -> anyhow::Result<u8> {
    let snapshot = super::SnapshotArgs {
        scan: args.scan.clone(),
        ..Default::default()
    };
    super::snapshot::run(s, &snapshot)
}

/// `tui`'s flags go before no subcommand: `gpufleet --read-only snapshot` is an error (exit 2),
/// as clap would give for an unknown flag. The global flags (`--config`, `-i`, …) are not
/// `tui`'s and are left alone.
pub(super) fn misplaced_flags(m: &ArgMatches) -> Option<clap::Error> {
    let (sub, _) = m.subcommand()?;
    let tui = TuiArgs::augment_args(clap::Command::new("tui"));
    let flag = tui
        .get_arguments()
        .map(|a| a.get_id().as_str())
        .find(|id| m.value_source(id) == Some(ValueSource::CommandLine))?;
    Some(super::Cli::command().error(
        clap::error::ErrorKind::ArgumentConflict,
        format!(
            "--{} is a flag of plain `gpufleet` (the TUI), not of `{sub}`: put it after `{sub}` if it takes one",
            flag.replace('_', "-")
        ),
    ))
}
