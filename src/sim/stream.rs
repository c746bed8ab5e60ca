//! The simulator's TCP stream: a connection's bytes from the client are handed to the SSH
//! server a fixed delay after they arrived (a round-trip latency, modelling a WAN: every
//! request/answer exchange of the session waits for it once), and the connection can be cut
//! from outside (a node that drops the session mid-probe).
//!
//! The delay is applied on the read side only, to every chunk as it arrives, so a client's
//! request and the server's immediate answer are one delay apart, as over a link with that round
//! trip. The TCP handshake itself is not delayed (it happens in the kernel before `accept`).

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// A switch that cuts one connection: once [`Cut::cut`] is called, the stream's reads and
/// writes fail, so the SSH server drops the session and closes the socket without a goodbye.
#[derive(Debug, Default)]
pub struct Cut {
    done: AtomicBool,
    waker: Mutex<Option<Waker>>,
}

impl Cut {
    /// Cuts the connection (wakes its reader).
    pub fn cut(&self) {
        self.done.store(true, Ordering::SeqCst);
        if let Ok(mut w) = self.waker.lock()
            && let Some(w) = w.take()
        {
            w.wake();
        }
    }

    /// Whether it was cut; remembers `cx` to be woken when it is.
    fn is_cut(&self, cx: &Context<'_>) -> bool {
        if let Ok(mut w) = self.waker.lock() {
            *w = Some(cx.waker().clone());
        }
        self.done.load(Ordering::SeqCst)
    }
}

/// A chunk read from the client, due at `.0` (`None`: the client's end of the stream).
type Due = (Instant, Option<Vec<u8>>);

/// A client connection as the simulator's SSH server reads and writes it.
pub struct SimStream {
    inner: TcpStream,
    delay: Duration,
    queue: VecDeque<Due>,
    inner_done: bool,
    timer: Option<Pin<Box<tokio::time::Sleep>>>,
    cut: Option<Arc<Cut>>,
}

impl SimStream {
    /// `inner` with reads delayed by `delay` (zero: none) and cut by `cut` when given.
    pub fn new(inner: TcpStream, delay: Duration, cut: Option<Arc<Cut>>) -> SimStream {
        SimStream {
            inner,
            delay,
            queue: VecDeque::new(),
            inner_done: false,
            timer: None,
            cut,
        }
    }

    fn was_cut(&self, cx: &Context<'_>) -> bool {
        self.cut.as_ref().is_some_and(|c| c.is_cut(cx))
    }
}

fn cut_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionReset,
        "the simulated node dropped the connection",
    )
}

impl AsyncRead for SimStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.was_cut(cx) {
            return Poll::Ready(Err(cut_error()));
        }
        if this.delay.is_zero() {
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        // Take in everything that has arrived, stamped with when it is due.
        while !this.inner_done {
            let mut tmp = [0u8; 8192];
            let mut rb = ReadBuf::new(&mut tmp);
            match Pin::new(&mut this.inner).poll_read(cx, &mut rb) {
                Poll::Ready(Ok(())) => {
                    let due = Instant::now() + this.delay;
                    if rb.filled().is_empty() {
                        this.inner_done = true;
                        this.queue.push_back((due, None));
                    } else {
                        this.queue.push_back((due, Some(rb.filled().to_vec())));
                    }
                }
                Poll::Ready(Err(e)) => {
                    if this.queue.is_empty() {
                        return Poll::Ready(Err(e));
                    }
                    // What arrived before the error is still handed over, then the end.
                    this.inner_done = true;
                    this.queue.push_back((Instant::now(), None));
                }
                Poll::Pending => break,
            }
        }
        loop {
            let Some((due, _)) = this.queue.front() else {
                return Poll::Pending;
            };
            let due = *due;
            if due > Instant::now() {
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
                if timer.deadline() != due {
                    timer.as_mut().reset(due);
                }
                if timer.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                continue;
            }
            let Some((_, chunk)) = this.queue.front_mut() else {
                return Poll::Pending;
            };
            let Some(bytes) = chunk else {
                // The client's end: every later read says so too.
                return Poll::Ready(Ok(()));
            };
            let n = bytes.len().min(buf.remaining());
            buf.put_slice(&bytes[..n]);
            if n == bytes.len() {
                this.queue.pop_front();
            } else {
                bytes.drain(..n);
            }
            return Poll::Ready(Ok(()));
        }
    }
}

use std::future::Future as _;

impl AsyncWrite for SimStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.was_cut(cx) {
            return Poll::Ready(Err(cut_error()));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.was_cut(cx) {
            return Poll::Ready(Err(cut_error()));
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn pair(delay: Duration, cut: Option<Arc<Cut>>) -> (TcpStream, SimStream) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let client = TcpStream::connect(l.local_addr().expect("addr"))
            .await
            .expect("connect");
        let (server, _) = l.accept().await.expect("accept");
        (client, SimStream::new(server, delay, cut))
    }

    #[tokio::test]
    async fn reads_arrive_one_delay_late_and_in_order() {
        let (mut client, mut server) = pair(Duration::from_millis(150), None).await;
        let start = Instant::now();
        client.write_all(b"hello ").await.expect("write");
        client.write_all(b"world").await.expect("write");
        client.shutdown().await.expect("shutdown");
        let mut got = Vec::new();
        server.read_to_end(&mut got).await.expect("read");
        assert_eq!(got, b"hello world");
        assert!(
            start.elapsed() >= Duration::from_millis(150),
            "{:?}",
            start.elapsed()
        );
        // Writes are not delayed.
        server.write_all(b"back").await.expect("write");
        let mut four = [0u8; 4];
        client.read_exact(&mut four).await.expect("read");
        assert_eq!(&four, b"back");
    }

    #[tokio::test]
    async fn a_cut_connection_fails_its_pending_read() {
        let cut = Arc::new(Cut::default());
        let (_client, mut server) = pair(Duration::ZERO, Some(cut.clone())).await;
        let reader = tokio::spawn(async move {
            let mut b = [0u8; 4];
            server.read(&mut b).await
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        cut.cut();
        let r = tokio::time::timeout(Duration::from_secs(5), reader)
            .await
            .expect("woken")
            .expect("joined");
        assert_eq!(r.expect_err("cut").kind(), io::ErrorKind::ConnectionReset);
    }
}
