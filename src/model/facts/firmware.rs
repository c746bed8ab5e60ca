//! Firmware and Secure Boot: the GSP firmware files of the loaded driver (the kernel's firmware
//! search folders), Secure Boot (its EFI variable), kernel lockdown
//! (/sys/kernel/security/lockdown), module signature enforcement (Secure Boot,
//! CONFIG_MODULE_SIG_FORCE, module.sig_enforce on /proc/cmdline) and the signature trailer of
//! the running kernel's host nvidia.ko.

use super::*;
use crate::model::parse::boot;

/// `firmware` and `secure_boot` in the JSON.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FirmwareFacts {
    /// `gsp*.bin` for the loaded driver version in a firmware search folder.
    pub gsp_files_present: Proved<bool>,
    /// Secure Boot enabled (efivar); `Some(false)` on a BIOS boot.
    pub secure_boot: Proved<bool>,
    /// The lockdown mode (`none`, `integrity`, `confidentiality`).
    pub lockdown: Proved<String>,
    /// Module signatures enforced: Secure Boot, CONFIG_MODULE_SIG_FORCE=y or module.sig_enforce=1.
    pub signature_enforced: Proved<bool>,
    /// The running kernel's host nvidia.ko ends with the signature trailer.
    pub nvidia_ko_signed: Proved<bool>,
    /// Schema 3 (`firmware.gsp_dirs`): each firmware folder looked in for the loaded version's
    /// GSP files, whether it was read and what it holds; `None` with no loaded version.
    pub gsp_dirs: Option<Vec<GspDir>>,
    /// Schema 3 (`secure_boot.machine_keyring`): `CONFIG_INTEGRITY_MACHINE_KEYRING=y` in the
    /// kernel config (a MOK-enrolled key is trusted for modules only then); `false` when the
    /// config was read without it.
    pub machine_keyring: Proved<bool>,
    /// Schema 3 (`secure_boot.nvidia_ko_signer`): the signer of the running kernel's host
    /// nvidia.ko, from its appended PKCS#7 signature (the issuer's common name, as `modinfo -F
    /// signer` prints it); unknown for a compressed module without its decompressor on the node.
    pub nvidia_ko_signer: Proved<String>,
}

/// One firmware folder of the loaded version (docs/domain.md "Schema 3", `firmware.gsp_dirs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GspDir {
    /// `<dir>/nvidia/<version>` (or the firmware_class parameter file, when it could not be read:
    /// the folder it names is then unknown).
    pub dir: String,
    /// Whether the folder (or its absence) was read; `false` makes the answer unknown.
    pub read: bool,
    /// Its `gsp*.bin` files (`.xz`, `.zst` too).
    pub files: Vec<String>,
}

impl FirmwareFacts {
    /// Every firmware folder was read and none has a GSP file of the loaded version: the next
    /// module load fails (`gsp-firmware-absent`). `None`: unknown (a folder not read) or no
    /// loaded version; `Some(false)`: a folder has them.
    pub fn gsp_absent_everywhere(&self) -> Option<bool> {
        let dirs = self.gsp_dirs.as_ref()?;
        if dirs.iter().any(|d| !d.files.is_empty()) {
            return Some(false);
        }
        dirs.iter().all(|d| d.read).then_some(true)
    }
}

/// Whether a firmware folder listing holds a GSP image (`gsp.bin`, `gsp_*.bin`, also `.xz`/`.zst`).
/// GSP firmware (after the driver and the kernel release), then Secure Boot and signatures
/// (after the kernel config and the installed kernels).
pub(super) fn collect(out: &ProbeOutput, f: &mut Facts) {
    gsp_files(out, f);
    signatures(out, f);
    machine_keyring(f);
}

/// `CONFIG_INTEGRITY_MACHINE_KEYRING` (`kernel.config`): with it the machine keyring (MOK)
/// is trusted for modules; without it, a MOK-signed module is rejected under Secure Boot
/// (deepin-community/kernel#2144). A config read without the line = not built.
fn machine_keyring(f: &mut Facts) {
    const OPT: &str = "CONFIG_INTEGRITY_MACHINE_KEYRING";
    f.firmware.machine_keyring = match &f.kernel.config {
        Some((src, cfg)) => match cfg.line(OPT) {
            Some(line) => Proved::known(
                cfg.value(OPT) == Some("y"),
                vec![Evidence::new(src.clone(), line)],
            ),
            None => Proved::known(
                false,
                vec![Evidence::new(src.clone(), format!("(no {OPT})"))],
            ),
        },
        None => Proved::unknown("the kernel config could not be read"),
    };
}

fn is_gsp(name: &str) -> bool {
    let stem = name
        .strip_suffix(".xz")
        .or_else(|| name.strip_suffix(".zst"))
        .unwrap_or(name);
    stem.starts_with("gsp") && stem.ends_with(".bin")
}

fn gsp_files(out: &ProbeOutput, f: &mut Facts) {
    let Some(version) = f.driver.as_ref().and_then(|d| d.version.clone()) else {
        return;
    };
    let rel = f.kernel.release.clone().unwrap_or_default();
    const FW_PATH: &str = "/sys/module/firmware_class/parameters/path";
    let (fw_path, fw_path_read) = match read(out, Kind::File, FW_PATH) {
        Read::Text(t) => (
            Some(first_line(&t).trim().to_string()).filter(|p| p.starts_with('/')),
            true,
        ),
        _ => (None, false),
    };
    let mut dirs: Vec<String> = fw_path.into_iter().collect();
    if !rel.is_empty() {
        dirs.push(format!("/lib/firmware/updates/{rel}"));
    }
    dirs.push("/lib/firmware/updates".into());
    if !rel.is_empty() {
        dirs.push(format!("/lib/firmware/{rel}"));
    }
    dirs.push("/lib/firmware".into());
    // Schema 3: also /usr/lib/firmware and the GPU Operator's driver root.
    dirs.push("/usr/lib/firmware".into());
    dirs.push("/run/nvidia/driver/lib/firmware".into());
    let mut checked = Vec::new();
    let mut failed = Vec::new();
    let mut gsp_dirs = Vec::new();
    // The firmware_class path always exists where the loader is built in: a parameter file that
    // was not read leaves the folder it names, and so `gsp_dirs`, unknown.
    if !fw_path_read {
        gsp_dirs.push(GspDir {
            dir: FW_PATH.to_string(),
            read: false,
            files: Vec::new(),
        });
    }
    let mut present = None;
    for d in &dirs {
        let nv = format!("{d}/nvidia");
        let vdir = format!("{nv}/{version}");
        match read(out, Kind::Dir, &nv) {
            Read::Absent => {
                checked.push(Evidence::new(nv, "(absent)"));
                gsp_dirs.push(GspDir {
                    dir: vdir,
                    read: true,
                    files: Vec::new(),
                });
                continue;
            }
            Read::Failed(w) => {
                failed.push(w);
                gsp_dirs.push(GspDir {
                    dir: vdir,
                    read: false,
                    files: Vec::new(),
                });
                continue;
            }
            Read::Text(t) if !listing(&t).contains(&version.as_str()) => {
                checked.push(Evidence::new(nv, format!("(no {version}/)")));
                gsp_dirs.push(GspDir {
                    dir: vdir,
                    read: true,
                    files: Vec::new(),
                });
                continue;
            }
            Read::Text(_) => {}
        }
        match read(out, Kind::Dir, &vdir) {
            Read::Text(t) => {
                let gsp: Vec<String> = listing(&t)
                    .into_iter()
                    .filter(|n| is_gsp(n))
                    .map(str::to_string)
                    .collect();
                if !gsp.is_empty() && present.is_none() {
                    present = Some(Evidence::new(vdir.clone(), gsp.join(" ")));
                } else if gsp.is_empty() {
                    checked.push(Evidence::new(vdir.clone(), "(no gsp*.bin)"));
                }
                gsp_dirs.push(GspDir {
                    dir: vdir,
                    read: true,
                    files: gsp,
                });
            }
            Read::Absent => {
                checked.push(Evidence::new(vdir.clone(), "(absent)"));
                gsp_dirs.push(GspDir {
                    dir: vdir,
                    read: true,
                    files: Vec::new(),
                });
            }
            Read::Failed(w) => {
                failed.push(w);
                gsp_dirs.push(GspDir {
                    dir: vdir,
                    read: false,
                    files: Vec::new(),
                });
            }
        }
    }
    f.firmware.gsp_dirs = Some(gsp_dirs);
    if let Some(ev) = present {
        f.firmware.gsp_files_present = Proved::known(true, vec![ev]);
        return;
    }
    f.firmware.gsp_files_present = if failed.is_empty() {
        Proved::known(false, checked)
    } else {
        Proved::unknown(failed.join("; "))
    };
}

fn signatures(out: &ProbeOutput, f: &mut Facts) {
    const EFI: &str = "/sys/firmware/efi";
    const VAR: &str = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c";
    f.firmware.secure_boot = match read(out, Kind::Dir, EFI) {
        Read::Absent => Proved::known(false, vec![Evidence::new(EFI, "(absent: BIOS boot)")]),
        Read::Failed(why) => Proved::unknown(why),
        Read::Text(_) => match read(out, Kind::Hex, VAR) {
            Read::Text(t) => match kconfig::decode_od_hex(&t)
                .ok()
                .and_then(|b| secureboot::efivar_bool(&b))
            {
                Some(on) => Proved::known(on, vec![Evidence::new(VAR, t.trim().to_string())]),
                None => {
                    Proved::unknown(format!("{VAR}: not a boolean EFI variable: {:?}", t.trim()))
                }
            },
            Read::Absent => Proved::known(false, vec![Evidence::new(VAR, "(absent)")]),
            Read::Failed(why) => Proved::unknown(why),
        },
    };
    const LOCKDOWN: &str = "/sys/kernel/security/lockdown";
    f.firmware.lockdown = match read(out, Kind::File, LOCKDOWN) {
        Read::Text(t) => match secureboot::lockdown_mode(&t) {
            Some(m) => Proved::known(m, vec![Evidence::new(LOCKDOWN, first_line(&t))]),
            None => Proved::unknown(format!("{LOCKDOWN}: {:?}", first_line(&t))),
        },
        Read::Absent => Proved::unknown(format!(
            "{LOCKDOWN} is absent (securityfs may not be mounted)"
        )),
        Read::Failed(why) => Proved::unknown(why),
    };
    // Enforcement: any source that says yes is enough; "no" needs all three.
    let mut yes = Vec::new();
    let mut unknown = Vec::new();
    match f.firmware.secure_boot.value {
        Some(true) => yes.extend(f.firmware.secure_boot.evidence.clone()),
        Some(false) => {}
        None => unknown.push("Secure Boot"),
    }
    match &f.kernel.config {
        Some((src, cfg)) => {
            if cfg.value("CONFIG_MODULE_SIG_FORCE") == Some("y") {
                yes.push(Evidence::new(src.clone(), "CONFIG_MODULE_SIG_FORCE=y"));
            }
        }
        None => unknown.push("the kernel config"),
    }
    match read(out, Kind::File, "/proc/cmdline") {
        Read::Text(t) if secureboot::cmdline_sig_enforce(&t) => {
            yes.push(Evidence::new("/proc/cmdline", first_line(&t)))
        }
        Read::Text(_) => {}
        _ => unknown.push("/proc/cmdline"),
    }
    f.firmware.signature_enforced = if !yes.is_empty() {
        Proved::known(true, yes)
    } else if unknown.is_empty() {
        Proved::known(false, Vec::new())
    } else {
        Proved::unknown(format!("{} could not be read", unknown.join(", ")))
    };
    // The running kernel's host nvidia.ko: its signature trailer.
    let Some(rel) = f.kernel.release.clone() else {
        return;
    };
    let prefix = format!("/lib/modules/{rel}/");
    let tail = out.with_prefix(Kind::Tail, &prefix).next();
    f.firmware.nvidia_ko_signed = match tail {
        Some(s) if s.status == Status::Ok => {
            let signed = secureboot::signed(&s.body);
            Proved::known(
                signed,
                vec![Evidence::new(
                    s.name.clone(),
                    if signed {
                        "~Module signature appended~".to_string()
                    } else {
                        "(no signature trailer)".to_string()
                    },
                )],
            )
        }
        Some(s) => Proved::unknown(why_not(&s.name, s)),
        None => {
            let compressed = f
                .boot
                .installed(&rel)
                .and_then(|k| k.nvidia_modules.as_ref())
                .is_some_and(|m| {
                    m.iter().any(|p| {
                        boot::module_file(p) == Some(boot::ModuleFile::Driver)
                            && !p.ends_with(".ko")
                    })
                });
            if compressed {
                Proved::unknown("the host nvidia.ko is compressed: its signature cannot be read")
            } else {
                Proved::default()
            }
        }
    };
}
