//! Size caps on the files gpufleet reads whole (docs/architecture.md, "Size caps"). A file, a
//! pipe or stdin is read through `take(cap + 1)`, so `-i /dev/zero` or a 10 GB file costs at
//! most the cap in memory and then fails with `larger than N MiB (the limit for …)`. The caps
//! are far above any real fleet's data: a 10,000-node snapshot is 77 MB, its inventory 1.5 MB.

use std::io::{self, Read};
use std::path::Path;

const MIB: u64 = 1024 * 1024;

/// The kinds of file read whole, each with its cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A snapshot: `snapshot --from FILE`, `diff OLD NEW`, `--compare`, `policy --against`
    /// (256 MiB: gpufleet's own pretty JSON is ≈ 8 KB a node, 77 MB for 10,000 nodes).
    Snapshot,
    /// An inventory: `-i FILE` of any format, `-i -` on stdin (64 MiB: ≈ 150 bytes a node in
    /// gpufleet's TOML, 1.5 MB for 10,000 nodes).
    Inventory,
    /// A Kubernetes object file for `policy check` (16 MiB).
    Policy,
    /// An OpenSSH client config and each file it includes (16 MiB).
    SshConfig,
    /// gpufleet's `config.toml` and theme files (16 MiB).
    Config,
}

impl Kind {
    /// The most bytes a file of this kind may have.
    pub const fn cap(self) -> u64 {
        match self {
            Kind::Snapshot => 256 * MIB,
            Kind::Inventory => 64 * MIB,
            Kind::Policy | Kind::SshConfig | Kind::Config => 16 * MIB,
        }
    }

    /// What the cap is for, as the error says it.
    pub const fn what(self) -> &'static str {
        match self {
            Kind::Snapshot => "a snapshot",
            Kind::Inventory => "an inventory",
            Kind::Policy => "a policy file",
            Kind::SshConfig => "an ssh_config file",
            Kind::Config => "a gpufleet config file",
        }
    }

    /// `larger than N MiB (the limit for …)`, the message of an oversized file.
    pub fn too_large(self) -> String {
        format!(
            "larger than {} MiB (the limit for {})",
            self.cap() / MIB,
            self.what()
        )
    }
}

/// All of `r`, or an error of kind [`io::ErrorKind::FileTooLarge`] (its message
/// [`Kind::too_large`]) once it gives more than `kind`'s cap. Reads at most cap + 1 bytes.
pub fn read_from(r: impl Read, kind: Kind) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    r.take(kind.cap().saturating_add(1)).read_to_end(&mut out)?;
    if out.len() as u64 > kind.cap() {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            kind.too_large(),
        ));
    }
    Ok(out)
}

/// [`read_from`] as UTF-8 text; text that is not UTF-8 is an [`io::ErrorKind::InvalidData`]
/// error, as `std::fs::read_to_string` gives.
pub fn read_text_from(r: impl Read, kind: Kind) -> io::Result<String> {
    String::from_utf8(read_from(r, kind)?).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
        )
    })
}

/// The file at `path`, as `std::fs::read` but capped ([`read_from`]). The error is the bare
/// `io::Error` (a caller checks `NotFound`); callers write it as `FILE: {e}`.
pub fn read(path: &Path, kind: Kind) -> io::Result<Vec<u8>> {
    read_from(std::fs::File::open(path)?, kind)
}

/// The file at `path` as text, as `std::fs::read_to_string` but capped ([`read_text_from`]).
pub fn read_to_string(path: &Path, kind: Kind) -> io::Result<String> {
    read_text_from(std::fs::File::open(path)?, kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_up_to_the_cap_and_refuses_more() {
        let cap = Kind::Inventory.cap() as usize;
        let ok = read_from(io::repeat(b'a').take(cap as u64), Kind::Inventory).unwrap();
        assert_eq!(ok.len(), cap);
        let e = read_from(io::repeat(b'a'), Kind::Inventory).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(
            e.to_string(),
            "larger than 64 MiB (the limit for an inventory)"
        );
        let e = read_to_string(Path::new("/dev/zero"), Kind::Snapshot).unwrap_err();
        assert_eq!(
            e.to_string(),
            "larger than 256 MiB (the limit for a snapshot)"
        );
        let e = read_text_from(&b"ok\xff"[..], Kind::Config).unwrap_err();
        assert_eq!(e.to_string(), "not UTF-8 text (byte 2)");
        let e = read(Path::new("/nonexistent/x"), Kind::Policy).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}
