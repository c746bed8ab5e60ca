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

/// One usable line: where its text is ([`KnownHosts::texts`]), parsed again only when it
/// matches a host being checked (a parsed entry is 300 to 700 bytes; this is 16).
#[derive(Debug, Clone, Copy)]
struct Line {
    /// Index into `texts` and `sources`.
    source: u32,
    number: u32,
    /// Byte offset in its text (a line past 4 GiB into a file is skipped).
    start: u32,
    len: u32,
}

/// A hashed line (`|1|salt|hash`): the HMAC-SHA1 keyed with its salt (RFC 2104), its key
/// state computed once at load — the SHA-1 states after the key's inner and outer pad blocks,
/// 20 bytes each — so a host costs two SHA-1 blocks per line (names under 56 bytes), not four.
/// 64 bytes a line: an `Hmac<Sha1>` kept whole (its two cores and a block buffer) was 128, 152
/// with the rest (1,000,000 hashed lines: peak RSS 346 MB → 249 MB, bench/README.md).
#[derive(Clone)]
struct Hashed {
    inner: [u32; 5],
    outer: [u32; 5],
    hash: [u8; 20],
    line: u32,
}

impl std::fmt::Debug for Hashed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hashed(line {})", self.line)
    }
}

/// SHA-1's initial state (FIPS 180-4, 5.3.1).
const SHA1_H0: [u32; 5] = [
    0x6745_2301,
    0xEFCD_AB89,
    0x98BA_DCFE,
    0x1032_5476,
    0xC3D2_E1F0,
];

impl Hashed {
    /// The key state of HMAC-SHA1 keyed with `salt`: a key over 64 bytes is hashed first, then
    /// padded with zeros to a block, and that block XOR 0x36 (inner) and XOR 0x5c (outer) is
    /// hashed from SHA-1's initial state.
    fn new(salt: &[u8], hash: [u8; 20], line: u32) -> Hashed {
        use sha1::Digest;
        let mut key = [0u8; 64];
        if salt.len() > 64 {
            key[..20].copy_from_slice(&sha1::Sha1::digest(salt));
        } else {
            key[..salt.len()].copy_from_slice(salt);
        }
        let pad = |x: u8| {
            let mut h = SHA1_H0;
            sha1::block_api::compress(&mut h, &[key.map(|b| b ^ x)]);
            h
        };
        Hashed {
            inner: pad(0x36),
            outer: pad(0x5c),
            hash,
            line,
        }
    }

    /// SHA-1 of one key block (whose state is `state`) followed by `msg`.
    fn finish(state: [u32; 5], msg: &[u8]) -> [u8; 20] {
        let mut h = state;
        let mut blocks = msg.chunks_exact(64);
        for b in &mut blocks {
            let mut block = [0u8; 64];
            block.copy_from_slice(b);
            sha1::block_api::compress(&mut h, &[block]);
        }
        let rest = blocks.remainder();
        // Padding (FIPS 180-4, 5.1.1): 0x80, zeros, the length in bits of all that was hashed
        // (the key block too) as 64 bits big-endian; one block, or two when it does not fit.
        let mut tail = [[0u8; 64]; 2];
        let flat = tail.as_flattened_mut();
        flat[..rest.len()].copy_from_slice(rest);
        flat[rest.len()] = 0x80;
        let n = if rest.len() < 56 { 1 } else { 2 };
        let bits = ((64 + msg.len()) as u64).wrapping_mul(8);
        flat[n * 64 - 8..n * 64].copy_from_slice(&bits.to_be_bytes());
        sha1::block_api::compress(&mut h, &tail[..n]);
        let mut out = [0u8; 20];
        for (o, w) in out.chunks_exact_mut(4).zip(h) {
            o.copy_from_slice(&w.to_be_bytes());
        }
        out
    }

    /// HMAC-SHA1(salt, `name`) against the line's hash (compared in constant time).
    fn matches(&self, name: &str) -> bool {
        let inner = Self::finish(self.inner, name.as_bytes());
        let mac = Self::finish(self.outer, &inner);
        mac.iter()
            .zip(self.hash)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

/// Above this many hashed lines, loading says what each node costs ([`KnownHosts::warning`]).
pub const HASHED_WARN: usize = 100_000;

/// The lines that match one host name, found before its handshake ([`KnownHosts::candidates`]):
/// the host-key check during the handshake reads only these.
#[derive(Debug, Clone, Default)]
pub struct Candidates {
    name: String,
    lines: Vec<u32>,
}

/// The known_hosts files gpufleet checks, in order, read and indexed once per scan: the text
/// of each file kept whole, 16 bytes a line, plain names in a hash table of line numbers, hashed
/// lines with their HMAC key state (1,000,000 plain lines: bench/known_hosts.sh).
#[derive(Debug, Clone, Default)]
pub struct KnownHosts {
    /// Each file's text (and each learned line), by source.
    texts: Vec<String>,
    /// The file of each source.
    sources: Vec<PathBuf>,
    lines: Vec<Line>,
    /// Lines whose host patterns are all plain names (no wildcard, no negation, not hashed),
    /// by each name in ASCII lower case: (its 32-bit hash, the line's index) per name, sorted
    /// (8 bytes a name, searched by halves; the name itself is in the text): a lookup reads
    /// only its own lines (a scan of N nodes against N lines is O(N), not O(N²)).
    by_name: Vec<(u32, u32)>,
    state: std::hash::RandomState,
    /// Lines with wildcards or negations: matched one by one at every lookup.
    by_pattern: Vec<u32>,
    /// Hashed lines: one HMAC each at every lookup.
    hashed: Vec<Hashed>,
    /// Keys learned under `accept-new` in this scan: (the name looked up, file, line, entry).
    learned: Vec<(String, PathBuf, usize, Entry)>,
    /// Lines that could not be parsed: (file, line number).
    pub skipped: Vec<(PathBuf, usize)>,
    /// Where `accept-new` writes learned keys.
    pub learn_to: Option<PathBuf>,
    /// Every file consulted (existing or not), for messages.
    pub files: Vec<PathBuf>,
}

/// A matching line, parsed.
struct Found {
    file: PathBuf,
    number: usize,
    entry: Entry,
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

/// A known_hosts pattern against a host name, case-insensitively, in polynomial time
/// ([`crate::glob`]: a planted `*a*a*a…b` line costs no more than its length).
fn glob(p: &[u8], s: &[u8]) -> bool {
    crate::glob::matches(p, s, true)
}

/// The host field of a known_hosts line (trimmed, parsed once already): the first field after
/// an optional `@marker`.
fn host_field(line: &str) -> &str {
    let mut fields = line.split_ascii_whitespace();
    let first = fields.next().unwrap_or("");
    if first.starts_with('@') {
        fields.next().unwrap_or("")
    } else {
        first
    }
}

/// Whether the comma-separated patterns of `field` match `name` (a negated match vetoes).
fn field_match(field: &str, name: &str) -> bool {
    let mut hit = false;
    for p in field.split(',') {
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
                Ok(text) => kh.add_text(f, text),
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

    /// How many lines every lookup goes through one by one (hashed lines, pattern lines).
    pub fn one_by_one(&self) -> usize {
        self.hashed.len() + self.by_pattern.len()
    }

    /// How many hashed lines every lookup goes through.
    pub fn hashed_lines(&self) -> usize {
        self.hashed.len()
    }

    /// Above [`HASHED_WARN`] hashed lines: what they cost, in words, to be said once per scan.
    pub fn warning(&self) -> Option<String> {
        let n = self.hashed.len();
        (n > HASHED_WARN).then(|| {
            format!(
                "known_hosts has {n} hashed lines (|1|salt|hash): every node costs {n} HMAC-SHA1 (one salt per line, nothing to index), about {:.0} ms of CPU before its connection; a plain known_hosts for the fleet is looked up by name",
                n as f64 * 0.15e-3
            )
        })
    }

    fn add_text(&mut self, file: &Path, text: String) {
        let source = self.sources.len() as u32;
        // Room for every line and name at once: growing by doubling holds the old and the new
        // lists together. Commas over-count names (a comment's): the room is at most that
        // much larger.
        let lines = text.bytes().filter(|&b| b == b'\n').count() + 1;
        let commas = text.bytes().filter(|&b| b == b',').count();
        self.lines.reserve_exact(lines);
        self.by_name.reserve_exact(lines.saturating_add(commas));
        for (i, raw) in text.lines().enumerate() {
            let l = raw.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let start = (l.as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
            let (Ok(start), Ok(len)) = (u32::try_from(start), u32::try_from(l.len())) else {
                // Past 4 GiB into one file: not indexed, said as skipped.
                self.skipped.push((file.to_path_buf(), i + 1));
                continue;
            };
            match l.parse::<Entry>() {
                Ok(entry) => self.push(
                    Line {
                        source,
                        number: u32::try_from(i + 1).unwrap_or(u32::MAX),
                        start,
                        len,
                    },
                    &entry,
                ),
                Err(_) => self.skipped.push((file.to_path_buf(), i + 1)),
            }
        }
        self.sources.push(file.to_path_buf());
        self.texts.push(text);
        self.by_name.sort_unstable();
        // The room made for names that hashed lines do not have (8 bytes a line), and what
        // growing by doubling left in the hashed list, given back.
        self.by_name.shrink_to_fit();
        self.hashed.shrink_to_fit();
    }

    /// `name`'s hash in ASCII lower case, 32 bits (what a slot of `by_name` keeps).
    fn hash_lower(state: &std::hash::RandomState, name: &str) -> u32 {
        use std::hash::{BuildHasher, Hasher};
        let mut h = state.build_hasher();
        for b in name.bytes() {
            h.write_u8(b.to_ascii_lowercase());
        }
        h.finish() as u32
    }

    /// Adds `line` (whose parsed form is `entry`), indexed by its plain names, its HMAC key
    /// state, or as a pattern line.
    fn push(&mut self, line: Line, entry: &Entry) {
        let Ok(at) = u32::try_from(self.lines.len()) else {
            return;
        };
        match entry.host_patterns() {
            HostPatterns::Patterns(list)
                if list
                    .iter()
                    .all(|p| !p.is_empty() && !p.contains(['*', '?', '!'])) =>
            {
                for p in list {
                    let h = Self::hash_lower(&self.state, p);
                    // Each name of a line once (`a,A key`).
                    // Each name of a line once (`a,A key`): the line's own are the last pushed.
                    if !self
                        .by_name
                        .iter()
                        .rev()
                        .take_while(|&&(_, i)| i == at)
                        .any(|&(hh, _)| hh == h)
                    {
                        self.by_name.push((h, at));
                    }
                }
            }
            HostPatterns::Patterns(_) => self.by_pattern.push(at),
            HostPatterns::HashedName { salt, hash } => {
                self.hashed.push(Hashed::new(salt, *hash, at));
            }
        }
        self.lines.push(line);
    }
    /// The keys learned in this scan for `name`.
    fn learned_for(&self, name: &str) -> Vec<Found> {
        self.learned
            .iter()
            .filter(|(n, ..)| n == name)
            .map(|(_, file, number, entry)| Found {
                file: file.clone(),
                number: *number,
                entry: entry.clone(),
            })
            .collect()
    }

    /// The text of line `i`.
    fn text(&self, i: u32) -> Option<&str> {
        let l = self.lines.get(i as usize)?;
        self.texts
            .get(l.source as usize)?
            .get(l.start as usize..l.start as usize + l.len as usize)
    }

    /// The lines whose host patterns match `host`:`port` (as looked up: [`lookup_name`]), in
    /// file order: the indexed lines of that name, the pattern lines that match it, and the
    /// hashed lines whose HMAC of it is theirs (CPU: one HMAC-SHA1 per hashed line, about
    /// 0.15 µs on this machine). Done before the host's connection, so that the check during its handshake
    /// costs nothing ([`KnownHosts::check_in`]).
    pub fn candidates(&self, host: &str, port: u16) -> Candidates {
        let name = lookup_name(host, port);
        let h = Self::hash_lower(&self.state, &name);
        let named = |i: &u32| {
            self.text(*i).is_some_and(|t| {
                host_field(t)
                    .split(',')
                    .any(|n| n.eq_ignore_ascii_case(&name))
            })
        };
        let from = self.by_name.partition_point(|&(hh, _)| hh < h);
        let mut lines: Vec<u32> = self.by_name[from..]
            .iter()
            .take_while(|&&(hh, _)| hh == h)
            .map(|&(_, i)| i)
            .filter(named)
            .collect();
        lines.extend(self.by_pattern.iter().copied().filter(|&i| {
            self.text(i)
                .is_some_and(|t| field_match(host_field(t), &name))
        }));
        lines.extend(
            self.hashed
                .iter()
                .filter(|h| h.matches(&name))
                .map(|h| h.line),
        );
        lines.sort_unstable();
        lines.dedup();
        Candidates { name, lines }
    }

    /// The lines of `c`, parsed again (each was parsed once at load).
    fn found(&self, c: &Candidates) -> Vec<Found> {
        c.lines
            .iter()
            .filter_map(|&i| {
                let l = self.lines.get(i as usize)?;
                Some(Found {
                    file: self.sources.get(l.source as usize)?.clone(),
                    number: l.number as usize,
                    entry: self.text(i)?.parse().ok()?,
                })
            })
            .collect()
    }

    /// Whether a `@cert-authority` line is among `c` (then the client asks the server for its
    /// host certificate).
    pub fn has_cert_authority_in(&self, c: &Candidates) -> bool {
        self.found(c)
            .iter()
            .any(|l| l.entry.marker() == Some(&Marker::CertAuthority))
    }

    /// Whether a `@cert-authority` line matches `host`:`port`.
    pub fn has_cert_authority(&self, host: &str, port: u16) -> bool {
        self.has_cert_authority_in(&self.candidates(host, port))
    }

    /// [`KnownHosts::check_in`] the lines that match `host`:`port` now.
    pub fn check(
        &self,
        host: &str,
        port: u16,
        key: &PublicKey,
        cert: Option<&Certificate>,
    ) -> Verdict {
        self.check_in(&self.candidates(host, port), host, key, cert)
    }

    /// Checks `key` presented by `host` among the lines of `c` (its [`KnownHosts::candidates`],
    /// plus a key learned for that name since); with `cert`, `key` is the key inside that host
    /// certificate. A certificate is accepted when a matching `@cert-authority` line holds the
    /// key that signed it and [`certificate_problem`] finds none.
    pub fn check_in(
        &self,
        c: &Candidates,
        host: &str,
        key: &PublicKey,
        cert: Option<&Certificate>,
    ) -> Verdict {
        let mut matching = self.found(c);
        matching.extend(self.learned_for(&c.name));
        let same = |l: &Found| l.entry.public_key().key_data() == key.key_data();
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
        let plain: Vec<&Found> = matching
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
            self.learned
                .push((lookup_name(host, port), path.clone(), number, entry));
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
mod tests;
