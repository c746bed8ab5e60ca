//! Host key checking against OpenSSH known_hosts files (sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT").
//!
//! Lines are parsed by the `ssh-key` crate; matching follows OpenSSH: a host is looked up as
//! `host` on port 22 and `[host]:port` otherwise; patterns may use `*`, `?` and `!` negation;
//! hashed names (`|1|salt|hash`) are HMAC-SHA1 of the name. Any matching line with the server's
//! key accepts it (other lines for the same host do not veto); a matching `@revoked` line
//! rejects it; a host certificate signed by a matching `@cert-authority` key is accepted. A host
//! with lines but none carrying this key has a **changed** key; a host without lines is
//! **unknown**. Unparseable lines are skipped and counted, not fatal.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use base64ct::{Base64, Encoding};
use hmac::{Hmac, KeyInit, Mac};
use russh::keys::ssh_key::known_hosts::{Entry, HostPatterns, Marker};
use russh::keys::ssh_key::{Certificate, HashAlg, PublicKey};

/// One usable line.
#[derive(Debug, Clone)]
struct Line {
    file: PathBuf,
    number: usize,
    entry: Entry,
}

/// The known_hosts files gpufleet checks, in order.
#[derive(Debug, Clone, Default)]
pub struct KnownHosts {
    lines: Vec<Line>,
    /// Lines that could not be parsed: (file, line number).
    pub skipped: Vec<(PathBuf, usize)>,
    /// Where `accept-new` writes learned keys.
    pub learn_to: Option<PathBuf>,
    /// Every file consulted (existing or not), for messages.
    pub files: Vec<PathBuf>,
}

/// The verdict on a server's host key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A line carries this key (or a matching CA signed its certificate).
    Known { file: PathBuf, line: usize },
    /// The host has lines, none with this key: refused (OpenSSH: "REMOTE HOST IDENTIFICATION
    /// HAS CHANGED").
    Changed { lines: Vec<(PathBuf, usize)> },
    /// A matching `@revoked` line names this key.
    Revoked { file: PathBuf, line: usize },
    /// No line names this host.
    Unknown,
}

/// The name a host is looked up under: `host`, or `[host]:port` off port 22.
pub fn lookup_name(host: &str, port: u16) -> String {
    if port == 22 {
        host.to_string()
    } else {
        format!("[{host}]:{port}")
    }
}

fn glob(p: &[u8], s: &[u8]) -> bool {
    match (p.first(), s.first()) {
        (None, None) => true,
        (Some(b'*'), _) => glob(&p[1..], s) || (!s.is_empty() && glob(p, &s[1..])),
        (Some(b'?'), Some(_)) => glob(&p[1..], &s[1..]),
        (Some(a), Some(b)) if a.eq_ignore_ascii_case(b) => glob(&p[1..], &s[1..]),
        _ => false,
    }
}

fn patterns_match(patterns: &HostPatterns, name: &str) -> bool {
    match patterns {
        HostPatterns::HashedName { salt, hash } => {
            let Ok(mut mac) = Hmac::<sha1::Sha1>::new_from_slice(salt) else {
                return false;
            };
            mac.update(name.as_bytes());
            mac.verify_slice(hash).is_ok()
        }
        HostPatterns::Patterns(list) => {
            let mut hit = false;
            for p in list {
                if let Some(neg) = p.strip_prefix('!') {
                    if glob(neg.as_bytes(), name.as_bytes()) {
                        return false;
                    }
                } else if glob(p.as_bytes(), name.as_bytes()) {
                    hit = true;
                }
            }
            hit
        }
    }
}

/// SHA256 fingerprint as OpenSSH prints it (`SHA256:…`).
pub fn fingerprint(key: &PublicKey) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

impl KnownHosts {
    /// Reads `files` (missing files are empty). Errors only on files that exist but cannot be read.
    pub fn load(files: &[PathBuf], learn_to: Option<PathBuf>) -> std::io::Result<KnownHosts> {
        let mut kh = KnownHosts {
            learn_to,
            files: files.to_vec(),
            ..KnownHosts::default()
        };
        for f in files {
            match std::fs::read_to_string(f) {
                Ok(text) => kh.add_text(f, &text),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(std::io::Error::new(
                        e.kind(),
                        format!("{}: {e}", f.display()),
                    ));
                }
            }
        }
        Ok(kh)
    }

    fn add_text(&mut self, file: &Path, text: &str) {
        for (i, raw) in text.lines().enumerate() {
            let l = raw.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            match l.parse::<Entry>() {
                Ok(entry) => self.lines.push(Line {
                    file: file.to_path_buf(),
                    number: i + 1,
                    entry,
                }),
                Err(_) => self.skipped.push((file.to_path_buf(), i + 1)),
            }
        }
    }

    /// Checks `key` (or a host certificate) presented by `host`:`port`.
    pub fn check(
        &self,
        host: &str,
        port: u16,
        key: &PublicKey,
        cert: Option<&Certificate>,
    ) -> Verdict {
        let name = lookup_name(host, port);
        let matching: Vec<&Line> = self
            .lines
            .iter()
            .filter(|l| patterns_match(l.entry.host_patterns(), &name))
            .collect();
        let same = |l: &Line| l.entry.public_key().key_data() == key.key_data();
        if let Some(l) = matching
            .iter()
            .find(|l| l.entry.marker() == Some(&Marker::Revoked) && same(l))
        {
            return Verdict::Revoked {
                file: l.file.clone(),
                line: l.number,
            };
        }
        if let Some(cert) = cert {
            for l in matching
                .iter()
                .filter(|l| l.entry.marker() == Some(&Marker::CertAuthority))
            {
                let ca = l.entry.public_key().fingerprint(HashAlg::Sha256);
                let principal_ok = cert.valid_principals().is_empty()
                    || cert.valid_principals().iter().any(|p| p == host);
                if cert.cert_type().is_host() && principal_ok && cert.validate([&ca]).is_ok() {
                    return Verdict::Known {
                        file: l.file.clone(),
                        line: l.number,
                    };
                }
            }
        }
        let plain: Vec<&&Line> = matching
            .iter()
            .filter(|l| l.entry.marker().is_none())
            .collect();
        if let Some(l) = plain.iter().find(|l| same(l)) {
            return Verdict::Known {
                file: l.file.clone(),
                line: l.number,
            };
        }
        if plain.is_empty() {
            Verdict::Unknown
        } else {
            Verdict::Changed {
                lines: plain.iter().map(|l| (l.file.clone(), l.number)).collect(),
            }
        }
    }

    /// Appends `host`:`port` `key` to the learn-to file (created with its folder), under an
    /// exclusive file lock so concurrent scans do not interleave lines. Also remembers it.
    pub fn learn(&mut self, host: &str, port: u16, key: &PublicKey) -> std::io::Result<PathBuf> {
        let path = self
            .learn_to
            .clone()
            .ok_or_else(|| std::io::Error::other("no known_hosts file to write learned keys to"))?;
        let with_path =
            |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(with_path)?;
        }
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(&path)
            .map_err(with_path)?;
        f.lock()?;
        let text = key
            .to_openssh()
            .map_err(|e| std::io::Error::other(format!("encode host key: {e}")))?;
        let line = format!("{} {}\n", lookup_name(host, port), text.trim());
        let mut buf = Vec::new();
        // A file not ending in a newline gets one first.
        let len = f.metadata()?.len();
        if len > 0 {
            use std::io::{Read, Seek, SeekFrom};
            let mut last = [0u8; 1];
            f.seek(SeekFrom::Start(len - 1))?;
            f.read_exact(&mut last)?;
            if last[0] != b'\n' {
                buf.push(b'\n');
            }
        }
        buf.extend_from_slice(line.as_bytes());
        f.write_all(&buf)?;
        f.sync_all()?;
        f.unlock()?;
        let number = std::fs::read_to_string(&path).map_or(0, |t| t.lines().count());
        if let Ok(entry) = line.trim().parse::<Entry>() {
            self.lines.push(Line {
                file: path.clone(),
                number,
                entry,
            });
        }
        Ok(path)
    }
}

/// A hashed host field for `name` with `salt` (for tests and tools that write hashed entries).
pub fn hashed_host(name: &str, salt: &[u8]) -> String {
    let mut mac = Hmac::<sha1::Sha1>::new_from_slice(salt).expect("HMAC takes any key length");
    mac.update(name.as_bytes());
    let hash = mac.finalize().into_bytes();
    format!(
        "|1|{}|{}",
        Base64::encode_string(salt),
        Base64::encode_string(&hash)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const K1: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIF4wdbTQRPw5TP5FEldmIA7sibG8w1tsdzWupG+kpN2S";
    const K2: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFvBd+t9iPNcmS+jp3f9Bq+5c9JbKO4R+HY7WNOHensG";

    fn key(s: &str) -> PublicKey {
        PublicKey::from_openssh(s).unwrap()
    }

    fn kh(text: &str) -> KnownHosts {
        let mut k = KnownHosts::default();
        k.add_text(Path::new("kh"), text);
        k
    }

    #[test]
    fn plain_port_wildcard_negation_and_hashed() {
        let k = kh(&format!(
            "gpu1,10.0.0.1 {K1}\n[gpu2]:2222 {K1}\n*.dc1,!bad.dc1 {K1}\n{} {K1}\nnot a line\n",
            hashed_host("[127.0.0.5]:2200", b"0123456789abcdefghij")
        ));
        assert_eq!(k.skipped, vec![(PathBuf::from("kh"), 5)]);
        let ok = |h, p| matches!(k.check(h, p, &key(K1), None), Verdict::Known { .. });
        assert!(ok("gpu1", 22));
        assert!(ok("10.0.0.1", 22));
        assert!(!ok("gpu1", 2222));
        assert!(ok("gpu2", 2222));
        assert!(ok("n7.dc1", 22));
        assert!(!ok("bad.dc1", 22));
        assert!(ok("127.0.0.5", 2200));
        assert_eq!(k.check("other", 22, &key(K1), None), Verdict::Unknown);
    }

    #[test]
    fn changed_key_and_any_matching_line_accepts() {
        let k = kh(&format!("gpu1 {K2}\ngpu1 {K1}\ngpu3 {K2}\n"));
        assert!(matches!(
            k.check("gpu1", 22, &key(K1), None),
            Verdict::Known { line: 2, .. }
        ));
        assert_eq!(
            k.check("gpu3", 22, &key(K1), None),
            Verdict::Changed {
                lines: vec![(PathBuf::from("kh"), 3)]
            }
        );
    }

    #[test]
    fn revoked_wins() {
        let k = kh(&format!("gpu1 {K1}\n@revoked * {K1}\n"));
        assert!(matches!(
            k.check("gpu1", 22, &key(K1), None),
            Verdict::Revoked { line: 2, .. }
        ));
    }

    #[test]
    fn learning_appends_and_is_found_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/known_hosts");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, format!("# comment\nother {K2}")).unwrap();
        let mut k = KnownHosts::load(std::slice::from_ref(&path), Some(path.clone())).unwrap();
        assert_eq!(k.check("127.0.0.9", 2201, &key(K1), None), Verdict::Unknown);
        k.learn("127.0.0.9", 2201, &key(K1)).unwrap();
        assert!(matches!(
            k.check("127.0.0.9", 2201, &key(K1), None),
            Verdict::Known { .. }
        ));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.ends_with(&format!("\n[127.0.0.9]:2201 {K1}\n")),
            "{text}"
        );
        let again = KnownHosts::load(&[path], None).unwrap();
        assert!(matches!(
            again.check("127.0.0.9", 2201, &key(K1), None),
            Verdict::Known { line: 3, .. }
        ));
    }
}
