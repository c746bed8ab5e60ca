//! OpenSSH `ProxyCommand`: a local command whose stdin and stdout carry the SSH connection
//! (`ssh -W %h:%p bastion`, `nc -X connect -x proxy:3128 %h %p`, a cloud CLI's tunnel).
//!
//! Run as OpenSSH runs it (`sh -c "exec …"` with the command line, tokens already expanded; see
//! docs/ssh.md), with its stderr kept (the first 4 KiB, shown, escaped, when the connection
//! fails), and killed when the connection ends: it runs in a process group of its own, and the
//! stream kills the whole group when dropped (a wrapper script's children too).

use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::ssh::Unreachable;
use crate::model::Code;

/// How much of the command's stderr is kept for messages.
const STDERR_KEPT: usize = 4096;

/// The running command: writes go to its stdin, reads come from its stdout.
pub struct ProxyStream {
    command: String,
    /// The process group the command leads (its pid), kept: `child.id()` is gone once reaped.
    group: Option<i32>,
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    stderr: Arc<Mutex<Vec<u8>>>,
}

/// Starts `command` (a shell command line) as OpenSSH does: `sh -c "exec COMMAND"`, so that
/// the process killed with the connection is the command itself, not a shell above it.
///
/// Errors: `ssh-refused` when it cannot be started (no `sh`, no pipes).
pub fn spawn(command: &str) -> Result<ProxyStream, Unreachable> {
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("exec {command}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            Unreachable::new(
                Code::SshRefused,
                format!("ProxyCommand `{command}` could not start: {e}"),
            )
        })?;
    let pipes = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let (Some(stdin), Some(stdout), Some(mut err)) = pipes else {
        return Err(Unreachable::new(
            Code::SshRefused,
            format!("ProxyCommand `{command}`: no pipes to it"),
        ));
    };
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let kept = stderr.clone();
    tokio::spawn(async move {
        let mut buf = [0u8; 1024];
        while let Ok(n) = err.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let mut k = kept
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let room = STDERR_KEPT.saturating_sub(k.len());
            k.extend_from_slice(&buf[..n.min(room)]);
        }
    });
    Ok(ProxyStream {
        command: command.to_string(),
        group: child.id().and_then(|p| i32::try_from(p).ok()),
        child,
        stdin,
        stdout,
        stderr,
    })
}

impl Drop for ProxyStream {
    /// Kills the command's whole process group (its own, made at spawn), not only the command:
    /// what a wrapper script started in the background goes with it.
    fn drop(&mut self) {
        if let Some(pid) = self.group {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

impl ProxyStream {
    /// Why the command's stdout ended: its exit and its stderr (raw: the report's outputs escape
    /// it, JSON keeps it exact).
    fn ended(&mut self) -> std::io::Error {
        let status = match self.child.try_wait() {
            Ok(Some(s)) => format!("exited ({s})"),
            _ => "closed its stdout".to_string(),
        };
        let err = self
            .stderr
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let raw = String::from_utf8_lossy(&err);
        let text = raw.trim();
        let said = if text.is_empty() {
            String::new()
        } else {
            format!(": {text}")
        };
        std::io::Error::other(format!("ProxyCommand `{}` {status}{said}", self.command))
    }
}

impl AsyncRead for ProxyStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.stdout).poll_read(cx, buf) {
            Poll::Ready(Ok(())) if buf.filled().len() == before && buf.remaining() > 0 => {
                Poll::Ready(Err(this.ended()))
            }
            other => other,
        }
    }
}

impl AsyncWrite for ProxyStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stdin).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stdin).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stdin).poll_shutdown(cx)
    }
}
