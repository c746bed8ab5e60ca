//! A node's state in its scheduler, read here before a rollout drains it and again before it
//! gives the node back (docs/domain.md, "Drains that respect what was there"). Read-only: it
//! needs no write permit (a dry run reads it too). Each tool's output is read through
//! [`drain::OUTPUT_CAP`] ([`drain::read_only`]).
//!
//! - slurm: `scontrol -o show node NAME`: its `State=` (base state and `+`-flags) and
//!   `Reason=… [user@time]`. Drained, draining, failed, down, in a reservation or a maintenance,
//!   powered down, not responding: not in service.
//! - kubernetes: `kubectl get node -o jsonpath=…` printing `unschedulable=` and
//!   `.spec.unschedulable`, then each taint
//!   (`key`, `effect`, `value`): cordoned, or a `node.kubernetes.io/*` condition taint
//!   (not-ready, unreachable, pressure…) with effect NoSchedule or NoExecute, or a taint whose
//!   key is in `[upgrade] unavailable_taints` (any effect): not in service. Other taints (a GPU
//!   node's permanent `dedicated=…:NoSchedule`) are not read as out of service.
//! - command: its `status` command: exit 0 means drained (as for the drain step); another exit
//!   status, in service. Without `status` the state is not read ([`State::NotRead`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::drain::{self, Local, LocalOutput};
use crate::inventory::{DrainBackend, DrainSpec, Node};

/// How long one state read may take.
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);

/// The taint keys Kubernetes' node lifecycle controller sets for node conditions share this
/// prefix (`node.kubernetes.io/not-ready`, `…/unreachable`, `…/unschedulable`, `…/*-pressure`,
/// `…/network-unavailable`).
pub const CONDITION_TAINTS: &str = "node.kubernetes.io/";

/// How a state read's output is understood.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Parser {
    /// `scontrol -o show node NAME`.
    Slurm,
    /// `unschedulable=` and `.spec.unschedulable`, then one `key\teffect\tvalue` line a taint; `taints`: the keys
    /// (besides the condition taints) that take a node out of service.
    Kubernetes { taints: Vec<String> },
    /// The command's exit status: 0 is drained.
    ExitStatus,
}

/// A state read: the command and how its output is read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateRead {
    pub command: Local,
    pub parser: Parser,
}

/// What took a node out of service before gpufleet did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Taken {
    /// In words: `drained (Slurm IDLE+DRAIN)`, `down (Slurm DOWN*)`, `cordoned`, `tainted
    /// node.kubernetes.io/not-ready:NoExecute`, `drained (its status command succeeds)`.
    pub what: String,
    /// Why, as the scheduler says (Slurm's Reason; the status command's first output line).
    pub reason: Option<String>,
    /// Who set it (Slurm's reason user), and when.
    pub by: Option<String>,
    pub since: Option<String>,
    /// A gpufleet rollout set it (a Slurm Reason `gpufleet rollout ID`): that rollout's id.
    pub rollout: Option<String>,
    /// Kubernetes: `.spec.unschedulable` is true (someone cordoned it).
    pub cordoned: bool,
}

impl Taken {
    /// For people: `drained (Slurm IDLE+DRAIN): Reason "bad DIMM" set by root at 2026-…`.
    pub fn words(&self) -> String {
        let mut s = self.what.clone();
        if let Some(r) = &self.reason {
            s.push_str(&format!(": Reason {r:?}"));
        }
        if let Some(b) = &self.by {
            s.push_str(&format!(" set by {b}"));
        }
        if let Some(t) = &self.since {
            s.push_str(&format!(" at {t}"));
        }
        s
    }
}

/// A node's scheduler state before gpufleet drains it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum State {
    /// In service: gpufleet may drain it, and gives it back after.
    InService,
    /// Out of service already, by someone else (or another rollout): not upgraded unless
    /// `--include-drained`, and then never given back by gpufleet.
    Taken(Taken),
    /// The backend cannot say (a `command` backend without `status`; `none`): drained and
    /// given back as before.
    NotRead { why: String },
}

/// The read of `node`'s state for `spec` (`taints`: `[upgrade] unavailable_taints`). `None` for
/// `none` and for a `command` backend without `status`.
pub fn state_read(spec: &DrainSpec, node: &Node, taints: &[String]) -> Option<StateRead> {
    let name = drain::scheduler_name(spec, node);
    match spec.backend {
        DrainBackend::Slurm => Some(StateRead {
            command: Local::Argv(vec![
                "scontrol".into(),
                "-o".into(),
                "show".into(),
                "node".into(),
                name,
            ]),
            parser: Parser::Slurm,
        }),
        DrainBackend::Kubernetes => Some(StateRead {
            command: drain::kubectl(
                spec,
                &[
                    "get",
                    "node",
                    "-o",
                    r#"jsonpath=unschedulable={.spec.unschedulable}{"\n"}{range .spec.taints[*]}{.key}{"\t"}{.effect}{"\t"}{.value}{"\n"}{end}"#,
                    "--",
                    &name,
                ],
            ),
            parser: Parser::Kubernetes {
                taints: taints.to_vec(),
            },
        }),
        DrainBackend::Command => spec.status.as_ref().and_then(|_| {
            Some(StateRead {
                command: drain::status_command(spec, node)?,
                parser: Parser::ExitStatus,
            })
        }),
        DrainBackend::None => None,
    }
}

/// Reads `node`'s state (read-only). `Err`: it could not be read (the tool failed, timed out,
/// printed more than the cap, or something this reader does not understand): unknown.
pub async fn read(spec: &DrainSpec, node: &Node, taints: &[String]) -> Result<State, String> {
    let Some(r) = state_read(spec, node, taints) else {
        return Ok(State::NotRead {
            why: match spec.backend {
                DrainBackend::None => "no drain backend".into(),
                _ => "the command backend has no `status` command".into(),
            },
        });
    };
    read_with(&r).await
}

/// Runs `r` and reads its output ([`parse`]).
pub async fn read_with(r: &StateRead) -> Result<State, String> {
    let out = drain::read_only(&r.command, READ_TIMEOUT).await?;
    parse(&r.parser, &out).map_err(|e| format!("`{}`: {e}", r.command))
}

/// The state from a read's output (pure).
pub fn parse(parser: &Parser, out: &LocalOutput) -> Result<State, String> {
    match parser {
        Parser::ExitStatus => Ok(if out.success {
            State::Taken(Taken {
                what: "drained (its status command succeeds)".into(),
                reason: out
                    .output
                    .lines()
                    .next()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_string),
                by: None,
                since: None,
                rollout: None,
                cordoned: false,
            })
        } else {
            State::InService
        }),
        Parser::Kubernetes { taints } => {
            if !out.success {
                return Err(format!("exit {}: {}", code(out), out.output));
            }
            kubernetes(&out.output, taints)
        }
        Parser::Slurm => {
            if !out.success {
                return Err(format!("exit {}: {}", code(out), out.output));
            }
            Ok(slurm_node(&out.output)?.state())
        }
    }
}

fn code(out: &LocalOutput) -> String {
    out.code.map_or("by a signal".into(), |c| c.to_string())
}

fn kubernetes(text: &str, extra: &[String]) -> Result<State, String> {
    let mut lines = text.lines();
    let unschedulable = match lines.next().map(str::trim) {
        Some("unschedulable=true") => true,
        Some("unschedulable=") | Some("unschedulable=false") => false,
        other => {
            return Err(format!(
                "not `unschedulable=…` first: {:?}",
                other.unwrap_or("")
            ));
        }
    };
    let mut what = Vec::new();
    if unschedulable {
        what.push("cordoned (.spec.unschedulable is true)".to_string());
    }
    for l in lines.filter(|l| !l.trim().is_empty()) {
        let mut f = l.split('\t');
        let (key, effect) = (f.next().unwrap_or("").trim(), f.next().unwrap_or("").trim());
        let value = f.next().unwrap_or("").trim();
        let condition = key.starts_with(CONDITION_TAINTS)
            && key != "node.kubernetes.io/unschedulable"
            && matches!(effect, "NoSchedule" | "NoExecute");
        if condition || extra.iter().any(|t| t == key) {
            what.push(if value.is_empty() {
                format!("tainted {key}:{effect}")
            } else {
                format!("tainted {key}={value}:{effect}")
            });
        }
    }
    Ok(if what.is_empty() {
        State::InService
    } else {
        State::Taken(Taken {
            what: what.join(", "),
            reason: None,
            by: None,
            since: None,
            rollout: None,
            cordoned: unschedulable,
        })
    })
}

/// A Slurm node as `scontrol -o show node` says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmNode {
    /// `State=` as printed (`IDLE+DRAIN`, `DOWN*+DRAIN`).
    pub state: String,
    /// The base state, without `*` (`IDLE`, `DOWN`, `MIXED`, …).
    pub base: String,
    /// The `+` flags (`DRAIN`, `RESERVED`, `MAINT`, …).
    pub flags: Vec<String>,
    /// `*`: slurmctld gets no answer from its slurmd.
    pub not_responding: bool,
    /// The Reason, without its `[user@time]`; `None` when unset.
    pub reason: Option<String>,
    pub by: Option<String>,
    pub since: Option<String>,
}

/// Reads one node's `scontrol -o show node` line. `Err` when it is not exactly one node line
/// with a `State=`.
pub fn slurm_node(text: &str) -> Result<SlurmNode, String> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let [line] = lines.as_slice() else {
        return Err(format!("{} node lines, not one", lines.len()));
    };
    if !line.starts_with("NodeName=") {
        return Err(format!("not a node line: {:?}", cut(line)));
    }
    // State comes before Reason on the line: the first ` State=` is the node's own.
    let at = line
        .find(" State=")
        .ok_or_else(|| format!("no State= in {:?}", cut(line)))?;
    let state = line[at + 7..].split(' ').next().unwrap_or("").to_string();
    let mut parts = state.split('+');
    let first = parts.next().unwrap_or("");
    let not_responding = first.ends_with('*');
    let base = first.trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-']);
    let flags: Vec<String> = parts.map(str::to_string).collect();
    let (mut reason, mut by, mut since) = (None, None, None);
    if let Some(r) = line[at..].find(" Reason=") {
        let mut text = &line[at + r + 8..];
        // Fields Slurm prints after the Reason, when set.
        for next in [" Comment=", " Extra="] {
            if let Some(e) = text.find(next) {
                text = &text[..e];
            }
        }
        let text = text.trim_end();
        if let Some(open) = text.rfind(" [")
            && text.ends_with(']')
        {
            let inner = &text[open + 2..text.len() - 1];
            if let Some((u, t)) = inner.split_once('@') {
                by = Some(u.to_string());
                since = Some(t.to_string());
            }
            reason = Some(text[..open].to_string());
        } else if !text.is_empty() && text != "(null)" {
            reason = Some(text.to_string());
        }
    }
    Ok(SlurmNode {
        state: state.clone(),
        base: base.to_ascii_uppercase(),
        flags,
        not_responding,
        reason,
        by,
        since,
    })
}

fn cut(s: &str) -> String {
    s.chars().take(120).collect()
}

/// The rollout a gpufleet Slurm Reason names (`gpufleet rollout ID`).
pub fn rollout_of_reason(reason: &str) -> Option<&str> {
    reason
        .strip_prefix("gpufleet rollout ")
        .map(|r| r.split_whitespace().next().unwrap_or(""))
        .filter(|r| !r.is_empty())
}

/// slurmctld's Reason for a node whose slurmd came back with a new boot time (ReturnToService
/// decides whether it is set DOWN): `Node unexpectedly rebooted …`.
pub const UNEXPECTED_REBOOT: &str = "Node unexpectedly rebooted";

/// How [`slurm_give_back`]'s words start for a node gpufleet drained that is DOWN for a reason
/// of someone else's after its upgrade (its uncordon step fails with them; the report says
/// "still down", never "done": [`crate::actions::rollout::Drained::StillDown`]).
pub const STILL_DOWN: &str = "still down (";

impl SlurmNode {
    pub fn has(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f.eq_ignore_ascii_case(flag))
    }

    /// Its base state is DOWN.
    pub fn down(&self) -> bool {
        self.base == "DOWN"
    }

    /// A DRAIN (or FAIL) flag is set.
    pub fn drain_flag(&self) -> bool {
        self.has("DRAIN") || self.has("FAIL")
    }

    /// Whether it is in service, and if not, why.
    pub fn state(&self) -> State {
        let busy = matches!(self.base.as_str(), "ALLOCATED" | "MIXED") || self.has("COMPLETING");
        let what = if self.down() {
            Some("down")
        } else if self.drain_flag() {
            Some(if busy { "draining" } else { "drained" })
        } else if self.has("MAINT") {
            Some("in a maintenance reservation")
        } else if self.has("RESERVED") {
            Some("reserved")
        } else if !matches!(self.base.as_str(), "IDLE" | "ALLOCATED" | "MIXED") {
            Some("not in service")
        } else if self.not_responding {
            Some("not responding")
        } else if self.flags.iter().any(|f| {
            let f = f.to_ascii_uppercase();
            f.starts_with("POWER") || f.starts_with("REBOOT") || f == "INVALID_REG"
        }) {
            Some("not in service")
        } else {
            None
        };
        match what {
            None => State::InService,
            Some(w) => State::Taken(Taken {
                what: format!("{w} (Slurm {})", self.state),
                reason: self.reason.clone(),
                by: self.by.clone(),
                since: self.since.clone(),
                rollout: self
                    .reason
                    .as_deref()
                    .and_then(rollout_of_reason)
                    .map(str::to_string),
                cordoned: false,
            }),
        }
    }
}

/// How gpufleet gives a node back after its upgrade, beyond its uncordon commands: Slurm reads
/// the node first (RESUME, UNDRAIN or nothing: [`give_back`]); a node gpufleet did not drain is
/// never given back (`kept`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GiveBack {
    /// Slurm: the node's state, read before anything is sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<StateRead>,
    /// The Reason gpufleet's drain set (`gpufleet rollout ID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Slurm: `scontrol update NodeName=X State=UNDRAIN` (the DRAIN flag off, base state kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undrain: Option<Local>,
    /// gpufleet did not drain the node (`--include-drained`): the state found before. Nothing
    /// is sent: it stays as its owner left it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<String>,
}

/// What to send to give a Slurm node back, from its state after the upgrade (pure;
/// docs/domain.md's table). `Ok((command, said))`: the command to run (none: nothing) and
/// what to report; `Err`: the node is not back ("still down").
pub fn slurm_give_back(
    n: &SlurmNode,
    back: &GiveBack,
    resume: Option<&Local>,
) -> (Option<Local>, Result<String, String>) {
    let state = format!("State={}", n.state);
    let reason = n
        .reason
        .as_deref()
        .map_or_else(String::new, |r| format!(", Reason {r:?}"));
    if let Some(kept) = &back.kept {
        let said = if n.down() {
            format!(
                "down after reboot, admin drain kept ({state}{reason}); gpufleet did not drain it ({kept})"
            )
        } else {
            format!(
                "not resumed: gpufleet did not drain it ({kept}); admin drain kept ({state}{reason})"
            )
        };
        return (None, Ok(said));
    }
    // gpufleet's own: this rollout's Reason, or an abandoned rollout's whose node lock it took
    // over (it holds the node's lock now, so no other rollout runs on it).
    let ours = n.reason.as_deref().is_some_and(|r| {
        Some(r) == back.reason.as_deref()
            || rollout_of_reason(r).is_some()
            || r.starts_with(UNEXPECTED_REBOOT)
    });
    if !n.drain_flag() && !n.down() {
        return (
            None,
            Ok(format!("already back in service ({state}): nothing sent")),
        );
    }
    if n.reason.is_some() && !ours {
        if n.down() {
            // Down for another reason: only gpufleet's DRAIN flag goes.
            return (
                back.undrain.clone().filter(|_| n.drain_flag()),
                Err(format!(
                    "{STILL_DOWN}{state}{reason}): gpufleet's drain flag removed (UNDRAIN), the node's DOWN state and Reason kept; it returns to service when its owner resumes it, or as slurmctld's ReturnToService says"
                )),
            );
        }
        return (
            None,
            Ok(format!(
                "not resumed: drained again meanwhile by someone else ({state}{reason}), their drain kept"
            )),
        );
    }
    let said = if n.down() {
        format!("resumed (slurmctld had set it DOWN after the reboot: {state}{reason})")
    } else {
        format!("resumed ({state}{reason})")
    };
    (resume.cloned(), Ok(said))
}

/// Gives the node back after its upgrade: `commands` (the backend's uncordon) unless `back`
/// says otherwise. Slurm: the node is read first, and RESUME, UNDRAIN or nothing is sent as
/// [`slurm_give_back`] says; `back.kept`: nothing is sent. `Err`: a command failed, the state
/// could not be read (nothing sent), or the node is still down. Needs the write permit.
pub async fn give_back(
    permit: &super::permit::WritePermit,
    commands: &[Local],
    back: Option<&GiveBack>,
    timeout: Duration,
) -> Result<String, String> {
    let Some(back) = back else {
        return Ok(run_all(permit, commands, timeout).await?.join(" / "));
    };
    let Some(read) = &back.read else {
        return match &back.kept {
            Some(k) => Ok(format!(
                "not uncordoned: gpufleet did not drain it ({k}); it stays as its owner left it"
            )),
            None => Ok(run_all(permit, commands, timeout).await?.join(" / ")),
        };
    };
    let out = drain::read_only(&read.command, READ_TIMEOUT).await?;
    if !out.success {
        return Err(format!(
            "cannot read the node's state before giving it back (`{}` exited {}: {}); nothing sent",
            read.command,
            code(&out),
            out.output
        ));
    }
    let n =
        slurm_node(&out.output).map_err(|e| format!("`{}`: {e}; nothing sent", read.command))?;
    let (cmd, said) = slurm_give_back(&n, back, commands.first());
    let ran = match cmd {
        Some(c) => {
            let said = run_all(permit, std::slice::from_ref(&c), timeout).await?;
            format!(
                " [`{c}`{}]",
                said.iter()
                    .map(|s| format!(": {s}"))
                    .collect::<String>()
                    .trim_end_matches(": ")
            )
        }
        None => String::new(),
    };
    match said {
        Ok(s) => Ok(format!("{s}{ran}")),
        Err(e) => Err(format!("{e}{ran}")),
    }
}

/// Runs each of `cmds`; each must succeed. What each printed, for the journal.
async fn run_all(
    permit: &super::permit::WritePermit,
    cmds: &[Local],
    timeout: Duration,
) -> Result<Vec<String>, String> {
    let mut said = Vec::new();
    for c in cmds {
        let out = drain::run(permit, c, timeout).await?;
        if !out.success {
            return Err(format!("`{c}` exited {}: {}", code(&out), out.output));
        }
        said.push(out.output);
    }
    Ok(said)
}

/// Before draining a node planned in service: its state read again, refused when someone took
/// it out of service since the plan (gpufleet would overwrite their Reason, and give it back).
///
/// A Slurm Reason naming `rollout` is this rollout's own drain (an earlier run of it).
pub async fn still_in_service(read: &StateRead, rollout: &str) -> Result<(), String> {
    match read_with(read).await {
        Ok(State::InService) | Ok(State::NotRead { .. }) => Ok(()),
        Ok(State::Taken(t)) if t.rollout.as_deref() == Some(rollout) => Ok(()),
        Ok(State::Taken(t)) => Err(format!(
            "taken out of service since the plan, not by this rollout: {}; not drained, not upgraded (`--include-drained` takes such a node, and leaves it drained)",
            t.words()
        )),
        Err(e) => Err(format!(
            "the node's scheduler state cannot be read ({e}); not drained"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(text: &str, success: bool) -> LocalOutput {
        LocalOutput {
            success,
            code: Some(if success { 0 } else { 1 }),
            output: text.into(),
        }
    }

    const LINE: &str = "NodeName=gpu1 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUTot=1 CPULoad=0.10 AvailableFeatures=(null) ActiveFeatures=(null) Gres=(null) NodeAddr=198.18.20.2 NodeHostName=gpu1 Version=22.05.8 OS=Linux RealMemory=100 AllocMem=0 FreeMem=1000 Sockets=1 Boards=1 State=STATE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu BootTime=2026-12-03T10:00:00 SlurmdStartTime=2026-12-03T10:00:01 LastBusyTime=2026-12-03T10:00:01 CfgTRES=cpu=1,mem=100M,billing=1 AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s";

    fn slurm(state: &str, reason: &str) -> State {
        let mut l = LINE.replace("STATE", state);
        l.push_str(reason);
        parse(&Parser::Slurm, &out(&l, true)).unwrap()
    }

    #[test]
    fn slurm_states_and_reasons() {
        assert_eq!(slurm("IDLE", ""), State::InService);
        assert_eq!(slurm("MIXED", ""), State::InService);
        let State::Taken(t) = slurm(
            "IDLE+DRAIN",
            " Reason=bad DIMM State=IDLE [root@2026-12-03T17:00:00] Comment=x",
        ) else {
            panic!()
        };
        assert_eq!(t.what, "drained (Slurm IDLE+DRAIN)");
        assert_eq!(t.reason.as_deref(), Some("bad DIMM State=IDLE"));
        assert_eq!(t.by.as_deref(), Some("root"));
        assert_eq!(t.since.as_deref(), Some("2026-12-03T17:00:00"));
        assert_eq!(
            t.words(),
            "drained (Slurm IDLE+DRAIN): Reason \"bad DIMM State=IDLE\" set by root at 2026-12-03T17:00:00"
        );
        for (s, w) in [
            ("ALLOCATED+DRAIN", "draining"),
            ("DOWN*+DRAIN", "down"),
            ("DOWN", "down"),
            ("IDLE+RESERVED", "reserved"),
            ("IDLE+MAINT", "in a maintenance reservation"),
            ("IDLE*", "not responding"),
            ("IDLE+POWERED_DOWN", "not in service"),
            ("FUTURE", "not in service"),
        ] {
            let State::Taken(t) = slurm(s, "") else {
                panic!("{s}")
            };
            assert!(t.what.starts_with(w), "{s}: {}", t.what);
        }
        let State::Taken(t) = slurm(
            "IDLE+DRAIN",
            " Reason=gpufleet rollout r-1 [root@2026-12-03T17:00:00]",
        ) else {
            panic!()
        };
        assert_eq!(t.rollout.as_deref(), Some("r-1"));
        assert!(parse(&Parser::Slurm, &out("Node gpu9 not found", false)).is_err());
        assert!(parse(&Parser::Slurm, &out(&format!("{LINE}\n{LINE}"), true)).is_err());
        assert!(parse(&Parser::Slurm, &out("garbage", true)).is_err());
    }

    #[test]
    fn kubernetes_condition_and_configured_taints_only() {
        let k = |t: &str| {
            parse(
                &Parser::Kubernetes {
                    taints: vec!["example.com/maintenance".into()],
                },
                &out(t, true),
            )
        };
        assert_eq!(k("unschedulable=").unwrap(), State::InService);
        assert!(k("").is_err());
        assert_eq!(
            k("unschedulable=\nnvidia.com/gpu\tNoSchedule\tpresent\ndedicated\tNoSchedule\tgpu\n")
                .unwrap(),
            State::InService
        );
        assert_eq!(
            k("unschedulable=\nnode.kubernetes.io/memory-pressure\tPreferNoSchedule\t\n").unwrap(),
            State::InService
        );
        let State::Taken(t) =
            k("unschedulable=true\nnode.kubernetes.io/unschedulable\tNoSchedule\t\n").unwrap()
        else {
            panic!()
        };
        assert!(
            t.cordoned && t.what == "cordoned (.spec.unschedulable is true)",
            "{t:?}"
        );
        let State::Taken(t) =
            k("unschedulable=false\nnode.kubernetes.io/not-ready\tNoExecute\t\n").unwrap()
        else {
            panic!()
        };
        assert!(!t.cordoned);
        assert_eq!(t.what, "tainted node.kubernetes.io/not-ready:NoExecute");
        let State::Taken(t) =
            k("unschedulable=\nexample.com/maintenance\tPreferNoSchedule\tdimm\n").unwrap()
        else {
            panic!()
        };
        assert_eq!(
            t.what,
            "tainted example.com/maintenance=dimm:PreferNoSchedule"
        );
        assert!(k("yes\n").is_err());
        assert!(
            parse(
                &Parser::Kubernetes { taints: vec![] },
                &out("NotFound", false)
            )
            .is_err()
        );
    }

    #[test]
    fn slurm_give_back_table() {
        let node = |state: &str, reason: &str| {
            let mut l = LINE.replace("STATE", state);
            l.push_str(reason);
            slurm_node(&l).unwrap()
        };
        let resume = Local::Argv(vec!["resume".into()]);
        let undrain = Local::Argv(vec!["undrain".into()]);
        let ours = GiveBack {
            read: None,
            reason: Some("gpufleet rollout r-1".into()),
            undrain: Some(undrain.clone()),
            kept: None,
        };
        let ours_r = " Reason=gpufleet rollout r-1 [root@2026-12-03T17:00:00]";
        // Ours, drained: RESUME.
        let (c, s) = slurm_give_back(&node("IDLE+DRAIN", ours_r), &ours, Some(&resume));
        assert_eq!(c.as_ref(), Some(&resume));
        assert!(s.unwrap().starts_with("resumed"));
        // Ours, set DOWN by slurmctld after the reboot (our Reason kept, or its own): RESUME.
        for r in [
            ours_r,
            " Reason=Node unexpectedly rebooted boot_time=1 last busy=2 [slurm@2026-12-03T17:05:00]",
        ] {
            let (c, s) = slurm_give_back(&node("DOWN+DRAIN", r), &ours, Some(&resume));
            assert_eq!(c.as_ref(), Some(&resume), "{r}");
            assert!(s.unwrap().contains("DOWN after the reboot"));
        }
        // Down for another reason: UNDRAIN, still down.
        let (c, s) = slurm_give_back(
            &node(
                "DOWN*+DRAIN",
                " Reason=Not responding [slurm@2026-12-03T17:05:00]",
            ),
            &ours,
            Some(&resume),
        );
        assert_eq!(c.as_ref(), Some(&undrain));
        assert!(s.unwrap_err().starts_with("still down"));
        // Drained again by an admin meanwhile: kept.
        let (c, s) = slurm_give_back(
            &node("IDLE+DRAIN", " Reason=bad DIMM [root@2026-12-03T17:05:00]"),
            &ours,
            Some(&resume),
        );
        assert_eq!(c, None);
        assert!(s.unwrap().contains("their drain kept"));
        // Not drained by gpufleet: never resumed or undrained.
        let kept = GiveBack {
            kept: Some("drained (Slurm IDLE+DRAIN): Reason \"bad DIMM\"".into()),
            ..ours.clone()
        };
        let (c, s) = slurm_give_back(
            &node("DOWN+DRAIN", " Reason=bad DIMM [root@2026-12-03T17:05:00]"),
            &kept,
            Some(&resume),
        );
        assert_eq!(c, None);
        assert!(
            s.unwrap()
                .starts_with("down after reboot, admin drain kept")
        );
        let (c, s) = slurm_give_back(
            &node("IDLE+DRAIN", " Reason=bad DIMM [root@2026-12-03T17:05:00]"),
            &kept,
            Some(&resume),
        );
        assert_eq!(c, None);
        assert!(s.unwrap().contains("admin drain kept"));
    }

    #[test]
    fn command_status_exit_zero_is_drained() {
        let State::Taken(t) = parse(&Parser::ExitStatus, &out("drained by ops\n", true)).unwrap()
        else {
            panic!()
        };
        assert_eq!(t.reason.as_deref(), Some("drained by ops"));
        assert_eq!(
            parse(&Parser::ExitStatus, &out("", false)).unwrap(),
            State::InService
        );
    }
}
