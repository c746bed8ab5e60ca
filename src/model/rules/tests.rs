//! Unit tests of the assessment: every rule, over synthetic probe output.

use super::*;
use crate::model::collect;
use crate::model::parse::sections;

const B: &str = "gpufleet-test";

/// What a complete probe of a bare machine prints, overridden by `parts`.
const BARE: &[(&str, &str, &str, &str)] = &[
    ("file", "/proc/sys/kernel/tainted", "ok", "0\n"),
    ("file", "/etc/os-release", "absent", ""),
    ("file", "/proc/driver/nvidia/version", "absent", ""),
    ("file", "/sys/module/nvidia/version", "absent", ""),
    ("file", "/proc/modules", "ok", ""),
    ("dir", "/sys/module", "ok", ""),
    ("dir", "/proc/driver/nvidia/gpus", "absent", ""),
    ("dir", "/sys/bus/pci/devices", "ok", ""),
    ("dir", "/etc/modules-load.d", "absent", ""),
    ("dir", "/etc/modprobe.d", "absent", ""),
    ("dir", "/run/modules-load.d", "absent", ""),
    ("dir", "/run/modprobe.d", "absent", ""),
    ("dir", "/usr/local/lib/modules-load.d", "absent", ""),
    ("dir", "/usr/local/lib/modprobe.d", "absent", ""),
    ("dir", "/usr/lib/modules-load.d", "absent", ""),
    ("dir", "/usr/lib/modprobe.d", "absent", ""),
    ("dir", "/lib/modules-load.d", "absent", ""),
    ("dir", "/lib/modprobe.d", "absent", ""),
    ("dir", "/sys/class/infiniband", "absent", ""),
    ("dir", "/lib/modules", "absent", ""),
    ("dir", "/boot", "absent", ""),
    ("link", "/boot/vmlinuz", "absent", ""),
    ("link", "/vmlinuz", "absent", ""),
    ("file", "/boot/grub2/grubenv", "absent", ""),
    ("file", "/run/reboot-required", "absent", ""),
    ("file", "/proc/driver/nvidia/params", "absent", ""),
    (
        "file",
        "/sys/kernel/mm/memory_peers/nv_mem/version",
        "absent",
        "",
    ),
    (
        "file",
        "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
        "absent",
        "",
    ),
    ("dir", "/run/nvidia/driver", "absent", ""),
    ("count", "/usr/lib64/libibverbs.so.1", "absent", ""),
    (
        "count",
        "/usr/lib/x86_64-linux-gnu/libibverbs.so.1",
        "absent",
        "",
    ),
    (
        "count",
        "/usr/lib/aarch64-linux-gnu/libibverbs.so.1",
        "absent",
        "",
    ),
    ("count", "/usr/lib/libibverbs.so.1", "absent", ""),
    ("dir", "/sys/firmware/efi", "absent", ""),
    ("file", "/sys/kernel/security/lockdown", "absent", ""),
    ("file", "/proc/cmdline", "ok", "ro quiet\n"),
    ("cmd", "dmesg", "ok", ""),
    ("grep", "/proc/kallsyms", "ok", ""),
    ("grep", "/proc/config.gz", "absent", ""),
    (
        "cmd",
        "nvidia-smi --query-gpu=...",
        "missing-tool nvidia-smi",
        "",
    ),
];

/// A probe output from `(kind, name, status, body)` sections, ending with the trailer (`meta complete`).
fn probe(parts: &[(&str, &str, &str, &str)]) -> Facts {
    let mut raw = format!("{B} meta probe\nprotocol 1\n\n{B} end ok\n");
    let given = |k: &str, n: &str| {
        parts.iter().any(|(pk, pn, ..)| {
            let tool = |c: &str| c.split_whitespace().next().unwrap_or("").to_string();
            *pk == k && (*pn == n || k == "cmd" && tool(pn) == tool(n))
        })
    };
    let defaults = BARE.iter().filter(|(k, n, ..)| !given(k, n));
    for (kind, name, status, body) in parts.iter().chain(defaults) {
        raw.push_str(&format!("{B} {kind} {name}\n{body}\n{B} end {status}\n"));
    }
    raw.push_str(&format!("{B} meta complete\n\n{B} end ok\n"));
    collect(&sections::parse(raw.as_bytes(), B))
}

pub(super) fn codes(a: &Assessment) -> Vec<&'static str> {
    a.reasons.iter().map(|r| r.code.as_str()).collect()
}

pub(super) const OPEN: (&str, &str, &str, &str) = (
    "file",
    "/proc/driver/nvidia/version",
    "ok",
    "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \n",
);
const PROP: (&str, &str, &str, &str) = (
    "file",
    "/proc/driver/nvidia/version",
    "ok",
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n",
);
const KALLSYMS: (&str, &str, &str, &str) = (
    "grep",
    "/proc/kallsyms",
    "ok",
    "0000000000000000 T ib_umem_dmabuf_get\t[ib_uverbs]\n",
);

fn rel(r: &str) -> (&'static str, &'static str, &'static str, String) {
    ("file", "/proc/sys/kernel/osrelease", "ok", format!("{r}\n"))
}

pub(super) fn with_release(r: &str, rest: &[(&str, &str, &str, &str)]) -> Facts {
    let (k, n, s, b) = rel(r);
    let boot = format!("/boot/config-{r}");
    let mut parts = vec![(k, n, s, b.as_str())];
    if !rest.iter().any(|(_, n, ..)| *n == boot) {
        parts.push(("grep", &boot, "absent", ""));
    }
    parts.extend_from_slice(rest);
    probe(&parts)
}

#[test]
fn kernel_without_modules_and_no_driver_is_no_driver_without_unknowns() {
    // This project's own CI machines: no /proc/modules, no NVIDIA files at all.
    let f = with_release(
        "6.1.0",
        &[
            ("file", "/proc/modules", "absent", ""),
            ("file", "/proc/driver/nvidia/version", "absent", ""),
            ("dir", "/sys/bus/pci/devices", "ok", "0000:00:01.0\n"),
            (
                "file",
                "/sys/bus/pci/devices/0000:00:01.0/vendor",
                "ok",
                "0x8086\n",
            ),
            ("dir", "/etc/modprobe.d", "absent", ""),
            ("dir", "/etc/modules-load.d", "absent", ""),
            ("file", "/proc/sys/kernel/tainted", "ok", "0\n"),
        ],
    );
    let a = assess(&f, &Thresholds::default());
    assert_eq!(a.status, NodeStatus::NoDriver);
    assert_eq!(codes(&a), vec!["no-nvidia-module"]);
    assert_eq!(f.modules, Some(vec![]));
    assert_eq!(f.peermem.loaded, Some(false));
    assert_eq!(f.peermem.configured, Some(false));
}

#[test]
fn unreadable_version_file_makes_the_flavor_unknown() {
    let f = with_release(
        "6.8.0",
        &[
            ("file", "/proc/driver/nvidia/version", "denied", ""),
            ("file", "/proc/modules", "error 5", ""),
            ("dir", "/sys/module", "denied", ""),
        ],
    );
    let a = assess(&f, &Thresholds::default());
    assert_eq!(a.status, NodeStatus::Attention);
    assert!(codes(&a).contains(&"module-flavor-unknown"));
    assert!(codes(&a).contains(&"fact-unknown"));
    assert_eq!(f.peermem.loaded, None);
}

#[test]
fn taint_letters_decide_the_flavor_when_the_banner_is_garbage() {
    let modules = "nvidia 56598528 147 nvidia_uvm, Live 0x0000000000000000 (POE)\n";
    let f = with_release(
        "6.8.0",
        &[
            (
                "file",
                "/proc/driver/nvidia/version",
                "ok",
                "\u{1}\u{2}garbage\n",
            ),
            ("file", "/proc/modules", "ok", modules),
            ("file", "/sys/module/nvidia/version", "ok", "535.183.01\n"),
            KALLSYMS,
        ],
    );
    let d = f.driver.clone().unwrap();
    assert_eq!(d.flavor, Flavor::Proprietary);
    assert_eq!(d.version.as_deref(), Some("535.183.01"));
    let a = assess(&f, &Thresholds::default());
    assert_eq!(a.status, NodeStatus::Migrate);
}

pub(super) const PCI_GPU: [(&str, &str, &str, &str); 4] = [
    ("dir", "/sys/bus/pci/devices", "ok", "0000:18:00.0\n"),
    (
        "file",
        "/sys/bus/pci/devices/0000:18:00.0/vendor",
        "ok",
        "0x10de\n",
    ),
    (
        "file",
        "/sys/bus/pci/devices/0000:18:00.0/device",
        "ok",
        "0x20b2\n",
    ),
    (
        "file",
        "/sys/bus/pci/devices/0000:18:00.0/class",
        "ok",
        "0x030200\n",
    ),
];

#[test]
fn gpu_without_driver() {
    let mut parts = PCI_GPU.to_vec();
    parts.push(("file", "/proc/driver/nvidia/version", "absent", ""));
    parts.push(("file", "/proc/modules", "ok", ""));
    let f = with_release("6.8.0", &parts);
    let a = assess(&f, &Thresholds::default());
    assert_eq!(a.status, NodeStatus::Attention);
    assert!(codes(&a).contains(&"gpu-without-driver"));
    // The GPU is still reported, named from the PCI table.
    assert_eq!(f.gpus[0].name.as_deref(), Some("NVIDIA A100-SXM4-80GB"));
    assert!(!f.gpus[0].initialized);
}

#[test]
fn gpu_not_initialized_while_the_module_is_loaded() {
    let mut parts = PCI_GPU.to_vec();
    parts.extend([
        OPEN,
        KALLSYMS,
        ("dir", "/proc/driver/nvidia/gpus", "ok", ""),
    ]);
    let f = with_release("6.8.0", &parts);
    let a = assess(&f, &Thresholds::default());
    assert_eq!(a.status, NodeStatus::Attention);
    assert!(codes(&a).contains(&"gpu-not-initialized"));
}

#[test]
fn blackwell_with_the_proprietary_module_requires_open() {
    let smi = "index, name, pci.bus_id, compute_cap\n0, NVIDIA B200, 00000000:18:00.0, 10.0\n";
    let f = with_release(
        "6.8.0",
        &[
            PROP,
            KALLSYMS,
            ("cmd", "nvidia-smi --query-gpu=x", "ok", smi),
        ],
    );
    let a = assess(&f, &Thresholds::default());
    assert_eq!(a.status, NodeStatus::Attention);
    assert!(codes(&a).contains(&"gpu-requires-open"));
    assert!(codes(&a).contains(&"proprietary-module"));
}

#[test]
fn open_with_sticky_taint_is_ready_with_an_advisory() {
    let f = with_release(
        "6.8.0",
        &[
            OPEN,
            KALLSYMS,
            ("file", "/proc/sys/kernel/tainted", "ok", "12289\n"),
        ],
    );
    let a = assess(&f, &Thresholds::default());
    assert_eq!(a.status, NodeStatus::Ready);
    assert_eq!(
        codes(&a),
        vec!["proprietary-taint-sticky", "no-rdma-device"]
    );
}

#[test]
fn backported_kernel_with_the_symbol_is_not_blocked() {
    let f = with_release("4.18.0-513.el8.x86_64", &[OPEN, KALLSYMS]);
    let a = assess(&f, &Thresholds::default());
    assert_eq!(a.dma_buf, Some(true));
    assert_eq!(a.status, NodeStatus::Ready);
    assert!(!codes(&a).contains(&"kernel-below-dmabuf-minimum"));
    assert!(codes(&a).contains(&"kernel-below-guideline"));
}

const IB: (&str, &str, &str, &str) = ("dir", "/sys/class/infiniband", "ok", "mlx5_0\n");

#[test]
fn dmabuf_unknown_where_rdma_applies_is_unknown_and_missing_config_blocks() {
    let parts = [
        OPEN,
        IB,
        ("grep", "/proc/kallsyms", "ok", ""),
        ("grep", "/boot/config-6.8.0", "absent", ""),
    ];
    let f = with_release("6.8.0", &parts);
    let a = assess(&f, &Thresholds::default());
    assert_eq!(a.dma_buf, None);
    assert_eq!(a.status, NodeStatus::Unknown);
    assert!(codes(&a).contains(&"dmabuf-kernel-unknown"));
    assert!(codes(&a).contains(&"verdict-incomplete"));
    // Without an RDMA device the same node is ready: DMA-BUF support does not matter there.
    let f = with_release("6.8.0", &parts[..1]);
    let a = assess(&f, &Thresholds::default());
    assert_eq!(a.status, NodeStatus::Ready);
    assert!(!codes(&a).contains(&"dmabuf-kernel-unknown"));
    assert!(codes(&a).contains(&"no-rdma-device"));

    let cfg = "CONFIG_DMA_SHARED_BUFFER=y\n# CONFIG_INFINIBAND_USER_MEM is not set\n";
    let f = with_release(
        "6.8.0",
        &[
            OPEN,
            IB,
            ("grep", "/proc/kallsyms", "ok", ""),
            ("grep", "/boot/config-6.8.0", "ok", cfg),
        ],
    );
    let a = assess(&f, &Thresholds::default());
    assert_eq!(a.dma_buf, Some(false));
    assert_eq!(a.status, NodeStatus::Blocked);
    let r = a
        .reasons
        .iter()
        .find(|r| r.code == Code::DmabufKernelMissing)
        .unwrap();
    assert!(
        r.evidence
            .iter()
            .any(|e| e.line == "# CONFIG_INFINIBAND_USER_MEM is not set")
    );
}

#[test]
fn thresholds_come_from_configuration() {
    let f = with_release("5.15.0-105-generic", &[OPEN, KALLSYMS]);
    let strict = Thresholds {
        kernel_guideline: MajorMinor(5, 10),
        ..Thresholds::default()
    };
    assert!(codes(&assess(&f, &Thresholds::default())).contains(&"kernel-below-guideline"));
    assert!(!codes(&assess(&f, &strict)).contains(&"kernel-below-guideline"));
    let f = with_release("5.15.0", &[OPEN, IB]);
    let higher_min = Thresholds {
        dmabuf_min_kernel: MajorMinor(6, 1),
        ..Thresholds::default()
    };
    assert_eq!(assess(&f, &higher_min).status, NodeStatus::Blocked);
}

#[test]
fn a_cpu_node_on_an_old_kernel_is_no_driver_not_blocked() {
    let f = with_release(
        "4.18.0",
        &[
            ("file", "/proc/driver/nvidia/version", "absent", ""),
            ("file", "/proc/modules", "ok", ""),
        ],
    );
    let a = assess(&f, &Thresholds::default());
    assert_eq!(a.status, NodeStatus::NoDriver);
    assert_eq!(codes(&a), vec!["no-nvidia-module"]);
}

#[test]
fn every_code_round_trips_and_has_the_documented_severity() {
    for c in Code::ALL {
        assert_eq!(c.as_str().parse::<Code>().unwrap(), *c);
        if c.status() == Some(NodeStatus::Migrate)
            || c.status().is_none()
                && !matches!(
                    *c,
                    Code::FactUnknown
                        | Code::ProbeIncomplete
                        | Code::NoRdmaDevice
                        | Code::ModuleParamIgnored
                        | Code::GpuOperatorManaged
                        | Code::GpuBoundElsewhere
                        | Code::RebootPending
                        | Code::SchedulerDown
                        | Code::SchedulerDrained
                )
        {
            assert_eq!(c.severity(), Severity::Warn, "{c:?}");
        }
    }
    assert_eq!(Code::ALL.len(), 55);
}

#[test]
fn every_code_a_probed_node_can_get_is_listed_by_one_rule_of_the_table() {
    // The scan's codes (unreachable, the scheduler's view) and the verdict's own are emitted
    // outside the table; `fact-unknown` comes from three rows (the fabric, Xid and MIG facts;
    // the unknown facts a rule needs; then the rest).
    for &c in Code::ALL {
        let rows: Vec<&str> = RULES
            .iter()
            .filter(|r| r.codes.contains(&c))
            .map(|r| r.name)
            .collect();
        match c {
            _ if c.status() == Some(NodeStatus::Unreachable)
                || matches!(
                    c,
                    Code::VerdictIncomplete | Code::SchedulerDown | Code::SchedulerDrained
                ) =>
            {
                assert!(rows.is_empty(), "{c:?} is not a rule's: {rows:?}")
            }
            Code::FactUnknown => assert_eq!(rows.len(), 3, "{rows:?}"),
            _ => assert_eq!(rows.len(), 1, "{c:?} in {rows:?}"),
        }
    }
}
