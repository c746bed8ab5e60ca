//! Size caps on the files gpufleet reads whole (docs/architecture.md, "Size caps"). A regular
//! file's size is checked before it is read (a 1 GB snapshot is refused without reading a
//! byte); a pipe, a FIFO, a device or stdin is read through a limit of cap + 1 bytes into
//! chunks that never grow past it, so `-i /dev/zero` or an endless FIFO costs at most the cap
//! in memory (plus one read buffer) and then fails with `larger than N MiB (the limit for …)`.
//! The caps are far above any real fleet's data: a 10,000-node snapshot is 77 MB, its
//! inventory 1.5 MB.

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
/// [`Kind::too_large`]) once it gives more than `kind`'s cap. Reads at most cap + 1 bytes, and
/// holds at most that much while refusing ([`read_capped`]).
pub fn read_from(r: impl Read, kind: Kind) -> io::Result<Vec<u8>> {
    read_capped(r, kind.cap(), None).map_err(|e| match e {
        Capped::TooLarge => io::Error::new(io::ErrorKind::FileTooLarge, kind.too_large()),
        Capped::Io(e) => e,
    })
}

/// Why [`read_capped`] gave no bytes.
#[derive(Debug)]
pub enum Capped {
    /// The reader gave more than the cap (cap + 1 bytes were read, then it stopped).
    TooLarge,
    Io(io::Error),
}

/// The first read buffer when the size is not known (64 KiB); each next one doubles.
const FIRST_CHUNK: usize = 64 * 1024;

/// All of `r` when it gives at most `cap` bytes, else [`Capped::TooLarge`] after reading
/// exactly cap + 1 of them. `size_hint` (a regular file's size) makes the first buffer that
/// size plus one, so a file read whole is one allocation of its size. The bytes go into
/// chunks that double and never reach past cap + 1 in all (no buffer is ever reallocated
/// larger, as `read_to_end` does up to twice the cap): refusing costs at most cap + 1 bytes of
/// memory; bytes that fit in more than one chunk are joined once at the end.
pub fn read_capped(mut r: impl Read, cap: u64, size_hint: Option<u64>) -> Result<Vec<u8>, Capped> {
    let limit = usize::try_from(cap.saturating_add(1)).unwrap_or(usize::MAX);
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    let mut total = 0usize;
    let mut next = size_hint
        .and_then(|s| usize::try_from(s).ok())
        .map_or(FIRST_CHUNK, |s| s.saturating_add(1));
    'read: while total < limit {
        let size = next.min(limit - total).max(1);
        let mut chunk = vec![0u8; size];
        let mut filled = 0;
        while filled < size {
            match r.read(&mut chunk[filled..]) {
                Ok(0) => {
                    chunk.truncate(filled);
                    total += filled;
                    chunks.push(chunk);
                    break 'read;
                }
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Capped::Io(e)),
            }
        }
        total += filled;
        chunks.push(chunk);
        next = size.saturating_mul(2).max(FIRST_CHUNK);
    }
    if total > limit - 1 {
        return Err(Capped::TooLarge);
    }
    if chunks.len() == 1 {
        return Ok(chunks.pop().unwrap_or_default());
    }
    let mut out = Vec::with_capacity(total);
    for c in chunks {
        out.extend_from_slice(&c);
    }
    Ok(out)
}

/// The file at `path`, capped: a regular file over the cap is refused from its size (not
/// read), anything else is read through [`read_capped`]. Errors: the bare `io::Error` (a caller
/// checks `NotFound`), [`io::ErrorKind::FileTooLarge`] with [`Kind::too_large`].
fn read_path(path: &Path, kind: Kind) -> io::Result<Vec<u8>> {
    let f = std::fs::File::open(path)?;
    let meta = f.metadata()?;
    let too_large = || io::Error::new(io::ErrorKind::FileTooLarge, kind.too_large());
    let hint = if meta.is_file() {
        if meta.len() > kind.cap() {
            return Err(too_large());
        }
        // /proc and sysfs files say 0; a file may also grow while it is read: the cap holds.
        Some(meta.len())
    } else {
        None
    };
    read_capped(f, kind.cap(), hint).map_err(|e| match e {
        Capped::TooLarge => too_large(),
        Capped::Io(e) => e,
    })
}

/// [`read_from`] as UTF-8 text; text that is not UTF-8 is an [`io::ErrorKind::InvalidData`]
/// error, as `std::fs::read_to_string` gives.
pub fn read_text_from(r: impl Read, kind: Kind) -> io::Result<String> {
    utf8(read_from(r, kind)?)
}

fn utf8(bytes: Vec<u8>) -> io::Result<String> {
    String::from_utf8(bytes).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to()),
        )
    })
}

/// The file at `path`, as `std::fs::read` but capped: a regular file's size is checked first,
/// a FIFO, a device or a pipe is read through the limit ([`read_capped`]). The error is the
/// bare `io::Error` (a caller checks `NotFound`); callers write it as `FILE: {e}`.
pub fn read(path: &Path, kind: Kind) -> io::Result<Vec<u8>> {
    read_path(path, kind)
}

/// The file at `path` as text, as `std::fs::read_to_string` but capped ([`read_text_from`]).
pub fn read_to_string(path: &Path, kind: Kind) -> io::Result<String> {
    utf8(read_path(path, kind)?)
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

    /// Bytes this thread has read through read(2) so far (/proc/thread-self/io `rchar`).
    fn rchar() -> u64 {
        std::fs::read_to_string("/proc/thread-self/io")
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("rchar: "))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    #[test]
    fn a_big_regular_file_is_refused_from_its_size_without_reading_it() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("snapshot.json");
        // 1 GiB, sparse: reading it would cost cap + 1 bytes of reads and memory (800 MB before).
        std::fs::File::create(&big)
            .unwrap()
            .set_len(1 << 30)
            .unwrap();
        let before = rchar();
        let e = read_to_string(&big, Kind::Snapshot).unwrap_err();
        let got = rchar() - before;
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(
            e.to_string(),
            "larger than 256 MiB (the limit for a snapshot)"
        );
        assert!(got < 64 * 1024, "{got} bytes read");
        // At the cap exactly: read, in one buffer of its size.
        let at = dir.path().join("at-cap.toml");
        std::fs::write(&at, vec![b'#'; Kind::Config.cap() as usize]).unwrap();
        assert_eq!(
            read(&at, Kind::Config).unwrap().len() as u64,
            Kind::Config.cap()
        );
    }

    #[test]
    fn an_endless_fifo_is_read_to_the_cap_plus_one_byte_then_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("inventory.fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let mut f = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
                let block = vec![b'x'; 1 << 16];
                let mut written = 0u64;
                // Until the reader closes (EPIPE: Rust ignores SIGPIPE).
                while let Ok(n) = io::Write::write(&mut f, &block) {
                    written += n as u64;
                }
                written
            })
        };
        // What reading /proc/thread-self/io itself adds between two readings.
        let own = {
            let a = rchar();
            rchar() - a
        };
        let before = rchar();
        let e = read(&fifo, Kind::Config).unwrap_err();
        let got = rchar() - before - own;
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(
            e.to_string(),
            "larger than 16 MiB (the limit for a gpufleet config file)"
        );
        // cap + 1 exactly, give or take the digits /proc/thread-self/io grew by meanwhile.
        let want = Kind::Config.cap() + 1;
        assert!(
            (want..want + 32).contains(&got),
            "{got} bytes read from the FIFO, want {want}"
        );
        assert!(writer.join().unwrap() > Kind::Config.cap());
    }

    #[test]
    fn a_stream_over_several_chunks_is_joined_whole() {
        let text: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let got = read_capped(&text[..], 1_000_000, None).unwrap();
        assert_eq!(got, text);
        assert!(matches!(
            read_capped(&text[..], 999_999, None),
            Err(Capped::TooLarge)
        ));
        // A regular file that grew after its size was taken: the cap still holds.
        assert!(matches!(
            read_capped(&text[..], 999_999, Some(10)),
            Err(Capped::TooLarge)
        ));
        assert_eq!(read_capped(&text[..], 1_000_000, Some(10)).unwrap(), text);
    }
}
