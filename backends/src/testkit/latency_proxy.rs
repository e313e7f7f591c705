//! A TCP proxy on loopback that delivers every chunk a fixed delay after it
//! arrived, in each direction (a delay line: throughput is kept, latency
//! is added), and shows each chunk to an observer, for benchmarks that
//! count requests and bytes over a slow network.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Sees each chunk going through the proxy.
pub trait Observer: Send + Sync + 'static {
    /// A chunk the client sent to the server.
    fn request(&self, chunk: &[u8]);
    /// A chunk the server sent to the client.
    fn response(&self, chunk: &[u8]);
}

/// Starts the proxy in front of `upstream`, adding `delay` each way, on the
/// current tokio runtime; returns its address.
pub async fn start(upstream: SocketAddr, delay: Duration, observer: Arc<dyn Observer>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("binding the proxy");
    let addr = listener.local_addr().expect("the proxy's address");
    tokio::spawn(async move {
        loop {
            let Ok((client, _)) = listener.accept().await else {
                continue;
            };
            let observer = Arc::clone(&observer);
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(upstream).await else {
                    return;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                let (up, down) = (Arc::clone(&observer), observer);
                tokio::join!(
                    delayed_copy(client_read, server_write, delay, move |chunk| up.request(chunk)),
                    delayed_copy(server_read, client_write, delay, move |chunk| down.response(chunk)),
                );
            });
        }
    });
    addr
}

/// Copies one direction of a connection, each chunk written `delay` after
/// it was read.
async fn delayed_copy(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
    on_chunk: impl Fn(&[u8]) + Send + 'static,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let writer = tokio::spawn(async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due.into()).await;
            if to.write_all(&chunk).await.is_err() {
                break;
            }
        }
        let _ = to.shutdown().await;
    });
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                on_chunk(&buf[..n]);
                if tx.send((Instant::now() + delay, buf[..n].to_vec())).is_err() {
                    break;
                }
            }
        }
    }
    drop(tx);
    let _ = writer.await;
}
