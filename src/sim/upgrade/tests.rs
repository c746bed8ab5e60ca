//! Unit tests of the simulator's rollout node side.
use super::*;

#[test]
fn rollout_commands_are_read_back_and_nothing_else() {
    let takeover = vec!["r-old".to_string()];
    let lock = node_side::lock_command("/", "r-1", "ops@h pid 7", &takeover);
    let want = NodeCommand::Lock {
        rollout: "r-1".into(),
        operator: "ops@h pid 7".into(),
        takeover: takeover.clone(),
    };
    assert_eq!(recognise(&lock), Some(want.clone()));
    let sudo = format!("sudo -n sh -c {}", crate::actions::drain::quote_arg(&lock));
    assert_eq!(recognise(&sudo), Some(want));
    assert_eq!(
        recognise(&node_side::unlock_command("/srv/n 1", "r-1")),
        Some(NodeCommand::Unlock {
            rollout: "r-1".into()
        })
    );
    assert_eq!(
        recognise(&node_side::read_lock_command("/")),
        Some(NodeCommand::ReadLock)
    );
    let files = StepFiles::new("/", "r-1", 2, "switch-open");
    let launch = node_side::launch_command(&files, SWITCH_OPEN, 60, true);
    assert_eq!(
        recognise(&launch),
        Some(NodeCommand::Launch {
            files: files.clone(),
            command: SWITCH_OPEN.into(),
            retry: true
        })
    );
    assert_eq!(
        recognise(&node_side::poll_command(&files)),
        Some(NodeCommand::Poll {
            files: files.clone()
        })
    );
    let kill = node_side::kill_command(&files, "cancel", node_side::KILL_GRACE_S);
    assert_eq!(
        recognise(&kill),
        Some(NodeCommand::Kill {
            files: StepFiles {
                prefix: files.prefix.clone(),
                lock: String::new()
            },
            why: "cancel".into()
        })
    );
    assert_eq!(recognise(&kill.replace("cancel", "CANCEL")), None);
    assert_eq!(recognise("true"), Some(NodeCommand::True));
    assert_eq!(
        recognise(&node_side::boot_id_command("/")),
        Some(NodeCommand::BootId)
    );
    let id = new_boot_id();
    assert!(
        matches!(node_side::BootIdentity::parse(&format!("boot_id {id}")), Some(node_side::BootIdentity::BootId(x)) if x == id),
        "{id}"
    );
    for bad in [
        format!("{lock}; rm -rf /"),
        lock.replace("rollout.lock", "rollout.lock2"),
        launch.replace("gpufleet-step started", "x"),
        format!("sudo sh -c {}", crate::actions::drain::quote_arg(&lock)),
        "sudo -n sh -c 'true; rm -rf /'".to_string(),
        "rm -rf /".into(),
        "true; reboot".into(),
        format!("{}; reboot", node_side::boot_id_command("/")),
        format!("{kill}; reboot"),
        String::new(),
    ] {
        assert_eq!(recognise(&bad), None, "{bad}");
    }
}

#[test]
fn switch_open_changes_the_tree_as_the_stand_in_does() {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/nodes/a100-proprietary-535-k5.15-peermem");
    copy_tree(&src, dir.path()).unwrap();
    let root = dir.path().join("root");
    let said = switch_open(&root).unwrap();
    assert!(said.contains("535."), "{said}");
    let v = std::fs::read_to_string(root.join("proc/driver/nvidia/version")).unwrap();
    assert!(
        v.starts_with("NVRM version: NVIDIA UNIX Open Kernel Module"),
        "{v}"
    );
    let m = std::fs::read_to_string(root.join("proc/modules")).unwrap();
    assert!(!m.contains("nvidia_peermem") && !m.contains("(POE)"), "{m}");
    assert!(!root.join("sys/module/nvidia_peermem").exists());
    // A node without a driver has nothing to switch.
    let empty = tempfile::tempdir().unwrap();
    assert!(switch_open(empty.path()).is_err());
}

/// Every banner form the probe reads (src/model/parse/driver.rs's verbatim samples): the switch
/// keeps the version and the arch, and the probe then reads an open module.
#[test]
fn switch_open_reads_every_banner_the_probe_reads() {
    use crate::model::{Flavor, parse::driver::parse_banner};
    let cases = [
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.173.02  Tue Jun 23 08:38:17 UTC 2026\nGCC version:  gcc version 14.2.0 (Ubuntu 14.2.0-4ubuntu2~24.04.1)\n",
            "x86_64",
            "580.173.02",
        ),
        (
            "NVRM version: NVIDIA UNIX aarch64 Kernel Module  460.73.01  Thu Apr  1 21:51:06 UTC 2021\nGCC version:  gcc version 9.3.0\n",
            "aarch64",
            "460.73.01",
        ),
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  384.98  Thu Oct 26 15:16:01 PDT 2017\n",
            "x86_64",
            "384.98",
        ),
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  555.42.02  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue May  7 03:49:59 UTC 2024\nGCC version:  gcc version 12.3.0\n",
            "x86_64",
            "555.42.02",
        ),
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  35.3.1  Release Build  (buildbrain@mobile-u64-6289-d7000)  Sun Mar 19 08:09:33 PDT 2023\nGCC version:  gcc version 9.3.0 (Buildroot 2020.08) \n",
            "aarch64",
            "35.3.1",
        ),
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \nGCC version:  gcc version 15.3.0 (GCC) \n",
            "x86_64",
            "580.159.04",
        ),
    ];
    for (text, arch, version) in cases {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("proc/driver/nvidia")).unwrap();
        std::fs::write(root.join("proc/driver/nvidia/version"), text).unwrap();
        std::fs::write(
            root.join("proc/modules"),
            "nvidia_peermem 16384 0 - Live 0x0 (POE)\nnvidia 1 2 nvidia_peermem,nvidia_uvm, Live 0x0 (POE)\n",
        )
        .unwrap();
        let said = switch_open(root).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert!(said.contains(version) && said.contains(arch), "{said}");
        let now = std::fs::read_to_string(root.join("proc/driver/nvidia/version")).unwrap();
        let b = parse_banner(&now).unwrap_or_else(|| panic!("no banner: {now}"));
        assert_eq!(b.flavor, Flavor::Open, "{now}");
        assert_eq!(b.arch, arch, "{now}");
        assert_eq!(b.version.as_deref(), Some(version), "{now}");
        // The banner's other lines stay; there is one banner.
        let gcc = text.lines().filter(|l| l.starts_with("GCC")).count();
        assert_eq!(now.lines().filter(|l| l.starts_with("GCC")).count(), gcc);
        assert_eq!(now.matches("NVRM version").count(), 1, "{now}");
        let m = std::fs::read_to_string(root.join("proc/modules")).unwrap();
        assert_eq!(m, "nvidia 1 2 nvidia_uvm, Live 0x0 (OE)\n");
    }
    // A version file that is not a banner, or a banner without a version, is an error.
    for bad in [
        "garbage\n",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  \n",
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc/driver/nvidia")).unwrap();
        std::fs::write(dir.path().join("proc/driver/nvidia/version"), bad).unwrap();
        assert!(switch_open(dir.path()).is_err(), "{bad}");
    }
}

#[test]
fn utc_now_has_its_shape() {
    let t = now_utc();
    assert_eq!(t.len(), 20, "{t}");
    assert!(t.starts_with("20") && t.ends_with('Z'), "{t}");
}
