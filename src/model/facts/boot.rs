//! Schema-2 facts (docs/domain.md, facts table): installed kernels and the next boot, GSP
//! firmware, module parameters, peer memory, libibverbs, Secure Boot and signatures, the kernel
//! log, the GPU Operator's driver folder and gpufleet's node lock.

use super::*;

/// Kernels the probe examines under /lib/modules (the probe's own cap).
pub(super) const MAX_KERNELS: usize = 32;

pub(super) fn v2_facts(out: &ProbeOutput, f: &mut Facts) {
    installed_kernels(out, f);
    boot_kernel(out, f);
    f.v2.reboot_pending = exists(out, Kind::File, "/run/reboot-required");
    gsp_files(out, f);
    f.v2.params_in_effect = match read(out, Kind::File, "/proc/driver/nvidia/params") {
        Read::Text(t) => Proved::known(
            params::parse_in_effect(&t),
            vec![Evidence::new("/proc/driver/nvidia/params", "(read)")],
        ),
        Read::Absent => Proved::default(),
        Read::Failed(why) => Proved::unknown(why),
    };
    f.v2.peermem_registered = {
        let a = exists(
            out,
            Kind::File,
            "/sys/kernel/mm/memory_peers/nv_mem/version",
        );
        let b = exists(
            out,
            Kind::File,
            "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
        );
        match (a.value, b.value) {
            (Some(true), _) => a,
            (_, Some(true)) => b,
            (Some(false), Some(false)) => Proved::known(false, Vec::new()),
            _ => Proved::unknown(a.why.or(b.why).unwrap_or_default()),
        }
    };
    libibverbs(out, f);
    signatures(out, f);
    f.v2.kernel_log = match read(out, Kind::Cmd, "dmesg") {
        Read::Text(t) => Proved::known(klog::messages(&t), Vec::new()),
        Read::Absent => Proved::unknown("dmesg: no answer"),
        Read::Failed(why) => Proved::unknown(match out.get(Kind::Cmd, "dmesg") {
            Some(s) if !s.body.is_empty() => {
                format!("{why}: {}", first_line(&String::from_utf8_lossy(&s.body)))
            }
            _ => why,
        }),
    };
    f.v2.kernel_log_cut = out
        .get(Kind::Cmd, "dmesg")
        .is_some_and(|s| matches!(s.status, Status::Cut(_)));
    f.v2.leftovers = out
        .sections
        .iter()
        .filter(|s| s.kind == Kind::Meta && s.name == "leftover")
        .flat_map(|s| {
            String::from_utf8_lossy(&s.body)
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .take(64)
        .collect();
    f.v2.gpu_operator = exists(out, Kind::Dir, "/run/nvidia/driver");
    f.v2.node_lock = node_lock(out);
}

/// gpufleet's node lock: the folder (absent: free), then its owner file (absent or unreadable
/// while the folder exists: held, owner not known).
pub(super) fn node_lock(out: &ProbeOutput) -> Proved<Option<lock::LockOwner>> {
    const DIR: &str = "/var/lib/gpufleet/rollout.lock";
    const OWNER: &str = "/var/lib/gpufleet/rollout.lock/owner";
    match read(out, Kind::Dir, DIR) {
        Read::Absent => Proved::known(None, Vec::new()),
        Read::Failed(why) => Proved::unknown(why),
        Read::Text(_) => match read(out, Kind::File, OWNER) {
            Read::Text(t) => Proved::known(
                Some(lock::parse_owner(&t)),
                vec![Evidence::new(OWNER, first_line(&t))],
            ),
            Read::Absent | Read::Failed(_) => Proved::known(
                Some(lock::LockOwner::default()),
                vec![Evidence::new(DIR, "exists (no readable owner file)")],
            ),
        },
    }
}

/// Whether `name` exists: a section that was read (`true`, with it as evidence), `absent`
/// (`false`), or unknown.
pub(super) fn exists(out: &ProbeOutput, kind: Kind, name: &str) -> Proved<bool> {
    match read(out, kind, name) {
        Read::Text(t) => Proved::known(
            true,
            vec![Evidence::new(
                name,
                first_line(&t).chars().take(120).collect::<String>(),
            )],
        ),
        Read::Absent => Proved::known(false, Vec::new()),
        Read::Failed(why) => Proved::unknown(why),
    }
}

pub(super) fn listing(t: &str) -> Vec<&str> {
    t.lines().map(str::trim).filter(|l| !l.is_empty()).collect()
}

pub(super) fn installed_kernels(out: &ProbeOutput, f: &mut Facts) {
    const MODS: &str = "/lib/modules";
    let names = match read(out, Kind::Dir, MODS) {
        Read::Absent => {
            f.v2.kernels = Proved::known(Vec::new(), vec![Evidence::new(MODS, "(absent)")]);
            return;
        }
        Read::Failed(why) => {
            f.v2.kernels = Proved::unknown(why);
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
    f.v2.kernels = Proved {
        value: Some(kernels),
        evidence: vec![Evidence::new(MODS, names.join(" "))],
        why: (!why.is_empty()).then(|| why.join("; ")),
    };
}

pub(super) fn boot_kernel(out: &ProbeOutput, f: &mut Facts) {
    for name in ["/boot/vmlinuz", "/vmlinuz"] {
        let s = out.get(Kind::Link, name);
        if s.is_some_and(|s| s.status == Status::NotLink) {
            continue;
        }
        match read(out, Kind::Link, name) {
            Read::Text(t) => {
                let target = first_line(&t).to_string();
                let ev = vec![Evidence::new(name, format!("-> {target}"))];
                f.v2.boot_kernel = match boot::release_of_image(&target) {
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
                f.v2.boot_kernel = Proved::unknown(why);
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
                            f.v2.boot_kernel = Proved::known(
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
                        f.v2.boot_kernel = Proved::unknown(why);
                        return;
                    }
                }
            }
        }
        Read::Absent => {}
        Read::Failed(why) => {
            f.v2.boot_kernel = Proved::unknown(why);
            return;
        }
    }
    // Heuristic: the highest installed release.
    match &f.v2.kernels.value {
        Some(k) => {
            if let Some(top) = k
                .iter()
                .map(|k| &k.release)
                .max_by(|a, b| boot::version_cmp(a, b))
            {
                f.v2.boot_kernel = Proved::known(
                    top.clone(),
                    vec![Evidence::new(
                        "/lib/modules",
                        format!(
                            "{top} (the highest installed release; no /boot/vmlinuz link or BLS entry says otherwise)"
                        ),
                    )],
                );
                f.v2.boot_kernel_heuristic = true;
            }
        }
        None => f.v2.boot_kernel = Proved::unknown("the installed kernels are unknown"),
    }
}

/// Whether a firmware folder listing holds a GSP image (`gsp.bin`, `gsp_*.bin`, also `.xz`/`.zst`).
pub(super) fn is_gsp(name: &str) -> bool {
    let stem = name
        .strip_suffix(".xz")
        .or_else(|| name.strip_suffix(".zst"))
        .unwrap_or(name);
    stem.starts_with("gsp") && stem.ends_with(".bin")
}

pub(super) fn gsp_files(out: &ProbeOutput, f: &mut Facts) {
    let Some(version) = f.driver.as_ref().and_then(|d| d.version.clone()) else {
        return;
    };
    let rel = f.kernel_release.clone().unwrap_or_default();
    let fw_path = match read(
        out,
        Kind::File,
        "/sys/module/firmware_class/parameters/path",
    ) {
        Read::Text(t) => Some(first_line(&t).trim().to_string()).filter(|p| p.starts_with('/')),
        _ => None,
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
    let mut checked = Vec::new();
    let mut failed = Vec::new();
    for d in &dirs {
        let nv = format!("{d}/nvidia");
        match read(out, Kind::Dir, &nv) {
            Read::Absent => {
                checked.push(Evidence::new(nv, "(absent)"));
                continue;
            }
            Read::Failed(w) => {
                failed.push(w);
                continue;
            }
            Read::Text(t) if !listing(&t).contains(&version.as_str()) => {
                checked.push(Evidence::new(nv, format!("(no {version}/)")));
                continue;
            }
            Read::Text(_) => {}
        }
        let vdir = format!("{nv}/{version}");
        match read(out, Kind::Dir, &vdir) {
            Read::Text(t) => {
                let gsp: Vec<&str> = listing(&t).into_iter().filter(|n| is_gsp(n)).collect();
                if !gsp.is_empty() {
                    f.v2.gsp_files_present =
                        Proved::known(true, vec![Evidence::new(vdir, gsp.join(" "))]);
                    return;
                }
                checked.push(Evidence::new(vdir, "(no gsp*.bin)"));
            }
            Read::Absent => checked.push(Evidence::new(vdir, "(absent)")),
            Read::Failed(w) => failed.push(w),
        }
    }
    f.v2.gsp_files_present = if failed.is_empty() {
        Proved::known(false, checked)
    } else {
        Proved::unknown(failed.join("; "))
    };
}

pub(super) fn libibverbs(out: &ProbeOutput, f: &mut Facts) {
    for d in [
        "/usr/lib64",
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib",
    ] {
        let name = format!("{d}/libibverbs.so.1");
        match read(out, Kind::Count, &name) {
            Read::Absent => continue,
            Read::Failed(why) => {
                f.v2.libibverbs_dmabuf = Proved::unknown(why);
                return;
            }
            Read::Text(t) => {
                let n: u64 = first_line(&t).trim().parse().unwrap_or(0);
                f.v2.libibverbs_dmabuf = Proved::known(
                    n > 0,
                    vec![Evidence::new(
                        name,
                        if n > 0 {
                            "ibv_reg_dmabuf_mr (present)".to_string()
                        } else {
                            "(no ibv_reg_dmabuf_mr: rdma-core older than 34)".to_string()
                        },
                    )],
                );
                return;
            }
        }
    }
}

pub(super) fn signatures(out: &ProbeOutput, f: &mut Facts) {
    const EFI: &str = "/sys/firmware/efi";
    const VAR: &str = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c";
    f.v2.secure_boot = match read(out, Kind::Dir, EFI) {
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
    f.v2.lockdown = match read(out, Kind::File, LOCKDOWN) {
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
    match f.v2.secure_boot.value {
        Some(true) => yes.extend(f.v2.secure_boot.evidence.clone()),
        Some(false) => {}
        None => unknown.push("Secure Boot"),
    }
    match &f.kernel_config {
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
    f.v2.signature_enforced = if !yes.is_empty() {
        Proved::known(true, yes)
    } else if unknown.is_empty() {
        Proved::known(false, Vec::new())
    } else {
        Proved::unknown(format!("{} could not be read", unknown.join(", ")))
    };
    // The running kernel's host nvidia.ko: its signature trailer.
    let Some(rel) = f.kernel_release.clone() else {
        return;
    };
    let prefix = format!("/lib/modules/{rel}/");
    let tail = out.with_prefix(Kind::Tail, &prefix).next();
    f.v2.nvidia_ko_signed = match tail {
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
            let compressed =
                f.v2.kernels
                    .value
                    .iter()
                    .flatten()
                    .find(|k| k.release == rel)
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
