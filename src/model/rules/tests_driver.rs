//! Unit tests of issue 24's driver-slice rules (docs/domain.md "Schema 3") over synthetic probe
//! output: the exact kernel strings of module signing, and the GSP firmware advisory's unknowns.

use super::tests::{OPEN, PCI_GPU, codes, with_release};
use super::*;

fn no_module_with_log(log: &str) -> Vec<&'static str> {
    let mut parts = PCI_GPU.to_vec();
    parts.push(("file", "/proc/driver/nvidia/version", "absent", ""));
    parts.push(("file", "/proc/modules", "ok", ""));
    parts.push(("cmd", "dmesg", "ok", log));
    let f = with_release("6.8.0", &parts);
    codes(&assess(&f, &Thresholds::default()))
}

/// `kernel/module/signing.c`'s three rejections, and the two lines that are not this reason.
#[test]
fn module_signing_strings_decide_the_reason() {
    let c = no_module_with_log("[    5.1] Loading of module with unavailable key is rejected\n");
    assert!(c.contains(&"module-key-untrusted"), "{c:?}");
    assert!(!c.contains(&"module-signature-rejected"), "{c:?}");
    let c = no_module_with_log("[    5.1] Loading of unsigned module is rejected\n");
    assert!(c.contains(&"module-signature-rejected"), "{c:?}");
    assert!(!c.contains(&"module-key-untrusted"), "{c:?}");
    let c = no_module_with_log("[    5.1] Loading of module with unsupported crypto is rejected\n");
    assert!(c.contains(&"module-signature-rejected"), "{c:?}");
    // Enforcement off: the module loaded (here it did not, for another reason); and modprobe's
    // stderr never reaches the kernel log.
    for other in [
        "[    5.1] nvidia: module verification failed: signature and/or required key missing - tainting kernel\n",
        "[    5.1] modprobe: ERROR: could not insert 'nvidia': Key was rejected by service\n",
    ] {
        let c = no_module_with_log(other);
        assert!(!c.contains(&"module-key-untrusted"), "{other}: {c:?}");
        assert!(!c.contains(&"module-signature-rejected"), "{other}: {c:?}");
    }
}

fn open_node_with_firmware(path_status: &str, lib_status: &str) -> Vec<&'static str> {
    let f = with_release(
        "6.8.0",
        &[
            OPEN,
            (
                "file",
                "/proc/modules",
                "ok",
                "nvidia 1 0 - Live 0x0 (OE)\n",
            ),
            (
                "file",
                "/sys/module/firmware_class/parameters/path",
                path_status,
                "\n",
            ),
            ("dir", "/lib/firmware/updates/6.8.0/nvidia", "absent", ""),
            ("dir", "/lib/firmware/updates/nvidia", "absent", ""),
            ("dir", "/lib/firmware/6.8.0/nvidia", "absent", ""),
            ("dir", "/lib/firmware/nvidia", lib_status, ""),
            ("dir", "/usr/lib/firmware/nvidia", "absent", ""),
            (
                "dir",
                "/run/nvidia/driver/lib/firmware/nvidia",
                "absent",
                "",
            ),
        ],
    );
    codes(&assess(&f, &Thresholds::default()))
}

/// `gsp-firmware-absent` only when every folder and the firmware_class path were read.
#[test]
fn gsp_firmware_absent_needs_every_folder_read() {
    assert!(open_node_with_firmware("ok", "absent").contains(&"gsp-firmware-absent"));
    // A folder that could not be read, or the firmware_class path missing from the output
    // (the H200 fixture's capture has no such file): unknown, never the advisory.
    assert!(!open_node_with_firmware("ok", "denied").contains(&"gsp-firmware-absent"));
    assert!(!open_node_with_firmware("absent", "absent").contains(&"gsp-firmware-absent"));
}
