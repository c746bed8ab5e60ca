//! The probe over SSH (russh): one connection and one exec per node per scan.
//!
//! Following docs/architecture.md decision 6: russh has no connect timeout (name resolution +
//! TCP connect, then handshake + authentication, each run under a tokio timeout here), keepalive
//! is off by default (turned on), `nodelay` is off by default (turned on), and its examples
//! accept every host key — here the key is checked against known_hosts ([`super::known_hosts`])
//! and an unknown or changed key is refused unless the policy is `accept-new` (then an unknown
//! key is learned; a changed key never is). The name is resolved on its own so a name that does
//! not resolve is told from a refused connection, and the peer's first bytes are kept so a peer
//! that does not speak SSH is told from a failed handshake (russh reports both as
//! `Disconnected`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

use russh::client;
use russh::keys::PublicKeyOrCertificate;
use russh::keys::ssh_key::HashAlg;
use russh::keys::{PrivateKeyWithHashAlg, load_openssh_certificate, load_secret_key};
use russh::{ChannelMsg, Disconnect};
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::known_hosts::{KnownHosts, Verdict, fingerprint};
use super::{COMMAND, ProbeSettings, RawRun, RunEnd, new_boundary, probe_stdin};
use crate::inventory::Node;
use crate::model::Code;

/// What to do with a host key that no known_hosts line names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostKeyPolicy {
    /// Refuse it (OpenSSH `StrictHostKeyChecking yes`). The default.
    Strict,
    /// Learn it and write it to known_hosts (OpenSSH `accept-new`); changed keys are still refused.
    AcceptNew,
}

/// SSH settings (`[ssh]` in config.toml).
#[derive(Debug, Clone)]
pub struct SshSettings {
    /// Name resolution + TCP connect limit.
    pub connect_timeout: Duration,
    /// SSH handshake + authentication limit (from the TCP connection on).
    pub auth_timeout: Duration,
    /// Keepalive interval; the connection is dropped after 3 unanswered keepalives.
    pub keepalive: Duration,
    pub host_key_policy: HostKeyPolicy,
    /// Nodes probed at once.
    pub concurrency: usize,
}

impl Default for SshSettings {
    fn default() -> Self {
        SshSettings {
            connect_timeout: Duration::from_secs(10),
            auth_timeout: Duration::from_secs(15),
            keepalive: Duration::from_secs(15),
            host_key_policy: HostKeyPolicy::Strict,
            concurrency: 256,
        }
    }
}

/// Why a node could not be scanned: an `unreachable` reason code and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreachable {
    pub code: Code,
    pub message: String,
}

impl Unreachable {
    fn new(code: Code, message: impl Into<String>) -> Self {
        Unreachable {
            code,
            message: message.into(),
        }
    }
}

/// Shared host-key state for one scan: the known_hosts files and the policy.
pub struct HostKeys {
    pub db: Mutex<KnownHosts>,
    pub policy: HostKeyPolicy,
    /// Keys learned under `accept-new` during this scan, as messages for the user.
    pub learned: Mutex<Vec<String>>,
}

impl HostKeys {
    pub fn new(db: KnownHosts, policy: HostKeyPolicy) -> HostKeys {
        HostKeys {
            db: Mutex::new(db),
            policy,
            learned: Mutex::new(Vec::new()),
        }
    }
}

struct Handler {
    host: String,
    port: u16,
    keys: Arc<HostKeys>,
    /// Why the key was refused, for the report.
    refused: Arc<Mutex<Option<Unreachable>>>,
}

impl client::Handler for Handler {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        server: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let (key, cert) = match server {
            PublicKeyOrCertificate::PublicKey { key, .. } => (key.clone(), None),
            PublicKeyOrCertificate::Certificate(c) => (
                russh::keys::PublicKey::from(c.public_key().clone()),
                Some(c),
            ),
        };
        let fp = fingerprint(&key);
        let alg = key.algorithm().to_string();
        let mut db = self
            .keys
            .db
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let refuse = |code, message: String| Some(Unreachable::new(code, message));
        let why = match db.check(&self.host, self.port, &key, cert) {
            Verdict::Known { .. } => None,
            Verdict::Changed { lines } => {
                let at: Vec<String> = lines
                    .iter()
                    .map(|(f, l)| format!("{}:{l}", f.display()))
                    .collect();
                refuse(
                    Code::HostKeyMismatch,
                    format!(
                        "host key CHANGED: the server presents {alg} {fp}, which does not match {}; refusing (possible man-in-the-middle, or the node was reinstalled: remove the old line after checking)",
                        at.join(", ")
                    ),
                )
            }
            Verdict::Revoked { file, line, ca } => refuse(
                Code::HostKeyMismatch,
                match cert {
                    Some(c) if ca => format!(
                        "host certificate for {alg} {fp} is signed by CA {}, which is revoked ({}:{line})",
                        c.signature_key().fingerprint(HashAlg::Sha256),
                        file.display()
                    ),
                    _ => format!("host key {alg} {fp} is revoked ({}:{line})", file.display()),
                },
            ),
            Verdict::CertificateRejected { file, line, why } => refuse(
                Code::HostKeyMismatch,
                format!(
                    "host certificate for {alg} {fp}, signed by the CA of {}:{line}, is not valid for {}: {why}; refusing",
                    file.display(),
                    self.host
                ),
            ),
            Verdict::Unknown if self.keys.policy == HostKeyPolicy::AcceptNew => {
                match db.learn(&self.host, self.port, &key) {
                    Ok(file) => {
                        self.keys
                            .learned
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .push(format!(
                                "learned the host key of {} ({alg} {fp}) into {}",
                                super::known_hosts::lookup_name(&self.host, self.port),
                                file.display()
                            ));
                        None
                    }
                    Err(e) => refuse(
                        Code::HostKeyUnknown,
                        format!("host key {alg} {fp} is unknown and could not be learned: {e}"),
                    ),
                }
            }
            Verdict::Unknown => {
                let files: Vec<String> = db.files.iter().map(|f| f.display().to_string()).collect();
                let signed = cert.map_or(String::new(), |c| {
                    format!(
                        " (in a host certificate signed by CA {}, which no matching @cert-authority line names)",
                        c.signature_key().fingerprint(HashAlg::Sha256)
                    )
                });
                refuse(
                    Code::HostKeyUnknown,
                    format!(
                        "host key {alg} {fp}{signed} of {} is in none of {}; refusing (verify it, then add it or rerun with --host-key-policy accept-new)",
                        super::known_hosts::lookup_name(&self.host, self.port),
                        files.join(", ")
                    ),
                )
            }
        };
        let ok = why.is_none();
        *self
            .refused
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = why;
        Ok(ok)
    }
}

fn default_identities() -> Vec<PathBuf> {
    let Some(home) = directories::BaseDirs::new().map(|d| d.home_dir().to_path_buf()) else {
        return Vec::new();
    };
    ["id_ed25519", "id_ecdsa", "id_rsa"]
        .iter()
        .map(|n| home.join(".ssh").join(n))
        .filter(|p| p.exists())
        .collect()
}

fn cert_for(key: &Path, explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(c) = explicit {
        return Some(c.to_path_buf());
    }
    let mut s = key.as_os_str().to_owned();
    s.push("-cert.pub");
    let p = PathBuf::from(s);
    p.exists().then_some(p)
}

/// Public-key authentication: ssh-agent identities (keys and certificates) first, then the key
/// files (the node's identity_file, else ~/.ssh/id_ed25519, id_ecdsa, id_rsa), with an OpenSSH
/// certificate when one is configured or lies beside the key as `<key>-cert.pub`.
async fn authenticate(h: &mut client::Handle<Handler>, node: &Node) -> Result<(), Unreachable> {
    let user = node.user.clone();
    let mut tried: Vec<String> = Vec::new();
    let mut problems: Vec<String> = Vec::new();
    let hash = h.best_supported_rsa_hash().await.ok().flatten().flatten();
    let fail = |e: russh::Error| {
        Unreachable::new(Code::SshAuthFailed, format!("authentication failed: {e}"))
    };

    if std::env::var_os("SSH_AUTH_SOCK").is_some() {
        // With an identity_file, offer only the agent key that matches it (like IdentitiesOnly),
        // so a full agent does not use up the server's MaxAuthTries. (Read only when there is an
        // agent: a file read and a key parse per node otherwise wasted.)
        let wanted = node.identity_file.as_ref().and_then(|f| {
            let mut pubf = f.as_os_str().to_owned();
            pubf.push(".pub");
            russh::keys::load_public_key(PathBuf::from(pubf))
                .ok()
                .or_else(|| {
                    load_secret_key(f, None)
                        .ok()
                        .map(|k| k.public_key().clone())
                })
        });
        match russh::keys::agent::client::AgentClient::connect_env().await {
            Ok(mut agent) => {
                let ids = agent.request_identities().await.unwrap_or_default();
                let ids = ids.into_iter().filter(|id| match (&wanted, id) {
                    (Some(w), russh::keys::agent::AgentIdentity::PublicKey { key, .. }) => {
                        key.key_data() == w.key_data()
                    }
                    (
                        Some(w),
                        russh::keys::agent::AgentIdentity::Certificate { certificate, .. },
                    ) => certificate.public_key() == w.key_data(),
                    (None, _) => true,
                });
                for id in ids {
                    let res = match &id {
                        russh::keys::agent::AgentIdentity::PublicKey { key, .. } => {
                            h.authenticate_publickey_with(&user, key.clone(), hash, &mut agent)
                                .await
                        }
                        russh::keys::agent::AgentIdentity::Certificate { certificate, .. } => {
                            h.authenticate_certificate_with(
                                &user,
                                certificate.clone(),
                                hash,
                                &mut agent,
                            )
                            .await
                        }
                    };
                    match res {
                        Ok(r) if r.success() => return Ok(()),
                        Ok(_) => tried.push("an ssh-agent key".into()),
                        Err(e) => {
                            return Err(Unreachable::new(
                                Code::SshAuthFailed,
                                format!(
                                    "{user}@{}: the server closed the connection during authentication after {} key(s) ({e}); OpenSSH stops after MaxAuthTries (6) keys: set identity_file for this node",
                                    node.host,
                                    tried.len() + 1
                                ),
                            ));
                        }
                    }
                }
            }
            Err(e) => problems.push(format!("ssh-agent at $SSH_AUTH_SOCK: {e}")),
        }
    }

    let files = match &node.identity_file {
        Some(f) => vec![f.clone()],
        None => default_identities(),
    };
    for path in files {
        let key = match load_secret_key(&path, None) {
            Ok(k) => Arc::new(k),
            Err(russh::keys::Error::KeyIsEncrypted) => {
                problems.push(format!(
                    "{} is passphrase-protected and no ssh-agent offered it: run `ssh-add {}`",
                    path.display(),
                    path.display()
                ));
                continue;
            }
            Err(e) => {
                problems.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        let res = match cert_for(&path, node.certificate_file.as_deref()) {
            Some(cert_path) => match load_openssh_certificate(&cert_path) {
                Ok(cert) => h.authenticate_openssh_cert(&user, key, cert).await,
                Err(e) => {
                    problems.push(format!("{}: {e}", cert_path.display()));
                    continue;
                }
            },
            None => {
                h.authenticate_publickey(&user, PrivateKeyWithHashAlg::new(key, hash))
                    .await
            }
        };
        match res.map_err(fail)? {
            r if r.success() => return Ok(()),
            _ => tried.push(path.display().to_string()),
        }
    }
    let mut msg = format!("{user}@{}: the server accepted none of", node.host);
    if tried.is_empty() {
        msg = format!(
            "{user}@{}: no usable key (no ssh-agent key, no identity file)",
            node.host
        );
    } else {
        msg.push_str(&format!(" {}", tried.join(", ")));
    }
    if !problems.is_empty() {
        msg.push_str(&format!("; {}", problems.join("; ")));
    }
    Err(Unreachable::new(Code::SshAuthFailed, msg))
}

/// The russh client configuration. With `with_certificates` (a `@cert-authority` line matches
/// the host), the `*-cert-v01@openssh.com` host key algorithms are offered ahead of the plain
/// ones, as OpenSSH does, so a server with a `HostCertificate` presents it.
fn client_config(ssh: &SshSettings, with_certificates: bool) -> client::Config {
    let mut preferred = russh::Preferred::default();
    if with_certificates {
        preferred.host_key_certificates = preferred.key.clone();
    }
    client::Config {
        preferred,
        inactivity_timeout: None,
        keepalive_interval: Some(ssh.keepalive),
        keepalive_max: 3,
        nodelay: true,
        ..client::Config::default()
    }
}

/// An authenticated SSH connection to one node.
pub struct Session {
    handle: client::Handle<Handler>,
    /// `host:port`, for messages.
    pub target: String,
}

/// What one command printed and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// stdout (and stderr too when asked for), as they arrived (capped).
    pub output: Vec<u8>,
    /// The exit status; `None` when the command was cut off or killed by a signal.
    pub exit_status: Option<u32>,
    /// The signal that killed the command (`KILL`), as the server reported it.
    pub exit_signal: Option<String>,
    pub end: RunEnd,
}

impl ExecOutput {
    /// How the command ended, in words (`exit status 2`, `killed by signal KILL`); `None` for a
    /// zero exit or when the server did not say.
    pub fn describe_exit(&self) -> Option<String> {
        match (&self.exit_signal, self.exit_status) {
            (Some(sig), _) => Some(format!("killed by signal {sig}")),
            (None, Some(s)) => super::describe_exit(i32::try_from(s).ok(), None),
            (None, None) => None,
        }
    }
}

/// How many of the peer's first bytes [`Recording`] keeps: room for the identification line
/// and the 20 lines of at most 255 bytes that russh lets come before it (RFC 4253 §4.2).
const PEER_BYTES_KEPT: usize = 8192;

/// How many characters of the peer's first bytes (escaped) a message shows.
const PEER_BYTES_SHOWN: usize = 80;

/// A stream that keeps a copy of the first bytes read from it (up to [`PEER_BYTES_KEPT`], and
/// only until an SSH identification line has arrived), so that a handshake that fails before
/// the key exchange can say what the peer sent. Writes pass through untouched.
struct Recording<S> {
    inner: S,
    seen: Arc<Mutex<Vec<u8>>>,
    /// Set once nothing more needs keeping; reads then cost nothing extra.
    done: bool,
}

impl<S: AsyncRead + Unpin> AsyncRead for Recording<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let res = Pin::new(&mut this.inner).poll_read(cx, buf);
        if !this.done
            && let Poll::Ready(Ok(())) = res
        {
            let new = &buf.filled()[before..];
            let mut seen = this
                .seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let room = PEER_BYTES_KEPT.saturating_sub(seen.len());
            seen.extend_from_slice(&new[..new.len().min(room)]);
            this.done = seen.len() >= PEER_BYTES_KEPT || peer_start(&seen) == PeerStart::Ssh;
        }
        res
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Recording<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// What a peer's first bytes say about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PeerStart {
    /// Nothing arrived.
    Nothing,
    /// An SSH-2 identification line (`SSH-2.0-…` or `SSH-1.99-…`, RFC 4253 §4.2) arrived, or is
    /// arriving (the last, unfinished line starts like one).
    Ssh,
    /// An identification line of SSH protocol 1 only (`SSH-1.5-…`).
    Ssh1,
    /// Bytes that are no SSH identification.
    Other,
}

/// Classifies `seen`, the first bytes a peer sent (lines before the identification line are
/// allowed, as RFC 4253 allows them).
fn peer_start(seen: &[u8]) -> PeerStart {
    if seen.is_empty() {
        return PeerStart::Nothing;
    }
    const IDS: [&[u8]; 2] = [b"SSH-2.0-", b"SSH-1.99-"];
    let mut ssh1 = false;
    for line in seen.split_inclusive(|&b| b == b'\n') {
        let complete = line.ends_with(b"\n");
        if IDS.iter().any(|id| line.starts_with(id)) {
            return PeerStart::Ssh;
        }
        if !complete && IDS.iter().any(|id| id.starts_with(line)) {
            return PeerStart::Ssh;
        }
        ssh1 |= complete && line.starts_with(b"SSH-1.");
    }
    if ssh1 {
        PeerStart::Ssh1
    } else {
        PeerStart::Other
    }
}

/// The first bytes of `bytes`, quoted, with everything but printable ASCII escaped (`\r`,
/// `\n`, `\t`, `\\`, `\"`, `\xNN`: no control character or escape sequence survives, and
/// bytes that are not UTF-8 show as what they are), at most `max` characters between the quotes;
/// `…` after the closing quote when cut.
fn escaped_start(bytes: &[u8], max: usize) -> String {
    let mut out = String::from("\"");
    let mut shown = 0;
    for &b in bytes {
        let e = match b {
            b'\r' => "\\r".to_string(),
            b'\n' => "\\n".to_string(),
            b'\t' => "\\t".to_string(),
            b'\\' => "\\\\".to_string(),
            b'"' => "\\\"".to_string(),
            0x20..=0x7e => char::from(b).to_string(),
            _ => format!("\\x{b:02x}"),
        };
        if shown + e.len() > max {
            out.push_str("\"…");
            return out;
        }
        shown += e.len();
        out.push_str(&e);
    }
    out.push('"');
    out
}

/// Why a handshake that failed with `e` failed, given `seen`, the first bytes the peer sent:
/// `ssh-protocol-error` when the peer sent something that is no SSH-2 identification, or closed
/// the connection without sending anything; otherwise `ssh-refused` with russh's error.
fn handshake_failure(target: &str, e: &russh::Error, seen: &[u8]) -> Unreachable {
    let closed = match e {
        russh::Error::Disconnect => true,
        russh::Error::IO(io) => matches!(
            io.kind(),
            std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::ConnectionAborted
                | std::io::ErrorKind::BrokenPipe
                | std::io::ErrorKind::UnexpectedEof
        ),
        _ => false,
    };
    match peer_start(seen) {
        PeerStart::Nothing if closed => Unreachable::new(
            Code::SshProtocolError,
            format!(
                "{target} closed the connection without sending an SSH identification line: not an SSH server, or an sshd turning connections away (MaxStartups, tcp wrappers)"
            ),
        ),
        PeerStart::Ssh | PeerStart::Nothing => Unreachable::new(
            Code::SshRefused,
            format!("SSH handshake with {target}: {e}"),
        ),
        PeerStart::Ssh1 => Unreachable::new(
            Code::SshProtocolError,
            format!(
                "{target} is not an SSH-2 server (SSH protocol 1 only): it sent {}",
                escaped_start(seen, PEER_BYTES_SHOWN)
            ),
        ),
        PeerStart::Other => not_ssh(target, seen),
    }
}

fn not_ssh(target: &str, seen: &[u8]) -> Unreachable {
    Unreachable::new(
        Code::SshProtocolError,
        format!(
            "{target} is not an SSH server: it sent {}",
            escaped_start(seen, PEER_BYTES_SHOWN)
        ),
    )
}

/// Resolves `host` (a name or an address literal) and opens a TCP connection to the first
/// address that answers, all within `limit`. Errors: `ssh-resolve-failed` when the name does not
/// resolve (or the resolver does not answer in time), `ssh-timeout` when no address answers in
/// time (or the host or network is unreachable), `ssh-refused` otherwise (connection refused).
async fn open_tcp(host: &str, port: u16, limit: Duration) -> Result<TcpStream, Unreachable> {
    let target = format!("{host}:{port}");
    let deadline = tokio::time::Instant::now() + limit;
    let secs = limit.as_secs();
    let addrs: Vec<SocketAddr> =
        match tokio::time::timeout_at(deadline, tokio::net::lookup_host((host, port))).await {
            Err(_) => {
                return Err(Unreachable::new(
                    Code::SshResolveFailed,
                    format!("cannot resolve {host}: no answer from the resolver within {secs} s"),
                ));
            }
            Ok(Err(e)) => {
                return Err(Unreachable::new(
                    Code::SshResolveFailed,
                    format!("cannot resolve {host}: {e}"),
                ));
            }
            Ok(Ok(a)) => a.collect(),
        };
    let mut last = None;
    for addr in &addrs {
        match tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await {
            Err(_) => break,
            Ok(Ok(s)) => return Ok(s),
            Ok(Err(e)) => last = Some(e),
        }
    }
    let Some(e) = last.filter(|_| tokio::time::Instant::now() < deadline) else {
        if addrs.is_empty() {
            return Err(Unreachable::new(
                Code::SshResolveFailed,
                format!("cannot resolve {host}: the name has no addresses"),
            ));
        }
        return Err(Unreachable::new(
            Code::SshTimeout,
            format!("connect to {target}: no answer within {secs} s"),
        ));
    };
    use std::io::ErrorKind as K;
    let code = match e.kind() {
        K::TimedOut | K::HostUnreachable | K::NetworkUnreachable => Code::SshTimeout,
        _ => Code::SshRefused,
    };
    Err(Unreachable::new(code, format!("connect to {target}: {e}")))
}

/// Resolves the node's host name and opens a TCP connection (both within `connect_timeout`),
/// checks the host key, and logs in (the handshake and login within `auth_timeout`).
///
/// Errors, as [`Unreachable`]: `ssh-resolve-failed` (the name does not resolve), `ssh-timeout`
/// (no TCP answer, or the handshake and login did not finish), `ssh-refused` (connection
/// refused, or the SSH handshake failed), `ssh-protocol-error` (the peer sent something that is
/// no SSH-2 identification line, shown escaped, or closed without sending anything),
/// `host-key-mismatch` / `host-key-unknown` (see [`Handler`]), `ssh-auth-failed`.
pub async fn connect(
    node: &Node,
    ssh: &SshSettings,
    keys: Arc<HostKeys>,
) -> Result<Session, Unreachable> {
    let target = format!("{}:{}", node.host, node.port);
    let tcp = open_tcp(&node.host, node.port, ssh.connect_timeout).await?;
    let _ = tcp.set_nodelay(true);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let stream = Recording {
        inner: tcp,
        seen: seen.clone(),
        done: false,
    };
    let refused = Arc::new(Mutex::new(None));
    let with_certificates = keys
        .db
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .has_cert_authority(&node.host, node.port);
    let handler = Handler {
        host: node.host.clone(),
        port: node.port,
        keys,
        refused: refused.clone(),
    };
    let config = Arc::new(client_config(ssh, with_certificates));
    let handshake = async {
        let mut h = client::connect_stream(config, stream, handler)
            .await
            .map_err(|e| {
                refused
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take()
                    .unwrap_or_else(|| {
                        handshake_failure(
                            &target,
                            &e,
                            &seen
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner),
                        )
                    })
            })?;
        authenticate(&mut h, node).await?;
        Ok::<_, Unreachable>(h)
    };
    match tokio::time::timeout(ssh.auth_timeout, handshake).await {
        Err(_) => {
            let seen = seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match peer_start(&seen) {
                // Something that is not SSH, then silence.
                PeerStart::Other | PeerStart::Ssh1 => Err(not_ssh(&target, &seen)),
                PeerStart::Nothing | PeerStart::Ssh => Err(Unreachable::new(
                    Code::SshTimeout,
                    format!(
                        "{target} accepted the TCP connection but the SSH handshake and login did not finish within {} s",
                        ssh.auth_timeout.as_secs()
                    ),
                )),
            }
        }
        Ok(r) => r.map(|handle| Session { handle, target }),
    }
}

impl Session {
    /// Runs `command` (a shell command line for the login shell), feeding `stdin`, until it
    /// ends, `deadline` passes, or `cap` bytes have arrived (stdout and stderr together: a
    /// stderr flood counts too). Output before the deadline is kept; stderr is kept too when
    /// `with_stderr`. Errors only when the session cannot start the command.
    pub async fn exec(
        &self,
        command: &str,
        stdin: &[u8],
        deadline: tokio::time::Instant,
        cap: usize,
        with_stderr: bool,
    ) -> Result<ExecOutput, Unreachable> {
        let mut output = Vec::new();
        let mut end = RunEnd::Completed;
        let mut exit_status = None;
        let mut exit_signal = None;
        let mut dropped_stderr = 0usize;
        let start = async {
            let ch = self.handle.channel_open_session().await?;
            ch.exec(true, command.as_bytes()).await?;
            if !stdin.is_empty() {
                ch.data(stdin).await?;
            }
            ch.eof().await?;
            Ok::<_, russh::Error>(ch)
        };
        match tokio::time::timeout_at(deadline, start).await {
            Err(_) => end = RunEnd::Deadline,
            Ok(Err(e)) => {
                return Err(Unreachable::new(
                    Code::SshRefused,
                    format!("{}: could not run a command: {e}", self.target),
                ));
            }
            Ok(Ok(mut ch)) => loop {
                match tokio::time::timeout_at(deadline, ch.wait()).await {
                    Err(_) => {
                        end = RunEnd::Deadline;
                        break;
                    }
                    Ok(None) => {
                        if exit_status.is_none() && exit_signal.is_none() {
                            end = RunEnd::ConnectionClosed;
                        }
                        break;
                    }
                    Ok(Some(ChannelMsg::ExtendedData { data, .. })) if !with_stderr => {
                        dropped_stderr = dropped_stderr.saturating_add(data.len());
                        if output.len().saturating_add(dropped_stderr) > cap {
                            end = RunEnd::CapExceeded;
                            break;
                        }
                    }
                    Ok(Some(ChannelMsg::Data { data } | ChannelMsg::ExtendedData { data, .. })) => {
                        let room = cap.saturating_sub(output.len().saturating_add(dropped_stderr));
                        output.extend_from_slice(&data[..data.len().min(room)]);
                        if data.len() > room {
                            end = RunEnd::CapExceeded;
                            break;
                        }
                    }
                    Ok(Some(ChannelMsg::ExitStatus { exit_status: s })) => exit_status = Some(s),
                    Ok(Some(ChannelMsg::ExitSignal { signal_name, .. })) => {
                        exit_signal = Some(format!("{signal_name:?}"));
                    }
                    Ok(Some(ChannelMsg::Close)) => break,
                    Ok(Some(_)) => {}
                }
            },
        }
        Ok(ExecOutput {
            output,
            exit_status,
            exit_signal,
            end,
        })
    }

    /// Closes the connection (within 2 s); the remote shell and what it still runs end.
    pub async fn close(self) {
        let _ = tokio::time::timeout(
            Duration::from_secs(2),
            self.handle.disconnect(Disconnect::ByApplication, "", "en"),
        )
        .await;
    }
}

/// Probes `node` over SSH. The node's deadline (`probe.deadline`) bounds the exec; output that
/// arrived before it is kept. Connection, host key and authentication failures are
/// [`Unreachable`].
pub async fn run_ssh(
    node: &Node,
    probe: &ProbeSettings,
    ssh: &SshSettings,
    keys: Arc<HostKeys>,
) -> Result<RawRun, Unreachable> {
    let start = Instant::now();
    let session = connect(node, ssh, keys).await?;
    let boundary = new_boundary();
    let stdin = probe_stdin(&boundary, &node.root, probe);
    let deadline = tokio::time::Instant::now() + probe.deadline;
    // The probe's stderr is left out (it could land inside a section's bytes) but counts
    // toward the output cap.
    let out = session
        .exec(COMMAND, &stdin, deadline, probe.output_cap, false)
        .await?;
    session.close().await;
    Ok(RawRun {
        boundary,
        exit: out.describe_exit(),
        output: out.output,
        end: out.end,
        duration: start.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_starts_are_told_apart() {
        assert_eq!(peer_start(b""), PeerStart::Nothing);
        assert_eq!(peer_start(b"SSH-2.0-OpenSSH_9.6\r\n"), PeerStart::Ssh);
        assert_eq!(peer_start(b"SSH-1.99-Cisco\r\n"), PeerStart::Ssh);
        // Lines before the identification line are allowed (RFC 4253 4.2).
        assert_eq!(peer_start(b"hello\r\nSSH-2.0-x\r\n"), PeerStart::Ssh);
        // Still arriving.
        assert_eq!(peer_start(b"SSH-2."), PeerStart::Ssh);
        assert_eq!(peer_start(b"SSH-1.5-old\n"), PeerStart::Ssh1);
        assert_eq!(
            peer_start(b"HTTP/1.1 400 Bad Request\r\n"),
            PeerStart::Other
        );
        assert_eq!(peer_start(b"\x1b[2J"), PeerStart::Other);
    }

    #[test]
    fn peer_bytes_are_escaped_and_capped() {
        assert_eq!(
            escaped_start(b"\x1b]0;x\x07 \"q\" \\ \xff\r\n\t", 80),
            r#""\x1b]0;x\x07 \"q\" \\ \xff\r\n\t""#
        );
        assert_eq!(escaped_start(b"abcdef", 4), "\"abcd\"…");
        // An escape is never cut in half.
        assert_eq!(escaped_start(b"abc\x1b", 5), "\"abc\"…");
        let got = handshake_failure("h:22", &russh::Error::Disconnect, b"HTTP/1.1 400\r\n");
        assert_eq!(got.code, Code::SshProtocolError);
        assert_eq!(
            got.message,
            r#"h:22 is not an SSH server: it sent "HTTP/1.1 400\r\n""#
        );
        let got = handshake_failure("h:22", &russh::Error::Disconnect, b"");
        assert_eq!(got.code, Code::SshProtocolError);
        // After an SSH identification line, a failure is the handshake's.
        let got = handshake_failure("h:22", &russh::Error::Kex, b"SSH-2.0-x\r\n");
        assert_eq!(
            (got.code, got.message.as_str()),
            (
                Code::SshRefused,
                "SSH handshake with h:22: Key exchange failed"
            )
        );
    }
}
