//! The next boot: `boot::version_cmp` (a total order), `boot::module_file`,
//! `boot::release_of_image`, `boot::grubenv_saved_entry`, `boot::bls_linux`.
#![no_main]

use std::cmp::Ordering::*;

use gpufleet::model::parse::boot;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);

    // version_cmp on the first three lines: reflexive, antisymmetric, transitive.
    let mut l = text.splitn(3, '\n');
    let (a, b, c) = (
        l.next().unwrap_or(""),
        l.next().unwrap_or(""),
        l.next().unwrap_or(""),
    );
    let cmp = boot::version_cmp;
    for x in [a, b, c] {
        assert_eq!(cmp(x, x), Equal, "{x:?}");
    }
    for (x, y) in [(a, b), (b, c), (a, c)] {
        assert_eq!(cmp(x, y), cmp(y, x).reverse(), "{x:?} vs {y:?}");
    }
    let le = |x: &str, y: &str| cmp(x, y) != Greater;
    for (x, y, z) in [
        (a, b, c),
        (a, c, b),
        (b, a, c),
        (b, c, a),
        (c, a, b),
        (c, b, a),
    ] {
        if le(x, y) && le(y, z) {
            assert!(le(x, z), "{x:?} <= {y:?} <= {z:?}");
        }
        if cmp(x, y) == Equal {
            assert_eq!(cmp(x, z), cmp(y, z), "{x:?} ~ {y:?} vs {z:?}");
        }
    }
    // Appending a field makes a release newer than itself.
    let longer = format!("{a}.1");
    assert_eq!(cmp(&longer, a), Greater);

    for line in text.lines() {
        // module_file: decided by the file name alone.
        if let Some(k) = boot::module_file(line) {
            let name = line.rsplit('/').next().unwrap();
            assert!(
                [".ko", ".ko.xz", ".ko.zst", ".ko.gz"]
                    .iter()
                    .any(|s| name.ends_with(s)),
                "{name:?} is {k:?}"
            );
        }
        assert_eq!(
            boot::module_file(&format!("/lib/modules/x/{line}")),
            boot::module_file(line)
        );

        // release_of_image: a clean release that follows `vmlinuz-` and reads back.
        if let Some(r) = boot::release_of_image(line) {
            assert!(!r.is_empty());
            assert!(
                r.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._+~-".contains(c)),
                "{r:?}"
            );
            assert!(line.contains(&format!("vmlinuz-{r}")));
            assert_eq!(
                boot::release_of_image(&format!("/boot/vmlinuz-{r}")),
                Some(r)
            );
        }
    }

    // grubenv: the first `saved_entry=` line's value, trimmed, never a path.
    if let Some(v) = boot::grubenv_saved_entry(&text) {
        assert!(!v.is_empty() && !v.contains('/') && v.trim() == v);
        let first = text
            .lines()
            .find_map(|l| l.strip_prefix("saved_entry="))
            .unwrap();
        assert_eq!(first.trim(), v);
    }

    // BLS: the first `linux <image>` line, trimmed, and its image.
    if let Some((img, line)) = boot::bls_linux(&text) {
        assert!(line.starts_with("linux") && line.trim() == line);
        assert!(line[5..].starts_with(char::is_whitespace), "{line:?}");
        assert_eq!(img, line[5..].trim());
        assert!(text.lines().any(|l| l.trim() == line));
        assert_eq!(
            boot::bls_linux(&format!("title x\n{line}\nlinux /other\n")),
            Some((img, line))
        );
    }
});
