//! `gpufleet config show` (the resolved settings and their origins) and `gpufleet paths`.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{Origin, ScanArgs, Settings};
use crate::config::Paths;
use crate::inventory::Inventory;

/// `gpufleet config …`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print every resolved setting with where it came from: a flag, an environment variable,
    /// the config file (and its key), the inventory, or the default
    #[command(after_help = SHOW_HELP)]
    Show(ShowArgs),
}

const SHOW_HELP: &str = "\
The same flags as `gpufleet snapshot` apply, so this shows what a scan with them would use.

Examples:
  gpufleet config show
  gpufleet config show -i fleet.toml --deadline 30 --json";

/// `gpufleet config show`'s arguments.
#[derive(Debug, Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub scan: ScanArgs,

    /// As if `--read-only` were given
    #[arg(long)]
    pub read_only: bool,

    /// Print JSON: a list of {"setting", "value", "origin"}
    #[arg(long)]
    pub json: bool,
}

/// Runs `gpufleet config …`; exit 0, or an error (2) when the settings do not resolve (a
/// missing inventory named by `-i`, a deadline shorter than the nvidia-smi limit, …).
pub fn run(s: &Settings, cmd: &ConfigCommand) -> anyhow::Result<u8> {
    let ConfigCommand::Show(args) = cmd;
    let rows = show(s, args)?;
    if args.json {
        let list: Vec<_> = rows
            .iter()
            .map(|(k, v, o)| serde_json::json!({"setting": k, "value": v, "origin": o.to_string()}))
            .collect();
        crate::outln!("{}", crate::model::text::json_string(&list, true)?);
        return Ok(0);
    }
    let kw = rows.iter().map(|(k, _, _)| k.len()).max().unwrap_or(0);
    let vw = rows
        .iter()
        .map(|(_, v, _)| v.chars().count())
        .filter(|w| *w <= 48)
        .max()
        .unwrap_or(0);
    for (k, v, o) in &rows {
        let v = crate::model::text::terminal_safe(v);
        let o = o.to_string();
        crate::outln!(
            "{k:<kw$}  {v:<vw$}  {}",
            crate::model::text::terminal_safe(&o)
        );
    }
    Ok(0)
}

/// The resolved settings as (setting, value, origin) rows, in a stable order.
fn show(s: &Settings, args: &ShowArgs) -> anyhow::Result<Vec<(String, String, Origin)>> {
    let mut rows: Vec<(String, String, Origin)> = Vec::new();
    let mut row = |k: &str, v: String, o: Origin| rows.push((k.to_string(), v, o));
    let path = |p: &Option<PathBuf>| match p {
        Some(p) if p.exists() => p.display().to_string(),
        Some(p) => format!("{} (absent)", p.display()),
        None => "(none: no home folder)".to_string(),
    };
    let p = &s.paths;
    row("config", path(&p.config), s.path_origin("config"));
    row("inventory", path(&p.inventory), s.path_origin("inventory"));
    row(
        "known_hosts",
        path(&p.known_hosts),
        s.path_origin("known_hosts"),
    );
    row(
        "ssh_config",
        match &p.ssh_config {
            Some(f) => path(&Some(f.clone())),
            None => path(&directories::BaseDirs::new().map(|b| b.home_dir().join(".ssh/config"))),
        },
        s.path_origin("ssh_config"),
    );
    row("state_dir", path(&p.state_dir), s.path_origin("state_dir"));

    let inventory = s.inventory(&args.scan)?;
    let probe = s.probe(&args.scan)?;
    match &inventory {
        None => row(
            "mode",
            format!(
                "local: this machine, root {}",
                args.scan
                    .root
                    .as_deref()
                    .unwrap_or(std::path::Path::new("/"))
                    .display()
            ),
            match (args.scan.local, args.scan.root.is_some()) {
                (true, _) => Origin::Flag("--local".into()),
                (_, true) => Origin::Flag("--root".into()),
                _ => Origin::Default,
            },
        ),
        Some(inv) => {
            let (_, selected) = s.scan(&args.scan, inv, probe.clone())?;
            row(
                "mode",
                format!(
                    "fleet: {} of {} nodes selected",
                    selected.len(),
                    inv.nodes.len()
                ),
                Origin::Inventory(inv.path.clone()),
            );
            if let Some(kh) = &inv.known_hosts {
                row(
                    "inventory known_hosts",
                    kh.display().to_string(),
                    Origin::Inventory(inv.path.clone()),
                );
            }
        }
    }
    // A shorter --deadline alone lowers the config's nvidia-smi limit (see Settings::probe).
    let smi_origin = match s.origin(Some("nvidia_smi_timeout"), "probe", "nvidia_smi_timeout") {
        Origin::Flag(f) => Origin::Flag(f),
        o if probe.nvidia_smi_timeout_secs != s.config.probe.nvidia_smi_timeout => {
            let _ = o;
            Origin::Flag("--deadline (lowered to stay under it)".into())
        }
        o => o,
    };
    row(
        "probe.nvidia_smi_timeout",
        format!("{} s", probe.nvidia_smi_timeout_secs),
        smi_origin,
    );
    row(
        "probe.deadline",
        format!("{} s", probe.deadline.as_secs()),
        s.origin(Some("deadline"), "probe", "deadline"),
    );
    row(
        "probe.kernel_log_lines",
        probe.kernel_log_lines.to_string(),
        s.origin(None, "probe", "kernel_log_lines"),
    );
    row(
        "collected.clock_skew",
        format!("{} s", s.config.collected.clock_skew),
        s.origin(None, "collected", "clock_skew"),
    );
    let ssh = s.ssh(&args.scan);
    row(
        "ssh.concurrency",
        ssh.concurrency.to_string(),
        s.origin(Some("concurrency"), "ssh", "concurrency"),
    );
    row(
        "ssh.workers",
        crate::rt::workers().to_string(),
        s.origin(Some("workers"), "ssh", "workers"),
    );
    row(
        "ssh.connect_timeout",
        format!("{} s", ssh.connect_timeout.as_secs()),
        s.origin(Some("connect_timeout"), "ssh", "connect_timeout"),
    );
    row(
        "ssh.auth_timeout",
        format!("{} s", ssh.auth_timeout.as_secs()),
        s.origin(None, "ssh", "auth_timeout"),
    );
    row(
        "ssh.keepalive",
        format!("{} s", ssh.keepalive.as_secs()),
        s.origin(None, "ssh", "keepalive"),
    );
    row(
        "ssh.host_key_policy",
        match ssh.host_key_policy {
            crate::probe::ssh::HostKeyPolicy::Strict => "strict".into(),
            crate::probe::ssh::HostKeyPolicy::AcceptNew => "accept-new".into(),
        },
        s.origin(Some("host_key_policy"), "ssh", "host_key_policy"),
    );
    let ro = s.read_only(args.read_only, inventory.as_ref());
    let ro_origin = if ro.flag {
        Origin::Flag("--read-only".into())
    } else if ro.config {
        s.origin(None, "tui", "read_only")
    } else if let (true, Some(inv)) = (ro.inventory, &inventory) {
        Origin::Inventory(inv.path.clone())
    } else {
        Origin::Default
    };
    row(
        "read_only",
        (ro.flag || ro.config || ro.inventory).to_string(),
        ro_origin,
    );
    let t = &s.config.tui;
    row("tui.theme", t.theme.clone(), s.origin(None, "tui", "theme"));
    row(
        "tui.refresh",
        t.refresh.map_or("off".into(), |r| format!("{r} s")),
        s.origin(None, "tui", "refresh"),
    );
    let u = &s.config.upgrade;
    for (key, value) in [
        ("max_unavailable", u.max_unavailable.to_string()),
        ("max_failures", u.max_failures.to_string()),
        ("drain_timeout", format!("{} s", u.drain_timeout)),
        ("step_timeout", format!("{} s", u.step_timeout)),
        ("reboot_timeout", format!("{} s", u.reboot_timeout)),
        (
            "on_failure",
            u.on_failure.clone().unwrap_or_else(|| "none".into()),
        ),
        (
            "on_success",
            u.on_success.clone().unwrap_or_else(|| "none".into()),
        ),
        (
            "gates",
            u.gates
                .iter()
                .map(|g| g.name())
                .collect::<Vec<_>>()
                .join(", "),
        ),
    ] {
        row(
            &format!("upgrade.{key}"),
            value,
            s.origin(None, "upgrade", key),
        );
    }
    let a = &s.config.assessment;
    for (key, value) in [
        ("dmabuf_min_kernel", &a.dmabuf_min_kernel),
        ("kernel_guideline", &a.kernel_guideline),
        (
            "open_min_compute_capability",
            &a.open_min_compute_capability,
        ),
        (
            "open_required_compute_capability",
            &a.open_required_compute_capability,
        ),
    ] {
        row(
            &format!("assessment.{key}"),
            value.clone(),
            s.origin(None, "assessment", key),
        );
    }
    row(
        "recipes",
        if s.config.recipes.is_empty() {
            "(none)".into()
        } else {
            s.config
                .recipes
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        },
        match &s.config.source {
            Some(f) if !s.config.recipes.is_empty() => {
                Origin::Config(f.clone(), "[recipes]".into())
            }
            _ => Origin::Default,
        },
    );
    Ok(rows)
}

/// `gpufleet paths`: where gpufleet reads and writes its files; exit 0.
pub fn paths(s: &Settings) -> anyhow::Result<u8> {
    let paths = &s.paths;
    let show = |p: &Option<PathBuf>| {
        p.as_ref()
            .map_or("(none: no home folder)".to_string(), |p| {
                let state = if p.exists() { "" } else { "  (absent)" };
                format!("{}{state}", p.display())
            })
    };
    let rows = [
        ("config", show(&paths.config)),
        ("inventory", show(&paths.inventory)),
        ("known_hosts", show(&paths.known_hosts)),
        ("ssh known_hosts", show(&Paths::user_known_hosts())),
        (
            "ssh config",
            show(&paths.ssh_config.clone().or_else(|| {
                directories::BaseDirs::new().map(|b| b.home_dir().join(".ssh/config"))
            })),
        ),
        (
            "themes",
            show(&crate::config::config_dir().map(|d| d.join("themes"))),
        ),
        ("state", show(&paths.state_dir)),
    ];
    for (k, v) in rows {
        crate::outln!("{k:<16} {v}");
    }
    if let Some(inv) = paths.inventory.as_ref().filter(|p| p.exists())
        && let Ok(inv) = Inventory::load(inv)
        && let Some(kh) = &inv.known_hosts
    {
        crate::outln!("{:<16} {} (the inventory's)", "known_hosts", kh.display());
    }
    Ok(0)
}
