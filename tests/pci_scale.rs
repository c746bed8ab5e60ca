//! A node with thousands of PCI functions (SR-IOV virtual functions of a network card) keeps its
//! facts (issue 21, item 2): the probe summarizes the PCI scan at the source (NVIDIA and physical
//! network/RDMA functions in full, each parent's VFs counted, the others counted), so the output
//! stays within the 1 MiB cap. On temp copies of a fixture node, through the real binary and the
//! real probe script.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use support::{codes, scratch};

mod support;

fn snapshot(node: &Path) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_gpufleet"))
        .arg("snapshot")
        .arg("--config")
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config/config.example.toml"))
        .arg("--root")
        .arg(node.join("root"))
        .args(["--nvidia-smi-timeout", "2", "--format", "json"])
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", node.join("bin").display()),
        )
        .output()
        .unwrap()
}

fn report(node: &Path) -> Value {
    let out = snapshot(node);
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    doc["nodes"][0].clone()
}

/// Adds PCI function `bus` (vendor, class) under the node's sysfs, as the kernel lays it out:
/// /sys/devices/pci0000:3a/BUS, linked from /sys/bus/pci/devices/BUS.
fn function(root: &Path, bus: &str, vendor: &str, class: &str) -> PathBuf {
    let dev = root.join("sys/devices/pci0000:3a").join(bus);
    std::fs::create_dir_all(&dev).unwrap();
    std::fs::write(dev.join("vendor"), format!("{vendor}\n")).unwrap();
    std::fs::write(dev.join("class"), format!("{class}\n")).unwrap();
    std::fs::write(dev.join("device"), "0x101e\n").unwrap();
    symlink(
        format!("../../../devices/pci0000:3a/{bus}"),
        root.join("sys/bus/pci/devices").join(bus),
    )
    .unwrap();
    dev
}

/// One ConnectX PF with `vfs` virtual functions (each with `physfn`, the PF with `virtfnN`), and
/// `others` functions of another kind.
fn sriov(root: &Path, vfs: usize, others: usize) {
    let pf = function(root, "0000:3b:00.0", "0x15b3", "0x020700");
    for i in 0..vfs {
        let bus = format!("0000:{:02x}:{:02x}.{}", 0x40 + i / 256, (i / 8) % 32, i % 8);
        let vf = function(root, &bus, "0x15b3", "0x020700");
        symlink("../0000:3b:00.0", vf.join("physfn")).unwrap();
        symlink(format!("../{bus}"), pf.join(format!("virtfn{i}"))).unwrap();
    }
    for i in 0..others {
        function(
            root,
            &format!("0000:3a:{:02x}.{}", i / 8, i % 8),
            "0x8086",
            "0x088000",
        );
    }
}

#[test]
fn ten_thousand_pci_functions_keep_every_fact() {
    let (_t, node) = scratch("h200-open-580-k6.18-real");
    let before = report(&node);
    assert_eq!(before["status"], "ready", "{before:#}");
    sriov(&node.join("root"), 9_900, 99);
    let after = report(&node);
    // The same report: status, reasons, every GPU fact (nothing unknown, nothing cut).
    for k in [
        "status", "gpus", "driver", "modules", "dma_buf", "peermem", "rdma",
    ] {
        assert_eq!(after[k], before[k], "{k}: {after:#}");
    }
    assert_eq!(codes(&after), codes(&before));
    assert!(!codes(&after).contains(&"probe-output-invalid".to_string()));
}

#[test]
fn a_function_whose_vendor_cannot_be_read_makes_the_pci_gpus_unknown() {
    let (_t, node) = scratch("h200-open-580-k6.18-real");
    sriov(&node.join("root"), 16, 4);
    // A vendor that is a folder: `read` fails, as on an I/O error.
    let dev = node.join("root/sys/devices/pci0000:3a/0000:3a:00.1");
    std::fs::remove_file(dev.join("vendor")).unwrap();
    std::fs::create_dir(dev.join("vendor")).unwrap();
    let n = report(&node);
    let text = n.to_string();
    assert!(
        text.contains("/sys/bus/pci/devices/0000:3a:00.1: its vendor could not be read"),
        "{n:#}"
    );
    assert_ne!(n["status"], "ready", "{n:#}");
}
