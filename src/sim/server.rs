//! The simulator's SSH server (russh): one listener per simulated node, each with its own host
//! key. It accepts one user key, answers gpufleet's probe from the node's recorded answer, and
//! runs nothing: every other request is refused.
//!
//! A probe request is either
//! - the exec command `sh -s` ([`crate::probe::COMMAND`]) whose stdin is the header
//!   `B='gpufleet-…' R='…' T=… D=… L=…` and then exactly the probe script
//!   ([`crate::probe::probe_stdin`]): gpufleet's own form; or
//! - the exec command `B='gpufleet-…' R='…' T=… D=… L=… sh -c '<the probe script>'`: the form
//!   for tools that cannot feed stdin to every node (pdsh, clush, Ansible's raw module), written
//!   by a shell as `sh -c "$(cat probe.sh)"` after the five assignments ([`probe_command`]);
//!   or, for tools that cap a command's length (bssh 2.2: 16 KiB, the probe is larger), the same
//!   with the script packed: `sh -c "$(echo <gzip, base64> | base64 -d | gzip -dc)"`
//!   ([`probe_command_packed`]), unpacked here in memory and compared with the probe: nothing
//!   runs for it either.
//!
//! The answer is the fixture's recorded output with the client's boundary `B` in place of the
//! recording's, then its exit status, EOF and close. The header's `R`, `T`, `D` and `L` are read
//! but not used: the recording was made with the fixture's own root and [`super::corpus`]'s
//! limits. The node lock's read-only marker command ([`node_side::read_lock_command`] for the
//! root `/`, what `gpufleet locks` sends) is answered `gpufleet-lock free`.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use russh::keys::PublicKey;
use russh::server::{
    self, Auth, ChannelOpenHandle, Msg, PublicKeyOffer, Session, VerifiedPublicKey,
};
use russh::{Channel, ChannelId, Pty};

use super::corpus::Answer;
use super::stream::{Cut, SimStream};
use crate::actions::node_side;

/// Exit status of every refused command, as a shell's "command not found".
pub const REFUSED_STATUS: u32 = 127;

/// Longest probe header accepted, in bytes (the boundary, root prefix and three numbers).
const MAX_HEADER: usize = 4096;

/// How a simulated node misbehaves (the fault shares of `gpufleet sim`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Answers as its fixture.
    None,
    /// Accepts the probe and never answers it.
    Hang,
    /// Accepts the probe, sends the first half of its answer, then closes the TCP connection
    /// without an SSH goodbye (no exit status, no channel close).
    Drop,
    /// Refuses the TCP connection: the port is bound but not listening, so the kernel answers
    /// a connection attempt with a reset (`Connection refused`). Never reaches this server.
    Refuse,
    /// Slow to accept: the kernel completes the TCP handshake, and the SSH server starts on
    /// each connection only [`Shared::accept_delay`] after it was accepted, one at a time (the
    /// connections behind it wait in a short listen queue, [`super::layout::SLOW_BACKLOG`];
    /// once it is full, further SYNs wait for the client's retransmission); then it answers as
    /// its fixture.
    SlowAccept,
}

impl Fault {
    /// The word used in the inventory's `sim` label and in messages.
    pub fn word(self) -> &'static str {
        match self {
            Fault::None => "",
            Fault::Hang => "hang",
            Fault::Drop => "drop",
            Fault::Refuse => "refuse",
            Fault::SlowAccept => "slow-accept",
        }
    }
}

/// One simulated node as the server sees it.
#[derive(Debug)]
pub struct SimNode {
    /// Inventory name (`gpu-r01-n01`).
    pub name: String,
    /// The round-trip latency of its connections (its rack's, [`super::Latency::of_node`]).
    pub rtt: super::Rtt,
    /// The recorded probe answer of its fixture.
    pub answer: Arc<Answer>,
    /// How it misbehaves.
    pub fault: Fault,
    /// Its simulated write side, when upgrades are allowed ([`super::upgrade`]).
    pub upgrade: Option<Arc<super::upgrade::Upgradable>>,
}

/// Counters of one simulator run, for the report at exit.
#[derive(Debug, Default)]
pub struct Stats {
    /// TCP connections accepted.
    pub connections: AtomicU64,
    /// Probes answered in full.
    pub probes: AtomicU64,
    /// Probes accepted and never answered (`hang` nodes).
    pub hung: AtomicU64,
    /// Probes cut halfway (`drop` nodes).
    pub dropped: AtomicU64,
    /// Commands refused (exit status 127).
    pub refused: AtomicU64,
    /// Other commands answered (the lock marker).
    pub other: AtomicU64,
}

/// What every node of one simulator shares.
#[derive(Debug)]
pub struct Shared {
    /// The only user key accepted (any user name).
    pub user_key: PublicKey,
    /// How long a `slow-accept` node waits before it takes a connection.
    pub accept_delay: Duration,
    /// Counters.
    pub stats: Stats,
}

/// The russh server of one node: makes one [`Conn`] per connection.
#[derive(Clone)]
pub struct NodeServer {
    pub node: Arc<SimNode>,
    pub shared: Arc<Shared>,
}

/// Serves one node on `listener` until the runtime stops: every accepted connection gets its
/// latency and, on a `drop` node, a [`Cut`]; a failed accept (out of file descriptors) is said
/// once and retried after 100 ms.
pub async fn serve_node(
    listener: tokio::net::TcpListener,
    config: Arc<server::Config>,
    node: NodeServer,
) {
    let mut said = false;
    let slow = node.node.fault == Fault::SlowAccept;
    loop {
        let sock = match listener.accept().await {
            // A rebooting node: the connection is closed at once.
            Ok(_) if node.node.upgrade.as_ref().is_some_and(|u| u.is_down()) => continue,
            Ok((sock, _)) => sock,
            Err(e) => {
                if !said {
                    eprintln!(
                        "gpufleet sim: {}: cannot accept a connection: {e} (retrying)",
                        node.node.name
                    );
                    said = true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // A slow node holds each connection before its SSH server sees it, and takes the next
        // only then: the ones behind it wait in the listen queue, and SYNs past it are dropped.
        if slow {
            tokio::time::sleep(node.shared.accept_delay).await;
        }
        let _ = sock.set_nodelay(true);
        let k = node
            .shared
            .stats
            .connections
            .fetch_add(1, Ordering::Relaxed);
        let cut = (node.node.fault == Fault::Drop || node.node.upgrade.is_some())
            .then(|| Arc::new(Cut::default()));
        if let (Some(u), Some(c)) = (&node.node.upgrade, &cut) {
            u.register(c);
        }
        let stream = SimStream::new(sock, node.node.rtt.draw(k), cut.clone());
        let handler = Conn {
            node: node.node.clone(),
            shared: node.shared.clone(),
            channels: HashMap::new(),
            cut,
        };
        let config = config.clone();
        tokio::spawn(async move {
            // A client that goes away is no error of the simulator's.
            if let Ok(session) = server::run_stream(config, stream, handler).await {
                let _ = session.await;
            }
        });
    }
}

/// Where one session channel is.
enum ChanState {
    /// Opened; no command yet.
    Open,
    /// `sh -s` was asked for: its stdin so far.
    Probe(Vec<u8>),
    /// Answered, refused or hung: nothing more to do.
    Done,
}

/// One client connection to one node.
pub struct Conn {
    node: Arc<SimNode>,
    shared: Arc<Shared>,
    channels: HashMap<ChannelId, ChanState>,
    cut: Option<Arc<Cut>>,
}

/// Why a probe's stdin is not gpufleet's probe, in words.
#[derive(Debug, PartialEq, Eq)]
pub struct NotProbe(pub String);

/// Checks that `stdin` is a probe header and the probe script, and returns the header's
/// boundary `B` (`gpufleet-` then 1 to 128 ASCII letters, digits, `-` or `_`).
///
/// Errors: no header line, a header that is not the five assignments `B R T D L` in that order
/// (shell-quoted as [`crate::probe::probe_stdin`] writes them), a boundary of another form, or
/// anything but the probe script after the header.
pub fn parse_probe(stdin: &[u8]) -> Result<String, NotProbe> {
    let Some(nl) = stdin.iter().position(|&b| b == b'\n') else {
        return Err(NotProbe("no header line on stdin".into()));
    };
    let header = std::str::from_utf8(&stdin[..nl])
        .map_err(|_| NotProbe("the header line is not UTF-8".into()))?;
    if stdin[nl + 1..] != *crate::probe::SCRIPT.as_bytes() {
        return Err(NotProbe(
            "what follows the header is not this gpufleet's probe script".into(),
        ));
    }
    let words = shlex::split(header)
        .ok_or_else(|| NotProbe("the header line is not shell words".into()))?;
    header_boundary(&words)
}

/// The exec command of the probe for tools that cannot feed stdin: the five header assignments,
/// then `sh -c` and the probe script as one shell-quoted word. A shell writes it as
/// `B='gpufleet-…' R='' T=10 D=60 L=200 sh -c "$(cat probe.sh)"` (the script then sees the five
/// as its environment; unlike [`crate::probe::COMMAND`] the boundary is in the node's
/// process list: for benchmarks and peers, not for gpufleet itself).
pub fn probe_command(boundary: &str, root: &str, settings: &crate::probe::ProbeSettings) -> String {
    let stdin = crate::probe::probe_stdin(boundary, root, settings);
    let text = String::from_utf8_lossy(&stdin);
    let (header, _) = text.split_once('\n').unwrap_or((&text, ""));
    format!(
        "{header} sh -c '{}'",
        crate::probe::SCRIPT.replace('\'', r"'\''")
    )
}

/// The words a packed script is wrapped in: `$(echo ` PACKED ` | base64 -d | gzip -dc)`.
const PACKED: (&str, &str) = ("$(echo ", " | base64 -d | gzip -dc)");

/// [`probe_command`] with the script packed, for tools that cap a command's length: the five
/// assignments, then `sh -c "$(echo <the script, gzip, base64> | base64 -d | gzip -dc)"` (12 KB
/// where the plain form is 25 KB). The node needs `base64` (coreutils) and `gzip`.
pub fn probe_command_packed(
    boundary: &str,
    root: &str,
    settings: &crate::probe::ProbeSettings,
) -> String {
    use std::io::Write as _;
    let stdin = crate::probe::probe_stdin(boundary, root, settings);
    let text = String::from_utf8_lossy(&stdin);
    let (header, _) = text.split_once('\n').unwrap_or((&text, ""));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    // Writing to a Vec cannot fail.
    let packed = gz
        .write_all(crate::probe::SCRIPT.as_bytes())
        .and_then(|()| gz.finish())
        .unwrap_or_default();
    let b64 = <base64ct::Base64 as base64ct::Encoding>::encode_string(&packed);
    format!("{header} sh -c \"{}{b64}{}\"", PACKED.0, PACKED.1)
}

/// The script a packed word holds (`$(echo <base64> | base64 -d | gzip -dc)`, as the shell
/// would produce it: its output with trailing newlines dropped), read in memory with a cap of
/// the probe's size; `None` for any other word.
fn unpacked(word: &str) -> Option<String> {
    use std::io::Read as _;
    let b64 = word.strip_prefix(PACKED.0)?.strip_suffix(PACKED.1)?;
    let gz = <base64ct::Base64 as base64ct::Encoding>::decode_vec(b64).ok()?;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .take(crate::probe::SCRIPT.len() as u64 + 1)
        .read_to_end(&mut out)
        .ok()?;
    if out.len() > crate::probe::SCRIPT.len() {
        return None;
    }
    let text = String::from_utf8(out).ok()?;
    Some(text.trim_end_matches('\n').to_string())
}

/// Checks that `command` is [`probe_command`]'s form (or [`probe_command_packed`]'s) and returns
/// its boundary.
///
/// Errors: as [`parse_probe`] for the assignments; anything but `sh -c <this gpufleet's probe
/// script>` (or that script packed) after them.
pub fn parse_probe_command(command: &[u8]) -> Result<String, NotProbe> {
    let text =
        std::str::from_utf8(command).map_err(|_| NotProbe("the command is not UTF-8".into()))?;
    let words =
        shlex::split(text).ok_or_else(|| NotProbe("the command is not shell words".into()))?;
    if words.len() != 8 || words[5] != "sh" || words[6] != "-c" {
        return Err(NotProbe(
            "the command is not B=… R=… T=… D=… L=… sh -c <probe script>".into(),
        ));
    }
    // `"$(cat probe.sh)"` drops the script's trailing newlines: the same script.
    let script = crate::probe::SCRIPT;
    let plain = |w: &str| w == script || w == script.trim_end_matches('\n');
    if !plain(&words[7]) && !unpacked(&words[7]).is_some_and(|w| plain(&w)) {
        return Err(NotProbe(
            "the script after sh -c is not this gpufleet's probe script".into(),
        ));
    }
    header_boundary(&words[..5])
}

/// The boundary of the five header words `B R T D L` (in that order; `T D L` whole numbers).
fn header_boundary(words: &[String]) -> Result<String, NotProbe> {
    let keys: Vec<&str> = words
        .iter()
        .map(|w| w.split_once('=').map_or("", |(k, _)| k))
        .collect();
    if keys != ["B", "R", "T", "D", "L"] {
        return Err(NotProbe(format!(
            "the header is not B=… R=… T=… D=… L=… (got {} words)",
            words.len()
        )));
    }
    let value = |w: &str| w.split_once('=').map_or("", |(_, v)| v).to_string();
    for (key, word) in keys.iter().zip(words).skip(2) {
        if value(word).parse::<u64>().is_err() {
            return Err(NotProbe(format!("{key} is not a whole number")));
        }
    }
    let boundary = value(&words[0]);
    let tail = boundary.strip_prefix("gpufleet-").unwrap_or("");
    let ok = !tail.is_empty()
        && tail.len() <= 128
        && tail
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !ok {
        return Err(NotProbe(
            "the boundary B is not gpufleet-<letters, digits>".into(),
        ));
    }
    Ok(boundary)
}

/// A command line as shown in a message: at most 200 characters, control characters escaped.
fn shown(command: &[u8]) -> String {
    let text = String::from_utf8_lossy(command);
    let mut out: String = text
        .chars()
        .take(200)
        .flat_map(char::escape_debug)
        .collect();
    if text.chars().count() > 200 {
        out.push('…');
    }
    out
}

impl Conn {
    /// Refuses the request on `channel`: `why` on stderr, exit status 127, EOF, close.
    fn refuse(
        &mut self,
        channel: ChannelId,
        why: &str,
        session: &mut Session,
    ) -> Result<(), russh::Error> {
        self.channels.insert(channel, ChanState::Done);
        self.shared.stats.refused.fetch_add(1, Ordering::Relaxed);
        eprintln!("gpufleet sim: {}: refused: {why}", self.node.name);
        let msg = format!(
            "gpufleet sim: {}: {why}. This simulated node runs nothing: it answers gpufleet's \
             probe (`sh -s` with the probe on stdin, or `B=… R=… T=… D=… L=… sh -c <probe>`) and \
             the node lock's marker, and refuses every other command.\n",
            self.node.name
        );
        session.extended_data(channel, 1, msg.into_bytes())?;
        session.exit_status_request(channel, REFUSED_STATUS)?;
        session.eof(channel)?;
        session.close(channel)
    }

    /// Looks at the probe stdin of `channel` so far; answers once it is complete (at `eof`, or
    /// as soon as the header and a whole script have arrived), refuses when it cannot be the
    /// probe.
    fn advance(
        &mut self,
        channel: ChannelId,
        eof: bool,
        session: &mut Session,
    ) -> Result<(), russh::Error> {
        let Some(ChanState::Probe(buf)) = self.channels.get(&channel) else {
            return Ok(());
        };
        let script = crate::probe::SCRIPT.len();
        let nl = buf.iter().position(|&b| b == b'\n');
        let whole = nl.is_some_and(|nl| buf.len() >= nl + 1 + script);
        if !eof && !whole {
            if buf.len() > MAX_HEADER + script || (nl.is_none() && buf.len() > MAX_HEADER) {
                return self.refuse(channel, "stdin is not gpufleet's probe (too long)", session);
            }
            return Ok(());
        }
        match parse_probe(buf) {
            Err(NotProbe(why)) => self.refuse(channel, &format!("sh -s: {why}"), session),
            Ok(boundary) => self.answer(channel, &boundary, session),
        }
    }

    /// Answers the probe on `channel` with `boundary`, as the node's fault says.
    fn answer(
        &mut self,
        channel: ChannelId,
        boundary: &str,
        session: &mut Session,
    ) -> Result<(), russh::Error> {
        self.channels.insert(channel, ChanState::Done);
        let stats = &self.shared.stats;
        match self.node.fault {
            Fault::Hang => {
                // Accepted and never answered: the client's deadline ends it.
                stats.hung.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Fault::Drop => {
                stats.dropped.fetch_add(1, Ordering::Relaxed);
                let mut out = self.node.answer.render(boundary);
                out.truncate(out.len() / 2);
                session.data(channel, out)?;
                if let Some(cut) = self.cut.clone() {
                    // After the half has gone out: the session loop writes it once this
                    // handler returns.
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        cut.cut();
                    });
                }
                Ok(())
            }
            Fault::None | Fault::Refuse | Fault::SlowAccept => {
                stats.probes.fetch_add(1, Ordering::Relaxed);
                let current = self.node.upgrade.as_ref().map(|u| u.answer());
                let answer = current.as_ref().unwrap_or(&self.node.answer);
                session.data(channel, answer.render(boundary))?;
                session.exit_status_request(channel, answer.exit_status)?;
                session.eof(channel)?;
                session.close(channel)
            }
        }
    }

    /// Answers a read-only command with `output` and exit status 0.
    fn reply(
        &mut self,
        channel: ChannelId,
        output: &str,
        session: &mut Session,
    ) -> Result<(), russh::Error> {
        self.channels.insert(channel, ChanState::Done);
        self.shared.stats.other.fetch_add(1, Ordering::Relaxed);
        session.data(channel, output.as_bytes().to_vec())?;
        session.exit_status_request(channel, 0)?;
        session.eof(channel)?;
        session.close(channel)
    }

    fn accepts(&self, key: &PublicKey) -> Auth {
        if key.key_data() == self.shared.user_key.key_data() {
            Auth::Accept
        } else {
            Auth::reject()
        }
    }
}

impl server::Handler for Conn {
    type Error = russh::Error;

    async fn auth_publickey_offered(
        &mut self,
        _user: &str,
        offer: PublicKeyOffer<'_>,
    ) -> Result<Auth, Self::Error> {
        Ok(self.accepts(offer.public_key))
    }

    async fn auth_publickey(
        &mut self,
        _user: &str,
        key: VerifiedPublicKey<'_>,
    ) -> Result<Auth, Self::Error> {
        Ok(self.accepts(key.public_key))
    }

    async fn channel_open_session(
        &mut self,
        channel: Channel<Msg>,
        reply: ChannelOpenHandle,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        self.channels.insert(channel.id(), ChanState::Open);
        reply.accept().await;
        Ok(())
    }

    async fn exec_request(
        &mut self,
        channel: ChannelId,
        data: &[u8],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)?;
        if !matches!(self.channels.get(&channel), Some(ChanState::Open)) {
            return self.refuse(channel, "a second command on one channel", session);
        }
        if data == crate::probe::COMMAND.as_bytes() {
            self.channels.insert(channel, ChanState::Probe(Vec::new()));
            return Ok(());
        }
        if data.starts_with(b"B=") {
            return match parse_probe_command(data) {
                Ok(boundary) => self.answer(channel, &boundary, session),
                Err(NotProbe(why)) => self.refuse(channel, &why, session),
            };
        }
        if let Some(up) = self.node.upgrade.clone()
            && let Some(cmd) = std::str::from_utf8(data)
                .ok()
                .and_then(super::upgrade::recognise)
        {
            let (rc, out, err) = up.handle(cmd).await;
            self.channels.insert(channel, ChanState::Done);
            self.shared.stats.other.fetch_add(1, Ordering::Relaxed);
            if !out.is_empty() {
                session.data(channel, out.into_bytes())?;
            }
            if !err.is_empty() {
                session.extended_data(channel, 1, err.into_bytes())?;
            }
            session.exit_status_request(channel, rc)?;
            session.eof(channel)?;
            return session.close(channel);
        }
        if data == node_side::read_lock_command("/").as_bytes() {
            return self.reply(channel, "gpufleet-lock free\n", session);
        }
        self.refuse(channel, &format!("command `{}`", shown(data)), session)
    }

    async fn shell_request(
        &mut self,
        channel: ChannelId,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)?;
        self.refuse(channel, "an interactive shell", session)
    }

    async fn subsystem_request(
        &mut self,
        channel: ChannelId,
        _name: &str,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_failure(channel)
    }

    /// A terminal is granted, as a flag only: Ansible's `raw` module (`ssh -tt`) and bssh ask
    /// for one before their command, and fail on a refusal. Nothing runs either way; the probe
    /// is answered with the same bytes as without a terminal (a real sshd would turn its `\n`
    /// into `\r\n`, which the peers' benchmarks do not depend on).
    async fn pty_request(
        &mut self,
        channel: ChannelId,
        _term: &str,
        _col_width: u32,
        _row_height: u32,
        _pix_width: u32,
        _pix_height: u32,
        _modes: &[(Pty, u32)],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)
    }

    async fn data(
        &mut self,
        channel: ChannelId,
        data: &[u8],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        if let Some(ChanState::Probe(buf)) = self.channels.get_mut(&channel) {
            buf.extend_from_slice(data);
            return self.advance(channel, false, session);
        }
        Ok(())
    }

    async fn channel_eof(
        &mut self,
        channel: ChannelId,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        self.advance(channel, true, session)
    }

    async fn channel_close(
        &mut self,
        channel: ChannelId,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        self.channels.remove(&channel);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::{ProbeSettings, probe_stdin};

    #[test]
    fn the_probe_is_recognised_and_its_boundary_read() {
        let b = "gpufleet-0123456789abcdef0123456789abcdef";
        let stdin = probe_stdin(b, "/", &ProbeSettings::default());
        assert_eq!(parse_probe(&stdin), Ok(b.to_string()));
        // A root prefix with a quote in it is still one word.
        let stdin = probe_stdin(b, "/ho'st", &ProbeSettings::default());
        assert_eq!(parse_probe(&stdin), Ok(b.to_string()));
    }

    #[test]
    fn anything_else_is_not_the_probe() {
        let ok = probe_stdin("gpufleet-ab", "/", &ProbeSettings::default());
        let mut extra = ok.clone();
        extra.extend_from_slice(b"rm -rf /\n");
        assert!(parse_probe(&extra).is_err(), "a command after the script");
        let mut cut = ok.clone();
        cut.truncate(ok.len() - 1);
        assert!(parse_probe(&cut).is_err(), "a cut script");
        assert!(parse_probe(b"rm -rf /\n").is_err());
        assert!(parse_probe(b"").is_err());
        let script = crate::probe::SCRIPT;
        for header in [
            "B='other-ab' R='' T=1 D=2 L=3",
            "B='gpufleet-a;b' R='' T=1 D=2 L=3",
            "B='gpufleet-' R='' T=1 D=2 L=3",
            "B='gpufleet-ab' R='' T=x D=2 L=3",
            "B='gpufleet-ab' R='' T=1 D=2",
            "R='' B='gpufleet-ab' T=1 D=2 L=3",
            "B='gpufleet-ab' R='' T=1 D=2 L=3; rm -rf /",
            "B='gpufleet-ab R=",
        ] {
            let stdin = format!("{header}\n{script}");
            assert!(parse_probe(stdin.as_bytes()).is_err(), "{header}");
        }
    }

    #[test]
    fn the_command_form_is_recognised_and_nothing_else() {
        let b = "gpufleet-0123456789abcdef";
        let cmd = probe_command(b, "/ho'st", &ProbeSettings::default());
        assert!(
            cmd.starts_with("B='gpufleet-0123456789abcdef' R='/ho'\\''st' T="),
            "{cmd}"
        );
        assert_eq!(parse_probe_command(cmd.as_bytes()), Ok(b.to_string()));
        // What a shell runs is the script with the five as its environment: the same words.
        let words = shlex::split(&cmd).unwrap();
        assert_eq!(words[7], crate::probe::SCRIPT);
        // As a shell's "$(cat probe.sh)" writes it: without the trailing newline.
        let cut = format!("{}'", cmd.strip_suffix("\n'").unwrap());
        assert_eq!(parse_probe_command(cut.as_bytes()), Ok(b.to_string()));
        for bad in [
            format!("{cmd}; rm -rf /"),
            cmd.replace("sh -c", "bash -c"),
            cmd.replacen("B='gpufleet-", "B='other-", 1),
            format!("{} sh -c 'rm -rf /'", cmd.split(" sh -c ").next().unwrap()),
            format!("{cmd} extra"),
        ] {
            assert!(
                parse_probe_command(bad.as_bytes()).is_err(),
                "{}",
                &bad[..80.min(bad.len())]
            );
        }
    }

    /// The packed form fits bssh 2.2's 16 KiB, a real shell unpacks it into the probe script,
    /// and only this probe's script is taken: another one packed, or one padded past the
    /// probe's size, is refused.
    #[test]
    fn the_packed_command_form_is_the_probe_and_fits_in_16_kib() {
        use std::io::Write as _;
        let b = "gpufleet-0123456789abcdef";
        let cmd = probe_command_packed(b, "", &ProbeSettings::default());
        assert!(cmd.len() < 16 * 1024, "{} bytes", cmd.len());
        assert_eq!(parse_probe_command(cmd.as_bytes()), Ok(b.to_string()));
        let words = shlex::split(&cmd).unwrap();
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf %s \"{}\"", words[7]))
            .output()
            .unwrap();
        assert!(out.status.success());
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            crate::probe::SCRIPT.trim_end_matches('\n')
        );
        let pack = |text: &[u8]| {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(text).unwrap();
            let b64 =
                <base64ct::Base64 as base64ct::Encoding>::encode_string(&gz.finish().unwrap());
            cmd.replace(&words[7], &format!("{}{b64}{}", PACKED.0, PACKED.1))
        };
        let longer = format!("{}\n{}", crate::probe::SCRIPT, " ".repeat(1 << 20));
        for bad in [pack(b"rm -rf /"), pack(longer.as_bytes())] {
            assert!(parse_probe_command(bad.as_bytes()).is_err());
        }
        assert_eq!(
            parse_probe_command(pack(crate::probe::SCRIPT.as_bytes()).as_bytes()),
            Ok(b.to_string())
        );
    }

    #[test]
    fn commands_are_shown_escaped_and_short() {
        assert_eq!(shown(b"rm -rf /tmp/x"), "rm -rf /tmp/x");
        assert_eq!(shown(b"a\x1b[2Jb\n"), "a\\u{1b}[2Jb\\n");
        assert_eq!(shown(&[b'x'; 300]).chars().count(), 201);
    }
}
