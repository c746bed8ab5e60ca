//! One resolved settings struct: the command line (flags and environment, as clap merged
//! them), the config file and the defaults, each value with where it came from.
//!
//! Every subcommand asks [`Settings`] for what it needs (the inventory, probe and SSH
//! settings, the read-only decision); nothing else merges flags with the config.
//! `gpufleet config show` prints the result, like `ssh -G` or `git config --show-origin`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args};

use crate::actions::permit::ReadOnlySources;
use crate::config::{Config, Paths};
use crate::fleet::scan::Source;
use crate::inventory::{Inventory, Node};
use crate::probe::ProbeSettings;
use crate::probe::known_hosts::KnownHosts;
use crate::probe::scan::Scan;
use crate::probe::ssh::{HostKeyPolicy, HostKeys, SshSettings};

/// Where a resolved value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A command-line flag, such as `--deadline`.
    Flag(String),
    /// An environment variable, such as `GPUFLEET_INVENTORY`.
    Env(&'static str),
    /// A key of the config file: the file and the key (`[probe] deadline`).
    Config(PathBuf, String),
    /// The inventory file (its `read_only` or `known_hosts`).
    Inventory(PathBuf),
    /// gpufleet's default.
    Default,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Flag(flag) => write!(f, "flag {flag}"),
            Origin::Env(var) => write!(f, "environment {var}"),
            Origin::Config(path, key) => write!(f, "config {} {key}", path.display()),
            Origin::Inventory(path) => write!(f, "inventory {}", path.display()),
            Origin::Default => f.write_str("default"),
        }
    }
}

/// The environment variable behind each global path flag (clap's `env = …`).
const ENV: [(&str, &str); 5] = [
    ("config", "GPUFLEET_CONFIG"),
    ("inventory", "GPUFLEET_INVENTORY"),
    ("known_hosts", "GPUFLEET_KNOWN_HOSTS"),
    ("state_dir", "GPUFLEET_STATE_DIR"),
    ("ssh_config", "GPUFLEET_SSH_CONFIG"),
];

/// Which arguments the command line or the environment gave, by clap id (`deadline`,
/// `inventory`): read from clap's `ArgMatches`, the subcommands' included.
#[derive(Debug, Clone, Default)]
pub struct Given(HashMap<String, Origin>);

impl Given {
    /// Collects the origin of every argument given in `m` and its subcommands.
    pub fn from_matches(m: &ArgMatches) -> Given {
        let mut given = Given::default();
        given.collect(m);
        given
    }

    fn collect(&mut self, m: &ArgMatches) {
        for id in m.ids() {
            let id = id.as_str();
            let origin = match m.try_get_raw(id).ok().flatten().map(|_| m.value_source(id)) {
                Some(Some(ValueSource::CommandLine)) => {
                    Origin::Flag(format!("--{}", id.replace('_', "-")))
                }
                Some(Some(ValueSource::EnvVariable)) => match ENV.iter().find(|(i, _)| *i == id) {
                    Some((_, var)) => Origin::Env(var),
                    None => continue,
                },
                _ => continue,
            };
            self.0.insert(id.to_string(), origin);
        }
        if let Some((_, sub)) = m.subcommand() {
            self.collect(sub);
        }
    }

    /// The origin of argument `id`, when it was given.
    pub fn get(&self, id: &str) -> Option<&Origin> {
        self.0.get(id)
    }
}

/// `--host-key-policy`'s values (clap's side of [`HostKeyPolicy`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HostKeyPolicyArg {
    /// Refuse unknown host keys (OpenSSH `StrictHostKeyChecking yes`). The default.
    Strict,
    /// Learn unknown host keys into known_hosts (OpenSSH `accept-new`); changed keys are
    /// still refused.
    AcceptNew,
}

impl From<HostKeyPolicyArg> for HostKeyPolicy {
    fn from(p: HostKeyPolicyArg) -> HostKeyPolicy {
        match p {
            HostKeyPolicyArg::Strict => HostKeyPolicy::Strict,
            HostKeyPolicyArg::AcceptNew => HostKeyPolicy::AcceptNew,
        }
    }
}

/// What every subcommand starts from: the paths, the config file and where each came from.
#[derive(Debug)]
pub struct Settings {
    /// The resolved paths (flag, environment or XDG default).
    pub paths: Paths,
    /// The parsed config file (defaults when there is none).
    pub config: Config,
    /// Which arguments were given, and how.
    pub given: Given,
    /// `--workers`.
    pub workers: Option<usize>,
}

impl Settings {
    /// Resolves the global paths and loads the config file: one given by flag or environment
    /// must exist; the default one is read when it exists.
    ///
    /// Errors: the config file's, formatted `file:line:column: message`.
    pub fn resolve(cli: &super::Cli, given: Given) -> Result<Settings, crate::config::ConfigError> {
        let paths = Paths::resolve(
            cli.config.clone(),
            cli.inventory.clone(),
            cli.known_hosts.clone(),
            cli.state_dir.clone(),
        );
        let paths = Paths {
            ssh_config: cli.ssh_config.clone(),
            inventory_format: cli.inventory_format,
            ..paths
        };
        let config = Config::load(paths.config.as_deref().filter(|_| cli.config.is_some()))?;
        Ok(Settings {
            paths,
            config,
            given,
            workers: cli.workers.map(|w| w as usize),
        })
    }

    /// These settings with other paths, the inventory taken as named explicitly (the demo's
    /// private files).
    pub fn with_paths(&self, paths: Paths) -> Settings {
        let mut given = self.given.clone();
        given
            .0
            .insert("inventory".into(), Origin::Flag("--inventory".into()));
        Settings {
            paths,
            config: self.config.clone(),
            given,
            workers: self.workers,
        }
    }

    /// The inventory was named by `-i` or `$GPUFLEET_INVENTORY` (then it must exist).
    pub fn explicit_inventory(&self) -> bool {
        self.given.get("inventory").is_some()
    }

    /// Where the path setting `id` (`config`, `inventory`, `known_hosts`, `state_dir`,
    /// `ssh_config`) came from.
    pub fn path_origin(&self, id: &str) -> Origin {
        self.given.get(id).cloned().unwrap_or(Origin::Default)
    }

    /// Where a config-backed setting came from: the flag `flag_id` when given, else the config
    /// file's `[table] key` when set there, else the default.
    pub fn origin(&self, flag_id: Option<&str>, table: &str, key: &str) -> Origin {
        if let Some(o) = flag_id.and_then(|id| self.given.get(id)) {
            return o.clone();
        }
        match &self.config.source {
            Some(path) if self.config.is_set(table, key) => {
                Origin::Config(path.clone(), format!("[{table}] {key}"))
            }
            _ => Origin::Default,
        }
    }

    /// The read-only decision, made here only: any of `--read-only`, the config's
    /// `[tui] read_only` and the inventory's `read_only` makes the session read-only.
    pub fn read_only(&self, flag: bool, inventory: Option<&Inventory>) -> ReadOnlySources {
        ReadOnlySources {
            flag,
            config: self.config.tui.read_only,
            inventory: inventory.is_some_and(|i| i.read_only),
        }
    }

    /// The state folder (rollout journals and locks).
    ///
    /// Errors: no folder could be worked out (no home folder and no `--state-dir`).
    pub fn state_dir(&self) -> anyhow::Result<PathBuf> {
        self.paths
            .state_dir
            .clone()
            .ok_or_else(|| anyhow::anyhow!("no state folder (no home folder?): set --state-dir"))
    }

    /// The runtime's worker threads asked for: `--workers`, else `[ssh] workers`; `None`: the
    /// default ([`crate::rt::default_workers`]).
    pub fn workers(&self) -> Option<usize> {
        self.workers.or(self.config.ssh.workers)
    }

    /// The rollout journal of the state folder (`<state>/journal.jsonl`), whose drained nodes
    /// a scan marks; `None` without a state folder.
    pub fn journal_path(&self) -> Option<PathBuf> {
        self.paths
            .state_dir
            .as_ref()
            .map(|d| d.join("journal.jsonl"))
    }

    /// The clock-skew allowance of a merge of collected files: `--clock-skew`, else the
    /// config's `[collected] clock_skew`, else 600 s (origin: [`Settings::origin`] with
    /// `clock_skew`, `collected`, `clock_skew`).
    pub fn clock_skew(&self, flag: Option<Duration>) -> Duration {
        flag.unwrap_or(Duration::from_secs(self.config.collected.clock_skew))
    }

    /// What a scan reads, decided here once for `snapshot`, `tui` and plain `gpufleet`: the
    /// `from` files (`--from`), else the inventory's selected nodes over SSH, else this machine
    /// (`--root`, `--name`). Returns the inventory too, when one was read (read-only sources,
    /// upgrades).
    ///
    /// Errors: `--from` with an explicit inventory; an unreadable `--from` file (escaped); as
    /// [`Settings::inventory`]'s, [`Settings::scan`]'s, [`Settings::local_root`]'s and
    /// [`Settings::local_name`]'s.
    pub fn source(
        &self,
        args: &ScanArgs,
        from: &[PathBuf],
        clock_skew: Option<Duration>,
        mut probe: ProbeSettings,
    ) -> anyhow::Result<(Source, Option<Inventory>)> {
        use crate::fleet::scan::{Files, Fleet, Local};
        if !from.is_empty() {
            // `--from` reads files, not an inventory: one named by `-i` or $GPUFLEET_INVENTORY
            // is a usage error (a default inventory file is ignored).
            if self.explicit_inventory() {
                anyhow::bail!(
                    "--from shows collected snapshots; it takes no inventory (-i or $GPUFLEET_INVENTORY)"
                );
            }
            let files = Files::read(from.to_vec(), self.clock_skew(clock_skew))
                .map_err(|e| anyhow::anyhow!("{}", crate::model::text::terminal_safe(&e)))?;
            // Said once, before any output (or the TUI) starts.
            crate::snapshot::collected::say_findings(&files.findings);
            if files.names.is_empty() {
                anyhow::bail!(
                    "--from: no node report in {}: nothing to show",
                    from.iter()
                        .map(
                            |f| crate::model::text::terminal_safe(&f.display().to_string())
                                .into_owned()
                        )
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            return Ok((Source::Files(files), None));
        }
        match self.inventory(args)? {
            None => {
                probe.root = Settings::local_root(args)?;
                Ok((
                    Source::Local(Local {
                        name: Settings::local_name(args)?,
                        settings: probe,
                        thresholds: self.config.thresholds(),
                    }),
                    None,
                ))
            }
            Some(inv) => {
                let (scan, nodes) = self.scan(args, &inv, probe)?;
                let fleet = Fleet {
                    scan,
                    nodes,
                    journal: self.journal_path(),
                    schedulers: Some(std::sync::Arc::new(
                        crate::fleet::scheduler::Schedulers::new(
                            self.config.upgrade.unavailable_taints.clone(),
                        ),
                    )),
                };
                Ok((Source::Fleet(fleet), Some(inv)))
            }
        }
    }

    /// Theme `name`: `<config dir>/themes/NAME.toml` when that file exists, else a built-in
    /// theme; `no_color` drops colours (`NO_COLOR`).
    ///
    /// Errors: the file cannot be read, or is not a theme (file and line), or no such theme.
    pub fn theme(&self, name: &str, no_color: bool) -> anyhow::Result<crate::ui::Theme> {
        let path = crate::config::config_dir()
            .map(|d| d.join("themes").join(format!("{name}.toml")))
            .filter(|p| p.exists());
        let text = match &path {
            Some(p) => Some(
                crate::limits::read_to_string(p, crate::limits::Kind::Config)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?,
            ),
            None => None,
        };
        let origin = path.as_ref().map(|p| p.display().to_string());
        let user = text.as_deref().zip(origin.as_deref());
        crate::ui::Theme::resolve(name, user, no_color).map_err(anyhow::Error::msg)
    }

    /// The SSH settings: the config's `[ssh]` with the flags applied.
    pub fn ssh(&self, args: &ScanArgs) -> SshSettings {
        let mut ssh = self.config.ssh_settings();
        if let Some(c) = args.concurrency {
            ssh.concurrency = c as usize;
            ssh.concurrency_fixed = true;
        }
        if let Some(c) = args.connect_timeout {
            ssh.connect_timeout = Duration::from_secs(c);
            ssh.flags.connect_timeout = true;
        }
        if let Some(p) = args.host_key_policy {
            ssh.host_key_policy = p.into();
            ssh.flags.host_key_policy = true;
        }
        ssh
    }

    /// The inventory to scan: `-i`/`$GPUFLEET_INVENTORY` must exist; the default one is used when
    /// it exists; otherwise `None` (local mode).
    pub fn inventory(&self, args: &ScanArgs) -> anyhow::Result<Option<Inventory>> {
        let (paths, explicit) = (&self.paths, self.explicit_inventory());
        if args.local {
            return Ok(None);
        }
        let Some(path) = &paths.inventory else {
            return Ok(None);
        };
        let using = explicit || path.exists();
        if using && let Some(root) = &args.root {
            anyhow::bail!(
                "--root {} applies to local mode; with an inventory, set `root` for the nodes in {}",
                root.display(),
                path.display()
            );
        }
        if using && args.name.is_some() {
            anyhow::bail!(
                "--name applies to local mode (--local); the inventory {} names its nodes",
                path.display()
            );
        }
        if !explicit && !path.exists() {
            if !args.select.selection().is_empty() {
                anyhow::bail!("--node, --group and --label need an inventory (-i FILE)");
            }
            return Ok(None);
        }
        Ok(Some(super::inventory_list::load(
            paths,
            path,
            Self::ssh_config(paths)?.as_ref(),
        )?))
    }

    /// The OpenSSH client config to read: `--ssh-config FILE` (an error if it does not parse),
    /// `none`, or ~/.ssh/config when it exists (a warning if it does not parse). Without
    /// `--ssh-config`, where ssh would also read /etc/ssh/ssh_config, a warning when that file
    /// sets what gpufleet would honour ([`crate::inventory::ssh_config::system_config_warning`]).
    fn ssh_config(
        paths: &Paths,
    ) -> anyhow::Result<Option<crate::inventory::ssh_config::ClientConfig>> {
        if paths.ssh_config.is_none()
            && let Some(w) = crate::inventory::ssh_config::system_config_warning(
                std::path::Path::new(crate::inventory::ssh_config::SYSTEM_CONFIG),
            )
        {
            eprintln!(
                "gpufleet: warning: {}",
                crate::model::text::terminal_safe(&w)
            );
        }
        let (path, explicit) = match &paths.ssh_config {
            Some(p) if p.as_os_str() == "none" => return Ok(None),
            Some(p) => (p.clone(), true),
            None => match directories::BaseDirs::new().map(|b| b.home_dir().join(".ssh/config")) {
                Some(p) if p.exists() => (p, false),
                _ => return Ok(None),
            },
        };
        let parsed = crate::inventory::ssh_config::load(&path);
        match parsed {
            Ok((c, warnings)) => {
                for w in warnings {
                    eprintln!(
                        "gpufleet: warning: {}",
                        crate::model::text::terminal_safe(&w)
                    );
                }
                Ok(Some(c))
            }
            // The config's text may be hostile: its errors quote it.
            Err(e) if explicit => {
                anyhow::bail!("--ssh-config {}", crate::model::text::terminal_safe(&e))
            }
            Err(e) => {
                eprintln!(
                    "gpufleet: warning: {}; not used",
                    crate::model::text::terminal_safe(&e)
                );
                Ok(None)
            }
        }
    }

    /// Probe settings from the config with the flags applied.
    ///
    /// Errors: the nvidia-smi limit is not shorter than the node deadline.
    pub fn probe(&self, args: &ScanArgs) -> anyhow::Result<ProbeSettings> {
        let mut settings = self.config.probe_settings();
        if let Some(s) = args.nvidia_smi_timeout {
            settings.nvidia_smi_timeout_secs = s;
        }
        if let Some(s) = args.deadline {
            settings.deadline = Duration::from_secs(s);
            // A shorter deadline alone brings the nvidia-smi limit (from the config) down with it.
            if args.nvidia_smi_timeout.is_none() && s >= 2 && settings.nvidia_smi_timeout_secs >= s
            {
                settings.nvidia_smi_timeout_secs = s - 1;
            }
        }
        if settings.nvidia_smi_timeout_secs >= settings.deadline.as_secs() {
            anyhow::bail!(
                "the nvidia-smi time limit ({} s) must be shorter than the node deadline ({} s): see --nvidia-smi-timeout and --deadline",
                settings.nvidia_smi_timeout_secs,
                settings.deadline.as_secs()
            );
        }
        Ok(settings)
    }

    /// Local mode's root folder: `--root`, else `/`; it must hold a `proc/` folder.
    pub fn local_root(args: &ScanArgs) -> anyhow::Result<PathBuf> {
        let root = args.root.clone().unwrap_or_else(|| PathBuf::from("/"));
        if !root.is_dir() {
            anyhow::bail!("--root {}: not a folder", root.display());
        }
        if !root.join("proc").is_dir() {
            anyhow::bail!(
                "--root {}: no proc/ folder in it; it should be a node's root filesystem (such as /host)",
                root.display()
            );
        }
        Ok(root)
    }

    /// Local mode's node name: `--name`, else `$NODE_NAME` (set from the pod's
    /// `spec.nodeName` by a DaemonSet), else `$SLURMD_NODENAME` (set by slurmd for a job step),
    /// else `None` (the report takes the node's hostname). Empty variables are skipped.
    ///
    /// Errors: a name that is empty or holds whitespace or control characters (it would not
    /// be one node name in tables, CSV or Prometheus labels); the error names its origin.
    pub fn local_name(args: &ScanArgs) -> anyhow::Result<Option<String>> {
        let from_env = |var: &'static str| {
            std::env::var_os(var)
                .filter(|v| !v.is_empty())
                .map(|v| (v.to_string_lossy().into_owned(), format!("${var}")))
        };
        let found = match &args.name {
            Some(n) => Some((n.clone(), "--name".to_string())),
            None => from_env("NODE_NAME").or_else(|| from_env("SLURMD_NODENAME")),
        };
        let Some((name, origin)) = found else {
            return Ok(None);
        };
        if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            anyhow::bail!(
                "{origin} {}: not a node name (empty, or whitespace or control characters in it)",
                crate::model::text::terminal_safe(&format!("{name:?}"))
            );
        }
        Ok(Some(name))
    }

    /// The selected nodes and a scan over them, with SSH settings, host keys and thresholds.
    ///
    /// Errors: a selector that matches nothing or is malformed; an unreadable known_hosts file.
    pub fn scan(
        &self,
        args: &ScanArgs,
        inv: &Inventory,
        settings: ProbeSettings,
    ) -> anyhow::Result<(Arc<Scan>, Vec<Node>)> {
        let paths = &self.paths;
        let thresholds = self.config.thresholds();
        let selected: Vec<_> = args
            .select
            .selection()
            .apply(inv)
            .map_err(anyhow::Error::msg)?
            .into_iter()
            .cloned()
            .collect();
        let ssh = self.ssh(args);
        let mut files: Vec<PathBuf> = Paths::user_known_hosts().into_iter().collect();
        files.extend(inv.known_hosts.clone());
        files.extend(paths.known_hosts.clone());
        let learn_to = inv
            .known_hosts
            .clone()
            .or_else(|| paths.known_hosts.clone());
        let db = KnownHosts::load(&files, learn_to)?;
        if let Some(w) = db.warning() {
            eprintln!("gpufleet: warning: {w}");
        }
        for (f, line) in db.skipped.iter().take(3) {
            eprintln!(
                "gpufleet: warning: {}:{line}: not a known_hosts line; skipped",
                f.display()
            );
        }
        let keeping: Vec<PathBuf> = inv
            .known_hosts
            .iter()
            .chain(&paths.known_hosts)
            .cloned()
            .collect();
        let keys = Arc::new(HostKeys::new(db, ssh.host_key_policy).keeping(keeping));
        let scan = Arc::new(Scan {
            probe: settings,
            ssh,
            keys,
            thresholds,
            adapted: Default::default(),
        });
        Ok((scan, selected))
    }
}

/// Which nodes and how to probe them (shared by `snapshot` and `tui`).
#[derive(Debug, Args, Default, Clone)]
pub struct ScanArgs {
    /// Probe this machine, even when an inventory is configured
    #[arg(long, conflicts_with_all = ["node", "group", "label"])]
    pub local: bool,

    /// Local mode: read every probed path under DIR (a host filesystem mounted elsewhere) [default: /]
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,

    /// Local mode: the node's name in its report [default: $NODE_NAME, then $SLURMD_NODENAME,
    /// then the node's hostname] (a pod's hostname is the pod's, not the node's)
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,

    #[command(flatten)]
    pub select: super::SelectArgs,

    /// Time limit of each nvidia-smi call, in seconds [default: 10, or the config's]
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub nvidia_smi_timeout: Option<u64>,

    /// Deadline for the whole probe of one node, in seconds [default: 60, or the config's]
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub deadline: Option<u64>,

    /// Most nodes probed at once, a fixed cap [default: adaptive from 256 up to 4096, or the config's]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub concurrency: Option<u64>,

    /// Seconds to resolve each node's name and open its TCP connection [default: 10, or the config's]
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub connect_timeout: Option<u64>,

    /// Unknown host keys: refuse (strict) or learn (accept-new); changed keys are always refused
    #[arg(long, value_enum, value_name = "POLICY")]
    pub host_key_policy: Option<HostKeyPolicyArg>,
}
