//! The simulator's SSH server (russh): one listener per simulated node, each with its own host
//! key. It accepts one user key, answers gpufleet's probe from the node's recorded answer, and
//! runs nothing: every other request is refused.
//!
//! A probe request is the exec command `sh -s` ([`crate::probe::COMMAND`]) whose stdin is the
//! header `B='gpufleet-…' R='…' T=… D=… L=…` and then exactly the probe script
//! ([`crate::probe::probe_stdin`]). The answer is the fixture's recorded output with the
//! client's boundary `B` in place of the recording's, then its exit status, EOF and close. The
//! header's `R`, `T`, `D` and `L` are read but not used: the recording was made with the
//! fixture's own root and [`super::corpus`]'s limits.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use russh::keys::PublicKey;
use russh::server::{
    self, Auth, ChannelOpenHandle, Msg, PublicKeyOffer, Session, VerifiedPublicKey,
};
use russh::{Channel, ChannelId, Pty};

use super::corpus::Answer;

/// Exit status of every refused command, as a shell's "command not found".
pub const REFUSED_STATUS: u32 = 127;

/// Longest probe header accepted, in bytes (the boundary, root prefix and three numbers).
const MAX_HEADER: usize = 4096;

/// One simulated node as the server sees it.
#[derive(Debug)]
pub struct SimNode {
    /// Inventory name (`sim-000-h200-open-580-k6.18-real`).
    pub name: String,
    /// The recorded probe answer of its fixture.
    pub answer: Arc<Answer>,
    /// Never answers the probe (the exec is accepted, then nothing comes).
    pub hang: bool,
}

/// What every node of one simulator shares.
#[derive(Debug)]
pub struct Shared {
    /// The only user key accepted (any user name).
    pub user_key: PublicKey,
    /// Sleep before each probe answer.
    pub latency: Duration,
}

/// The russh server of one node: makes one [`Conn`] per connection.
#[derive(Clone)]
pub struct NodeServer {
    pub node: Arc<SimNode>,
    pub shared: Arc<Shared>,
}

impl server::Server for NodeServer {
    type Handler = Conn;

    fn new_client(&mut self, _peer: Option<std::net::SocketAddr>) -> Conn {
        Conn {
            node: self.node.clone(),
            shared: self.shared.clone(),
            channels: HashMap::new(),
        }
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
    for (key, word) in keys.iter().zip(&words).skip(2) {
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
        eprintln!("gpufleet sim: {}: refused: {why}", self.node.name);
        let msg = format!(
            "gpufleet sim: {}: {why}. This simulated node runs nothing: it answers gpufleet's \
             probe (`sh -s` with the probe on stdin) and refuses every other command \
             (simulated upgrade steps are not there yet).\n",
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
            Ok(boundary) => {
                self.channels.insert(channel, ChanState::Done);
                if self.node.hang {
                    // Accepted and never answered: the client's deadline ends it.
                    return Ok(());
                }
                let answer = self.node.answer.clone();
                let latency = self.shared.latency;
                if latency.is_zero() {
                    session.data(channel, answer.render(&boundary))?;
                    session.exit_status_request(channel, answer.exit_status)?;
                    session.eof(channel)?;
                    return session.close(channel);
                }
                let handle = session.handle();
                tokio::spawn(async move {
                    tokio::time::sleep(latency).await;
                    // A client gone meanwhile is no error of the simulator's.
                    let _ = handle.data(channel, answer.render(&boundary)).await;
                    let _ = handle
                        .exit_status_request(channel, answer.exit_status)
                        .await;
                    let _ = handle.eof(channel).await;
                    let _ = handle.close(channel).await;
                });
                Ok(())
            }
        }
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
        session.channel_failure(channel)
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
    fn commands_are_shown_escaped_and_short() {
        assert_eq!(shown(b"rm -rf /tmp/x"), "rm -rf /tmp/x");
        assert_eq!(shown(b"a\x1b[2Jb\n"), "a\\u{1b}[2Jb\\n");
        assert_eq!(shown(&[b'x'; 300]).chars().count(), 201);
    }
}
