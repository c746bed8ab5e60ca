//! What a peer sent before the SSH handshake failed: a stream that records the first bytes, and
//! the classification that tells a non-SSH peer from a failed handshake (russh reports both as
//! `Disconnected`).

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::Unreachable;
use crate::model::Code;

/// How many of the peer's first bytes [`Recording`] keeps: room for the identification line
/// and the 20 lines of at most 255 bytes that russh lets come before it (RFC 4253 §4.2).
const PEER_BYTES_KEPT: usize = 8192;

/// How many characters of the peer's first bytes a message shows.
const PEER_BYTES_SHOWN: usize = 80;

/// A stream that keeps a copy of the first bytes read from it (up to [`PEER_BYTES_KEPT`], and
/// only until an SSH identification line has arrived), so that a handshake that fails before
/// the key exchange can say what the peer sent. Writes pass through untouched.
pub(super) struct Recording<S> {
    pub(super) inner: S,
    pub(super) seen: Arc<Mutex<Vec<u8>>>,
    /// Set once nothing more needs keeping; reads then cost nothing extra.
    pub(super) done: bool,
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
pub(super) enum PeerStart {
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
pub(super) fn peer_start(seen: &[u8]) -> PeerStart {
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

/// The first `max` characters of `bytes` (decoded lossily: a byte that is not UTF-8 is U+FFFD),
/// quoted, `…` after the closing quote when cut. Not escaped here: the message holds what the
/// peer sent, and every output escapes it once where it reaches a person (docs/domain.md, trust
/// model; JSON keeps the exact characters, `\u001b`). Escaping here too doubled every escape
/// on screen: an ESC showed as `\\x1b`, what the four characters `\x1b` look like.
fn quoted_start(bytes: &[u8], max: usize) -> String {
    // A character is at most 4 bytes: more than `max` characters are never needed.
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(max.saturating_mul(4) + 4)]);
    let mut out = String::from("\"");
    out.extend(text.chars().take(max));
    out.push('"');
    if text.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}

/// Why a handshake that failed with `e` failed, given `seen`, the first bytes the peer sent:
/// `ssh-protocol-error` when the peer sent something that is no SSH-2 identification, or closed
/// the connection without sending anything; otherwise `ssh-refused` with russh's error.
pub(super) fn handshake_failure(target: &str, e: &russh::Error, seen: &[u8]) -> Unreachable {
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
        // An identification line russh refuses (over 255 bytes, malformed: RFC 4253 4.2), or
        // one followed by bytes that are no SSH packet: the peer's protocol, not a refusal.
        PeerStart::Ssh if matches!(e, russh::Error::Version) => Unreachable::new(
            Code::SshProtocolError,
            format!(
                "{target} sent an SSH identification line that is not valid (over 255 bytes, or malformed: RFC 4253 4.2): it sent {}",
                quoted_start(seen, PEER_BYTES_SHOWN)
            ),
        ),
        PeerStart::Ssh
            if matches!(
                e,
                russh::Error::IndexOutOfBounds
                    | russh::Error::PacketSize(_)
                    | russh::Error::Inconsistent
                    | russh::Error::KexInit
            ) =>
        {
            Unreachable::new(
                Code::SshProtocolError,
                format!(
                    "{target} sent an SSH identification line, then bytes that are no SSH key exchange ({e}): it sent {}",
                    quoted_start(seen, PEER_BYTES_SHOWN)
                ),
            )
        }
        PeerStart::Ssh | PeerStart::Nothing => Unreachable::new(
            Code::SshRefused,
            format!("SSH handshake with {target}: {e}"),
        ),
        PeerStart::Ssh1 => Unreachable::new(
            Code::SshProtocolError,
            format!(
                "{target} is not an SSH-2 server (SSH protocol 1 only): it sent {}",
                quoted_start(seen, PEER_BYTES_SHOWN)
            ),
        ),
        PeerStart::Other => not_ssh(target, seen),
    }
}

pub(super) fn not_ssh(target: &str, seen: &[u8]) -> Unreachable {
    Unreachable::new(
        Code::SshProtocolError,
        format!(
            "{target} is not an SSH server: it sent {}",
            quoted_start(seen, PEER_BYTES_SHOWN)
        ),
    )
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

    /// The peer's bytes are kept as characters (escaped once, by the output): the table shows
    /// an ESC as `\x1b` and a backslash the peer sent as `\\` (before: escaped here and again
    /// by the table, `\\x1b` and `\\\\`).
    #[test]
    fn peer_bytes_are_quoted_capped_and_escaped_once_by_the_output() {
        let got = quoted_start(b"\x1b]0;x\x07 \"q\" \\ \xff\r\n\t", 80);
        assert_eq!(got, "\"\x1b]0;x\x07 \"q\" \\ \u{fffd}\r\n\t\"");
        assert_eq!(
            crate::model::text::terminal_safe(&got),
            r#""\x1b]0;x\x07 "q" \\ �\r\n\t""#
        );
        assert_eq!(quoted_start(b"abcdef", 4), "\"abcd\"…");
        assert_eq!(quoted_start(b"abcd", 4), "\"abcd\"");
        // A character is never cut in half.
        assert_eq!(quoted_start("abcé".as_bytes(), 4), "\"abcé\"");
        assert_eq!(
            quoted_start("é".repeat(100).as_bytes(), 80).chars().count(),
            83
        );
        let got = handshake_failure("h:22", &russh::Error::Disconnect, b"HTTP/1.1 400\r\n");
        assert_eq!(got.code, Code::SshProtocolError);
        assert_eq!(
            got.message,
            "h:22 is not an SSH server: it sent \"HTTP/1.1 400\r\n\""
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

    #[test]
    fn garbage_after_the_banner_and_an_overlong_version_line_are_protocol_errors() {
        let seen = b"SSH-2.0-x\r\n\x00\x00\x00\x05garbage";
        for e in [
            russh::Error::IndexOutOfBounds,
            russh::Error::PacketSize(1 << 30),
            russh::Error::Inconsistent,
        ] {
            let got = handshake_failure("h:22", &e, seen);
            assert_eq!(got.code, Code::SshProtocolError, "{e}");
            assert!(
                got.message.starts_with(
                    "h:22 sent an SSH identification line, then bytes that are no SSH key exchange"
                ),
                "{}",
                got.message
            );
        }
        let long = [b"SSH-2.0-".as_slice(), &[b'a'; 1 << 20]].concat();
        let got = handshake_failure("h:22", &russh::Error::Version, &long);
        assert_eq!(got.code, Code::SshProtocolError);
        assert!(got.message.contains("over 255 bytes"), "{}", got.message);
        assert!(got.message.len() < 400, "{}", got.message.len());
    }
}
