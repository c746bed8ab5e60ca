//! `gpufleet inventory list` and the loading of `-i` for every command (the sources are in
//! `crate::inventory::source`).

use std::path::Path;

use clap::builder::TypedValueParser;
use clap::{Args, Subcommand, ValueEnum};

use crate::config::Paths;
use crate::inventory::Inventory;
use crate::inventory::source::InventoryFormat;
use crate::model::text::{json_string, terminal_safe};

#[derive(Debug, Subcommand)]
pub enum InventoryCommand {
    /// Print the resolved nodes: name, host, port, user, key, root, groups, labels and where
    /// each was defined (file:line), like `ansible-inventory --list`
    List(ListArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    /// Aligned columns
    Table,
    /// A JSON array of nodes
    Json,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    pub select: super::SelectArgs,
    /// Output format
    #[arg(long, short = 'f', value_enum, default_value = "table")]
    pub format: ListFormat,
}

pub const INVENTORY_HELP: &str = "\
Inventory sources (-i):
  FILE            gpufleet TOML, Ansible INI or YAML, or a host list; the kind is detected
                  (--inventory-format toml|ansible-ini|ansible-yaml|hosts forces it)
  -               a host list on stdin: [user@]host[:port] per line, # comments
  slurm:          every Slurm node (sinfo, scontrol show nodes); slurm:PARTITION or
                  slurm:NODELIST (gpu[1-4]) for some
  k8s:            every Kubernetes node (kubectl get nodes -o json); k8s:SELECTOR for some

Examples:
  gpufleet inventory list -i hosts.ini
  gpufleet inventory list -i slurm:gpu --format json
  printf 'gpu01\\nops@gpu02:2222\\n' | gpufleet inventory list -i -";

/// Loads the inventory that `-i` names (any source), printing its warnings once on stderr.
pub(super) fn load(
    paths: &Paths,
    arg: &Path,
    ssh: Option<&crate::inventory::ssh_config::ClientConfig>,
) -> anyhow::Result<Inventory> {
    let inv = crate::inventory::source::load(
        arg,
        paths.inventory_format,
        ssh,
        &mut std::io::stdin().lock(),
    )
    // Inventory text may be hostile: the message quotes it.
    .map_err(|e| anyhow::anyhow!("{}", terminal_safe(&e.0)))?;
    for w in &inv.warnings {
        eprintln!("gpufleet: warning: {}", terminal_safe(w));
    }
    Ok(inv)
}

/// The `--inventory-format` value parser (its names show in help and completions).
pub fn format_parser() -> impl TypedValueParser<Value = InventoryFormat> {
    clap::builder::PossibleValuesParser::new(InventoryFormat::NAMES)
        .try_map(|s| s.parse::<InventoryFormat>())
}

pub(super) fn run(s: &super::Settings, cmd: &InventoryCommand) -> anyhow::Result<u8> {
    let InventoryCommand::List(args) = cmd;
    let scan = super::ScanArgs::default();
    let paths = &s.paths;
    let inv = s.inventory(&scan)?.ok_or_else(|| {
        anyhow::anyhow!(
            "no inventory: give one with -i FILE, -i -, -i slurm: or -i k8s: (or write {})",
            paths
                .inventory
                .as_ref()
                .map_or("~/.config/gpufleet/inventory.toml".into(), |p| p
                    .display()
                    .to_string())
        )
    })?;
    let nodes = args
        .select
        .selection()
        .apply(&inv)
        .map_err(anyhow::Error::msg)?;
    match args.format {
        ListFormat::Json => {
            let list: Vec<serde_json::Value> = nodes
                .iter()
                .map(|n| {
                    serde_json::json!({
                        "name": n.name,
                        "host": n.host,
                        "port": n.port,
                        "user": n.user,
                        "identity_file": n.identity_file,
                        // Every key file tried, in order (the first is `identity_file`).
                        "identity_files": n.identity_file.iter().chain(&n.route.more_identity_files).collect::<Vec<_>>(),
                        "certificate_file": n.certificate_file,
                        "root": n.root,
                        "groups": n.groups,
                        "labels": n.labels,
                        "canary": n.canary,
                        "drain": n.drain.as_ref().map(|d| format!("{:?}", d.backend).to_lowercase()),
                        "jump": n.route.jump.iter().map(|h| format!("{}@{}", h.login.user, h.target())).collect::<Vec<_>>(),
                        "proxy_command": n.route.proxy_command,
                        "source": n.origin.as_ref().map(|o| o.to_string()),
                    })
                })
                .collect();
            crate::outln!("{}", json_string(&list, true)?);
        }
        ListFormat::Table => {
            let headers = [
                "NAME", "HOST", "PORT", "USER", "KEY", "ROOT", "GROUPS", "LABELS", "SOURCE",
            ];
            let rows: Vec<Vec<String>> = nodes
                .iter()
                .map(|n| {
                    let labels: Vec<String> =
                        n.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    [
                        n.name.clone(),
                        n.host.clone(),
                        n.port.to_string(),
                        n.user.clone(),
                        n.identity_file
                            .as_ref()
                            .map_or("-".into(), |p| p.display().to_string()),
                        n.root.clone(),
                        if n.groups.is_empty() {
                            "-".into()
                        } else {
                            n.groups.join(",")
                        },
                        if labels.is_empty() {
                            "-".into()
                        } else {
                            labels.join(",")
                        },
                        n.origin.as_ref().map_or("-".into(), |o| o.to_string()),
                    ]
                    .iter()
                    .map(|c| terminal_safe(c).into_owned())
                    .collect()
                })
                .collect();
            let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
            for r in &rows {
                for (w, c) in widths.iter_mut().zip(r) {
                    *w = (*w).max(c.chars().count());
                }
            }
            let line = |cells: Vec<&str>| {
                cells
                    .iter()
                    .zip(&widths)
                    .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
                    .collect::<Vec<_>>()
                    .join("  ")
                    .trim_end()
                    .to_string()
            };
            crate::outln!("{}", line(headers.to_vec()));
            for r in &rows {
                crate::outln!("{}", line(r.iter().map(String::as_str).collect()));
            }
            eprintln!(
                "{} node(s) from {}",
                nodes.len(),
                terminal_safe(&inv.path.display().to_string())
            );
        }
    }
    Ok(0)
}
