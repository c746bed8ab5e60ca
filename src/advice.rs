//! What to do for each status and each reason code: the operator's guide to the verdict.
//!
//! [`reason`] and [`status`] match every [`Code`] and [`NodeStatus`] exhaustively, so a new code
//! does not compile without its advice. `gpufleet reasons` prints it, `--brief` snapshots give
//! the hint of each code they show (on stderr), and docs/reasons.md is generated from it
//! (`gpufleet reasons --markdown > docs/reasons.md`; a unit test fails while the file differs).
//! The meanings follow docs/domain.md's reason-code table.

use std::fmt::Write as _;

use crate::model::{Code, NodeStatus};

/// One code's entry: what it means and what to do about it (plain text, one sentence or two;
/// backticks mark commands and file names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Advice {
    pub meaning: &'static str,
    pub action: &'static str,
}

const fn a(meaning: &'static str, action: &'static str) -> Advice {
    Advice { meaning, action }
}

/// What `code` means and what to do.
pub fn reason(code: Code) -> Advice {
    use Code::*;
    match code {
        SshTimeout => a(
            "no TCP connection or SSH answer in time (or the host or network is unreachable)",
            "Check that the node is up and reachable from here (`ssh -v NODE`). Behind a bastion, set `ProxyJump` in ~/.ssh/config or `jump` in the inventory; on a slow network raise `--connect-timeout`.",
        ),
        SshRefused => a(
            "the TCP connection or the SSH handshake was refused",
            "Nothing listens on that port, or a firewall rejects it: check sshd on the node and the port gpufleet used (`gpufleet inventory list`).",
        ),
        SshResolveFailed => a(
            "the node's host name does not resolve",
            "Fix the host: `gpufleet inventory list` shows each node's host and the line it came from; set `host` (Ansible: `ansible_host`; ~/.ssh/config: `HostName`).",
        ),
        SshProtocolError => a(
            "the peer does not speak SSH-2 (its first bytes are in the message)",
            "Point the inventory at the node's sshd port; something else answers on this one.",
        ),
        SshAuthFailed => a(
            "login failed with every key tried",
            "Load the key into ssh-agent (`ssh-add`) or set the node's `identity_file` and `user`; check with `ssh -v -i KEY USER@HOST` that the node's authorized_keys has it.",
        ),
        HostKeyMismatch => a(
            "the host key differs from the known one; gpufleet always refuses it",
            "Find out why the key changed before anything else (a re-imaged node?). Once verified, remove the old entry (`ssh-keygen -R HOST`, or `ssh-keygen -R '[HOST]:PORT'`) and scan again.",
        ),
        HostKeyUnknown => a(
            "no known host key for the node, and learning new keys is not enabled",
            "Verify the SHA256 fingerprint in the message, then add the key (`ssh-keyscan -p PORT HOST >> ~/.ssh/known_hosts`) or scan once with `--host-key-policy accept-new` to learn new keys.",
        ),
        ProbeOutputInvalid => a(
            "the probe printed nothing usable: the 1 MiB output cap reached before its header, nothing before the deadline, or not the probe's format",
            "Make sure the login prints nothing before the command runs (rc files, a forced command in authorized_keys), then run the probe by hand (docs/operators.md, \"Try it without a fleet\", shows how with `ssh`).",
        ),
        DriverLibraryMismatch => a(
            "nvidia-smi says `Driver/library version mismatch`: the loaded module and the userspace libraries differ",
            "A driver package was upgraded without a reboot: drain the node and reboot it (or reload the nvidia modules).",
        ),
        NvidiaSmiFailed => a(
            "nvidia-smi failed for another reason (its message is kept)",
            "Run `nvidia-smi` on the node and read the kernel log (`dmesg`, its NVRM and Xid lines); drain the node until it answers.",
        ),
        NvidiaSmiTimeout => a(
            "nvidia-smi ran past its time limit",
            "A wedged GPU or a stuck driver: look for Xid errors in `dmesg`, drain the node, then reset the GPU or reboot.",
        ),
        GpuNotInitialized => a(
            "an NVIDIA GPU on PCI that the loaded driver did not take",
            "Read the reasons beside it (GSP firmware, opt-in, signatures) and the kernel log (`RmInitAdapter failed`); the GPU is unusable until that is fixed.",
        ),
        GpuWithoutDriver => a(
            "NVIDIA GPUs on PCI and no nvidia module loaded",
            "Install or load the driver (`modprobe nvidia`); the boot log says why it did not load.",
        ),
        GpuRequiresOpen => a(
            "a Blackwell (compute capability 10.0 or above) or GH200 GPU with the proprietary module",
            "These GPUs need the open kernel modules: upgrade the node (`gpufleet upgrade --canary`, then `--wave`).",
        ),
        ModuleFlavorUnknown => a(
            "an nvidia module is loaded but open vs proprietary cannot be told",
            "Look at the evidence (the /proc/driver/nvidia/version banner, the module's taint letters): a custom or very old build; install a packaged driver.",
        ),
        GpuFallenOffBus => a(
            "the kernel log says a GPU has fallen off the bus (or Xid 79)",
            "A hardware, power or thermal fault: drain the node and have the GPU checked; a reboot may hide it for a while.",
        ),
        PeermemLoadFailed => a(
            "nvidia-peermem is configured, not loaded, and the kernel log shows a symbol error",
            "It was built for another kernel or driver: move to DMA-BUF and remove its configuration (see `peermem-configured`), or rebuild it.",
        ),
        NextBootWithoutDriver => a(
            "the kernel the next reboot starts has no nvidia.ko, while the running one has",
            "Install the driver for that kernel (the DKMS build or the kmod package) before the node reboots, or it comes back without GPUs.",
        ),
        GspFirmwareMissing => a(
            "no GSP firmware for the loaded driver version (files or kernel log)",
            "Install the firmware of the loaded driver version (`gsp_*.bin` under /lib/firmware/nvidia/VERSION, the driver's firmware package), then reload or reboot.",
        ),
        OpenGpuOptInMissing => a(
            "an open module older than 545.23.06 on a GPU that is not a data-center one, without `NVreg_OpenRmEnableUnsupportedGpus`",
            "Set `options nvidia NVreg_OpenRmEnableUnsupportedGpus=1` in modprobe.d, or use driver 545.23.06 or later.",
        ),
        OpenGpuUnsupported => a(
            "the open module refused a GPU without GSP (pre-Turing)",
            "That GPU needs the proprietary module: keep its node on the legacy stack (see `gpu-pre-turing`).",
        ),
        ModuleSignatureRejected => a(
            "module signature enforcement rejected (or would reject) an unsigned nvidia.ko",
            "Sign the modules with a key the firmware trusts (an enrolled MOK; DKMS can sign) or use your distribution's signed driver packages.",
        ),
        // Issue 24, driver slice (docs/domain.md "Schema 3").
        DriverBranchDropsGpu => a(
            "the loaded (or logged) driver branch no longer supports a GPU's architecture (580 was the last for Maxwell, Pascal and Volta; 470 for Kepler)",
            "Install the branch the message names (e.g. the 580 packages) and pin it against newer ones, or move the GPU; a recipe's `driver_version` makes the rollout plan refuse such a target.",
        ),
        GpuInitFailed => a(
            "the kernel log has `RmInitAdapter failed!` for a GPU (with its error code), and that GPU is not working now",
            "Fix the likely cause the message names (GSP firmware, driver branch, open module on a GPU without GSP); otherwise read the kernel log lines just before it, then reload the driver or reboot.",
        ),
        ModuleKeyUntrusted => a(
            "Secure Boot rejected the NVIDIA module's signing key (`Loading of module with unavailable key is rejected`), or, with no log, the kernel lacks the machine keyring and the module is a MOK-signed local build",
            "Boot a kernel built with CONFIG_INTEGRITY_MACHINE_KEYRING=y (then an enrolled MOK is trusted for modules), or install the distribution's signed driver; `Key was rejected by service` on modprobe's stderr says the same from user space.",
        ),
        VerdictIncomplete => a(
            "`ready` or `no-driver` would win, but a fact that verdict rests on is unknown",
            "Fix each `fact-unknown` it names (an unreadable file, a probe cut short) and scan again; the node is not called ready on facts nobody read.",
        ),
        GpuPreTuring => a(
            "a GPU has compute capability below 7.5: the open modules do not support it",
            "Keep this node on the proprietary stack (and nvidia-peermem), or replace the GPUs; nothing on the node can change it.",
        ),
        KernelBelowDmabufMinimum => a(
            "RDMA applies and the kernel release is below 5.12",
            "Upgrade the kernel to 5.12 or later (a distribution's newer or HWE kernel) before moving to DMA-BUF.",
        ),
        DmabufKernelMissing => a(
            "RDMA applies and the kernel config lacks `CONFIG_DMA_SHARED_BUFFER=y` or `CONFIG_INFINIBAND_USER_MEM=y`",
            "Boot a kernel built with both options (the evidence names the config file read).",
        ),
        ProprietaryModule => a(
            "the proprietary nvidia module is loaded",
            "Move the node to the open module: `gpufleet upgrade --canary`, then `--wave` (docs/operators.md, \"gpufleet upgrade\").",
        ),
        PeermemLoaded => a(
            "nvidia_peermem is loaded",
            "The upgrade recipe unloads it; GPUDirect RDMA then goes through DMA-BUF.",
        ),
        PeermemConfigured => a(
            "nvidia-peermem is configured to load at boot",
            "Remove it from the file the evidence names (modules-load.d, modprobe.d), or let the upgrade recipe do it, so it does not come back at the next boot.",
        ),
        NoNvidiaModule => a(
            "no nvidia module loaded and no NVIDIA GPU seen",
            "Nothing to do on a CPU node; `snapshot --check --allow-no-driver` lets such nodes pass.",
        ),
        ProbeIncomplete => a(
            "the probe's trailer is missing: the message says after which section it stopped and why (the deadline, a dropped connection, the 1 MiB output cap)",
            "Raise `--deadline` for slow nodes, or find what hung on the node (the section named); at the output cap, find why that section is so large (the section named). The facts after it are unknown.",
        ),
        KernelBelowGuideline => a(
            "the kernel release is below 6.0 (a rule of thumb; 5.12 is the documented minimum)",
            "Not blocking: plan a kernel upgrade when convenient. The threshold is `[assessment] kernel_guideline` in the config.",
        ),
        ProprietaryTaintSticky => a(
            "the open module is loaded but taint bit 0 is still set: switched without a reboot",
            "Reboot the node when convenient to clear the taint; until then its bug reports look proprietary.",
        ),
        DmabufKernelUnknown => a(
            "RDMA applies and the kernel's DMA-BUF support could not be read",
            "Make `/proc/kallsyms` and `/boot/config-RELEASE` (or `/proc/config.gz`) readable to the probe, then scan again.",
        ),
        NextBootWithoutPeermem => a(
            "nvidia_peermem is loaded and the boot kernel has no nvidia-peermem.ko",
            "After the next reboot it will not load: fine once on DMA-BUF; otherwise build it for that kernel first.",
        ),
        PeermemNotRegistered => a(
            "nvidia_peermem is loaded but not registered with the RDMA core (no `memory_peers/nv_mem*/version`): NCCL before 2.23 runs without GPUDirect RDMA",
            "Move the node to DMA-BUF; until then, reload nvidia-peermem after the RDMA drivers.",
        ),
        XidEvents => a(
            "Xid codes in the kernel log (other than 79), with their counts",
            "Look the codes up in NVIDIA's Xid catalogue; repeated ones warrant draining the node.",
        ),
        ProbeLeftProcesses => a(
            "a command the probe ran (nvidia-smi, dmesg) left processes running; the probe killed them (pids and names in the message)",
            "Find what holds those commands' output on the node (a daemon, a wrapper).",
        ),
        ModuleParamNotApplied => a(
            "a configured `NVreg_` option differs from the value in effect",
            "Reload the module or reboot so that the configuration applies, or fix the file the evidence names.",
        ),
        GspFirmwareAbsent => a(
            "the loaded driver's GSP firmware files are in none of the firmware folders (every one was read): the GPUs work now, the next module load fails",
            "Reinstall the firmware package of the loaded version, or install userspace, module and firmware of one version together, before the next reboot.",
        ),
        RdmaUserspaceLacksDmabuf => a(
            "an RDMA device is present and the host's libibverbs lacks `ibv_reg_dmabuf_mr`",
            "Upgrade rdma-core (libibverbs) to a release with DMA-BUF registration.",
        ),
        NoRdmaDevice => a(
            "no RDMA device: GPUDirect RDMA does not apply, so the kernel does not block the move",
            "Nothing to do.",
        ),
        ModuleParamIgnored => a(
            "a configured `NVreg_` option that the loaded module ignores or does not know",
            "Remove it from the modprobe.d file the evidence names.",
        ),
        GpuOperatorManaged => a(
            "the GPU Operator manages the driver: host recipes skip the node",
            "Change the driver through the ClusterPolicy or NVIDIADriver (`gpufleet policy check`, `policy generate --for SNAPSHOT`).",
        ),
        GpuBoundElsewhere => a(
            "NVIDIA GPUs bound to another driver (`nova_core`, `nouveau`, `vfio-pci`, `pci-stub`); attention (error) when nouveau or nova_core holds a GPU while an NVIDIA module is installed for the running kernel",
            "Nothing to do on a passthrough host. Otherwise follow the message: blacklist the driver in a file of its own under /etc/modprobe.d (or `modprobe.blacklist=` on the command line), rename an /etc file that shadows the package's blacklist, rebuild the initramfs and reboot.",
        ),
        RebootPending => a(
            "/run/reboot-required exists",
            "Reboot the node in a maintenance window (drained).",
        ),
        FactUnknown => a(
            "one fact could not be read: the message names it and why",
            "Fix that read (permissions, a tool missing on the node, a probe cut short) and scan again; an unknown fact is never taken as absent.",
        ),
        // Schema 3: the NVLink fabric, Xid recovery actions, MIG.
        FabricNotReady => a(
            "a GPU's NVLink fabric is not ready (`nvidia-smi -q` Fabric State In Progress or Not Started, or a failed Status), or the daemons that bring it up are not running: CUDA fails with error 802 while nvidia-smi looks healthy",
            "On HGX boards start nvidia-fabricmanager at the driver's version (B200/B300 also need NVLSM and the InfiniBand modules mlx5_ib/ib_umad); on GB200/GB300 racks check the switch trays and start nvidia-imex; then reset the GPUs or reboot.",
        ),
        XidActionRequired => a(
            "an Xid whose recovery (NVIDIA's Xid catalog, the driver's Xid 154 line, Xid 94/95's RST:/D-RST:) is a GPU reset, a drain or a node reboot, or a pending or failed row remap, named per GPU",
            "Drain the node, then do what the message says (nvidia-smi -r on that GPU, or reboot); a failed row remap or a repeating Xid calls for NVIDIA support.",
        ),
        MigWithoutInstances => a(
            "MIG mode is enabled (now, or after the next GPU reset) and the GPU has no GPU instances: it offers nothing to workloads (the device plugin refuses it)",
            "Create the instances (nvidia-smi mig -cgi … -C, or the MIG manager's config), or disable MIG (nvidia-smi -mig 0) and reset the GPU.",
        ),
        // The scheduler's view (src/fleet/scheduler.rs).
        SchedulerDown => a(
            "the node's scheduler says it is down: Slurm DOWN, not responding, powered down or not yet in service; Kubernetes not-ready or unreachable. It was still probed where it answers",
            "Find out why the scheduler lost it (its Reason, slurmctld's log, `kubectl describe node`) before trusting its status; gpufleet's rollout skips it unless `--include-drained`.",
        ),
        SchedulerDrained => a(
            "someone took the node out of service in its scheduler: Slurm DRAIN, FAIL, MAINT, RESERVED or a reboot requested; Kubernetes cordoned or tainted out of service. It was still probed where it answers",
            "Read its Reason (who and why) before upgrading it: gpufleet's rollout skips it unless `--include-drained`, and never gives back a node it did not drain.",
        ),
    }
}

/// What to do for a node of status `s`.
pub fn status(s: NodeStatus) -> &'static str {
    match s {
        NodeStatus::Ready => {
            "Nothing: the node runs the open module with DMA-BUF where RDMA applies."
        }
        NodeStatus::Migrate => {
            "Upgrade it: canaries first (`gpufleet upgrade --canary`), then waves (`--wave`)."
        }
        NodeStatus::Blocked => {
            "Fix what blocks the move first (hardware or kernel); its reasons say which."
        }
        NodeStatus::Attention => {
            "Fix it before upgrading (its reasons say what); drain it if it runs jobs."
        }
        NodeStatus::Unknown => {
            "Make the unknown facts readable (its `fact-unknown` reasons) and scan again."
        }
        NodeStatus::NoDriver => {
            "Nothing on a CPU node; with GPUs, install the driver (see `gpu-without-driver`)."
        }
        NodeStatus::Unreachable => {
            "Make it reachable over SSH: its reason and message say which step failed."
        }
    }
}

/// The status a code implies, or `advisory`.
fn implies(c: Code) -> &'static str {
    c.status().map_or("advisory", NodeStatus::as_str)
}

/// docs/reasons.md: the statuses, then every reason code grouped by the status it implies
/// (worst first, advisories last), each with its severity, meaning and what to do.
pub fn markdown() -> String {
    let mut s = String::from(
        "# What each status and reason means, and what to do\n\n\
         <!-- Generated by `gpufleet reasons --markdown > docs/reasons.md` from src/advice.rs and the\n     \
         reason table (`Code`); edit those, not this file. A unit test fails while they differ. -->\n\n\
         Every node gets one status and a list of reasons (a code, a severity, a message and the\n\
         evidence lines that prove it). The worst status wins; advisories never change it.\n\
         `gpufleet reasons CODE` prints one entry in the terminal.\n\n\
         ## Statuses\n\n| status | meaning | what to do |\n|---|---|---|\n",
    );
    for st in order() {
        let _ = writeln!(s, "| `{st}` | {} | {} |", st.meaning(), status(st));
    }
    let mut groups: Vec<Option<NodeStatus>> = order().into_iter().map(Some).collect();
    groups.push(None);
    for g in groups {
        let codes: Vec<Code> = Code::ALL
            .iter()
            .copied()
            .filter(|c| c.status() == g)
            .collect();
        if codes.is_empty() {
            continue;
        }
        let title = match g {
            Some(st) => format!("Reasons that make a node `{st}`"),
            None => "Advisories (they never change the status)".to_string(),
        };
        let _ = write!(
            s,
            "\n## {title}\n\n| code | severity | meaning | what to do |\n|---|---|---|---|\n"
        );
        for c in codes {
            let adv = reason(c);
            let _ = writeln!(
                s,
                "| `{}` | {} | {} | {} |",
                c.as_str(),
                c.severity().as_str(),
                adv.meaning,
                adv.action
            );
        }
    }
    s
}

/// The statuses, worst first as the tables sort them (`unknown` after `attention`).
fn order() -> [NodeStatus; 7] {
    [
        NodeStatus::Unreachable,
        NodeStatus::Attention,
        NodeStatus::Unknown,
        NodeStatus::Blocked,
        NodeStatus::Migrate,
        NodeStatus::NoDriver,
        NodeStatus::Ready,
    ]
}

/// One code for the terminal: `code (severity, status): meaning` and the action indented.
pub fn text(c: Code) -> String {
    let adv = reason(c);
    format!(
        "{} ({}, {}): {}\n  {}\n",
        c.as_str(),
        c.severity().as_str(),
        implies(c),
        adv.meaning,
        adv.action
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/reasons.md is exactly what the table generates, and names every code.
    #[test]
    fn docs_reasons_md_is_generated_from_the_reason_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/reasons.md");
        let file = std::fs::read_to_string(path).unwrap_or_default();
        for c in Code::ALL {
            assert!(
                file.contains(&format!("| `{}` |", c.as_str())),
                "docs/reasons.md lacks `{}`: run `cargo run -- reasons --markdown > docs/reasons.md`",
                c.as_str()
            );
        }
        assert!(
            file == markdown(),
            "docs/reasons.md differs from the reason table: run `cargo run -- reasons --markdown > docs/reasons.md`"
        );
    }

    /// Every entry is filled and fits a table cell (no `|`, no newline).
    #[test]
    fn every_code_has_a_meaning_and_an_action() {
        for c in Code::ALL {
            let adv = reason(*c);
            for t in [adv.meaning, adv.action] {
                assert!(!t.trim().is_empty(), "{}", c.as_str());
                assert!(!t.contains(['|', '\n']), "{}: {t}", c.as_str());
            }
        }
        for st in NodeStatus::ALL {
            assert!(!status(st).contains(['|', '\n']));
        }
        assert_eq!(order().len(), NodeStatus::ALL.len());
        for st in NodeStatus::ALL {
            assert!(order().contains(&st));
        }
    }
}
