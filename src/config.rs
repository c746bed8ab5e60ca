//! `config.toml`: thresholds and probe limits.
//!
//! Location: `--config FILE`, else `$GPUFLEET_CONFIG`, else `config.toml` in the XDG config
//! folder (`~/.config/gpufleet/` on Linux, from the `directories` crate). A missing file at the
//! default location means defaults; a missing file named explicitly is an error. Errors name the
//! file, line and column.

mod max_unavailable;
pub use max_unavailable::{MaxUnavailable, MaxUnavailableError};

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::diag;
use crate::model::{MajorMinor, Thresholds};
use crate::probe::ProbeSettings;
use crate::probe::ssh::{HostKeyPolicy, SshSettings};

/// The parsed config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub assessment: AssessmentConfig,
    #[serde(default)]
    pub probe: ProbeConfig,
    #[serde(default)]
    pub ssh: SshConfig,
    #[serde(default)]
    pub tui: TuiConfig,
    /// Key overrides: action name → keys (see `gpufleet tui`'s help overlay for the names).
    #[serde(default)]
    pub keys: std::collections::BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub upgrade: UpgradeConfig,
    #[serde(default)]
    pub collected: CollectedConfig,
    /// Upgrade recipes by name; inventory groups pick one with `recipe = "NAME"`.
    #[serde(default)]
    pub recipes: std::collections::BTreeMap<String, Recipe>,
    /// The file this config was read from (`None`: defaults, no file).
    #[serde(skip)]
    pub source: Option<PathBuf>,
    /// The `table.key` pairs the file sets (for `gpufleet config show`'s origins).
    #[serde(skip)]
    pub keys_set: std::collections::BTreeSet<String>,
}

/// A gate a node must pass after its upgrade before it is uncordoned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Gate {
    /// The open kernel module is loaded.
    OpenModule,
    /// nvidia-peermem is neither loaded nor configured to load at boot.
    NoPeermem,
    /// nvidia-smi answers (no mismatch, failure, timeout or uninitialized GPU).
    NvidiaSmiHealthy,
    /// The kernel supports DMA-BUF (`dma_buf.kernel_support` is true).
    DmabufKernel,
    /// No reason of severity error.
    NoErrors,
    /// The kernel the next reboot starts has an nvidia.ko (or the node has no host driver to
    /// check): the node survives its next reboot too.
    NextBootHasDriver,
    /// On a canary: the recipe's `nccl_test` command, run on the canary with NCCL_DEBUG=INFO,
    /// proves from its NCCL log that GPUDirect RDMA ran over DMA-BUF there (docs/domain.md,
    /// "The nccl-dmabuf gate"). Opt-in: not in the default gates.
    NcclDmabuf,
}

impl Gate {
    /// The default gates (every gate that needs nothing beyond the re-probe; `nccl-dmabuf`,
    /// which needs a recipe's `nccl_test`, is opt-in).
    pub const ALL: [Gate; 6] = [
        Gate::OpenModule,
        Gate::NoPeermem,
        Gate::NvidiaSmiHealthy,
        Gate::DmabufKernel,
        Gate::NoErrors,
        Gate::NextBootHasDriver,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Gate::OpenModule => "open-module",
            Gate::NoPeermem => "no-peermem",
            Gate::NvidiaSmiHealthy => "nvidia-smi-healthy",
            Gate::DmabufKernel => "dmabuf-kernel",
            Gate::NoErrors => "no-errors",
            Gate::NextBootHasDriver => "next-boot-has-driver",
            Gate::NcclDmabuf => "nccl-dmabuf",
        }
    }
}

/// `[upgrade]`: rollouts. Times in seconds (`900` or `"15m"`: [`crate::duration::parse_secs`]).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpgradeConfig {
    /// Nodes out of service at once (1): `N`, or `"P%"` of the selected nodes (at least 1);
    /// nodes already drained or down and nodes locked by other rollouts count against it
    /// (docs/domain.md, "The unavailability budget").
    pub max_unavailable: MaxUnavailable,
    /// Failed nodes tolerated before the rollout stops (0: the first failure stops it).
    pub max_failures: usize,
    /// How long a drain may take (900).
    #[serde(deserialize_with = "crate::duration::de_secs")]
    pub drain_timeout: u64,
    /// How long one recipe step may run (1800).
    #[serde(deserialize_with = "crate::duration::de_secs")]
    pub step_timeout: u64,
    /// Seconds a node may take after its reboot step to answer with a new boot identity (900);
    /// past it, the node stops there, drained (docs/domain.md, "Proven reboots").
    #[serde(deserialize_with = "crate::duration::de_secs")]
    pub reboot_timeout: u64,
    /// Gates checked after the re-probe, before the uncordon (all of them).
    pub gates: Vec<Gate>,
    /// A command run here (`sh -c`) when a node of a rollout fails, with the node and the
    /// rollout only in its environment (`GPUFLEET_ROLLOUT`, `GPUFLEET_NODE`, `GPUFLEET_STEP`,
    /// `GPUFLEET_STATE`, `GPUFLEET_REASON`), never in its text; journaled (`hook:on_failure`).
    pub on_failure: Option<String>,
    /// As `on_failure`, when a node was upgraded (`hook:on_success`).
    pub on_success: Option<String>,
    /// Kubernetes taint keys that take a node out of service, besides the
    /// `node.kubernetes.io/*` condition taints (empty): a node carrying one is left alone like
    /// a cordoned one (docs/domain.md, "Drains that respect what was there").
    pub unavailable_taints: Vec<String>,
    /// `--include-drained`: nodes already out of service are upgraded too, and never given back
    /// (not a config key).
    #[serde(skip)]
    pub include_drained: bool,
}

impl Default for UpgradeConfig {
    fn default() -> Self {
        UpgradeConfig {
            max_unavailable: MaxUnavailable::Count(1),
            max_failures: 0,
            drain_timeout: 900,
            step_timeout: 1800,
            reboot_timeout: 900,
            gates: Gate::ALL.to_vec(),
            on_failure: None,
            on_success: None,
            unavailable_taints: Vec::new(),
            include_drained: false,
        }
    }
}

/// An upgrade recipe: steps run over SSH in order.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Recipe {
    /// Run each step with `sudo -n` (no password prompt: it fails instead of hanging).
    #[serde(default)]
    pub sudo: bool,
    pub steps: Vec<RecipeStep>,
    /// The driver version the recipe installs (`580.95.05`, or a branch: `580`); optional.
    /// The plan refuses a node with a GPU whose architecture's last branch
    /// (data/driver-branches.toml) is below it, before anything runs.
    #[serde(default)]
    pub driver_version: Option<String>,
    /// The `nccl-dmabuf` gate's test (a shell command line run on each canary, as the login
    /// user, with `NCCL_DEBUG=INFO` exported; `{node}` and `{root}` replaced as in steps, e.g.
    /// `mpirun -H {node},gpu-ref-01 -x NCCL_DEBUG all_reduce_perf -b 1G -e 1G`): its output,
    /// stdout and stderr, is read as the NCCL log.
    #[serde(default)]
    pub nccl_test: Option<String>,
}

/// One recipe step. `run` is a shell command line on the node; `{node}`, `{root}` and
/// `{branch}` (the loaded driver's major version, such as 535) are replaced, shell-quoted.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RecipeStep {
    pub name: String,
    pub run: String,
    /// The step reboots the node: its connection may drop; gpufleet then waits for SSH.
    #[serde(default)]
    pub reboot: bool,
    /// Opt-in: past this many seconds (`600` or `"10m"`) the step's process group is killed on
    /// the node (TERM, then KILL 10 s later) and the step fails, journaled. Without it a step
    /// is never killed: past `step_timeout` gpufleet stops waiting, the step goes on there.
    #[serde(default, deserialize_with = "crate::duration::de_opt_secs")]
    pub kill_after: Option<u64>,
}

/// `[tui]`: the interactive fleet matrix.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TuiConfig {
    /// Theme name: built in `default`, `light`, `high-contrast`, or `<config dir>/themes/NAME.toml`.
    pub theme: String,
    /// Read-only fleet view (any source saying read-only wins).
    pub read_only: bool,
    /// Rescan every N seconds after a scan ends (off when absent).
    pub refresh: Option<u64>,
}

impl Default for TuiConfig {
    fn default() -> Self {
        TuiConfig {
            theme: "default".into(),
            read_only: false,
            refresh: None,
        }
    }
}

/// `[ssh]`: fleet scans. Times in seconds.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SshConfig {
    /// Nodes probed at once. Unset: adaptive, from 256 up to 4,096 (`probe::pace`; a session
    /// waits on about 8 network round trips, so over a WAN of 50 ms 1,000 nodes need about 256
    /// at once to finish in 2 s). Set: a fixed cap the scan never passes. Either way lowered
    /// with a message to what the open-files limit holds.
    pub concurrency: usize,
    /// Worker threads of the runtime (scans, the TUI's scans, the simulator); unset: the CPUs
    /// this process may use, at most 8 ([`crate::rt::default_workers`]).
    pub workers: Option<usize>,
    /// Name resolution + TCP connect limit (10).
    pub connect_timeout: u64,
    /// SSH handshake + login limit (15).
    pub auth_timeout: u64,
    /// Keepalive interval (15); 3 unanswered keepalives drop the connection.
    pub keepalive: u64,
    /// `strict` (refuse unknown host keys) or `accept-new` (learn them; changed keys are
    /// always refused).
    pub host_key_policy: HostKeyPolicy,
}

impl Default for SshConfig {
    fn default() -> Self {
        let d = SshSettings::default();
        SshConfig {
            concurrency: d.concurrency,
            workers: None,
            connect_timeout: d.connect_timeout.as_secs(),
            auth_timeout: d.auth_timeout.as_secs(),
            keepalive: d.keepalive.as_secs(),
            host_key_policy: d.host_key_policy,
        }
    }
}

/// `[assessment]`: thresholds of docs/domain.md's rules, as "major.minor" text. The config may
/// give a string (`"5.12"`) or a bare number, read by its raw token (`6.10` is 6.10, not the
/// float 6.1): see [`version_tokens`].
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AssessmentConfig {
    /// Hard minimum kernel for DMA-BUF RDMA (NVIDIA docs: 5.12).
    #[serde(deserialize_with = "version_text")]
    pub dmabuf_min_kernel: String,
    /// Advisory kernel guideline (6.0).
    #[serde(deserialize_with = "version_text")]
    pub kernel_guideline: String,
    /// Lowest compute capability the open modules support (7.5).
    #[serde(deserialize_with = "version_text")]
    pub open_min_compute_capability: String,
    /// Compute capability from which GPUs require the open modules (10.0).
    #[serde(deserialize_with = "version_text")]
    pub open_required_compute_capability: String,
}

/// The `[assessment]` keys that hold versions.
const VERSION_KEYS: [&str; 4] = [
    "dmabuf_min_kernel",
    "kernel_guideline",
    "open_min_compute_capability",
    "open_required_compute_capability",
];

/// A version threshold as text: a string as written, or a number (the float's digits are
/// replaced by its raw token afterwards, in [`Config::parse`]).
fn version_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Text {
        S(String),
        I(i64),
        F(f64),
    }
    match Text::deserialize(d) {
        Ok(Text::S(s)) => Ok(s),
        Ok(Text::I(i)) => Ok(i.to_string()),
        Ok(Text::F(f)) => Ok(f.to_string()),
        Err(_) => Err(serde::de::Error::custom(
            "expected a version such as \"5.12\" (a string or a number)",
        )),
    }
}

/// The raw tokens of the `[assessment]` versions given as bare numbers (`6.10` stays `6.10`:
/// TOML reads it as the float 6.1), by key.
fn version_tokens(text: &str) -> Vec<(&'static str, String)> {
    use toml::de::{DeTable, DeValue};
    let Ok(doc) = DeTable::parse(text) else {
        return Vec::new();
    };
    let Some((_, table)) = doc
        .get_ref()
        .iter()
        .find(|(k, _)| k.get_ref() == "assessment")
    else {
        return Vec::new();
    };
    VERSION_KEYS
        .iter()
        .filter_map(|key| match table.get_ref().get(*key).map(|v| v.get_ref()) {
            Some(DeValue::Float(f)) => Some((*key, f.as_str().to_string())),
            Some(DeValue::Integer(i)) => Some((*key, i.as_str().to_string())),
            _ => None,
        })
        .collect()
}

impl Default for AssessmentConfig {
    fn default() -> Self {
        let t = Thresholds::default();
        AssessmentConfig {
            dmabuf_min_kernel: t.dmabuf_min_kernel.to_string(),
            kernel_guideline: t.kernel_guideline.to_string(),
            open_min_compute_capability: t.open_min_compute_capability.to_string(),
            open_required_compute_capability: t.open_required_compute_capability.to_string(),
        }
    }
}

/// `[probe]`: limits, in seconds.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProbeConfig {
    /// Time limit of each nvidia-smi call (10).
    pub nvidia_smi_timeout: u64,
    /// Deadline for the whole probe of one node (60).
    pub deadline: u64,
    /// Kernel log lines kept, the last ones (200; docs/domain.md "kernel log").
    pub kernel_log_lines: u64,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        let p = ProbeSettings::default();
        ProbeConfig {
            nvidia_smi_timeout: p.nvidia_smi_timeout_secs,
            deadline: p.deadline.as_secs(),
            kernel_log_lines: p.kernel_log_lines,
        }
    }
}

/// `[collected]`: merging snapshots collected elsewhere (docs/domain.md "Collected snapshots").
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CollectedConfig {
    /// How far after this machine's now a report's `scanned_at` may be, in seconds, before it
    /// is a merge finding and never preferred (600; 0 to a day).
    pub clock_skew: u64,
}

impl Default for CollectedConfig {
    fn default() -> Self {
        CollectedConfig {
            clock_skew: crate::snapshot::collected::DEFAULT_CLOCK_SKEW.as_secs(),
        }
    }
}

/// Largest accepted time limit, in seconds (a day).
pub const MAX_SECS: u64 = 86_400;
/// Largest accepted number of nodes probed at once.
pub const MAX_CONCURRENCY: u64 = 10_000;
/// The most worker threads `[ssh] workers` and `--workers` take.
pub const MAX_WORKERS: u64 = 256;
/// Most kernel log lines a probe may keep (each node's output is capped at 1 MiB anyway).
pub const MAX_KERNEL_LOG_LINES: u64 = 5_000;

/// Why a config file was refused. Each says where: `file:line:column: message` (the line and
/// column of the key's first mention; `1:1` when the text does not name it), or `file: message`
/// for a rule across keys.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read (it exists, or was named with `--config`).
    #[error("{}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Not TOML, or a key of the wrong type or unknown: the message of
    /// [`diag::toml_error`], already `file:line:column: …` with the line shown.
    #[error("{0}")]
    Toml(String),
    /// A number out of its range: `[table] key = value` is not within `min..=max`.
    #[error("{}:{line}:{col}: [{table}] {key} = {value}: must be between {min} and {max}", path.display())]
    OutOfRange {
        path: PathBuf,
        line: usize,
        col: usize,
        table: &'static str,
        key: &'static str,
        value: u64,
        min: u64,
        max: u64,
    },
    /// An `[assessment]` version threshold that is not `major.minor`; `reason` is the
    /// version parser's message.
    #[error("{}:{line}:{col}: [assessment] {key}: {reason}", path.display())]
    Threshold {
        path: PathBuf,
        line: usize,
        col: usize,
        key: String,
        reason: String,
    },
    /// A recipe's `driver_version` that is not a driver version or a branch.
    #[error(
        "{}:{line}:{col}: [recipes.{recipe}] driver_version = {value:?}: not a driver version \
         (580.95.05, or a branch: 580)",
        path.display()
    )]
    DriverVersion {
        path: PathBuf,
        line: usize,
        col: usize,
        recipe: String,
        value: String,
    },
    /// `[upgrade] max_unavailable = 0`.
    #[error("{}: [upgrade] max_unavailable must be at least 1", path.display())]
    NoUnavailability { path: PathBuf },
    /// `[upgrade] drain_timeout = 0` (kubectl drain reads `--timeout=0s` as no timeout).
    #[error(
        "{}:{line}:{col}: [upgrade] drain_timeout = 0: must be at least 1 s (kubectl drain \
         reads --timeout=0s as no timeout: a drain that cannot finish would wait forever)",
        path.display()
    )]
    NoDrainTimeout {
        path: PathBuf,
        line: usize,
        col: usize,
    },
    /// `[upgrade] gates = []`: a node would be uncordoned without any check.
    #[error("{}: [upgrade] gates is empty: a node would be uncordoned without any check", path.display())]
    NoGates { path: PathBuf },
    /// `[probe] nvidia_smi_timeout` is not shorter than `[probe] deadline` (seconds).
    #[error(
        "{}: [probe] nvidia_smi_timeout ({smi} s) must be shorter than deadline ({deadline} s)",
        path.display()
    )]
    SmiTimeout {
        path: PathBuf,
        smi: u64,
        deadline: u64,
    },
}

/// The XDG config folder (`~/.config/gpufleet`), where user themes live in `themes/`.
pub fn config_dir() -> Option<PathBuf> {
    dirs().map(|d| d.config_dir().to_path_buf())
}

/// The default config path: `<XDG config dir>/gpufleet/config.toml`.
pub fn default_config_path() -> Option<PathBuf> {
    dirs().map(|d| d.config_dir().join("config.toml"))
}

fn dirs() -> Option<directories::ProjectDirs> {
    directories::ProjectDirs::from("", "", "gpufleet")
}

/// Where gpufleet keeps its files (XDG folders from the `directories` crate), each
/// overridable by a flag and an environment variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// `--config`, `$GPUFLEET_CONFIG`, `~/.config/gpufleet/config.toml`.
    pub config: Option<PathBuf>,
    /// `-i/--inventory`, `$GPUFLEET_INVENTORY`, `~/.config/gpufleet/inventory.toml`.
    pub inventory: Option<PathBuf>,
    /// gpufleet's own known_hosts: `--known-hosts`, `$GPUFLEET_KNOWN_HOSTS`,
    /// `~/.local/share/gpufleet/known_hosts`. Read with ~/.ssh/known_hosts; `accept-new` writes
    /// here unless the inventory names its own file.
    pub known_hosts: Option<PathBuf>,
    /// `--state-dir`, `$GPUFLEET_STATE_DIR`, `~/.local/state/gpufleet` (rollout journals).
    pub state_dir: Option<PathBuf>,
    /// `--ssh-config`, `$GPUFLEET_SSH_CONFIG`; `None` means ~/.ssh/config when it exists.
    pub ssh_config: Option<PathBuf>,
    /// `--inventory-format`: the kind of the `-i` file; `None`: detected.
    pub inventory_format: Option<crate::inventory::source::InventoryFormat>,
}

impl Paths {
    /// Resolves each path: the given value (flag or environment, as clap merged them), else the
    /// XDG default.
    pub fn resolve(
        config: Option<PathBuf>,
        inventory: Option<PathBuf>,
        known_hosts: Option<PathBuf>,
        state_dir: Option<PathBuf>,
    ) -> Paths {
        let d = dirs();
        Paths {
            config: config.or_else(default_config_path),
            inventory: inventory
                .or_else(|| d.as_ref().map(|d| d.config_dir().join("inventory.toml"))),
            known_hosts: known_hosts
                .or_else(|| d.as_ref().map(|d| d.data_dir().join("known_hosts"))),
            ssh_config: None,
            inventory_format: None,
            state_dir: state_dir.or_else(|| {
                d.as_ref()
                    .map(|d| d.state_dir().unwrap_or(d.data_local_dir()).to_path_buf())
            }),
        }
    }

    /// ~/.ssh/known_hosts, as OpenSSH reads it.
    pub fn user_known_hosts() -> Option<PathBuf> {
        directories::BaseDirs::new().map(|b| b.home_dir().join(".ssh/known_hosts"))
    }
}

impl Config {
    /// Parses config text; `path` is only used in messages.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let mut cfg: Config = toml::from_str(text).map_err(|e| {
            ConfigError::Toml(diag::toml_error(&path.display().to_string(), text, &e))
        })?;
        if let Ok(table) = text.parse::<toml::Table>() {
            for (name, value) in &table {
                match value.as_table() {
                    Some(t) => cfg.keys_set.extend(t.keys().map(|k| format!("{name}.{k}"))),
                    None => {
                        cfg.keys_set.insert(name.clone());
                    }
                }
            }
        }
        cfg.source = Some(path.to_path_buf());
        for (key, token) in version_tokens(text) {
            let a = &mut cfg.assessment;
            let field = match key {
                "dmabuf_min_kernel" => &mut a.dmabuf_min_kernel,
                "kernel_guideline" => &mut a.kernel_guideline,
                "open_min_compute_capability" => &mut a.open_min_compute_capability,
                _ => &mut a.open_required_compute_capability,
            };
            *field = token;
        }
        cfg.thresholds_checked(text, path)?;
        let s = &cfg.ssh;
        let secs = [
            ("probe", "nvidia_smi_timeout", cfg.probe.nvidia_smi_timeout),
            ("probe", "deadline", cfg.probe.deadline),
            ("ssh", "connect_timeout", s.connect_timeout),
            ("ssh", "auth_timeout", s.auth_timeout),
            ("ssh", "keepalive", s.keepalive),
        ];
        let counts = [
            ("ssh", "concurrency", s.concurrency as u64, MAX_CONCURRENCY),
            // Unset is the default; a set value is checked like the others.
            (
                "ssh",
                "workers",
                s.workers.map_or(1, |w| w as u64),
                MAX_WORKERS,
            ),
            (
                "probe",
                "kernel_log_lines",
                cfg.probe.kernel_log_lines,
                MAX_KERNEL_LOG_LINES,
            ),
        ];
        for (table, key, v, max) in secs
            .iter()
            .map(|(t, k, v)| (*t, *k, *v, MAX_SECS))
            .chain(counts)
        {
            if v == 0 || v > max {
                let (line, col) = text
                    .find(key)
                    .map_or((1, 1), |off| diag::line_col(text, off));
                return Err(ConfigError::OutOfRange {
                    path: path.to_path_buf(),
                    line,
                    col,
                    table,
                    key,
                    value: v,
                    min: 1,
                    max,
                });
            }
        }
        if cfg.collected.clock_skew > MAX_SECS {
            let (line, col) = text
                .find("clock_skew")
                .map_or((1, 1), |off| diag::line_col(text, off));
            return Err(ConfigError::OutOfRange {
                path: path.to_path_buf(),
                line,
                col,
                table: "collected",
                key: "clock_skew",
                value: cfg.collected.clock_skew,
                min: 0,
                max: MAX_SECS,
            });
        }
        if cfg.upgrade.max_unavailable == MaxUnavailable::Count(0) {
            return Err(ConfigError::NoUnavailability {
                path: path.to_path_buf(),
            });
        }
        if cfg.upgrade.drain_timeout == 0 {
            // kubectl drain reads `--timeout=0s` as "wait forever" (issue 22 item 5).
            let (line, col) = text
                .find("drain_timeout")
                .map_or((1, 1), |off| diag::line_col(text, off));
            return Err(ConfigError::NoDrainTimeout {
                path: path.to_path_buf(),
                line,
                col,
            });
        }
        if cfg.upgrade.gates.is_empty() {
            return Err(ConfigError::NoGates {
                path: path.to_path_buf(),
            });
        }
        for (name, r) in &cfg.recipes {
            if let Some(v) = &r.driver_version
                && crate::model::facts::branches::branch_of(v).is_none()
            {
                let (line, col) = text
                    .find("driver_version")
                    .map_or((1, 1), |off| diag::line_col(text, off));
                return Err(ConfigError::DriverVersion {
                    path: path.to_path_buf(),
                    line,
                    col,
                    recipe: name.clone(),
                    value: v.clone(),
                });
            }
        }
        if cfg.probe.nvidia_smi_timeout >= cfg.probe.deadline {
            return Err(ConfigError::SmiTimeout {
                path: path.to_path_buf(),
                smi: cfg.probe.nvidia_smi_timeout,
                deadline: cfg.probe.deadline,
            });
        }
        Ok(cfg)
    }

    /// Whether the config file sets `[table] key`.
    pub fn is_set(&self, table: &str, key: &str) -> bool {
        self.keys_set.contains(&format!("{table}.{key}"))
    }

    /// Loads `explicit` (must exist), else the default path if it exists, else defaults.
    pub fn load(explicit: Option<&Path>) -> Result<Config, ConfigError> {
        let (path, required) = match explicit {
            Some(p) => (p.to_path_buf(), true),
            None => match default_config_path() {
                Some(p) => (p, false),
                None => return Ok(Config::default()),
            },
        };
        match crate::limits::read_to_string(&path, crate::limits::Kind::Config) {
            Ok(text) => Config::parse(&text, &path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => {
                Ok(Config::default())
            }
            Err(source) => Err(ConfigError::Read { path, source }),
        }
    }

    fn thresholds_checked(&self, text: &str, path: &Path) -> Result<Thresholds, ConfigError> {
        let a = &self.assessment;
        let parse = |key: &str, v: &str| -> Result<MajorMinor, ConfigError> {
            v.parse().map_err(|e: String| {
                let (line, col) = text
                    .find(key)
                    .map_or((1, 1), |off| diag::line_col(text, off));
                ConfigError::Threshold {
                    path: path.to_path_buf(),
                    line,
                    col,
                    key: key.to_string(),
                    reason: e,
                }
            })
        };
        Ok(Thresholds {
            dmabuf_min_kernel: parse("dmabuf_min_kernel", &a.dmabuf_min_kernel)?,
            kernel_guideline: parse("kernel_guideline", &a.kernel_guideline)?,
            open_min_compute_capability: parse(
                "open_min_compute_capability",
                &a.open_min_compute_capability,
            )?,
            open_required_compute_capability: parse(
                "open_required_compute_capability",
                &a.open_required_compute_capability,
            )?,
        })
    }

    /// The thresholds (already validated by [`Config::parse`]).
    pub fn thresholds(&self) -> Thresholds {
        self.thresholds_checked("", Path::new("config"))
            .unwrap_or_default()
    }

    /// SSH settings from `[ssh]`.
    pub fn ssh_settings(&self) -> SshSettings {
        let s = &self.ssh;
        SshSettings {
            connect_timeout: Duration::from_secs(s.connect_timeout),
            auth_timeout: Duration::from_secs(s.auth_timeout),
            keepalive: Duration::from_secs(s.keepalive),
            host_key_policy: s.host_key_policy,
            concurrency: s.concurrency,
            concurrency_fixed: self.is_set("ssh", "concurrency"),
            flags: Default::default(),
        }
    }

    /// Probe settings from `[probe]`.
    pub fn probe_settings(&self) -> ProbeSettings {
        ProbeSettings {
            nvidia_smi_timeout_secs: self.probe.nvidia_smi_timeout,
            deadline: Duration::from_secs(self.probe.deadline),
            kernel_log_lines: self.probe.kernel_log_lines,
            ..ProbeSettings::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upgrade_timeouts_and_kill_after_take_either_form() {
        let u: UpgradeConfig = toml::from_str(
            "drain_timeout = \"15m\"\nstep_timeout = 1200\nreboot_timeout = \"1h\"\n",
        )
        .unwrap();
        assert_eq!(
            (u.drain_timeout, u.step_timeout, u.reboot_timeout),
            (900, 1200, 3600)
        );
        let e = toml::from_str::<UpgradeConfig>("step_timeout = \"soon\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"soon\" is not a duration in seconds"), "{e}");
        let s: RecipeStep =
            toml::from_str("name = \"x\"\nrun = \"true\"\nkill_after = \"10m\"\n").unwrap();
        assert_eq!(s.kill_after, Some(600));
        let s: RecipeStep = toml::from_str("name = \"x\"\nrun = \"true\"\n").unwrap();
        assert_eq!(s.kill_after, None);
    }

    #[test]
    fn example_config_parses_to_defaults() {
        let text = include_str!("../config/config.example.toml");
        let c = Config::parse(text, Path::new("config.example.toml")).unwrap();
        assert_eq!(c.thresholds(), Thresholds::default());
        assert_eq!(c.probe.nvidia_smi_timeout, 10);
    }

    #[test]
    fn typo_names_line_and_column() {
        let text = "[assessment]\ndmabuf_min_kernle = \"5.12\"\n";
        let e = Config::parse(text, Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("c.toml:2:1: unknown field `dmabuf_min_kernle`"),
            "{e}"
        );
    }

    /// Issue 13 item 6: a version threshold is a string (`"5.12"`) or a bare number read by its
    /// raw token (`6.10` is 6.10, not the float 6.1); anything else is an error at its line.
    #[test]
    fn version_thresholds_take_strings_and_numbers_by_their_raw_token() {
        let text = "[assessment]\ndmabuf_min_kernel = \"5.12\"\nkernel_guideline = 6.10\n\
                    open_min_compute_capability = 7.5\nopen_required_compute_capability = 10.0\n";
        let c = Config::parse(text, Path::new("c.toml")).unwrap();
        let t = c.thresholds();
        assert_eq!(t.dmabuf_min_kernel.to_string(), "5.12");
        assert_eq!(t.kernel_guideline.to_string(), "6.10");
        assert_eq!(t.open_min_compute_capability.to_string(), "7.5");
        assert_eq!(t.open_required_compute_capability.to_string(), "10.0");
        assert_eq!(c.assessment.kernel_guideline, "6.10");
        // 6.1 and 6.10 differ.
        let c = Config::parse("[assessment]\nkernel_guideline = 6.1\n", Path::new("c")).unwrap();
        assert_eq!(c.thresholds().kernel_guideline.to_string(), "6.1");
        assert!(c.thresholds().kernel_guideline < t.kernel_guideline);
        let e = Config::parse("[assessment]\nkernel_guideline = 6\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("c.toml:2:1: [assessment] kernel_guideline: \"6\" is not major.minor"),
            "{e}"
        );
        let e = Config::parse(
            "[assessment]\nkernel_guideline = true\n",
            Path::new("c.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("c.toml:2:") && e.contains("expected a version such as"),
            "{e}"
        );
    }

    #[test]
    fn bad_threshold_is_reported() {
        let text = "[assessment]\nkernel_guideline = \"six\"\n";
        let e = Config::parse(text, Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("c.toml:2:1: [assessment] kernel_guideline"),
            "{e}"
        );
    }

    #[test]
    fn zero_limits_are_rejected() {
        let e = Config::parse("[probe]\ndeadline = 0\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("c.toml:2:1: [probe] deadline = 0: must be between 1 and 86400"),
            "{e}"
        );
        let e = Config::parse(
            "[ssh]\nkeepalive = 18446744073709551615\n",
            Path::new("c.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("between 1 and 86400"), "{e}");
        let e = Config::parse("[probe]\nnvidia_smi_timeout = 90\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("shorter than deadline"), "{e}");
    }

    /// Issue 22 item 5: kubectl reads `drain --timeout=0s` as infinite, so 0 is refused.
    #[test]
    fn zero_drain_timeout_is_refused() {
        let e = Config::parse("[upgrade]\ndrain_timeout = 0\n", Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("c.toml:2:1: [upgrade] drain_timeout = 0: must be at least 1 s")
                && e.contains("kubectl drain reads --timeout=0s as no timeout"),
            "{e}"
        );
        let c = Config::parse("[upgrade]\ndrain_timeout = 1\n", Path::new("c.toml")).unwrap();
        assert_eq!(c.upgrade.drain_timeout, 1);
    }
}

#[cfg(test)]
mod recipe_tests {
    use super::*;

    #[test]
    fn shipped_recipes_parse() {
        let text = include_str!("../config/recipes.example.toml");
        let c = Config::parse(text, Path::new("recipes.example.toml")).unwrap();
        for name in ["ubuntu-open", "rhel-open"] {
            let r = &c.recipes[name];
            assert!(r.sudo);
            assert!(r.steps.last().unwrap().reboot, "{name} ends with a reboot");
            assert!(r.steps.iter().any(|s| s.run.contains("{branch}")));
        }
    }
}
