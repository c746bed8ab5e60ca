//! Host key checking against OpenSSH known_hosts files (sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT").
//!
//! Lines are parsed by the `ssh-key` crate; matching follows OpenSSH: a host is looked up as
//! `host` on port 22 and `[host]:port` otherwise; patterns may use `*`, `?` and `!` negation;
//! hashed names (`|1|salt|hash`) are HMAC-SHA1 of the name. Any matching line with the server's
//! key accepts it (other lines for the same host do not veto); a matching `@revoked` line
//! rejects it; a host certificate signed by a matching `@cert-authority` key is accepted when
//! [`certificate_problem`] finds nothing wrong with it (type, principals, validity, critical
//! options) and neither it nor its CA is `@revoked`. A host with lines but none carrying this key
//! has a **changed** key; a host without lines is **unknown**. Unparseable lines are skipped and
//! counted, not fatal.

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
    /// Lines whose host patterns are all plain names (no wildcard, no negation, not hashed),
    /// by each name in ASCII lower case: a lookup reads only its own lines, not the whole file
    /// (a scan of N nodes against N lines is then O(N), not O(N²)).
    by_name: std::collections::HashMap<String, Vec<usize>>,
    /// The other lines (hashed names, wildcards, negations): matched one by one at every lookup.
    by_pattern: Vec<usize>,
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
    /// A matching `@revoked` line names this key, or (`ca`) the CA that signed its certificate.
    Revoked {
        file: PathBuf,
        line: usize,
        ca: bool,
    },
    /// The host certificate was signed by the CA of a matching `@cert-authority` line (`file`,
    /// `line`) but is not acceptable (`why`: not a host certificate, the host is not among its
    /// principals, outside its validity window, a bad signature, a critical option), and no
    /// plain line carries its key.
    CertificateRejected {
        file: PathBuf,
        line: usize,
        why: String,
    },
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

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A Unix time in seconds as an RFC 3339 UTC time (`2024-05-01T12:00:00Z`), or `forever` past
/// what `jiff` represents (year 9999; OpenSSH writes "forever" as 2^64-1).
fn utc(secs: u64) -> String {
    i64::try_from(secs)
        .ok()
        .and_then(|s| jiff::Timestamp::from_second(s).ok())
        .map_or_else(|| "forever".to_string(), |t| t.to_string())
}

/// Why host certificate `cert` cannot vouch for `host` at Unix time `now` (seconds), or `None`
/// when it can (PROTOCOL.certkeys, as OpenSSH's `sshkey_cert_check_authority`): a host
/// certificate; its signature valid; `host` among its principals (an empty list means any
/// host); valid after <= `now` < valid before; no critical option (none is defined for host
/// certificates, and an unknown one must be refused). Whether the signer is trusted is the
/// caller's question.
pub fn certificate_problem(cert: &Certificate, host: &str, now: u64) -> Option<String> {
    if !cert.cert_type().is_host() {
        return Some("it is a user certificate, not a host certificate".into());
    }
    if cert.verify_signature().is_err() {
        return Some("its signature does not verify".into());
    }
    let principals = cert.valid_principals();
    if !principals.is_empty() && !principals.iter().any(|p| p == host) {
        return Some(format!(
            "{host} is not among its principals ({})",
            principals.join(", ")
        ));
    }
    if now < cert.valid_after() {
        return Some(format!(
            "it is not valid before {}",
            utc(cert.valid_after())
        ));
    }
    if now >= cert.valid_before() {
        return Some(format!("it expired at {}", utc(cert.valid_before())));
    }
    if let Some(name) = cert.critical_options().keys().next() {
        return Some(format!(
            "it carries the critical option {name:?}, unknown for host certificates"
        ));
    }
    None
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
                Ok(entry) => self.push(Line {
                    file: file.to_path_buf(),
                    number: i + 1,
                    entry,
                }),
                Err(_) => self.skipped.push((file.to_path_buf(), i + 1)),
            }
        }
    }

    /// Adds `line`, indexed by its plain names (see `by_name`).
    fn push(&mut self, line: Line) {
        let at = self.lines.len();
        let plain = match line.entry.host_patterns() {
            HostPatterns::Patterns(list) => list
                .iter()
                .all(|p| !p.is_empty() && !p.contains(['*', '?', '!']))
                .then_some(list),
            HostPatterns::HashedName { .. } => None,
        };
        match plain {
            Some(list) => {
                for p in list {
                    let v = self.by_name.entry(p.to_ascii_lowercase()).or_default();
                    if v.last() != Some(&at) {
                        v.push(at);
                    }
                }
            }
            None => self.by_pattern.push(at),
        }
        self.lines.push(line);
    }

    /// The lines whose host patterns match `name` (as [`patterns_match`] decides), in file
    /// order: the indexed lines of that name and the pattern lines that match it.
    fn matching(&self, name: &str) -> impl Iterator<Item = &Line> {
        let named = self
            .by_name
            .get(&name.to_ascii_lowercase())
            .map_or(&[][..], Vec::as_slice);
        let mut at: Vec<usize> = named
            .iter()
            .copied()
            .chain(self.by_pattern.iter().copied())
            .collect();
        at.sort_unstable();
        at.into_iter()
            .map(|i| &self.lines[i])
            .filter(move |l| patterns_match(l.entry.host_patterns(), name))
    }

    /// Whether a `@cert-authority` line matches `host`:`port` (then the client asks the server
    /// for its host certificate).
    pub fn has_cert_authority(&self, host: &str, port: u16) -> bool {
        let name = lookup_name(host, port);
        self.matching(&name).any(|l| {
            l.entry.marker() == Some(&Marker::CertAuthority)
                && patterns_match(l.entry.host_patterns(), &name)
        })
    }

    /// Checks `key` presented by `host`:`port`; with `cert`, `key` is the key inside that host
    /// certificate. A certificate is accepted when a matching `@cert-authority` line holds the
    /// key that signed it and [`certificate_problem`] finds none.
    pub fn check(
        &self,
        host: &str,
        port: u16,
        key: &PublicKey,
        cert: Option<&Certificate>,
    ) -> Verdict {
        let name = lookup_name(host, port);
        let matching: Vec<&Line> = self.matching(&name).collect();
        let same = |l: &Line| l.entry.public_key().key_data() == key.key_data();
        if let Some(l) = matching
            .iter()
            .find(|l| l.entry.marker() == Some(&Marker::Revoked) && same(l))
        {
            return Verdict::Revoked {
                file: l.file.clone(),
                line: l.number,
                ca: false,
            };
        }
        // A certificate: a matching `@cert-authority` line whose key signed it decides, unless
        // the certificate is unacceptable; then, as OpenSSH does, the key inside it is looked up
        // like a plain key, and if that fails too the certificate's fault is the verdict.
        let mut rejected = None;
        if let Some(cert) = cert {
            let signer = cert.signature_key();
            if let Some(l) = matching.iter().find(|l| {
                l.entry.marker() == Some(&Marker::Revoked)
                    && l.entry.public_key().key_data() == signer
            }) {
                return Verdict::Revoked {
                    file: l.file.clone(),
                    line: l.number,
                    ca: true,
                };
            }
            if let Some(l) = matching.iter().find(|l| {
                l.entry.marker() == Some(&Marker::CertAuthority)
                    && l.entry.public_key().key_data() == signer
            }) {
                match certificate_problem(cert, host, now_unix()) {
                    None => {
                        return Verdict::Known {
                            file: l.file.clone(),
                            line: l.number,
                        };
                    }
                    Some(why) => {
                        rejected = Some(Verdict::CertificateRejected {
                            file: l.file.clone(),
                            line: l.number,
                            why,
                        });
                    }
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
        if let Some(r) = rejected {
            r
        } else if plain.is_empty() {
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
            self.push(Line {
                file: path.clone(),
                number,
                entry,
            });
        }
        Ok(path)
    }
}

/// A hashed host field for `name` with `salt` (for tests and tools that write hashed entries).
#[allow(
    clippy::expect_used,
    reason = "HMAC-SHA1 takes a key of any length: it cannot fail"
)]
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
        // Names are matched without regard to ASCII case, indexed or not.
        assert!(ok("GPU1", 22));
        assert!(ok("N7.DC1", 22));
    }

    #[test]
    fn indexed_and_pattern_lines_are_seen_together_in_file_order() {
        // A plain line after a wildcard line for the same host: the changed-key verdict names
        // both, in file order; each line found once though it names the host twice.
        let k = kh(&format!(
            "*.dc1 {K2}
gpu1.dc1,GPU1.dc1 {K2}
"
        ));
        assert_eq!(
            k.check("gpu1.dc1", 22, &key(K1), None),
            Verdict::Changed {
                lines: vec![(PathBuf::from("kh"), 1), (PathBuf::from("kh"), 2)]
            }
        );
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

    /// CA keys for these tests only (made once with `ssh-keygen -t ed25519 -N ''`), and CA's
    /// public key.
    const CA: &str = concat!(
        "-----BEGIN OPENSSH PRIVATE KEY-----\n",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n",
        "QyNTUxOQAAACDTREmGNsqCAD6dkViTCvLCxKNFcMQ+S0H0S+jXgkT55AAAAIhiUd0kYlHd\n",
        "JAAAAAtzc2gtZWQyNTUxOQAAACDTREmGNsqCAD6dkViTCvLCxKNFcMQ+S0H0S+jXgkT55A\n",
        "AAAEB1XEwoyM4Y3gnNV6SJTOr3SUdNKU8FDNlc5MXZjOxY/NNESYY2yoIAPp2RWJMK8sLE\n",
        "o0VwxD5LQfRL6NeCRPnkAAAAAAECAwQF\n",
        "-----END OPENSSH PRIVATE KEY-----\n",
    );
    const CA_PUB: &str =
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINNESYY2yoIAPp2RWJMK8sLEo0VwxD5LQfRL6NeCRPnk";
    const OTHER_CA: &str = concat!(
        "-----BEGIN OPENSSH PRIVATE KEY-----\n",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n",
        "QyNTUxOQAAACD/SgTKrHHx+d1kEph9voWgDPhzwUT3CE9dapfau/qTOQAAAIgrfuu5K37r\n",
        "uQAAAAtzc2gtZWQyNTUxOQAAACD/SgTKrHHx+d1kEph9voWgDPhzwUT3CE9dapfau/qTOQ\n",
        "AAAEAhPQc5J0/zuMQfIZOeOZMQZfy/sJO6NM5FV0r63f1mQf9KBMqscfH53WQSmH2+haAM\n",
        "+HPBRPcIT11ql9q7+pM5AAAAAAECAwQF\n",
        "-----END OPENSSH PRIVATE KEY-----\n",
    );

    /// A certificate for K1 signed by `ca`, valid for `window` (Unix seconds), of `host` type,
    /// with `principals` and critical options `critical`.
    fn cert(
        ca: &str,
        host: bool,
        principals: &[&str],
        window: (u64, u64),
        critical: &[&str],
    ) -> Certificate {
        use russh::keys::ssh_key::PrivateKey;
        use russh::keys::ssh_key::certificate::{Builder, CertType};
        let ca = PrivateKey::from_openssh(ca).unwrap();
        let mut b =
            Builder::new([7u8; 16], key(K1).key_data().clone(), window.0, window.1).unwrap();
        b.cert_type(if host { CertType::Host } else { CertType::User })
            .unwrap();
        b.key_id("test").unwrap();
        if principals.is_empty() {
            b.all_principals_valid().unwrap();
        }
        for p in principals {
            b.valid_principal(*p).unwrap();
        }
        for c in critical {
            b.critical_option(*c, "").unwrap();
        }
        b.sign(&ca).unwrap()
    }

    #[test]
    fn host_certificates_are_checked_against_cert_authority_lines() {
        let now = now_unix();
        let valid = (now - 60, now + 3600);
        let k = kh(&format!(
            "@cert-authority *.dc1,[127.0.0.*]:* {CA_PUB}\n@revoked bad.dc1 {CA_PUB}\nplain.dc1 {K1}\n"
        ));
        assert!(k.has_cert_authority("n1.dc1", 22));
        assert!(k.has_cert_authority("127.0.0.5", 2200));
        assert!(!k.has_cert_authority("n1.dc2", 22));
        let check = |host: &str, c: &Certificate| k.check(host, 22, &key(K1), Some(c));
        let rejected = |v: Verdict| match v {
            Verdict::CertificateRejected { line: 1, why, .. } => why,
            other => panic!("{other:?}"),
        };

        let good = cert(CA, true, &["n1.dc1", "n2.dc1"], valid, &[]);
        assert!(matches!(
            check("n2.dc1", &good),
            Verdict::Known { line: 1, .. }
        ));
        // An empty principal list is valid for any host (PROTOCOL.certkeys).
        let any = cert(CA, true, &[], valid, &[]);
        assert!(matches!(
            check("n9.dc1", &any),
            Verdict::Known { line: 1, .. }
        ));
        assert!(
            rejected(check("n3.dc1", &good))
                .contains("n3.dc1 is not among its principals (n1.dc1, n2.dc1)")
        );
        let expired = cert(CA, true, &["n1.dc1"], (1_000, 2_000), &[]);
        assert_eq!(
            rejected(check("n1.dc1", &expired)),
            "it expired at 1970-01-01T00:33:20Z"
        );
        let early = cert(CA, true, &["n1.dc1"], (now + 3600, now + 7200), &[]);
        assert!(rejected(check("n1.dc1", &early)).starts_with("it is not valid before"));
        let user = cert(CA, false, &["n1.dc1"], valid, &[]);
        assert!(rejected(check("n1.dc1", &user)).contains("user certificate"));
        let critical = cert(CA, true, &["n1.dc1"], valid, &["force-command"]);
        assert!(rejected(check("n1.dc1", &critical)).contains("critical option \"force-command\""));
        // A revoked CA is refused, whatever else vouches for the key.
        assert!(matches!(
            check("bad.dc1", &cert(CA, true, &["bad.dc1"], valid, &[])),
            Verdict::Revoked {
                line: 2,
                ca: true,
                ..
            }
        ));
        // Another CA: the key inside is looked up like a plain key (as OpenSSH does).
        let other = cert(OTHER_CA, true, &["n1.dc1"], valid, &[]);
        assert_eq!(check("n1.dc1", &other), Verdict::Unknown);
        // A rejected certificate whose key a plain line carries is accepted by that line.
        let k2 = kh(&format!("@cert-authority * {CA_PUB}\nplain.dc1 {K1}\n"));
        assert!(matches!(
            k2.check("plain.dc1", 22, &key(K1), Some(&expired)),
            Verdict::Known { line: 2, .. }
        ));
    }
}
