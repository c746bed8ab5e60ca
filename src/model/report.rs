//! The per-node report and the snapshot document (docs/domain.md "Snapshot JSON",
//! schema_version 3; the schema-3 objects are in schema3.rs). Unknown values are `null`; an
//! unreachable node has `name`, `status`, `reasons` and every fact `null`. The JSON Schema of
//! the document, docs/report.schema.json, is generated from these types (`report_schema` below).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::facts::{Evidence, Facts, SmiOutcome};
use super::parse::driver::Flavor;
use super::parse::smi::SmiFailure;
use super::rules::{Assessment, Code, NodeStatus, Reason};

/// The `schema_version` gpufleet writes (docs/domain.md "Snapshot JSON"); readers accept
/// [`READABLE_SCHEMA_VERSIONS`].
pub const SCHEMA_VERSION: u32 = 3;

/// The schema versions `diff`, `--from` and every other reader accept: 1 to [`SCHEMA_VERSION`]
/// (each version adds fields; none renames or removes one).
pub const READABLE_SCHEMA_VERSIONS: std::ops::RangeInclusive<u64> = 1..=SCHEMA_VERSION as u64;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct KernelJson {
    pub release: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct OsJson {
    pub pretty_name: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct DriverJson {
    /// `open`, `proprietary`, `none` or `unknown`.
    pub flavor: Flavor,
    /// Version of the loaded kernel module.
    pub version: Option<String>,
    pub arch: Option<String>,
    /// Version of the userspace driver (NVML): from nvidia-smi's driver_version, or the NVML
    /// version in a mismatch message.
    pub userspace_version: Option<String>,
    /// `host` or `gpu-operator` (the driver container's root at /run/nvidia/driver); `null`
    /// with no driver loaded or when unknown. Schema 2.
    #[serde(default)]
    pub managed_by: Option<ManagedBy>,
    /// Schema 3: the driver branch, the version's first field (`580` of `580.95.05`): of the
    /// loaded module, else of the version the kernel log's legacy notice names; `null` when
    /// neither is known.
    #[serde(default)]
    pub branch: Option<u32>,
}

/// Who manages a node's NVIDIA driver (`driver.managed_by`, docs/domain.md "Snapshot JSON").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub enum ManagedBy {
    /// The host's own packages (DKMS, precompiled, a .run installer).
    Host,
    /// The GPU Operator's driver container (its root at /run/nvidia/driver).
    GpuOperator,
}

impl ManagedBy {
    /// The JSON value: `host`, `gpu-operator`.
    pub fn as_str(self) -> &'static str {
        match self {
            ManagedBy::Host => "host",
            ManagedBy::GpuOperator => "gpu-operator",
        }
    }
}

/// Whether the kernel the next reboot starts has the NVIDIA driver (the CSV's
/// `next_boot_driver`, docs/domain.md "Snapshot JSON"); serialized as its machine value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NextBootDriver {
    /// The boot kernel has an nvidia.ko (or is the running one, which has the driver).
    #[serde(rename = "ok")]
    Ok,
    /// The next reboot comes up without the driver (`next-boot-without-driver`).
    #[serde(rename = "missing")]
    Missing,
    /// Nothing to check: no host nvidia.ko (the GPU Operator's driver, no driver running).
    #[serde(rename = "n/a")]
    NotApplicable,
}

impl NextBootDriver {
    /// Every state, in the order the exports list them.
    pub const ALL: [NextBootDriver; 3] = [
        NextBootDriver::Ok,
        NextBootDriver::Missing,
        NextBootDriver::NotApplicable,
    ];

    /// The machine value: `ok`, `missing`, `n/a` (CSV, Prometheus, diff).
    pub fn as_str(self) -> &'static str {
        match self {
            NextBootDriver::Ok => "ok",
            NextBootDriver::Missing => "missing",
            NextBootDriver::NotApplicable => "n/a",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct GpuJson {
    pub index: u32,
    pub name: Option<String>,
    /// Lower-case `dddd:bb:dd.f`.
    pub bus_id: Option<String>,
    pub uuid: Option<String>,
    /// Upper-case hex, 4 digits (`20B2`).
    pub pci_device_id: Option<String>,
    /// "major.minor".
    pub compute_capability: Option<String>,
    pub open_capable: Option<bool>,
    /// Schema 3: MIG mode and GPU instances (`null`: n/a, unknown, or an older document).
    #[serde(default)]
    pub mig: Option<super::schema3::MigJson>,
    /// Schema 3: row remapping pending / failed (`null`: n/a before Ampere, or unknown).
    #[serde(default)]
    pub remapped_rows: Option<super::schema3::RemapJson>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ModuleJson {
    pub name: String,
    pub state: super::parse::modules::ModuleState,
    pub taint: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct DmaBufJson {
    pub kernel_support: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct PeermemJson {
    pub loaded: Option<bool>,
    pub configured: Option<bool>,
    /// Registered with the RDMA stack as nv_mem or nv_mem_nc (what NCCL before 2.23 tests).
    /// Schema 2.
    #[serde(default)]
    pub registered: Option<bool>,
}

/// `boot` (schema 2): the next boot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct BootJson {
    /// The running kernel release.
    pub running: Option<String>,
    /// The release the next reboot starts.
    pub boot_kernel: Option<String>,
    /// /run/reboot-required exists.
    pub reboot_pending: Option<bool>,
    /// Installed kernels and the NVIDIA module files under their `/lib/modules/<release>`.
    pub kernels: Option<Vec<InstalledKernelJson>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct InstalledKernelJson {
    pub release: String,
    /// Paths on the node; `null` when that folder could not be searched.
    pub nvidia_modules: Option<Vec<String>>,
}

/// `rollout` (schema 2, gpufleet's own state): the node lock read by the probe, and the
/// rollout of this machine's journal that drained the node and has not given it back.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct RolloutJson {
    /// The node lock (`<root>/var/lib/gpufleet/rollout.lock`) is held; `null` when it could
    /// not be read (or the node was not reached).
    pub locked: Option<bool>,
    /// Who holds it: `{rollout, operator, since}`; `null` when free or unknown.
    pub lock: Option<crate::model::parse::lock::LockOwner>,
    /// The rollout that drained the node (its drain started) and has not uncordoned it, from
    /// this machine's rollout journal; `null` when the journal says none.
    pub drained_by: Option<String>,
}

/// gpufleet's own marks on a node ([`RolloutJson::marks`]): what the matrix's ROLLOUT cell
/// says (`drained`, `locked`, both, or nothing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RolloutMarks {
    /// A rollout of this machine's journal drained the node and has not given it back
    /// (`rollout.drained_by` is set).
    pub drained: bool,
    /// The node lock is held (`rollout.locked` is `true`; unknown is not a mark).
    pub locked: bool,
}

impl RolloutJson {
    /// The marks of this state: drained by a rollout, the node lock held.
    pub fn marks(&self) -> RolloutMarks {
        RolloutMarks {
            drained: self.drained_by.is_some(),
            locked: self.locked == Some(true),
        }
    }
}

/// `firmware` (schema 2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct FirmwareJson {
    /// `gsp*.bin` for the loaded driver in a firmware search folder; `null` unless a GPU is not
    /// initialized (while GPUs work, its absence proves nothing).
    pub gsp_files_present: Option<bool>,
    /// Schema 3: each firmware folder looked in for the loaded version's GSP files; `null` with
    /// no loaded driver version.
    #[serde(default)]
    pub gsp_dirs: Option<Vec<super::schema3::GspDirJson>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ConfiguredParamJson {
    /// The key without `NVreg_`, as /proc/driver/nvidia/params names it.
    pub key: String,
    pub value: String,
    /// The modprobe.d file it came from.
    pub source: String,
}

/// `module_params` (schema 2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct ModuleParamsJson {
    /// `options nvidia NVreg_K=V` lines of the boot configuration, in reading order.
    pub configured: Option<Vec<ConfiguredParamJson>>,
    /// /proc/driver/nvidia/params; `null` with no module loaded or when unreadable.
    pub in_effect: Option<BTreeMap<String, String>>,
}

/// `rdma` (schema 2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct RdmaJson {
    /// Entries of /sys/class/infiniband.
    pub devices: Option<Vec<String>>,
    /// `ibv_reg_dmabuf_mr` in the host's libibverbs.so.1; `null` with no host library.
    pub libibverbs_dmabuf: Option<bool>,
}

/// `secure_boot` (schema 2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct SecureBootJson {
    pub enabled: Option<bool>,
    /// The lockdown mode (`none`, `integrity`, `confidentiality`).
    pub lockdown: Option<String>,
    /// The running kernel's host nvidia.ko ends with a module signature.
    pub nvidia_ko_signed: Option<bool>,
    /// Secure Boot, CONFIG_MODULE_SIG_FORCE=y or module.sig_enforce=1.
    pub signature_enforced: Option<bool>,
    /// Schema 3: `CONFIG_INTEGRITY_MACHINE_KEYRING=y` in the kernel config (a MOK-enrolled key
    /// is trusted for modules only then); `false` when the config was read without it.
    #[serde(default)]
    pub machine_keyring: Option<bool>,
    /// Schema 3: the signer of the running kernel's host nvidia.ko (the common name `modinfo -F
    /// signer` prints); `null` when unsigned, absent, or unknown (a compressed module without
    /// its decompressor on the node).
    #[serde(default)]
    pub nvidia_ko_signer: Option<String>,
}

/// `kernel_log` (schema 2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct KernelLogJson {
    /// Xid events in the lines read, by code; `null` when the log could not be read.
    pub xid_counts: Option<BTreeMap<String, u32>>,
    /// Schema 3: per GPU and Xid code, with the recovery action (`null`: the log is unknown).
    #[serde(default)]
    pub xids: Option<Vec<super::schema3::XidJson>>,
    /// Schema 3: the driver's Xid 154 recovery-action lines.
    #[serde(default)]
    pub recovery_actions: Option<Vec<super::schema3::RecoveryActionJson>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct TaintJson {
    /// Bit 0 (P) of /proc/sys/kernel/tainted.
    pub proprietary: Option<bool>,
    pub value: Option<u64>,
}

/// The kernel's taint flags, by bit: the letter and what it means
/// (`torvalds/linux: Documentation/admin-guide/tainted-kernels.rst`, "Table for decoding
/// tainted state").
pub const TAINT_FLAGS: [(char, &str); 20] = [
    ('P', "proprietary module"),
    ('F', "module force-loaded"),
    ('S', "kernel running on an out of specification system"),
    ('R', "module force-unloaded"),
    ('M', "machine check"),
    ('B', "bad page"),
    ('U', "taint requested by userspace"),
    ('D', "kernel died recently (OOPS or BUG)"),
    ('A', "ACPI table overridden"),
    ('W', "kernel warning"),
    ('C', "staging driver"),
    ('I', "platform firmware workaround"),
    ('O', "out-of-tree module"),
    ('E', "unsigned module"),
    ('L', "soft lockup"),
    ('K', "live patched"),
    ('X', "auxiliary taint (distribution)"),
    ('T', "built with struct randomization"),
    ('N', "test module"),
    ('J', "fwctl device used"),
];

/// A /proc/sys/kernel/tainted value in words: `0` is `not tainted`; otherwise each set bit's
/// letter and meaning ([`TAINT_FLAGS`]), and `bit N` for a bit the table does not name
/// (`12288` → `O out-of-tree module, E unsigned module`).
pub fn taint_words(value: u64) -> String {
    if value == 0 {
        return "not tainted".into();
    }
    (0..64)
        .filter(|b| value & (1u64 << b) != 0)
        .map(|b| match TAINT_FLAGS.get(b) {
            Some((letter, what)) => format!("{letter} {what}"),
            None => format!("bit {b}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// One node's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct NodeReport {
    pub name: String,
    pub status: NodeStatus,
    /// RFC 3339, UTC, seconds.
    pub scanned_at: String,
    /// Wall time of the probe, in milliseconds.
    pub duration_ms: u64,
    pub reasons: Vec<Reason>,
    pub kernel: Option<KernelJson>,
    pub os: Option<OsJson>,
    pub driver: Option<DriverJson>,
    pub gpus: Option<Vec<GpuJson>>,
    /// The NVIDIA, RDMA core and mlx5 modules from /proc/modules (not every module).
    pub modules: Option<Vec<ModuleJson>>,
    pub dma_buf: Option<DmaBufJson>,
    pub peermem: Option<PeermemJson>,
    pub taint: Option<TaintJson>,
    /// Schema 2 facts (`null` on an unreachable node, and in schema-1 documents).
    #[serde(default)]
    pub boot: Option<BootJson>,
    #[serde(default)]
    pub firmware: Option<FirmwareJson>,
    #[serde(default)]
    pub module_params: Option<ModuleParamsJson>,
    #[serde(default)]
    pub rdma: Option<RdmaJson>,
    #[serde(default)]
    pub secure_boot: Option<SecureBootJson>,
    #[serde(default)]
    pub kernel_log: Option<KernelLogJson>,
    /// Schema 3: the NVLink fabric (`null` on an unreachable node and in older documents).
    #[serde(default)]
    pub fabric: Option<super::schema3::FabricJson>,
    /// Schema 3: the NVIDIA display/3D PCI functions and the driver bound to each (`null` when
    /// the PCI scan is unknown, on an unreachable node and in older documents).
    #[serde(default)]
    pub pci_devices: Option<Vec<super::schema3::PciDeviceJson>>,
    /// Schema 3: the `blacklist` lines of modprobe.d and the command line's blacklists (`null`
    /// when a folder or file that takes effect could not be read).
    #[serde(default)]
    pub blacklists: Option<Vec<super::schema3::BlacklistJson>>,
    /// gpufleet's rollout state of the node: lock and drain (`null` in documents older than it).
    #[serde(default)]
    pub rollout: Option<RolloutJson>,
    /// Each fact's evidence, by the JSON path of the fact (`kernel.release`, `driver.flavor`,
    /// `boot.boot_kernel`, …): the file or command and the raw line.
    #[serde(default)]
    pub evidence: BTreeMap<String, Vec<Evidence>>,
}

/// Modules worth showing: the NVIDIA ones and those GPUDirect RDMA goes through.
pub fn is_relevant_module(name: &str) -> bool {
    name.starts_with("nvidia")
        || name.starts_with("mlx5_")
        || matches!(name, "ib_core" | "ib_uverbs" | "gdrdrv")
}

impl NodeReport {
    /// The report of a node whose probe ran.
    pub fn from_facts(
        name: String,
        facts: &Facts,
        a: &Assessment,
        scanned_at: String,
        duration_ms: u64,
    ) -> Self {
        let userspace_version = match &facts.smi {
            SmiOutcome::Answered { gpus, .. } => gpus.iter().find_map(|g| g.driver_version.clone()),
            SmiOutcome::Failed {
                failure: SmiFailure::Mismatch { nvml_version },
                ..
            } => nvml_version.clone(),
            _ => None,
        };
        let driver = facts.driver.as_ref().map(|d| DriverJson {
            flavor: d.flavor,
            version: d.version.clone(),
            arch: d.arch.clone(),
            userspace_version: userspace_version.clone(),
            managed_by: match (d.flavor, facts.gpu_operator.value) {
                (Flavor::None, _) | (_, None) => None,
                (_, Some(true)) => Some(ManagedBy::GpuOperator),
                (_, Some(false)) => Some(ManagedBy::Host),
            },
            branch: super::schema3::driver_branch(facts),
        });
        let not_initialized = a
            .reasons
            .iter()
            .any(|r| matches!(r.code, Code::GpuNotInitialized | Code::GpuWithoutDriver));
        let evidence = super::report_evidence::evidence(facts, a, not_initialized);
        NodeReport {
            name,
            status: a.status,
            scanned_at,
            duration_ms,
            reasons: a.reasons.clone(),
            kernel: Some(KernelJson {
                release: facts.kernel.release.clone(),
            }),
            os: Some(OsJson {
                pretty_name: facts.os_pretty_name.clone(),
            }),
            driver,
            gpus: Some(
                facts
                    .gpus
                    .iter()
                    .zip(&a.open_capable)
                    .map(|(g, oc)| {
                        let (mig, remapped_rows) =
                            super::schema3::gpu_mig_remap(facts, g.bus_id.as_deref(), g.index);
                        GpuJson {
                            index: g.index,
                            name: g.name.clone(),
                            bus_id: g.bus_id.clone(),
                            uuid: g.uuid.clone(),
                            pci_device_id: g.pci_device_id.map(|id| format!("{id:04X}")),
                            compute_capability: g.compute_capability.clone(),
                            open_capable: *oc,
                            mig,
                            remapped_rows,
                        }
                    })
                    .collect(),
            ),
            modules: facts.modules.as_ref().map(|mods| {
                mods.iter()
                    .filter(|m| is_relevant_module(&m.name))
                    .map(|m| ModuleJson {
                        name: m.name.clone(),
                        state: m.state,
                        taint: m.taint.clone(),
                    })
                    .collect()
            }),
            dma_buf: Some(DmaBufJson {
                kernel_support: a.dma_buf,
            }),
            peermem: Some(PeermemJson {
                loaded: facts.peermem.loaded,
                configured: facts.peermem.configured,
                registered: facts.peermem.registered.value,
            }),
            taint: Some(TaintJson {
                proprietary: facts.kernel.taint.map(|v| v & 1 == 1),
                value: facts.kernel.taint,
            }),
            boot: Some(BootJson {
                running: facts.kernel.release.clone(),
                boot_kernel: facts.boot.boot_kernel.value.clone(),
                reboot_pending: facts.boot.reboot_pending.value,
                kernels: facts.boot.kernels.value.as_ref().map(|ks| {
                    ks.iter()
                        .map(|k| InstalledKernelJson {
                            release: k.release.clone(),
                            nvidia_modules: k.nvidia_modules.clone(),
                        })
                        .collect()
                }),
            }),
            firmware: Some(FirmwareJson {
                gsp_files_present: if not_initialized {
                    facts.firmware.gsp_files_present.value
                } else {
                    None
                },
                gsp_dirs: super::schema3::gsp_dirs_json(facts),
            }),
            module_params: Some(ModuleParamsJson {
                configured: facts.peermem.configured.map(|_| {
                    facts
                        .module_params
                        .configured
                        .iter()
                        .map(|(c, src)| ConfiguredParamJson {
                            key: c.key.clone(),
                            value: c.value.clone(),
                            source: src.clone(),
                        })
                        .collect()
                }),
                in_effect: facts.module_params.in_effect.value.clone(),
            }),
            rdma: Some(RdmaJson {
                devices: facts.rdma.devices.clone(),
                libibverbs_dmabuf: facts.rdma.libibverbs_dmabuf.value,
            }),
            secure_boot: Some(SecureBootJson {
                enabled: facts.firmware.secure_boot.value,
                lockdown: facts.firmware.lockdown.value.clone(),
                nvidia_ko_signed: facts.firmware.nvidia_ko_signed.value,
                signature_enforced: facts.firmware.signature_enforced.value,
                machine_keyring: facts.firmware.machine_keyring.value,
                nvidia_ko_signer: facts.firmware.nvidia_ko_signer.value.clone(),
            }),
            kernel_log: Some(KernelLogJson {
                xid_counts: facts.kernel_log.messages.value.as_ref().map(|log| {
                    super::parse::klog::xid_counts(log)
                        .into_iter()
                        .map(|(c, n)| (c.to_string(), n))
                        .collect()
                }),
                xids: super::schema3::xids_json(facts).0,
                recovery_actions: super::schema3::xids_json(facts).1,
            }),
            fabric: super::schema3::fabric_json(facts),
            pci_devices: super::schema3::pci_devices_json(facts),
            blacklists: super::schema3::blacklists_json(facts),
            rollout: Some(RolloutJson {
                locked: facts.node_lock.value.as_ref().map(Option::is_some),
                lock: facts.node_lock.value.clone().flatten(),
                drained_by: None,
            }),
            evidence,
        }
    }

    /// gpufleet's marks on the node (none when the report has no rollout state).
    pub fn rollout_marks(&self) -> RolloutMarks {
        self.rollout
            .as_ref()
            .map(RolloutJson::marks)
            .unwrap_or_default()
    }

    /// Who manages the driver (`driver.managed_by`); `None` when unknown or no driver.
    pub fn managed_by(&self) -> Option<ManagedBy> {
        self.driver.as_ref().and_then(|d| d.managed_by)
    }

    /// `next_boot_driver` of the CSV, or `None` when unknown (docs/domain.md, "Snapshot
    /// JSON"); from the report's own facts.
    pub fn next_boot_driver(&self) -> Option<NextBootDriver> {
        if self.status == NodeStatus::Unreachable {
            return None;
        }
        if self
            .reasons
            .iter()
            .any(|r| r.code == Code::NextBootWithoutDriver)
        {
            return Some(NextBootDriver::Missing);
        }
        if self.managed_by() == Some(ManagedBy::GpuOperator) {
            return Some(NextBootDriver::NotApplicable);
        }
        let boot = self.boot.as_ref()?;
        let running = boot.running.as_deref()?;
        let kernels = boot.kernels.as_ref()?;
        let has_driver = |rel: &str| {
            kernels.iter().find(|k| k.release == rel).map(|k| {
                k.nvidia_modules.as_ref().map(|m| {
                    m.iter().any(|p| {
                        super::parse::boot::module_file(p)
                            == Some(super::parse::boot::ModuleFile::Driver)
                    })
                })
            })
        };
        match has_driver(running) {
            Some(Some(true)) => {}
            Some(None) => return None,
            Some(Some(false)) | None => return Some(NextBootDriver::NotApplicable),
        }
        let target = boot.boot_kernel.as_deref()?;
        match has_driver(target) {
            Some(Some(true)) => Some(NextBootDriver::Ok),
            _ if target == running => Some(NextBootDriver::Ok),
            _ => None,
        }
    }

    /// The report of a node the scan could not run on: one `unreachable` reason, facts `null`.
    pub fn unreachable(
        name: String,
        code: Code,
        message: String,
        evidence: Vec<Evidence>,
        scanned_at: String,
        duration_ms: u64,
    ) -> Self {
        NodeReport {
            name,
            status: NodeStatus::Unreachable,
            scanned_at,
            duration_ms,
            reasons: vec![Reason::new(code, message, evidence)],
            kernel: None,
            os: None,
            driver: None,
            gpus: None,
            modules: None,
            dma_buf: None,
            peermem: None,
            taint: None,
            boot: None,
            firmware: None,
            module_params: None,
            rdma: None,
            secure_boot: None,
            kernel_log: None,
            fabric: None,
            pci_devices: None,
            blacklists: None,
            rollout: Some(RolloutJson::default()),
            evidence: BTreeMap::new(),
        }
    }

    /// "8x NVIDIA A100-SXM4-80GB", "4x A, 4x B", "" for none, `None` when unknown.
    pub fn gpu_summary(&self) -> Option<String> {
        let gpus = self.gpus.as_ref()?;
        let mut groups: Vec<(String, usize)> = Vec::new();
        for g in gpus {
            let name = g.name.clone().unwrap_or_else(|| "unknown GPU".into());
            match groups.iter_mut().find(|(n, _)| *n == name) {
                Some((_, c)) => *c += 1,
                None => groups.push((name, 1)),
            }
        }
        Some(
            groups
                .iter()
                .map(|(n, c)| format!("{c}x {n}"))
                .collect::<Vec<_>>()
                .join(", "),
        )
    }

    /// The lowest compute capability among the GPUs, "major.minor".
    pub fn min_compute_capability(&self) -> Option<String> {
        self.gpus
            .as_ref()?
            .iter()
            .filter_map(|g| {
                let s = g.compute_capability.as_deref()?;
                Some((s.parse::<super::rules::MajorMinor>().ok()?, s))
            })
            .min_by_key(|(mm, _)| *mm)
            .map(|(_, s)| s.to_string())
    }
}

/// Node counts per status (of the nodes' `statuses`); every status is present.
pub fn summary(statuses: impl IntoIterator<Item = NodeStatus>) -> BTreeMap<&'static str, usize> {
    let mut m: BTreeMap<&'static str, usize> =
        NodeStatus::ALL.iter().map(|s| (s.as_str(), 0)).collect();
    for s in statuses {
        *m.entry(s.as_str()).or_default() += 1;
    }
    m
}

/// The whole snapshot document.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
pub struct Snapshot {
    /// 3 (this version; `SCHEMA_VERSION`); readers accept 1 to 3.
    #[cfg_attr(test, schemars(range(min = 1, max = 3)))]
    pub schema_version: u32,
    /// RFC 3339, UTC, seconds.
    pub generated_at: String,
    /// gpufleet's version (Cargo.toml).
    pub tool_version: &'static str,
    pub nodes: Vec<NodeReport>,
    /// Node counts per status; every status is present.
    #[cfg_attr(test, schemars(schema_with = "super::report_schema::summary"))]
    pub summary: BTreeMap<&'static str, usize>,
}

impl Snapshot {
    pub fn new(generated_at: String, nodes: Vec<NodeReport>) -> Self {
        Snapshot {
            schema_version: SCHEMA_VERSION,
            generated_at,
            tool_version: env!("CARGO_PKG_VERSION"),
            summary: summary(nodes.iter().map(|n| n.status)),
            nodes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taint_values_in_words() {
        assert_eq!(taint_words(0), "not tainted");
        assert_eq!(
            taint_words(12288),
            "O out-of-tree module, E unsigned module"
        );
        assert_eq!(
            taint_words(1 | (1 << 12) | (1 << 40)),
            "P proprietary module, O out-of-tree module, bit 40"
        );
    }
}
