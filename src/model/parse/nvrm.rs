//! Schema-3 driver messages of the kernel log (docs/domain.md "Schema 3", "New rules and reason
//! codes"), each matched on a [`Message`]'s text anchored at its start (after the timestamp), so
//! a process name cannot forge one. Pure: no I/O.
//!
//! - `NVRM: GPU <bus>: RmInitAdapter failed! (0x61:0x56:1770)` (`gpu-init-failed`;
//!   ublue-os/bazzite#2668, NVIDIA/open-gpu-kernel-modules#789);
//! - the legacy notice of a driver branch that dropped a GPU (`driver-branch-drops-gpu`;
//!   anomixer/proxmox-vgpu-installer#29): `NVRM: The NVIDIA <name> GPU installed in this system
//!   is` / `NVRM:  supported through the NVIDIA 580.xx Legacy drivers. Please` / … / `NVRM:
//!   information.  The 595.71.03 NVIDIA driver will ignore` (each line its own record, or one
//!   message with continuations);
//! - `NVRM: GPU <bus> is already bound to NovaCore.` (beclab/Olares#3963).

use super::klog::Message;

/// `RmInitAdapter failed!` of one GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitFailed {
    /// The bus id as printed (`0000:07:00.0`), lower-case.
    pub bus: String,
    /// The error code in parentheses (`0x61:0x56:1770`).
    pub code: String,
}

fn is_bus(s: &str) -> bool {
    s.split(':').count() == 3
        && s.len() <= 16
        && s.chars()
            .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.')
}

/// `NVRM: GPU <bus>: RmInitAdapter failed! (<code>)`.
pub fn init_failed(m: &Message) -> Option<InitFailed> {
    let rest = m.text.strip_prefix("NVRM: GPU ")?;
    let (bus, tail) = rest.split_once(": ")?;
    let code = tail
        .strip_prefix("RmInitAdapter failed! (")?
        .split_once(')')?
        .0;
    (is_bus(bus)
        && !code.is_empty()
        && code.len() <= 32
        && code.chars().all(|c| c.is_ascii_alphanumeric() || c == ':'))
    .then(|| InitFailed {
        bus: bus.to_ascii_lowercase(),
        code: code.to_string(),
    })
}

/// The legacy branch a notice names: `supported through the NVIDIA 580.xx Legacy drivers`
/// → `580` (the first field of the branch as printed). The line starts `NVRM:` (one record per
/// line), or the words follow the notice's first line in one message.
pub fn legacy_branch(m: &Message) -> Option<u32> {
    if !m.text.starts_with("NVRM:") {
        return None;
    }
    let rest = m.text.split_once("supported through the NVIDIA ")?.1;
    let (branch, tail) = rest.split_once(' ')?;
    if !tail.starts_with("Legacy drivers") {
        return None;
    }
    let first = branch.split('.').next()?;
    (!first.is_empty() && first.len() <= 4 && first.bytes().all(|b| b.is_ascii_digit()))
        .then(|| first.parse().ok())
        .flatten()
}

/// The driver version a legacy notice says ignores the GPU: `The 595.71.03 NVIDIA driver will
/// ignore` → `595.71.03`.
pub fn ignoring_driver(m: &Message) -> Option<String> {
    if !m.text.starts_with("NVRM:") {
        return None;
    }
    let before = m.text.split_once(" NVIDIA driver will ignore")?.0;
    let version = before.rsplit(' ').next()?;
    let ok = !version.is_empty()
        && version.len() <= 24
        && version.starts_with(|c: char| c.is_ascii_digit())
        && version
            .chars()
            .all(|c| c.is_ascii_digit() || c == '.' || c == '-');
    (ok && before.ends_with(version) && before[..before.len() - version.len()].ends_with("The "))
        .then(|| version.to_string())
}

/// `NVRM: GPU <bus> is already bound to <driver>.` → the bus id (lower-case) and the driver's
/// name as the NVIDIA driver prints it (`NovaCore`).
pub fn already_bound(m: &Message) -> Option<(String, String)> {
    let rest = m.text.strip_prefix("NVRM: GPU ")?;
    let (bus, tail) = rest.split_once(" is already bound to ")?;
    let driver = tail.trim_end().strip_suffix('.').unwrap_or(tail.trim_end());
    (is_bus(bus)
        && !driver.is_empty()
        && driver.len() <= 32
        && driver
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'))
    .then(|| (bus.to_ascii_lowercase(), driver.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::parse::klog::messages;

    /// ublue-os/bazzite#2668, verbatim.
    #[test]
    fn rm_init_adapter_failed_names_the_gpu_and_code() {
        let log = "[   23.991660] nvidia 0000:07:00.0: Direct firmware load for nvidia/570.144/gsp_ga10x.bin failed with error -2\n\
                   [   23.991667] NVRM: RmFetchGspRmImages: No firmware image found\n\
                   [   23.991672] NVRM: GPU 0000:07:00.0: RmInitAdapter failed! (0x61:0x56:1770)\n\
                   [   23.991822] NVRM: GPU 0000:07:00.0: rm_init_adapter failed, device minor number 0\n";
        let m = messages(log);
        let found: Vec<InitFailed> = m.iter().filter_map(init_failed).collect();
        assert_eq!(
            found,
            [InitFailed {
                bus: "0000:07:00.0".into(),
                code: "0x61:0x56:1770".into()
            }]
        );
        // A process's words are not the driver's.
        let forged = messages(
            "[ 1.0] python[12]: NVRM: GPU 0000:07:00.0: RmInitAdapter failed! (0x1:0x2:3)\n",
        );
        assert!(forged.iter().all(|m| init_failed(m).is_none()));
    }

    /// anomixer/proxmox-vgpu-installer#29 (the quoted lines) with the driver's full notice
    /// (each line its own record, as dmesg prints it).
    #[test]
    fn the_legacy_notice_names_the_branch_and_the_driver() {
        let log = "[    5.1] NVRM: The NVIDIA Tesla P100-PCIE-16GB GPU installed in this system is\n\
                   [    5.1] NVRM:  supported through the NVIDIA 580.xx Legacy drivers. Please\n\
                   [    5.1] NVRM:  visit http://www.nvidia.com/object/unix.html for more\n\
                   [    5.1] NVRM:  information.  The 595.71.03 NVIDIA driver will ignore\n\
                   [    5.1] NVRM:  this GPU.  Continuing probe...\n\
                   [    5.2] NVRM: No NVIDIA GPU found.\n";
        let m = messages(log);
        assert_eq!(m.iter().find_map(legacy_branch), Some(580));
        assert_eq!(
            m.iter().find_map(ignoring_driver).as_deref(),
            Some("595.71.03")
        );
        // One message with continuation lines reads the same.
        let joined = messages(
            "[    5.1] NVRM: The NVIDIA GeForce GT 750M GPU installed in this system is\n          NVRM:  supported through the NVIDIA 470.xx Legacy drivers. Please\n          NVRM:  information.  The 510.60.02 NVIDIA driver will ignore\n",
        );
        assert_eq!(joined.iter().find_map(legacy_branch), Some(470));
        assert_eq!(
            joined.iter().find_map(ignoring_driver).as_deref(),
            Some("510.60.02")
        );
        assert!(
            messages("[ 1] x: supported through the NVIDIA 580.xx Legacy drivers\n")
                .iter()
                .all(|m| legacy_branch(m).is_none())
        );
    }

    /// beclab/Olares#3963, verbatim.
    #[test]
    fn already_bound_to_nova_core() {
        let m = messages(
            "[  201.910514] NVRM: GPU 0000:01:00.0 is already bound to NovaCore.\n[  201.913648] NVRM: No NVIDIA devices probed.\n",
        );
        assert_eq!(
            m.iter().find_map(already_bound),
            Some(("0000:01:00.0".to_string(), "NovaCore".to_string()))
        );
    }
}
