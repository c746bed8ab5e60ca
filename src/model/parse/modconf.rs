//! Whether nvidia-peermem is configured to load at boot: `modules-load.d/*.conf`
//! (modules-load.d(5): one module name per line, `#` and `;` comments) and `modprobe.d/*.conf`
//! (modprobe.d(5): `softdep` and `install` lines, `\` continuations), and whether it is masked
//! (`install nvidia-peermem /bin/false`). Module names compare with `-` and `_` as the same
//! character, as modprobe does. Callers decode the files lossily, so a byte that is not UTF-8 (a
//! Latin-1 comment) never hides a directive.

/// One line that loads nvidia-peermem, for evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadLine {
    pub line: String,
}

fn norm(name: &str) -> String {
    name.replace('-', "_")
}

/// nvidia-peermem, or `nv_peer_mem`: the legacy Mellanox peer-memory module it replaced (the
/// same legacy GPUDirect RDMA path, out of tree like it).
pub fn is_peermem(word: &str) -> bool {
    matches!(norm(word).as_str(), "nvidia_peermem" | "nv_peer_mem")
}

/// Lines of a modules-load.d file that name nvidia-peermem.
pub fn modules_load(text: &str) -> Vec<LoadLine> {
    text.lines()
        .filter(|l| {
            let t = l.trim();
            !t.starts_with('#') && !t.starts_with(';') && is_peermem(t)
        })
        .map(|l| LoadLine {
            line: l.to_string(),
        })
        .collect()
}

/// Lines of a modprobe.d file that make another module load nvidia-peermem: `softdep X pre:|post:
/// ... nvidia-peermem`, or `install X ... modprobe ... nvidia-peermem` for a module X other than
/// nvidia-peermem itself (`install nvidia-peermem /bin/false` disables it instead).
pub fn modprobe(text: &str) -> Vec<LoadLine> {
    logical_lines(text)
        .into_iter()
        .filter(|line| {
            let words = kmod_words(line);
            match words.as_slice() {
                ["softdep", module, rest @ ..] => {
                    !is_peermem(module) && rest.iter().any(|w| !w.ends_with(':') && is_peermem(w))
                }
                ["install", module, ..] => !is_peermem(module) && command_loads_peermem(line),
                _ => false,
            }
        })
        .map(|line| LoadLine { line })
        .collect()
}

/// Words as modprobe splits a line: on spaces and tabs only (a no-break space or a vertical tab
/// is part of a word, so such a line does not mean what it seems to).
fn kmod_words(line: &str) -> Vec<&str> {
    line.split([' ', '\t']).filter(|w| !w.is_empty()).collect()
}

/// Whether an `install` line's shell command loads nvidia-peermem: a `modprobe` or `insmod`
/// among its words and a word that names the module (`nvidia-peermem`, `nvidia_peermem`, or its
/// `.ko` file), quotes, parentheses and `;` `&` `|` being word breaks as in the shell.
fn command_loads_peermem(line: &str) -> bool {
    let tokens: Vec<&str> = line
        .split(|c: char| c.is_whitespace() || ";&|()\"'`".contains(c))
        .filter(|w| !w.is_empty())
        .collect();
    let loader = tokens
        .iter()
        .skip(2)
        .any(|w| w.ends_with("modprobe") || w.ends_with("insmod"));
    let names = tokens.iter().skip(2).any(|w| {
        let file = w.rsplit('/').next().unwrap_or(w);
        let stem = [".ko.xz", ".ko.zst", ".ko.gz", ".ko"]
            .iter()
            .find_map(|x| file.strip_suffix(x))
            .unwrap_or(file);
        is_peermem(stem)
    });
    loader && names
}

/// The first `install nvidia-peermem …` line of a file (modprobe uses the first one it reads),
/// and whether it masks the module (`/bin/false` or `/bin/true` instead of loading it).
pub fn peermem_install(text: &str) -> Option<(String, bool)> {
    logical_lines(text).into_iter().find_map(|line| {
        let words = kmod_words(&line);
        match words.as_slice() {
            ["install", module, cmd, ..] if is_peermem(module) => {
                let base = cmd.rsplit('/').next().unwrap_or(cmd);
                let masks = matches!(base, "false" | "true");
                Some((line.clone(), masks))
            }
            _ => None,
        }
    })
}

/// Whether the kernel command line asks systemd-modules-load for nvidia-peermem
/// (`modules-load=a,nvidia-peermem` or `rd.modules-load=`, modules-load.d(5)).
pub fn cmdline_loads_peermem(cmdline: &str) -> bool {
    cmdline.split_whitespace().any(|w| {
        w.strip_prefix("modules-load=")
            .or_else(|| w.strip_prefix("rd.modules-load="))
            .is_some_and(|list| list.split(',').any(is_peermem))
    })
}

/// Logical lines of a modprobe.d file as kmod reads them (`libkmod-config.c`, modprobe.d(5);
/// docs/domain.md "modprobe.d exactly as modprobe reads it"): a line ending in `\` continues on
/// the next one (the backslash and the line end are dropped, nothing is put in their place), a
/// line whose first non-blank character is `#` is a comment (a comment continued by `\` takes
/// the next line with it), and a file that ends after a `\` ends that line there.
pub fn logical_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut logical = String::new();
    for raw in text.lines() {
        if let Some(cont) = raw.strip_suffix('\\') {
            logical.push_str(cont);
            continue;
        }
        logical.push_str(raw);
        let line = std::mem::take(&mut logical);
        if !is_comment_or_blank(&line) {
            out.push(line);
        }
    }
    if !is_comment_or_blank(&logical) {
        out.push(logical);
    }
    out
}

fn is_comment_or_blank(line: &str) -> bool {
    let t = line.trim_start_matches([' ', '\t']);
    t.is_empty() || t.starts_with('#')
}

/// Words as modprobe splits a logical line: on spaces and tabs only.
pub fn words(line: &str) -> Vec<&str> {
    kmod_words(line)
}

/// Module names as modprobe compares them: `-` and `_` are the same character.
pub fn same_module(a: &str, b: &str) -> bool {
    norm(a) == norm(b)
}

/// One `blacklist MODULE` line of a modprobe.d file (modprobe.d(5): the module's aliases are
/// not used; loading it by name still works).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlacklistLine {
    /// The module as written (`nouveau`, `nova_core`).
    pub module: String,
    /// The logical line (continuations joined).
    pub line: String,
}

/// The `blacklist` lines of one modprobe.d file, in order.
pub fn blacklists(text: &str) -> Vec<BlacklistLine> {
    logical_lines(text)
        .into_iter()
        .filter_map(|line| match kmod_words(&line).as_slice() {
            ["blacklist", module, ..] => Some(BlacklistLine {
                module: (*module).to_string(),
                line: line.trim().to_string(),
            }),
            _ => None,
        })
        .collect()
}

/// Modules the kernel command line blacklists: `modprobe.blacklist=a,b` (read by modprobe),
/// `rd.driver.blacklist=a,b` (dracut's initramfs) and `module_blacklist=a,b` (the kernel
/// itself, `kernel/module/main.c`), each with the parameter that named it. A parameter may be
/// given several times.
pub fn cmdline_blacklists(cmdline: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for w in cmdline.split_ascii_whitespace() {
        for param in [
            "modprobe.blacklist",
            "rd.driver.blacklist",
            "module_blacklist",
        ] {
            if let Some(list) = w.strip_prefix(param).and_then(|r| r.strip_prefix('=')) {
                for m in list.split(',').filter(|m| !m.is_empty()) {
                    out.push((m.to_string(), param.to_string()));
                }
            }
        }
    }
    out
}

/// Lines of a modprobe.d file that mask nvidia-peermem (its first `install` line, when that one
/// runs `/bin/false` or `/bin/true`).
pub fn masks(text: &str) -> Vec<LoadLine> {
    peermem_install(text)
        .filter(|(_, masks)| *masks)
        .map(|(line, _)| LoadLine { line })
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_load_names_with_dash_or_underscore() {
        assert_eq!(modules_load("nvidia-peermem\n").len(), 1);
        assert_eq!(modules_load("  nvidia_peermem  \n").len(), 1);
        assert!(
            modules_load("# nvidia-peermem\n; nvidia-peermem\nnvidia\nnvidia-peermem-x\n")
                .is_empty()
        );
    }

    #[test]
    fn modprobe_softdep_and_install() {
        assert_eq!(modprobe("softdep nvidia post: nvidia-peermem\n").len(), 1);
        assert_eq!(
            modprobe("softdep mlx5_ib pre: nvidia_peermem ib_core\n").len(),
            1
        );
        assert_eq!(
            modprobe("install nvidia /sbin/modprobe --ignore-install nvidia && \\\n /sbin/modprobe nvidia-peermem\n").len(),
            1
        );
        assert!(modprobe("install nvidia-peermem /bin/false\n").is_empty());
        assert!(
            modprobe("blacklist nvidia_peermem\noptions nvidia-peermem peerdirect_support=1\n")
                .is_empty()
        );
        assert!(modprobe("# softdep nvidia post: nvidia-peermem\n").is_empty());
        assert!(modprobe("softdep nvidia post: nvidia-uvm\n").is_empty());
    }

    #[test]
    fn install_hooks_the_shell_way_and_kmod_words() {
        for hook in [
            "install nvidia /sbin/modprobe --ignore-install nvidia && /sbin/modprobe \"nvidia-peermem\"\n",
            "install nvidia /sbin/modprobe --ignore-install nvidia && (/sbin/modprobe nvidia-peermem)\n",
            "install nvidia /sbin/modprobe --ignore-install nvidia; /sbin/modprobe nvidia-peermem||true\n",
            "install nvidia /sbin/modprobe --ignore-install nvidia; /sbin/insmod /lib/modules/x/nvidia-peermem.ko\n",
        ] {
            assert_eq!(modprobe(hook).len(), 1, "{hook}");
        }
        // A no-break space is not a word break for modprobe: not a mask.
        assert!(masks("install nvidia-peermem\u{a0}/bin/false\n").is_empty());
        // The first install line decides.
        let two = "install nvidia-peermem /sbin/modprobe --ignore-install nvidia-peermem\ninstall nvidia-peermem /bin/false\n";
        assert!(masks(two).is_empty());
        assert!(cmdline_loads_peermem(
            "ro modules-load=ib_umad,nvidia-peermem quiet"
        ));
        assert!(!cmdline_loads_peermem("ro modules-load=ib_umad"));
    }

    #[test]
    fn install_false_or_true_masks_peermem() {
        assert_eq!(
            masks("blacklist nvidia_peermem\ninstall nvidia-peermem /bin/false\n").len(),
            1
        );
        assert_eq!(masks("install nvidia_peermem /usr/bin/true\n").len(), 1);
        assert!(
            masks("install nvidia-peermem /sbin/modprobe --ignore-install nvidia-peermem\n")
                .is_empty()
        );
        assert!(masks("# install nvidia-peermem /bin/false\n").is_empty());
        assert!(masks("blacklist nvidia_peermem\n").is_empty());
    }

    /// negativo17/nvidia-driver#73: the package's /usr/lib/modprobe.d/nvidia.conf has
    /// `blacklist nouveau` (its `cat … | grep black`, verbatim).
    #[test]
    fn blacklist_lines_and_the_command_line() {
        let b = blacklists(
            "# c\nblacklist nouveau\noptions nouveau modeset=0\n  blacklist\tnova_core \\\n\n#blacklist x\n",
        );
        let m: Vec<&str> = b.iter().map(|l| l.module.as_str()).collect();
        assert_eq!(m, ["nouveau", "nova_core"]);
        assert_eq!(b[0].line, "blacklist nouveau");
        let c = cmdline_blacklists(
            "BOOT_IMAGE=/vmlinuz rd.driver.blacklist=nouveau rd.lvm.lv=vg0/root modprobe.blacklist=nova_core,nova_drm module_blacklist= rhgb",
        );
        assert_eq!(
            c,
            [
                ("nouveau".to_string(), "rd.driver.blacklist".to_string()),
                ("nova_core".to_string(), "modprobe.blacklist".to_string()),
                ("nova_drm".to_string(), "modprobe.blacklist".to_string()),
            ]
        );
        assert!(cmdline_blacklists("xmodprobe.blacklist=nouveau").is_empty());
        assert!(same_module("nova-core", "nova_core"));
    }

    #[test]
    fn continuation_drops_backslash_and_line_end_only() {
        assert_eq!(logical_lines("a\\\nb\n"), ["ab"]);
        assert_eq!(logical_lines("# x \\\nblacklist y\nz\n"), ["z"]);
        assert_eq!(logical_lines("blacklist a \\"), ["blacklist a "]);
        // The legacy Mellanox module is a peermem name.
        assert!(is_peermem("nv_peer_mem"));
        assert_eq!(modules_load("nv_peer_mem\n").len(), 1);
    }
}
