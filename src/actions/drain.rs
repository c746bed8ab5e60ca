//! Drain backends: the scheduler commands that take a node out of service before its upgrade
//! and give it back after. They run on this machine (the operator's kubectl, Slurm client or
//! own commands), never on the node.
//!
//! - kubernetes: `kubectl cordon -- NODE`, `kubectl drain --ignore-daemonsets
//!   --delete-emptydir-data --timeout=Ns -- NODE` (which waits for the pods to go),
//!   `kubectl uncordon -- NODE`; `--kubeconfig`/`--context` when set. The node name comes
//!   after `--`, so it is never read as an option (and it is an RFC 1123 subdomain:
//!   [`check_name`]).
//!   Before it, the node's GPU Operator upgrade labels are read ([`operator_guard_command`]):
//!   a node the Operator is upgrading, or is told to skip, is refused ([`operator_guard`]).
//! - slurm: `scontrol update NodeName=X State=DRAIN Reason="..."`, then `sinfo -h -N -n X -o %T`
//!   until it says `drained`; `scontrol update NodeName=X State=RESUME`.
//! - command: the inventory's own `drain`, `status` and `uncordon` shell commands with `{node}`.

use std::time::Duration;

use tokio::process::Command;

use super::permit::WritePermit;
use crate::inventory::{DrainBackend, DrainSpec, Node};
use crate::model::facts::gpu_operator::{UPGRADE_SKIP_LABEL, UPGRADE_STATE_LABEL};

/// A command line to run here: argv, or a shell command for `sh -c`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Local {
    Argv(Vec<String>),
    Shell(String),
}

impl std::fmt::Display for Local {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Local::Argv(a) => {
                let quoted: Vec<String> = a.iter().map(|s| quote_arg(s)).collect();
                f.write_str(&quoted.join(" "))
            }
            Local::Shell(s) => f.write_str(s),
        }
    }
}

/// `s` as a shell word: unchanged when it needs no quoting (letters, digits, `_@%+=:,./-`),
/// else quoted by shlex.
pub fn quote_arg(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c));
    if plain {
        s.to_string()
    } else {
        shlex::try_quote(s).map_or_else(|_| s.to_string(), |c| c.into_owned())
    }
}

/// The scheduler's name for `node`.
pub fn scheduler_name(spec: &DrainSpec, node: &Node) -> String {
    spec.node_name
        .as_ref()
        .map_or_else(|| node.name.clone(), |p| p.replace("{name}", &node.name))
}

pub(crate) fn kubectl(spec: &DrainSpec, args: &[&str]) -> Local {
    let mut v = vec!["kubectl".to_string()];
    if let Some(k) = &spec.kubeconfig {
        v.push(format!("--kubeconfig={k}"));
    }
    if let Some(c) = &spec.context {
        v.push(format!("--context={c}"));
    }
    v.extend(args.iter().map(|s| s.to_string()));
    Local::Argv(v)
}

fn shell_with_node(cmd: &str, name: &str) -> Local {
    Local::Shell(cmd.replace("{node}", &quote_arg(name)))
}

/// Whether the scheduler name of `node` may reach `spec`'s commands
/// ([`crate::actions::names`]): kubernetes an RFC 1123 subdomain, slurm one node name (never a
/// hostlist), command a plain word (its `{node}`); `none` runs nothing. `Err` says which name
/// breaks which rule, for the plan's refusal.
pub fn check_name(spec: &DrainSpec, node: &Node) -> Result<(), String> {
    use crate::actions::names;
    let name = scheduler_name(spec, node);
    let (what, bad) = match spec.backend {
        DrainBackend::Kubernetes => ("kubernetes", names::kubernetes_node(&name)),
        DrainBackend::Slurm => ("slurm", names::slurm_node(&name)),
        DrainBackend::Command => ("command", names::shell_name(&name)),
        DrainBackend::None => return Ok(()),
    };
    match bad {
        None => Ok(()),
        Some(why) => Err(format!(
            "scheduler name {} for the {what} drain backend is {why}",
            shown(&name)
        )),
    }
}

/// A name from an inventory or a node, quoted for an error message: Rust's `{:?}`, which
/// escapes every control, format and line-separator character (so it stays on one line and
/// prints nothing raw).
pub fn shown(name: &str) -> String {
    format!("{name:?}")
}

/// The commands that drain `node` (run in order; each must succeed). Empty for `none`.
pub fn drain_commands(
    spec: &DrainSpec,
    node: &Node,
    timeout: Duration,
    reason: &str,
) -> Vec<Local> {
    let name = scheduler_name(spec, node);
    match spec.backend {
        DrainBackend::Kubernetes => vec![
            kubectl(spec, &["cordon", "--", &name]),
            kubectl(
                spec,
                &[
                    "drain",
                    "--ignore-daemonsets",
                    "--delete-emptydir-data",
                    &format!("--timeout={}s", timeout.as_secs()),
                    "--",
                    &name,
                ],
            ),
        ],
        DrainBackend::Slurm => vec![Local::Argv(vec![
            "scontrol".into(),
            "update".into(),
            format!("NodeName={name}"),
            "State=DRAIN".into(),
            format!("Reason={reason}"),
        ])],
        DrainBackend::Command => spec
            .drain
            .iter()
            .map(|c| shell_with_node(c, &name))
            .collect(),
        DrainBackend::None => Vec::new(),
    }
}

/// The command whose output (kubernetes, slurm) or exit status (command) says the node is
/// drained: kubernetes reads `.spec.unschedulable` back (`true` once cordoned; `kubectl drain`
/// has waited for the pods by then).
pub fn status_command(spec: &DrainSpec, node: &Node) -> Option<Local> {
    let name = scheduler_name(spec, node);
    match spec.backend {
        DrainBackend::Kubernetes => Some(kubectl(
            spec,
            &[
                "get",
                "node",
                "-o",
                "jsonpath={.spec.unschedulable}",
                "--",
                &name,
            ],
        )),
        DrainBackend::Slurm => Some(Local::Argv(vec![
            "sinfo".into(),
            "-h".into(),
            "-N".into(),
            "-n".into(),
            name,
            "-o".into(),
            "%T".into(),
        ])),
        DrainBackend::Command => spec.status.as_ref().map(|c| shell_with_node(c, &name)),
        _ => None,
    }
}

/// The commands that return `node` to service.
pub fn uncordon_commands(spec: &DrainSpec, node: &Node) -> Vec<Local> {
    let name = scheduler_name(spec, node);
    match spec.backend {
        DrainBackend::Kubernetes => vec![kubectl(spec, &["uncordon", "--", &name])],
        DrainBackend::Slurm => vec![Local::Argv(vec![
            "scontrol".into(),
            "update".into(),
            format!("NodeName={name}"),
            "State=RESUME".into(),
        ])],
        DrainBackend::Command => spec
            .uncordon
            .iter()
            .map(|c| shell_with_node(c, &name))
            .collect(),
        DrainBackend::None => Vec::new(),
    }
}

/// Slurm: `scontrol update NodeName=X State=UNDRAIN`: the DRAIN flag off, the base state (DOWN)
/// and its Reason kept (Slurm 20.11 and later).
pub fn undrain_command(spec: &DrainSpec, node: &Node) -> Local {
    Local::Argv(vec![
        "scontrol".into(),
        "update".into(),
        format!("NodeName={}", scheduler_name(spec, node)),
        "State=UNDRAIN".into(),
    ])
}

/// Kubernetes only: `kubectl get node NAME -o jsonpath=…` printing the upgrade state label,
/// a newline, the skip label and a newline (empty lines when unset).
pub fn operator_guard_command(spec: &DrainSpec, node: &Node) -> Option<Local> {
    if spec.backend != DrainBackend::Kubernetes {
        return None;
    }
    let name = scheduler_name(spec, node);
    let path = |label: &str| format!("{{.metadata.labels.{}}}", label.replace('.', "\\."));
    Some(kubectl(
        spec,
        &[
            "get",
            "node",
            "-o",
            &format!(
                "jsonpath={}{{\"\\n\"}}{}{{\"\\n\"}}",
                path(UPGRADE_STATE_LABEL),
                path(UPGRADE_SKIP_LABEL)
            ),
            "--",
            &name,
        ],
    ))
}

/// Whether gpufleet may cordon the node, from [`operator_guard_command`]'s output: refused
/// (with the reason) when the skip label is `true`, when an upgrade state other than
/// `upgrade-done` is set (the Operator uncordons a node cordoned during its upgrade: GPU
/// Operator release notes), or when the labels could not be read (unknown is not "none"). The
/// reason quotes the output raw: its printers escape it.
pub fn operator_guard(out: &LocalOutput) -> Result<(), String> {
    if !out.success {
        return Err(format!(
            "cannot read the node's GPU Operator upgrade labels ({}); not cordoning a node whose upgrade state is unknown",
            out.output.trim()
        ));
    }
    let mut lines = out.output.lines().map(str::trim);
    let state = lines.next().unwrap_or("");
    let skip = lines.next().unwrap_or("");
    if skip == "true" {
        return Err(format!(
            "the node has {UPGRADE_SKIP_LABEL}=true (its driver is to be left alone); remove the label to upgrade it with gpufleet"
        ));
    }
    if !state.is_empty() && state != "upgrade-done" {
        return Err(format!(
            "the GPU Operator is upgrading the node ({UPGRADE_STATE_LABEL}={}): it would undo a cordon; wait for upgrade-done, or set {UPGRADE_SKIP_LABEL}=true and let gpufleet upgrade it",
            state
        ));
    }
    Ok(())
}

/// Exit status and combined output of one local command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalOutput {
    pub success: bool,
    pub code: Option<i32>,
    pub output: String,
}

/// The most bytes read of a local command's stdout, and of its stderr (1 MiB each): a
/// scheduler tool that prints more (a hostile or broken kubectl, sinfo, status command) is
/// stopped and its output is not read as an answer.
pub const OUTPUT_CAP: u64 = 1 << 20;

/// Runs `cmd` here, killed after `timeout`. Needs the write permit.
pub async fn run(
    _permit: &WritePermit,
    cmd: &Local,
    timeout: Duration,
) -> Result<LocalOutput, String> {
    capped(cmd, timeout).await
}

/// Runs a read-only `cmd` here (a scheduler state read: [`crate::actions::scheduler`]), as
/// [`run`] does; it needs no permit, since it changes nothing.
pub async fn read_only(cmd: &Local, timeout: Duration) -> Result<LocalOutput, String> {
    capped(cmd, timeout).await
}

/// All of `r` up to [`OUTPUT_CAP`] + 1 bytes (more than the cap: over it).
async fn read_cap<R: tokio::io::AsyncRead + Unpin>(r: Option<R>) -> std::io::Result<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let mut buf = Vec::new();
    if let Some(r) = r {
        r.take(OUTPUT_CAP + 1).read_to_end(&mut buf).await?;
    }
    Ok(buf)
}

/// `cmd` run with stdin from /dev/null, its stdout and stderr each read through
/// [`OUTPUT_CAP`] + 1 bytes; killed (its process group) after `timeout` or once an output
/// passes the cap, which is then an error (the output is not an answer).
async fn capped(cmd: &Local, timeout: Duration) -> Result<LocalOutput, String> {
    let mut c = match cmd {
        Local::Argv(a) => {
            let mut c = Command::new(&a[0]);
            c.args(&a[1..]);
            c
        }
        Local::Shell(s) => {
            let mut c = Command::new("sh");
            c.arg("-c").arg(s);
            c
        }
    };
    c.kill_on_drop(true)
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = c.spawn().map_err(|e| format!("`{cmd}`: {e}"))?;
    let pgid = child.id();
    let (mut so, mut se) = (child.stdout.take(), child.stderr.take());
    let work = async {
        let (o, e) = tokio::join!(read_cap(so.take()), read_cap(se.take()));
        let (o, e) = (o.map_err(|e| e.to_string())?, e.map_err(|e| e.to_string())?);
        if o.len() as u64 > OUTPUT_CAP || e.len() as u64 > OUTPUT_CAP {
            return Err(format!(
                "`{cmd}` printed more than {} MiB: stopped, its output not read",
                OUTPUT_CAP >> 20
            ));
        }
        let st = child.wait().await.map_err(|e| format!("`{cmd}`: {e}"))?;
        Ok((st, o, e))
    };
    let res = tokio::time::timeout(timeout, work).await;
    // Whatever it left behind in its process group goes with it.
    if let Some(pg) = pgid {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pg as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let (status, out, err) =
        res.map_err(|_| format!("`{cmd}` did not finish within {} s", timeout.as_secs()))??;
    let mut text = String::from_utf8_lossy(&out).into_owned();
    text.push_str(&String::from_utf8_lossy(&err));
    Ok(LocalOutput {
        success: status.success(),
        code: status.code(),
        output: text.trim().to_string(),
    })
}

/// Whether `status_command`'s output says drained, for `backend`.
pub fn drained(backend: DrainBackend, output: &str, success: bool) -> bool {
    match backend {
        DrainBackend::Slurm => slurm_drained(output),
        DrainBackend::Kubernetes => success && output.trim() == "true",
        _ => success,
    }
}

/// Whether a slurm state from `sinfo -o %T` means drained (`drained`, `drained*`; not
/// `draining`, which still runs jobs).
pub fn slurm_drained(state: &str) -> bool {
    state
        .lines()
        .map(|l| {
            l.trim()
                .trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-'])
        })
        .any(|s| s == "drained")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> Node {
        Node::for_test("gpu01", "10.0.0.1")
    }

    #[test]
    fn kubernetes_commands_with_context_and_node_name() {
        let spec = DrainSpec {
            backend: DrainBackend::Kubernetes,
            node_name: Some("{name}.cluster.local".into()),
            context: Some("prod".into()),
            ..Default::default()
        };
        let d = drain_commands(&spec, &node(), Duration::from_secs(600), "x");
        assert_eq!(
            d[0].to_string(),
            "kubectl --context=prod cordon -- gpu01.cluster.local"
        );
        assert_eq!(
            d[1].to_string(),
            "kubectl --context=prod drain --ignore-daemonsets --delete-emptydir-data --timeout=600s -- gpu01.cluster.local"
        );
        assert_eq!(
            uncordon_commands(&spec, &node())[0].to_string(),
            "kubectl --context=prod uncordon -- gpu01.cluster.local"
        );
    }

    #[test]
    fn operator_guard_reads_the_upgrade_labels() {
        let spec = DrainSpec {
            backend: DrainBackend::Kubernetes,
            ..Default::default()
        };
        let Some(Local::Argv(argv)) = operator_guard_command(&spec, &node()) else {
            panic!("an argv")
        };
        assert_eq!(
            argv,
            [
                "kubectl",
                "get",
                "node",
                "-o",
                r#"jsonpath={.metadata.labels.nvidia\.com/gpu-driver-upgrade-state}{"\n"}{.metadata.labels.nvidia\.com/gpu-driver-upgrade\.skip}{"\n"}"#,
                "--",
                "gpu01",
            ]
        );
        let out = |output: &str, success| LocalOutput {
            success,
            code: Some(if success { 0 } else { 1 }),
            output: output.into(),
        };
        assert!(operator_guard(&out("", true)).is_ok());
        assert!(operator_guard(&out("upgrade-done\n", true)).is_ok());
        assert!(operator_guard(&out("\nfalse", true)).is_ok());
        let e = operator_guard(&out("drain-required\n", true)).unwrap_err();
        assert!(
            e.contains("upgrading the node") && e.contains("drain-required"),
            "{e}"
        );
        let e = operator_guard(&out("\ntrue", true)).unwrap_err();
        assert!(e.contains("gpu-driver-upgrade.skip=true"), "{e}");
        let e = operator_guard(&out("Error from server (NotFound)", false)).unwrap_err();
        assert!(e.contains("unknown"), "{e}");
        // Raw here: the rollout's log, its summary and `gpufleet rollouts` escape it once.
        let e = operator_guard(&out("\u{1b}[2J", true)).unwrap_err();
        assert!(e.contains("=\u{1b}[2J)"), "{e}");
        let slurm = DrainSpec {
            backend: DrainBackend::Slurm,
            ..Default::default()
        };
        assert!(operator_guard_command(&slurm, &node()).is_none());
    }

    #[test]
    fn slurm_commands_and_states() {
        let spec = DrainSpec {
            backend: DrainBackend::Slurm,
            ..Default::default()
        };
        let d = drain_commands(
            &spec,
            &node(),
            Duration::from_secs(60),
            "gpufleet rollout r1",
        );
        assert_eq!(
            d[0].to_string(),
            "scontrol update NodeName=gpu01 State=DRAIN 'Reason=gpufleet rollout r1'"
        );
        assert_eq!(
            status_command(&spec, &node()).unwrap().to_string(),
            "sinfo -h -N -n gpu01 -o %T"
        );
        assert!(slurm_drained("drained\n"));
        assert!(slurm_drained("drained*"));
        assert!(!slurm_drained("draining"));
        assert!(!slurm_drained("idle"));
    }

    #[test]
    fn command_backend_quotes_the_node() {
        let spec = DrainSpec {
            backend: DrainBackend::Command,
            drain: Some("drain-it {node}".into()),
            uncordon: Some("undrain {node}".into()),
            node_name: Some("a b".into()),
            ..Default::default()
        };
        assert_eq!(
            drain_commands(&spec, &node(), Duration::ZERO, "")[0].to_string(),
            "drain-it 'a b'"
        );
        assert_eq!(
            uncordon_commands(&spec, &node())[0].to_string(),
            "undrain 'a b'"
        );
    }
}
