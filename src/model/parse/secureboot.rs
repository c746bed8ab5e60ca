//! Module signature enforcement: the Secure Boot EFI variable, kernel lockdown, the kernel command
//! line and the signature trailer of a module file. Pure: no I/O. docs/domain.md, "module
//! signature enforcement" and "nvidia.ko signed".

/// The value of a boolean EFI variable as efivarfs shows it (UEFI spec; efivarfs): 4 attribute
/// bytes, then the data. `Some(true)` for data byte 1, `Some(false)` for 0, `None` when the
/// file is not that shape.
pub fn efivar_bool(bytes: &[u8]) -> Option<bool> {
    match bytes {
        [_, _, _, _, 1] => Some(true),
        [_, _, _, _, 0] => Some(false),
        _ => None,
    }
}

/// The active lockdown mode of `/sys/kernel/security/lockdown`: the word in brackets
/// (`none [integrity] confidentiality` → `integrity`).
pub fn lockdown_mode(text: &str) -> Option<String> {
    let start = text.find('[')?;
    let end = text[start..].find(']')? + start;
    let w = &text[start + 1..end];
    (!w.is_empty() && w.chars().all(|c| c.is_ascii_lowercase())).then(|| w.to_string())
}

/// Whether `/proc/cmdline` sets `module.sig_enforce=1` (or `=y`).
pub fn cmdline_sig_enforce(text: &str) -> bool {
    text.split_whitespace().any(|w| {
        matches!(
            w,
            "module.sig_enforce=1" | "module.sig_enforce=y" | "module.sig_enforce=Y"
        )
    })
}

/// The trailer the kernel's module signing appends (kernel/module/signing.c MODULE_SIG_STRING).
pub const SIGNATURE_TRAILER: &[u8] = b"~Module signature appended~\n";

/// Whether a module file's last bytes are the signature trailer.
pub fn signed(tail: &[u8]) -> bool {
    tail.ends_with(SIGNATURE_TRAILER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn efivars_lockdown_cmdline_trailer() {
        assert_eq!(efivar_bool(&[6, 0, 0, 0, 1]), Some(true));
        assert_eq!(efivar_bool(&[6, 0, 0, 0, 0]), Some(false));
        assert_eq!(efivar_bool(&[6, 0, 0, 0]), None);
        assert_eq!(efivar_bool(&[6, 0, 0, 0, 1, 1]), None);
        assert_eq!(
            lockdown_mode("none [integrity] confidentiality\n").as_deref(),
            Some("integrity")
        );
        assert_eq!(lockdown_mode("[none] integrity").as_deref(), Some("none"));
        assert_eq!(lockdown_mode("garbage"), None);
        assert!(cmdline_sig_enforce(
            "BOOT_IMAGE=/vmlinuz ro module.sig_enforce=1 quiet"
        ));
        assert!(!cmdline_sig_enforce("ro module.sig_enforce=0"));
        assert!(signed(b"xx~Module signature appended~\n"));
        assert!(!signed(b"license=GPL\0"));
    }
}
