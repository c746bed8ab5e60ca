//! The probe over SSH (russh): one connection and one exec per node per scan, directly, through
//! a `ProxyCommand` (`super::proxy`), or through jump hosts (`direct-tcpip` channels, each hop's
//! host key checked and each hop logged in; docs/ssh.md).
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
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use russh::client;
use russh::keys::PublicKeyOrCertificate;
use russh::keys::ssh_key::HashAlg;
use russh::{ChannelMsg, Disconnect};
use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

mod auth;
mod peer;

use self::auth::authenticate;
use self::peer::{PeerStart, Recording, handshake_failure, not_ssh, peer_start};
use super::endpoint::{Endpoint, Hop};
use super::known_hosts::{Candidates, KnownHosts, Verdict, fingerprint};
use super::{COMMAND, ProbeSettings, RawRun, RunEnd, new_boundary, probe_stdin};
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
    /// Nodes probed at once: where the scan starts (then it adapts, `probe::pace`), or with
    /// `concurrency_fixed` the cap it never passes.
    pub concurrency: usize,
    /// `concurrency` was given (`--concurrency`, `[ssh] concurrency`): a fixed cap.
    pub concurrency_fixed: bool,
    /// Set when `connect_timeout` / `host_key_policy` came from a command-line flag: they then
    /// win over a host's own `ConnectTimeout` / `StrictHostKeyChecking` from ~/.ssh/config, as
    /// `ssh -o` wins over the config file.
    pub flags: FlagsWin,
}

/// Which [`SshSettings`] came from flags (and so win over per-host ~/.ssh/config values).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlagsWin {
    pub connect_timeout: bool,
    pub host_key_policy: bool,
}

impl Default for SshSettings {
    fn default() -> Self {
        SshSettings {
            connect_timeout: Duration::from_secs(10),
            auth_timeout: Duration::from_secs(15),
            keepalive: Duration::from_secs(15),
            host_key_policy: HostKeyPolicy::Strict,
            concurrency: super::pace::DEFAULT_START,
            concurrency_fixed: false,
            flags: FlagsWin::default(),
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
    pub(crate) fn new(code: Code, message: impl Into<String>) -> Self {
        Unreachable {
            code,
            message: message.into(),
        }
    }
}

/// Shared SSH state for one scan: the known_hosts files and the policy, and the identity files
/// (each read once per scan).
pub struct HostKeys {
    pub db: Arc<RwLock<KnownHosts>>,
    pub policy: HostKeyPolicy,
    /// Keys learned under `accept-new` during this scan, as messages for the user.
    pub learned: Mutex<Vec<String>>,
    /// The files of `db` that a server's own `UserKnownHostsFile` does not replace (the
    /// inventory's `known_hosts`, `--known-hosts`).
    also: Vec<PathBuf>,
    /// The known_hosts files of servers with their own `UserKnownHostsFile`, by file list,
    /// each loaded once per scan.
    per_server: Mutex<std::collections::HashMap<Vec<PathBuf>, Arc<RwLock<KnownHosts>>>>,
    identities: auth::Identities,
    /// Host lookups that go through many hashed or pattern lines run on the blocking pool, at
    /// most this many at once (the cores but one), so they never starve the workers that carry
    /// the handshakes in flight.
    lookups: tokio::sync::Semaphore,
}

/// Lines a lookup goes through one by one (hashed, patterns) above which it leaves the worker.
const HEAVY_LOOKUP: usize = 1_000;

/// The blocking lookups allowed at once: the cores but one, at least one.
fn lookup_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get().saturating_sub(1))
        .max(1)
}

impl HostKeys {
    /// The known_hosts lines that match `hop` in `db` ([`KnownHosts::candidates`]): local work,
    /// done before the hop's connection and outside its time limits. A lookup through more than
    /// [`HEAVY_LOOKUP`] hashed or pattern lines runs on the blocking pool, at most
    /// [`lookup_threads`] at once.
    async fn candidates(&self, db: &Arc<RwLock<KnownHosts>>, hop: &Hop) -> Candidates {
        let heavy = db
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .one_by_one()
            > HEAVY_LOOKUP;
        let lookup = {
            let (db, host, port) = (db.clone(), hop.host.clone(), hop.port);
            move || {
                db.read()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .candidates(&host, port)
            }
        };
        if !heavy {
            return lookup();
        }
        let _permit = self.lookups.acquire().await;
        match tokio::task::spawn_blocking(lookup).await {
            Ok(c) => c,
            // The pool is gone (the runtime shuts down): looked up here.
            Err(_) => db
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .candidates(&hop.host, hop.port),
        }
    }

    pub fn new(db: KnownHosts, policy: HostKeyPolicy) -> HostKeys {
        HostKeys {
            db: Arc::new(RwLock::new(db)),
            policy,
            lookups: tokio::sync::Semaphore::new(lookup_threads()),
            learned: Mutex::new(Vec::new()),
            also: Vec::new(),
            per_server: Mutex::new(std::collections::HashMap::new()),
            identities: auth::Identities::default(),
        }
    }

    /// Names the files of the scan's known_hosts that stay in use for a server with its own
    /// `UserKnownHostsFile` (which replaces only ~/.ssh/known_hosts, as in OpenSSH).
    pub fn keeping(mut self, files: Vec<PathBuf>) -> HostKeys {
        self.also = files;
        self
    }

    /// The known_hosts database for `hop`: the scan's, or, when the hop has its own
    /// `UserKnownHostsFile`, those files plus [`HostKeys::keeping`]'s (loaded once; keys learned
    /// under `accept-new` go where the scan's would, else to the hop's first file).
    ///
    /// Errors: a file that exists but cannot be read (`host-key-unknown`: no key can be
    /// checked).
    fn db_for(&self, hop: &Hop) -> Result<Arc<RwLock<KnownHosts>>, Unreachable> {
        if hop.known_hosts.is_empty() {
            return Ok(self.db.clone());
        }
        let mut sets = self
            .per_server
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(db) = sets.get(&hop.known_hosts) {
            return Ok(db.clone());
        }
        let learn_to = self
            .db
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .learn_to
            .clone()
            .filter(|l| self.also.contains(l))
            .or_else(|| hop.known_hosts.first().cloned());
        let mut files = hop.known_hosts.clone();
        files.extend(self.also.iter().cloned());
        let db = KnownHosts::load(&files, learn_to).map_err(|e| {
            Unreachable::new(
                Code::HostKeyUnknown,
                format!("UserKnownHostsFile of {}: {e}", hop.target()),
            )
        })?;
        let db = Arc::new(RwLock::new(db));
        sets.insert(hop.known_hosts.clone(), db.clone());
        Ok(db)
    }
}

struct Handler {
    host: String,
    port: u16,
    keys: Arc<HostKeys>,
    /// The known_hosts of this server ([`HostKeys::db_for`]) and its policy.
    db: Arc<RwLock<KnownHosts>>,
    /// The lines of `db` that match this server, looked up before its connection.
    candidates: Candidates,
    policy: HostKeyPolicy,
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
        // The lines were looked up before the connection: this costs no HMAC.
        let verdict = self
            .db
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .check_in(&self.candidates, &self.host, &key, cert);
        let refuse = |code, message: String| Some(Unreachable::new(code, message));
        let why = match verdict {
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
            Verdict::Unknown if self.policy == HostKeyPolicy::AcceptNew => {
                let learned = self
                    .db
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .learn(&self.host, self.port, &key);
                match learned {
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
                let files: Vec<String> = self
                    .db
                    .read()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .files
                    .iter()
                    .map(|f| f.display().to_string())
                    .collect();
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

/// Bytes read from a node's connection at once (see [`handshake`]).
const READ_BUFFER: usize = 16 * 1024;

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
    /// The jump hosts' connections the node's runs through, first to last (kept open as long
    /// as the session).
    jumps: Vec<client::Handle<Handler>>,
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

/// The longest a connect waits in all for file descriptors to be freed (EMFILE/ENFILE under a
/// scan) before the node fails with the error.
const FILES_WAIT: Duration = Duration::from_secs(60);

/// Resolves `host` (a name or an address literal) and opens a TCP connection to the first
/// address that answers, all within `limit`. Errors: `ssh-resolve-failed` when the name does not
/// resolve (or the resolver does not answer in time), `ssh-timeout` when no address answers in
/// time (or the host or network is unreachable), `ssh-refused` otherwise (connection refused).
async fn open_tcp(host: &str, port: u16, limit: Duration) -> Result<TcpStream, Unreachable> {
    let target = format!("{host}:{port}");
    let mut deadline = tokio::time::Instant::now() + limit;
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
    'addrs: for addr in &addrs {
        // Out of file descriptors (EMFILE/ENFILE) is this process's state, not the node's:
        // under a scan its concurrency narrows and the connect is tried again (probe::pace);
        // the wait does not count against the connect limit, up to FILES_WAIT in all.
        let mut backoff = Duration::from_millis(10);
        let mut waited = Duration::ZERO;
        loop {
            match tokio::time::timeout_at(deadline, TcpStream::connect(addr)).await {
                Err(_) => break 'addrs,
                Ok(Ok(s)) => return Ok(s),
                Ok(Err(e))
                    if super::pace::is_out_of_files(&e)
                        && waited < FILES_WAIT
                        && super::pace::wait_for_files(backoff).await =>
                {
                    deadline += backoff;
                    waited += backoff;
                    backoff = (backoff * 2).min(Duration::from_millis(500));
                }
                Ok(Err(e)) => {
                    last = Some(e);
                    break;
                }
            }
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

/// A byte stream an SSH connection runs over: TCP, a `direct-tcpip` channel through a jump
/// host, or a `ProxyCommand`'s stdin and stdout.
trait Io: AsyncRead + AsyncWrite + Unpin + Send + 'static {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + 'static> Io for T {}

/// The SSH handshake, host-key check (against `hop`'s known_hosts lines `looked` up before
/// the connection, and its policy) and login on `stream`, within `limit`. Errors as for
/// [`connect`].
async fn handshake(
    hop: &Hop,
    stream: Box<dyn Io>,
    ssh: &SshSettings,
    keys: &Arc<HostKeys>,
    looked: (Arc<RwLock<KnownHosts>>, Candidates),
    limit: Duration,
    tcp: bool,
) -> Result<client::Handle<Handler>, Unreachable> {
    let target = hop.target();
    let seen = Arc::new(Mutex::new(Vec::new()));
    // Buffered: russh reads each packet in two small reads (its length, then the rest); the
    // buffer makes that one `recv` per burst of packets.
    let stream = tokio::io::BufReader::with_capacity(
        READ_BUFFER,
        Recording {
            inner: stream,
            seen: seen.clone(),
            done: false,
        },
    );
    let refused = Arc::new(Mutex::new(None));
    let (db, candidates) = looked;
    let with_certificates = db
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .has_cert_authority_in(&candidates);
    let handler = Handler {
        host: hop.host.clone(),
        port: hop.port,
        keys: keys.clone(),
        db,
        candidates,
        policy: match hop.host_key_policy {
            Some(p) if !ssh.flags.host_key_policy => p,
            _ => keys.policy,
        },
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
        authenticate(&mut h, &hop.host, &hop.login, &keys.identities).await?;
        Ok::<_, Unreachable>(h)
    };
    match tokio::time::timeout(limit, handshake).await {
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
                        "{target} accepted the {} but the SSH handshake and login did not finish within {} s",
                        if tcp { "TCP connection" } else { "connection" },
                        limit.as_secs_f64().ceil()
                    ),
                )),
            }
        }
        Ok(r) => r,
    }
}

/// Opens a `direct-tcpip` channel from the jump host `via` (named `jump` in messages) to
/// `to`, within `limit`: the jump host resolves and connects.
async fn open_through(
    via: &client::Handle<Handler>,
    jump: &str,
    to: &Hop,
    limit: Duration,
) -> Result<Box<dyn Io>, Unreachable> {
    let opened = via.channel_open_direct_tcpip(to.host.clone(), u32::from(to.port), "127.0.0.1", 0);
    match tokio::time::timeout(limit, opened).await {
        Err(_) => Err(Unreachable::new(
            Code::SshTimeout,
            format!(
                "jump host {jump}: connect to {}: no answer within {} s",
                to.target(),
                limit.as_secs_f64().ceil()
            ),
        )),
        Ok(Err(e)) => Err(Unreachable::new(
            Code::SshRefused,
            format!("jump host {jump}: cannot connect to {}: {e}", to.target()),
        )),
        Ok(Ok(ch)) => Ok(Box::new(ch.into_stream())),
    }
}

/// Connects to the node of `ep` (directly, through its `ProxyCommand`, or through its jump
/// hosts, each hop's host key checked against its own known_hosts entry and each hop logged
/// in), and logs in. Name resolution + TCP connect (or each `direct-tcpip` channel) is bounded
/// by `ConnectTimeout` (else `[ssh] connect_timeout`), each handshake + login by
/// `auth_timeout`, and the whole chain by the two added together (what one direct connection
/// gets).
///
/// Errors, as [`Unreachable`]: `ssh-resolve-failed` (the name does not resolve), `ssh-timeout`
/// (no TCP answer, or the handshake and login did not finish), `ssh-refused` (connection
/// refused, the SSH handshake failed, a jump host could not open the next connection, the
/// `ProxyCommand` could not start or ended), `ssh-protocol-error` (the peer sent something that
/// is no SSH-2 identification line, shown escaped, or closed without sending anything),
/// `host-key-mismatch` / `host-key-unknown` (see [`Handler`]), `ssh-auth-failed`. A failure at
/// a jump host starts `jump host HOST:PORT: `.
pub async fn connect(
    ep: &Endpoint,
    ssh: &SshSettings,
    keys: Arc<HostKeys>,
) -> Result<Session, Unreachable> {
    let connect_timeout = match ep.connect_timeout {
        Some(t) if !ssh.flags.connect_timeout => t,
        _ => ssh.connect_timeout,
    };
    let hops: Vec<&Hop> = ep.jump.iter().chain([&ep.target]).collect();
    // Local work first, outside every time limit (they cover waiting on the network): each
    // hop's known_hosts lines, looked up once (a large hashed file costs one HMAC a line).
    let mut looked = Vec::with_capacity(hops.len());
    for (i, hop) in hops.iter().enumerate() {
        let db = keys.db_for(hop).map_err(|u| {
            if i + 1 == hops.len() {
                u
            } else {
                Unreachable::new(u.code, format!("jump host {}: {}", hop.target(), u.message))
            }
        })?;
        let c = keys.candidates(&db, hop).await;
        looked.push((db, c));
        keys.identities.preload(&hop.login).await;
    }
    let mut looked = looked.into_iter();
    let whole = connect_timeout + ssh.auth_timeout;
    let deadline = tokio::time::Instant::now() + whole;
    let left = |limit: Duration| {
        limit.min(deadline.saturating_duration_since(tokio::time::Instant::now()))
    };
    let mut handles: Vec<client::Handle<Handler>> = Vec::with_capacity(hops.len());
    for (i, hop) in hops.iter().enumerate() {
        let last = i + 1 == hops.len();
        let at_jump = |u: Unreachable| {
            if last {
                u
            } else {
                Unreachable::new(u.code, format!("jump host {}: {}", hop.target(), u.message))
            }
        };
        let tcp = handles.is_empty() && ep.proxy_command.is_none();
        let stream: Box<dyn Io> = match handles.last() {
            // The error is the jump host's already ("jump host …: cannot connect to …").
            Some(via) => {
                open_through(via, &hops[i - 1].target(), hop, left(connect_timeout)).await?
            }
            None => match &ep.proxy_command {
                Some(cmd) => Box::new(super::proxy::spawn(cmd).map_err(at_jump)?),
                None => {
                    let tcp = open_tcp(&hop.host, hop.port, left(connect_timeout))
                        .await
                        .map_err(at_jump)?;
                    let _ = tcp.set_nodelay(true);
                    Box::new(tcp)
                }
            },
        };
        let Some(l) = looked.next() else { break };
        let h = handshake(hop, stream, ssh, &keys, l, left(ssh.auth_timeout), tcp)
            .await
            .map_err(at_jump)?;
        handles.push(h);
    }
    match handles.pop() {
        Some(handle) => Ok(Session {
            handle,
            jumps: handles,
            target: ep.target.target(),
        }),
        None => Err(Unreachable::new(
            Code::SshRefused,
            "no SSH server to connect to",
        )),
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

    /// Closes the connection, then the jump hosts' from the last to the first (each within
    /// 2 s); the remote shell and what it still runs end, and a `ProxyCommand` is killed.
    pub async fn close(self) {
        let _ = tokio::time::timeout(
            Duration::from_secs(2),
            self.handle.disconnect(Disconnect::ByApplication, "", "en"),
        )
        .await;
        for jump in self.jumps.iter().rev() {
            let _ = tokio::time::timeout(
                Duration::from_secs(2),
                jump.disconnect(Disconnect::ByApplication, "", "en"),
            )
            .await;
        }
    }
}

/// Probes `node` over SSH. The node's deadline (`probe.deadline`) bounds the exec; output that
/// arrived before it is kept. Connection, host key and authentication failures are
/// [`Unreachable`].
pub async fn run_ssh(
    node: &Endpoint,
    probe: &ProbeSettings,
    ssh: &SshSettings,
    keys: Arc<HostKeys>,
) -> Result<RawRun, Unreachable> {
    let start = Instant::now();
    let session = connect(node, ssh, keys).await;
    // The scan's concurrency hears how the connection went (probe::pace).
    super::pace::observe(match &session {
        Ok(_) => super::pace::Outcome::Handshake(start.elapsed()),
        Err(u) if matches!(u.code, Code::SshTimeout | Code::SshRefused) => {
            super::pace::Outcome::Refused
        }
        Err(_) => super::pace::Outcome::Other,
    });
    let session = session?;
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
