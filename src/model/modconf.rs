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

fn is_peermem(word: &str) -> bool {
    norm(word) == "nvidia_peermem"
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
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["softdep", module, rest @ ..] => {
                    !is_peermem(module) && rest.iter().any(|w| !w.ends_with(':') && is_peermem(w))
                }
                ["install", module, rest @ ..] => {
                    !is_peermem(module)
                        && rest.iter().any(|w| w.ends_with("modprobe"))
                        && rest.iter().any(|w| is_peermem(w.trim_end_matches(';')))
                }
                _ => false,
            }
        })
        .map(|line| LoadLine { line })
        .collect()
}

/// Logical lines of a modprobe.d file: `\` continuations joined, comments dropped.
fn logical_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut logical = String::new();
    for raw in text.lines() {
        if let Some(cont) = raw.strip_suffix('\\') {
            logical.push_str(cont);
            logical.push(' ');
            continue;
        }
        logical.push_str(raw);
        let line = std::mem::take(&mut logical);
        if !line.trim().starts_with('#') {
            out.push(line);
        }
    }
    if !logical.trim().is_empty() && !logical.trim().starts_with('#') {
        out.push(logical);
    }
    out
}

/// Lines of a modprobe.d file that mask nvidia-peermem: `install nvidia-peermem /bin/false` (or
/// `true`, any path): modprobe runs that command instead of loading the module, whoever asks
/// for it (modules-load.d, a softdep, an explicit `modprobe`).
pub fn masks(text: &str) -> Vec<LoadLine> {
    logical_lines(text)
        .into_iter()
        .filter(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["install", module, cmd, ..] => {
                    let base = cmd.rsplit('/').next().unwrap_or(cmd);
                    is_peermem(module) && matches!(base, "false" | "true")
                }
                _ => false,
            }
        })
        .map(|line| LoadLine { line })
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
}
