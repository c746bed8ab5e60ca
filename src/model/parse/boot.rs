//! The next boot: installed kernels and their NVIDIA module files, the kernel the next reboot
//! starts, and version order (pure: no I/O). docs/domain.md, facts table "installed kernels and
//! their NVIDIA modules" and "boot kernel".

use std::cmp::Ordering;

/// Compares two kernel releases as `sort -V` does: the dot/dash-separated fields left to right,
/// runs of digits as numbers, the rest as text (`5.15.0-124-generic` > `5.15.0-122-generic`,
/// `6.10` > `6.9`).
pub fn version_cmp(a: &str, b: &str) -> Ordering {
    fn chunks(s: &str) -> Vec<(bool, &str)> {
        let mut out = Vec::new();
        let mut start = 0;
        let bytes = s.as_bytes();
        for i in 1..=bytes.len() {
            let boundary =
                i == bytes.len() || bytes[i].is_ascii_digit() != bytes[i - 1].is_ascii_digit();
            if boundary {
                out.push((bytes[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        out
    }
    let (ca, cb) = (chunks(a), chunks(b));
    for (x, y) in ca.iter().zip(cb.iter()) {
        let ord = match (x, y) {
            ((true, p), (true, q)) => {
                let (p, q) = (p.trim_start_matches('0'), q.trim_start_matches('0'));
                p.len().cmp(&q.len()).then_with(|| p.cmp(q))
            }
            ((_, p), (_, q)) => p.cmp(q),
        };
        if ord != Ordering::Equal {
            return ord;
        }
    }
    ca.len().cmp(&cb.len())
}

/// Kind of an NVIDIA module file found under /lib/modules/<k>.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModuleFile {
    /// The driver: `nvidia.ko`, Debian's `nvidia-current.ko` / `nvidia-current-open.ko`.
    Driver,
    /// `nvidia-peermem.ko` / `nvidia_peermem.ko`.
    Peermem,
}

/// What an NVIDIA module file path is, by its file name (`.ko`, `.ko.xz`, `.ko.zst`, `.ko.gz`);
/// `None` for anything else (`nvidiafb.ko`, `nvidia-drm.ko`, …).
pub fn module_file(path: &str) -> Option<ModuleFile> {
    let name = path.rsplit('/').next()?;
    let stem = ["", ".xz", ".zst", ".gz"]
        .iter()
        .find_map(|c| name.strip_suffix(&format!(".ko{c}")))?;
    match stem {
        "nvidia" | "nvidia-current" | "nvidia-current-open" => Some(ModuleFile::Driver),
        "nvidia-peermem" | "nvidia_peermem" => Some(ModuleFile::Peermem),
        _ => None,
    }
}

/// The release a boot-kernel link target or BLS `linux` path names: `vmlinuz-5.15.0-124-generic`,
/// `/boot/vmlinuz-6.1.0-28-amd64`, `boot/vmlinuz-…` → the part after `vmlinuz-`.
pub fn release_of_image(target: &str) -> Option<String> {
    let name = target.trim().rsplit('/').next()?;
    let rel = name.strip_prefix("vmlinuz-")?;
    (!rel.is_empty()
        && rel
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+~-".contains(c)))
    .then(|| rel.to_string())
}

/// `saved_entry=<id>` of a GRUB environment block (`/boot/grub2/grubenv`).
pub fn grubenv_saved_entry(text: &str) -> Option<String> {
    grubenv_value(text, "saved_entry")
}

fn grubenv_value(text: &str, key: &str) -> Option<String> {
    let prefix = format!("{key}=");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty() && !v.contains('/'))
}

/// The entry the next boot starts: `next_entry` (a one-time boot, `grub2-reboot`) before
/// `saved_entry`; with the key that named it.
pub fn grubenv_entry(text: &str) -> Option<(&'static str, String)> {
    grubenv_value(text, "next_entry")
        .map(|v| ("next_entry", v))
        .or_else(|| grubenv_saved_entry(text).map(|v| ("saved_entry", v)))
}

/// The `linux` line of a BLS entry (`/boot/loader/entries/<id>.conf`): its image path.
pub fn bls_linux(text: &str) -> Option<(String, String)> {
    text.lines().find_map(|l| {
        let t = l.trim();
        let rest = t.strip_prefix("linux")?;
        rest.starts_with(char::is_whitespace)
            .then(|| (rest.trim().to_string(), t.to_string()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_like_sort_v() {
        use Ordering::*;
        assert_eq!(
            version_cmp("5.15.0-124-generic", "5.15.0-122-generic"),
            Greater
        );
        assert_eq!(version_cmp("6.10.0", "6.9.12"), Greater);
        assert_eq!(version_cmp("6.8.0-83-generic", "6.8.0-83-generic"), Equal);
        assert_eq!(
            version_cmp(
                "4.18.0-553.22.1.el8_10.x86_64",
                "4.18.0-553.5.1.el8_10.x86_64"
            ),
            Greater
        );
        assert_eq!(version_cmp("6.1", "6.1.0"), Less);
    }

    #[test]
    fn module_files_by_name() {
        assert_eq!(
            module_file("/x/updates/dkms/nvidia.ko"),
            Some(ModuleFile::Driver)
        );
        assert_eq!(
            module_file("/x/nvidia-current-open.ko.zst"),
            Some(ModuleFile::Driver)
        );
        assert_eq!(
            module_file("/x/nvidia_peermem.ko.xz"),
            Some(ModuleFile::Peermem)
        );
        assert_eq!(module_file("/x/fbdev/nvidia/nvidiafb.ko"), None);
        assert_eq!(module_file("/x/nvidia-drm.ko"), None);
        assert_eq!(module_file("/x/nvidia.ko.bak"), None);
    }

    #[test]
    fn boot_images_and_bls() {
        assert_eq!(
            release_of_image("vmlinuz-5.15.0-124-generic").as_deref(),
            Some("5.15.0-124-generic")
        );
        assert_eq!(
            release_of_image("boot/vmlinuz-6.1.0-28-amd64").as_deref(),
            Some("6.1.0-28-amd64")
        );
        assert_eq!(release_of_image("vmlinuz"), None);
        assert_eq!(release_of_image("vmlinuz-$(reboot)"), None);
        let env = "# GRUB Environment Block\nsaved_entry=abc-5.14.0-503.el9.x86_64\n#####\n";
        assert_eq!(
            grubenv_saved_entry(env).as_deref(),
            Some("abc-5.14.0-503.el9.x86_64")
        );
        assert_eq!(grubenv_saved_entry("saved_entry=../../etc/passwd\n"), None);
        assert_eq!(
            grubenv_entry("saved_entry=a-K\nnext_entry=a-N\n"),
            Some(("next_entry", "a-N".to_string()))
        );
        let (img, line) =
            bls_linux("title RHEL\nversion 5.14.0\nlinux /vmlinuz-5.14.0-503.el9.x86_64\n")
                .unwrap();
        assert_eq!(img, "/vmlinuz-5.14.0-503.el9.x86_64");
        assert_eq!(line, "linux /vmlinuz-5.14.0-503.el9.x86_64");
        assert_eq!(bls_linux("linuxefi x\n"), None);
    }
}
