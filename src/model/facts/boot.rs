//! Boot: the installed kernels and their NVIDIA module files (/lib/modules, /boot), the kernel
//! the next reboot starts (/boot/vmlinuz or /vmlinuz, else grubenv and its BLS entry, else the
//! highest installed release), a pending reboot (/run/reboot-required), and the boot
//! configuration (modules-load.d, modprobe.d, /proc/cmdline): nvidia-peermem loaded at boot and
//! the `options nvidia` lines.

use super::*;
use crate::model::parse::boot;

/// `boot` in the JSON: the next boot.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BootFacts {
    /// Installed kernels with their NVIDIA module files (`Some(empty)`: none installed).
    pub kernels: Proved<Vec<KernelInstall>>,
    /// The release the next reboot starts; `heuristic` when only "the highest installed" says so.
    pub boot_kernel: Proved<String>,
    pub boot_kernel_heuristic: bool,
    /// /run/reboot-required exists.
    pub reboot_pending: Proved<bool>,
    /// `blacklist` lines of modprobe.d (those that take effect, and those of files a same-named
    /// file shadows) and the command line's blacklists (schema 3, `blacklists`).
    pub blacklists: Proved<Vec<Blacklist>>,
}

/// One blacklisted module (docs/domain.md "Schema 3", `blacklists[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blacklist {
    /// The module as written (`nouveau`, `nova_core`).
    pub module: String,
    /// The file (`/usr/lib/modprobe.d/nvidia.conf`) or `/proc/cmdline`.
    pub source: String,
    /// The logical line, or the command line's parameter (`rd.driver.blacklist=nouveau`).
    pub line: String,
    /// The same-named file of an earlier folder that replaces `source` whole: modprobe never
    /// reads this line (`None`: it takes effect).
    pub shadowed_by: Option<String>,
}

/// One installed kernel (docs/domain.md: `/boot/vmlinuz-<k>`, `/lib/modules/<k>/vmlinuz` or
/// `/lib/modules/<k>/modules.dep` exists) and the NVIDIA module files under its
/// `/lib/modules/<k>` (`None` when that walk failed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelInstall {
    pub release: String,
    pub nvidia_modules: Option<Vec<String>>,
}

impl BootFacts {
    /// The installed kernel `release` (`None`: not installed, or the list is unknown).
    pub fn installed(&self, release: &str) -> Option<&KernelInstall> {
        self.kernels
            .value
            .as_ref()?
            .iter()
            .find(|k| k.release == release)
    }
}

impl KernelInstall {
    /// Whether a driver module (`nvidia.ko` or Debian's names) is among its files; `None` unknown.
    pub fn has(&self, kind: boot::ModuleFile) -> Option<bool> {
        self.nvidia_modules
            .as_ref()
            .map(|m| m.iter().any(|p| boot::module_file(p) == Some(kind)))
    }
}

/// Kernels the probe examines under /lib/modules (the probe's own cap).
pub(super) const MAX_KERNELS: usize = 32;

/// The next boot: installed kernels, the boot kernel, a pending reboot.
pub(super) fn collect(out: &ProbeOutput, f: &mut Facts) {
    installed_kernels(out, f);
    boot_kernel(out, f);
    f.boot.reboot_pending = exists(out, Kind::File, "/run/reboot-required");
    f.boot.blacklists = blacklists(out);
}

/// Every `blacklist` line of the modprobe.d folders, with the file that shadows it when a
/// same-named file of an earlier folder replaces its own (modprobe.d(5): only the first is
/// read; a /dev/null symlink masks the name), and the command line's blacklists. Unknown when a
/// folder or a file could not be read (it could hold, or shadow, a blacklist).
fn blacklists(out: &ProbeOutput) -> Proved<Vec<Blacklist>> {
    let mut found = Vec::new();
    let mut failed = Vec::new();
    // File name -> the path modprobe reads for it (the first folder that has it).
    let mut winner: BTreeMap<String, String> = BTreeMap::new();
    for base in BOOT_CONFIG_DIRS {
        let folder = format!("{base}/modprobe.d");
        if out
            .get(Kind::Dir, &folder)
            .is_some_and(|s| s.status == Status::Same)
        {
            continue;
        }
        let listing = match read(out, Kind::Dir, &folder) {
            Read::Absent => continue,
            Read::Failed(why) => {
                failed.push(why);
                continue;
            }
            Read::Text(t) => t,
        };
        for name in listing
            .lines()
            .filter(|n| n.ends_with(".conf") || n.ends_with(".alias"))
        {
            let path = format!("{folder}/{name}");
            let shadowed_by = winner.get(name).cloned();
            if shadowed_by.is_none() {
                winner.insert(name.to_string(), path.clone());
            }
            match read(out, Kind::File, &path) {
                Read::Text(t) => {
                    found.extend(modconf::blacklists(&t).into_iter().map(|b| Blacklist {
                        module: b.module,
                        source: path.clone(),
                        line: b.line,
                        shadowed_by: shadowed_by.clone(),
                    }))
                }
                // Masked (a /dev/null symlink: nothing to read), or a dangling link.
                Read::Absent => {}
                Read::Failed(_)
                    if out
                        .get(Kind::File, &path)
                        .is_some_and(|s| s.status == Status::Masked) => {}
                // A shadowed file that could not be read changes nothing modprobe reads.
                Read::Failed(_) if shadowed_by.is_some() => {}
                Read::Failed(why) => failed.push(why),
            }
        }
    }
    const CMDLINE: &str = "/proc/cmdline";
    match read(out, Kind::File, CMDLINE) {
        Read::Text(t) => found.extend(modconf::cmdline_blacklists(&t).into_iter().map(
            |(module, param)| Blacklist {
                line: format!("{param}={module}"),
                module,
                source: CMDLINE.to_string(),
                shadowed_by: None,
            },
        )),
        Read::Absent => {}
        Read::Failed(why) => failed.push(why),
    }
    if failed.is_empty() {
        Proved::known(found, Vec::new())
    } else {
        Proved::unknown(failed.join("; "))
    }
}

fn installed_kernels(out: &ProbeOutput, f: &mut Facts) {
    const MODS: &str = "/lib/modules";
    let names = match read(out, Kind::Dir, MODS) {
        Read::Absent => {
            f.boot.kernels = Proved::known(Vec::new(), vec![Evidence::new(MODS, "(absent)")]);
            return;
        }
        Read::Failed(why) => {
            f.boot.kernels = Proved::unknown(why);
            return;
        }
        Read::Text(t) => listing(&t)
            .into_iter()
            .map(str::to_string)
            .collect::<Vec<_>>(),
    };
    let boot_images: Vec<String> = match read(out, Kind::Dir, "/boot") {
        Read::Text(t) => listing(&t).into_iter().map(str::to_string).collect(),
        _ => Vec::new(),
    };
    let mut kernels = Vec::new();
    let mut why = Vec::new();
    if names.len() > MAX_KERNELS {
        why.push(format!(
            "{MODS} lists {} kernels; only the first {MAX_KERNELS} are examined",
            names.len()
        ));
    }
    for k in names.iter().take(MAX_KERNELS) {
        let folder = format!("{MODS}/{k}");
        let has_image = boot_images.iter().any(|b| *b == format!("vmlinuz-{k}"));
        let installed = match read(out, Kind::Dir, &folder) {
            Read::Text(t) => {
                has_image
                    || listing(&t)
                        .iter()
                        .any(|e| matches!(*e, "vmlinuz" | "modules.dep"))
            }
            Read::Absent => has_image,
            Read::Failed(w) => {
                if !has_image {
                    why.push(w);
                    continue;
                }
                true
            }
        };
        if !installed {
            continue;
        }
        let nvidia_modules = match read(out, Kind::Find, &folder) {
            // The probe prints one more than it keeps: a 33rd line means the list was cut.
            Read::Text(t) if listing(&t).len() > 32 => {
                why.push(format!(
                    "{folder}: more than 32 NVIDIA module files (list cut)"
                ));
                None
            }
            Read::Text(t) => Some(
                listing(&t)
                    .into_iter()
                    .filter(|p| boot::module_file(p).is_some())
                    .map(str::to_string)
                    .collect(),
            ),
            Read::Absent => Some(Vec::new()),
            Read::Failed(w) => {
                why.push(w);
                None
            }
        };
        kernels.push(KernelInstall {
            release: k.clone(),
            nvidia_modules,
        });
    }
    kernels.sort_by(|a, b| boot::version_cmp(&a.release, &b.release));
    f.boot.kernels = Proved {
        value: Some(kernels),
        evidence: vec![Evidence::new(MODS, names.join(" "))],
        why: (!why.is_empty()).then(|| why.join("; ")),
    };
}

fn boot_kernel(out: &ProbeOutput, f: &mut Facts) {
    for name in ["/boot/vmlinuz", "/vmlinuz"] {
        let s = out.get(Kind::Link, name);
        if s.is_some_and(|s| s.status == Status::NotLink) {
            continue;
        }
        match read(out, Kind::Link, name) {
            Read::Text(t) => {
                let target = first_line(&t).to_string();
                let ev = vec![Evidence::new(name, format!("-> {target}"))];
                f.boot.boot_kernel = match boot::release_of_image(&target) {
                    Some(rel) => Proved::known(rel, ev),
                    None => Proved {
                        value: None,
                        evidence: ev,
                        why: Some(format!("{name} -> {target:?} names no kernel release")),
                    },
                };
                return;
            }
            Read::Absent => {}
            Read::Failed(why) => {
                f.boot.boot_kernel = Proved::unknown(why);
                return;
            }
        }
    }
    // BLS (RHEL 8+, Fedora): grubenv's saved_entry names a loader entry with a `linux` line.
    const ENV: &str = "/boot/grub2/grubenv";
    match read(out, Kind::File, ENV) {
        Read::Text(env) => {
            if let Some((key, id)) = boot::grubenv_entry(&env) {
                let entry = format!("/boot/loader/entries/{id}.conf");
                match read(out, Kind::File, &entry) {
                    Read::Text(t) => {
                        if let Some((img, line)) = boot::bls_linux(&t)
                            && let Some(rel) = boot::release_of_image(&img)
                        {
                            f.boot.boot_kernel = Proved::known(
                                rel,
                                vec![
                                    Evidence::new(ENV, format!("{key}={id}")),
                                    Evidence::new(entry, line),
                                ],
                            );
                            return;
                        }
                    }
                    Read::Absent => {}
                    Read::Failed(why) => {
                        f.boot.boot_kernel = Proved::unknown(why);
                        return;
                    }
                }
            }
        }
        Read::Absent => {}
        Read::Failed(why) => {
            f.boot.boot_kernel = Proved::unknown(why);
            return;
        }
    }
    // Heuristic: the highest installed release.
    match &f.boot.kernels.value {
        Some(k) => {
            if let Some(top) = k
                .iter()
                .map(|k| &k.release)
                .max_by(|a, b| boot::version_cmp(a, b))
            {
                f.boot.boot_kernel = Proved::known(
                    top.clone(),
                    vec![Evidence::new(
                        "/lib/modules",
                        format!(
                            "{top} (the highest installed release; no /boot/vmlinuz link or BLS entry says otherwise)"
                        ),
                    )],
                );
                f.boot.boot_kernel_heuristic = true;
            }
        }
        None => f.boot.boot_kernel = Proved::unknown("the installed kernels are unknown"),
    }
}

/// Folders that hold boot configuration (`modprobe.d/`, `modules-load.d/`), in the precedence
/// order of modprobe.d(5) and modules-load.d(5): a file in an earlier folder overrides a
/// same-named one in a later folder.
pub const BOOT_CONFIG_DIRS: [&str; 5] = ["/etc", "/run", "/usr/local/lib", "/usr/lib", "/lib"];

/// The files of one boot-configuration kind (`modprobe.d` or `modules-load.d`) that take
/// effect: per file name, the one in the first folder that has it; a masked one (a symlink to
/// /dev/null) hides the same name in later folders and contributes nothing. Reads that failed
/// for a file that would take effect, or for a whole folder, go to `failures`.
pub(super) fn boot_config<'a>(
    out: &'a ProbeOutput,
    kind: &str,
    failures: &mut Vec<String>,
) -> Vec<(String, std::borrow::Cow<'a, str>)> {
    let mut chosen: BTreeMap<String, Option<(String, std::borrow::Cow<'a, str>)>> = BTreeMap::new();
    for base in BOOT_CONFIG_DIRS {
        let folder = format!("{base}/{kind}");
        if out
            .get(Kind::Dir, &folder)
            .is_some_and(|s| s.status == Status::Same)
        {
            continue;
        }
        let listing = match read(out, Kind::Dir, &folder) {
            Read::Absent => continue,
            Read::Failed(why) => {
                failures.push(why);
                continue;
            }
            Read::Text(t) => t,
        };
        // modprobe reads *.conf (and, in kmod before 2024, *.alias); modules-load.d *.conf.
        let wanted =
            |n: &&str| n.ends_with(".conf") || kind == "modprobe.d" && n.ends_with(".alias");
        for name in listing.lines().filter(wanted) {
            if chosen.contains_key(name) {
                continue;
            }
            let path = format!("{folder}/{name}");
            if out
                .get(Kind::File, &path)
                .is_some_and(|s| s.status == Status::Masked)
            {
                chosen.insert(name.to_string(), None);
                continue;
            }
            match read(out, Kind::File, &path) {
                Read::Text(t) => {
                    chosen.insert(name.to_string(), Some((path, t)));
                }
                // A dangling symlink (modprobe skips it too), or removed since it was listed.
                // A listed name with no entry at all (part of a name with a newline) comes as
                // `error 2`: a failure above.
                Read::Absent => {}
                Read::Failed(why) => {
                    failures.push(why);
                    chosen.insert(name.to_string(), None);
                }
            }
        }
    }
    chosen.into_values().flatten().collect()
}

pub(super) fn configuration(out: &ProbeOutput, f: &mut Facts) {
    let mut evidence = Vec::new();
    let mut masks = Vec::new();
    let mut failures = Vec::new();
    for (path, text) in boot_config(out, "modules-load.d", &mut failures) {
        evidence.extend(
            modconf::modules_load(&text)
                .into_iter()
                .map(|l| Evidence::new(path.clone(), l.line)),
        );
    }
    // modprobe uses the first `install` line of a module, files read in name order.
    let mut first_install: Option<(Evidence, bool)> = None;
    for (path, text) in boot_config(out, "modprobe.d", &mut failures) {
        f.module_params.configured.extend(
            params::parse_options(&text)
                .into_iter()
                .map(|c| (c, path.clone())),
        );
        evidence.extend(
            modconf::modprobe(&text)
                .into_iter()
                .map(|l| Evidence::new(path.clone(), l.line)),
        );
        if first_install.is_none()
            && let Some((line, masks)) = modconf::peermem_install(&text)
        {
            first_install = Some((Evidence::new(path.clone(), line), masks));
        }
    }
    // The kernel command line loads modules too (systemd-modules-load reads modules-load=).
    if let Read::Text(t) = read(out, Kind::File, "/proc/cmdline")
        && modconf::cmdline_loads_peermem(&t)
    {
        evidence.push(Evidence::new("/proc/cmdline", first_line(&t)));
    }
    if let Some((ev, true)) = &first_install
        && failures.is_empty()
    {
        // `install nvidia-peermem /bin/false` runs instead of every load, whatever asks for it.
        masks.push(ev.clone());
        f.peermem.configured = Some(false);
        f.peermem.configured_evidence = masks;
    } else if !evidence.is_empty() {
        f.peermem.configured = Some(true);
        f.peermem.configured_evidence = evidence;
    } else if failures.is_empty() {
        f.peermem.configured = Some(false);
    } else {
        // An unreadable file could load it, or hold the first install line.
        f.unknown("peermem.configured", failures.join("; "));
    }
}
