//! Public-key authentication for one SSH server (a node or a jump host): ssh-agent keys and
//! certificates, then key files, with OpenSSH user certificates.

use std::time::Duration;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use russh::client;
use russh::keys::{
    Certificate, PrivateKey, PrivateKeyWithHashAlg, load_openssh_certificate, load_secret_key,
};

use super::{Handler, Unreachable};
use crate::model::Code;
use crate::probe::endpoint::Login;

/// The identity files (and their certificates) of one scan, each read and parsed once, not once
/// per node: a 10,000-node scan with one key reads it once. Keyed by the key file's path and
/// the login's `CertificateFile`; a file that failed to load fails the same way for every node
/// of the scan (its message kept). The TUI's rescans share their session's [`super::HostKeys`],
/// so a key file changed during a TUI session is read at the next `gpufleet tui`; keys added
/// to ssh-agent are asked for at every connection.
#[derive(Default)]
pub struct Identities {
    loaded: Mutex<HashMap<(PathBuf, Option<PathBuf>), Loaded>>,
    /// `~/.ssh/id_ed25519`, `id_ecdsa`, `id_rsa` that exist, looked for once.
    defaults: std::sync::OnceLock<Vec<PathBuf>>,
}

/// One identity file as loaded.
#[derive(Clone)]
enum Loaded {
    Key {
        key: Arc<PrivateKey>,
        /// The certificate beside it (`KEY-cert.pub`) or named by `CertificateFile`: its
        /// path and what loading it gave.
        cert: Option<(PathBuf, Result<Arc<Certificate>, String>)>,
    },
    /// Passphrase-protected (only an ssh-agent can use it).
    Encrypted,
    Failed(String),
    /// EMFILE/ENFILE while reading it (not kept: read again).
    OutOfFiles(String),
}

impl Identities {
    /// The key at `path` with its certificate (`explicit`, else `path` + `-cert.pub` when it
    /// exists), from the cache or read now.
    fn load(&self, path: &Path, explicit: Option<&Path>) -> Loaded {
        let id = (path.to_path_buf(), explicit.map(Path::to_path_buf));
        let mut cache = self
            .loaded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(l) = cache.get(&id) {
            return l.clone();
        }
        let key = load_secret_key(path, None);
        // Out of file descriptors is this process's state of the moment (a scan under
        // pressure, probe::pace): not kept, so the next node reads the file again.
        if let Err(russh::keys::Error::IO(e)) = &key
            && crate::probe::pace::is_out_of_files(e)
        {
            return Loaded::OutOfFiles(e.to_string());
        }
        let loaded = match key {
            Ok(k) => Loaded::Key {
                key: Arc::new(k),
                cert: cert_for(path, explicit).map(|c| {
                    let got = load_openssh_certificate(&c)
                        .map(Arc::new)
                        .map_err(|e| e.to_string());
                    (c, got)
                }),
            },
            Err(russh::keys::Error::KeyIsEncrypted) => Loaded::Encrypted,
            Err(e) => Loaded::Failed(e.to_string()),
        };
        cache.insert(id, loaded.clone());
        loaded
    }
}

impl Identities {
    /// [`Identities::load`]; out of file descriptors under a scan, it narrows and the file is
    /// read again (up to 60 s in all).
    async fn load_waiting(&self, path: &Path, explicit: Option<&Path>) -> Loaded {
        let mut loaded = self.load(path, explicit);
        let (mut backoff, mut waited) = (Duration::from_millis(10), Duration::ZERO);
        while matches!(loaded, Loaded::OutOfFiles(_))
            && waited < Duration::from_secs(60)
            && crate::probe::pace::wait_for_files(backoff).await
        {
            waited += backoff;
            backoff = (backoff * 2).min(Duration::from_millis(50));
            loaded = self.load(path, explicit);
        }
        loaded
    }

    /// Reads `login`'s key files now (kept: [`authenticate`] finds them read), before a
    /// connection holds a descriptor: a scan out of file descriptors would otherwise hold every
    /// socket waiting on a key file it cannot open.
    pub(super) async fn preload(&self, login: &Login) {
        let files = if login.identity_files.is_empty() {
            self.defaults.get_or_init(default_identities).clone()
        } else {
            login.identity_files.clone()
        };
        for path in files {
            self.load_waiting(&path, login.certificate_file.as_deref())
                .await;
        }
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

/// Public-key authentication as `login.user` on `host` (named in messages): ssh-agent
/// identities (keys and certificates) first, then the key files (`login.identity_files`, else
/// ~/.ssh/id_ed25519, id_ecdsa, id_rsa), with an OpenSSH certificate when one is configured or
/// lies beside the key as `<key>-cert.pub`.
pub(super) async fn authenticate(
    h: &mut client::Handle<Handler>,
    host: &str,
    login: &Login,
    ids: &Identities,
) -> Result<(), Unreachable> {
    let user = login.user.clone();
    let mut tried: Vec<String> = Vec::new();
    let mut problems: Vec<String> = Vec::new();
    let hash = h.best_supported_rsa_hash().await.ok().flatten().flatten();
    let fail = |e: russh::Error| {
        Unreachable::new(Code::SshAuthFailed, format!("authentication failed: {e}"))
    };

    // With identity files, offer only the agent keys that match them (like IdentitiesOnly),
    // so a full agent does not use up the server's MaxAuthTries; with `IdentitiesOnly` and no
    // identity file, no agent key. Read only when there is an agent: a file read and a key
    // parse per node otherwise wasted.
    let agent = std::env::var_os("SSH_AUTH_SOCK").is_some();
    let wanted: Vec<russh::keys::PublicKey> = login
        .identity_files
        .iter()
        .filter(|_| agent)
        .filter_map(|f| {
            let mut pubf = f.as_os_str().to_owned();
            pubf.push(".pub");
            russh::keys::load_public_key(PathBuf::from(pubf))
                .ok()
                .or_else(|| {
                    load_secret_key(f, None)
                        .ok()
                        .map(|k| k.public_key().clone())
                })
        })
        .collect();
    let restrict = login.identities_only || !login.identity_files.is_empty();
    if agent {
        match russh::keys::agent::client::AgentClient::connect_env().await {
            Ok(mut agent) => {
                let ids = agent.request_identities().await.unwrap_or_default();
                let ids = ids.into_iter().filter(|id| {
                    !restrict
                        || wanted.iter().any(|w| match id {
                            russh::keys::agent::AgentIdentity::PublicKey { key, .. } => {
                                key.key_data() == w.key_data()
                            }
                            russh::keys::agent::AgentIdentity::Certificate {
                                certificate, ..
                            } => certificate.public_key() == w.key_data(),
                        })
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
                                    "{user}@{host}: the server closed the connection during authentication after {} key(s) ({e}); OpenSSH stops after MaxAuthTries (6) keys: set identity_file for this node",
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

    let files = if login.identity_files.is_empty() {
        ids.defaults.get_or_init(default_identities).clone()
    } else {
        login.identity_files.clone()
    };
    for path in files {
        let res = match ids
            .load_waiting(&path, login.certificate_file.as_deref())
            .await
        {
            Loaded::Encrypted => {
                problems.push(format!(
                    "{} is passphrase-protected and no ssh-agent offered it: run `ssh-add {}`",
                    path.display(),
                    path.display()
                ));
                continue;
            }
            Loaded::Failed(e) | Loaded::OutOfFiles(e) => {
                problems.push(format!("{}: {e}", path.display()));
                continue;
            }
            Loaded::Key {
                cert: Some((cert_path, Err(e))),
                ..
            } => {
                problems.push(format!("{}: {e}", cert_path.display()));
                continue;
            }
            Loaded::Key {
                key,
                cert: Some((_, Ok(cert))),
            } => {
                h.authenticate_openssh_cert(&user, key, (*cert).clone())
                    .await
            }
            Loaded::Key { key, cert: None } => {
                h.authenticate_publickey(&user, PrivateKeyWithHashAlg::new(key, hash))
                    .await
            }
        };
        match res.map_err(fail)? {
            r if r.success() => return Ok(()),
            _ => tried.push(path.display().to_string()),
        }
    }
    let mut msg = format!("{user}@{host}: the server accepted none of");
    if tried.is_empty() {
        msg = format!("{user}@{host}: no usable key (no ssh-agent key, no identity file)");
    } else {
        msg.push_str(&format!(" {}", tried.join(", ")));
    }
    if !problems.is_empty() {
        msg.push_str(&format!("; {}", problems.join("; ")));
    }
    Err(Unreachable::new(Code::SshAuthFailed, msg))
}
