//! An HTTP/1.1 proxy for tests that puts faults between an S3 client and a
//! server: 503 SlowDown, 500, a reset connection, a truncated body, or a
//! stall past the client's timeout, at a chosen rate. It can also play a
//! server that is down.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use super::s3_server::{client_builder, serve_on_thread};

/// One kind of fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// `503 SlowDown`, without forwarding the request.
    SlowDown,
    /// `500 InternalError`, without forwarding the request.
    InternalError,
    /// The connection is closed (with a reset) without a response.
    Reset,
    /// The request is served, and the response body cut in half.
    Truncate,
    /// No response until after the stall time, then a closed connection.
    Stall,
}

/// Every fault kind.
pub const ALL_FAULTS: [Fault; 5] = [
    Fault::SlowDown,
    Fault::InternalError,
    Fault::Reset,
    Fault::Truncate,
    Fault::Stall,
];

impl Fault {
    fn index(self) -> usize {
        ALL_FAULTS.iter().position(|f| *f == self).expect("listed")
    }
}

/// How many faults of each kind were injected, and how many requests came.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Requests received (faulted or not).
    pub requests: u64,
    /// Faults injected, in the order of [`ALL_FAULTS`].
    pub injected: [u64; 5],
}

impl FaultCounts {
    /// Faults of every kind.
    pub fn total(&self) -> u64 {
        self.injected.iter().sum()
    }

    /// Faults of one kind.
    pub fn of(&self, fault: Fault) -> u64 {
        self.injected[fault.index()]
    }
}

#[derive(Debug)]
struct State {
    upstream: SocketAddr,
    /// Faulted requests per million.
    rate: AtomicU32,
    down: AtomicBool,
    faults: Mutex<Vec<Fault>>,
    stall: Duration,
    seed: AtomicU64,
    requests: AtomicU64,
    injected: [AtomicU64; 5],
}

/// A running fault proxy. It serves until the process exits.
#[derive(Debug, Clone)]
pub struct FaultProxy {
    addr: SocketAddr,
    state: Arc<State>,
}

impl FaultProxy {
    /// Starts a proxy to the server at `upstream` (`http://host:port`) on
    /// its own thread, faulting nothing until told to. A stall lasts
    /// `stall`, which should exceed the client's request timeout.
    pub fn start(upstream: &str, stall: Duration) -> Self {
        let upstream: SocketAddr = upstream
            .trim_start_matches("http://")
            .parse()
            .expect("an http://IP:PORT upstream");
        let state = Arc::new(State {
            upstream,
            rate: AtomicU32::new(0),
            down: AtomicBool::new(false),
            faults: Mutex::new(ALL_FAULTS.to_vec()),
            stall,
            seed: AtomicU64::new(0x5eed),
            requests: AtomicU64::new(0),
            injected: Default::default(),
        });
        let served = Arc::clone(&state);
        let addr = serve_on_thread("fault-proxy", move |ready| async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
            ready
                .send(listener.local_addr().expect("an address"))
                .expect("the caller waits");
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                tokio::spawn(serve_connection(client, Arc::clone(&served)));
            }
        });
        FaultProxy { addr, state }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Faults this fraction of requests (0.0 to 1.0), choosing among the
    /// enabled kinds.
    pub fn set_rate(&self, fraction: f64) {
        let per_million = (fraction.clamp(0.0, 1.0) * 1e6).round() as u32;
        self.state.rate.store(per_million, Ordering::SeqCst);
    }

    /// The kinds of fault to choose from (default: all).
    pub fn set_faults(&self, faults: &[Fault]) {
        *self.state.faults.lock().expect("not poisoned") = faults.to_vec();
    }

    /// While down, every connection is reset at once, as by a dead server.
    pub fn set_down(&self, down: bool) {
        self.state.down.store(down, Ordering::SeqCst);
    }

    /// The counts so far.
    pub fn counts(&self) -> FaultCounts {
        FaultCounts {
            requests: self.state.requests.load(Ordering::SeqCst),
            injected: std::array::from_fn(|i| self.state.injected[i].load(Ordering::SeqCst)),
        }
    }

    /// An S3 client for `bucket` through this proxy, with the test keys,
    /// `timeout` per request and `retries` retries with a short backoff.
    pub fn client(&self, bucket: &str, timeout: Duration, retries: usize) -> Arc<dyn ObjectStore> {
        let store = client_builder(&self.endpoint(), bucket)
            .with_client_options(
                ClientOptions::new()
                    .with_allow_http(true)
                    .with_timeout(timeout)
                    .with_connect_timeout(timeout),
            )
            .with_retry(RetryConfig {
                backoff: BackoffConfig {
                    init_backoff: Duration::from_millis(20),
                    max_backoff: Duration::from_millis(500),
                    base: 2.0,
                },
                max_retries: retries,
                retry_timeout: timeout * (retries as u32 + 2),
            })
            .build()
            .expect("an S3 client");
        Arc::new(store)
    }
}

impl State {
    /// The fault for the next request, if any: a deterministic sequence
    /// (splitmix64), so a run can be repeated.
    fn draw(&self) -> Option<Fault> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        let mut z = self.seed.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::SeqCst);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let rate = u64::from(self.rate.load(Ordering::SeqCst));
        if (z % 1_000_000) >= rate {
            return None;
        }
        let faults = self.faults.lock().expect("not poisoned");
        let fault = *faults.get(((z >> 32) % faults.len().max(1) as u64) as usize)?;
        self.injected[fault.index()].fetch_add(1, Ordering::SeqCst);
        Some(fault)
    }
}

/// One HTTP message head and body as raw bytes.
struct Message {
    head: Vec<u8>,
    body: Vec<u8>,
}

async fn serve_connection(client: TcpStream, state: Arc<State>) {
    if state.down.load(Ordering::SeqCst) {
        reset(client);
        return;
    }
    let mut client = BufReader::new(client);
    let mut upstream: Option<BufReader<TcpStream>> = None;
    loop {
        let Ok(Some(request)) = read_request(&mut client).await else {
            return;
        };
        if state.down.load(Ordering::SeqCst) {
            reset(client.into_inner());
            return;
        }
        let fault = state.draw();
        match fault {
            Some(Fault::SlowDown) => {
                let _ = client.get_mut().write_all(&error_response(503, "SlowDown")).await;
                continue;
            }
            Some(Fault::InternalError) => {
                let _ = client.get_mut().write_all(&error_response(500, "InternalError")).await;
                continue;
            }
            Some(Fault::Reset) => {
                reset(client.into_inner());
                return;
            }
            Some(Fault::Stall) => {
                tokio::time::sleep(state.stall).await;
                return;
            }
            Some(Fault::Truncate) | None => {}
        }
        let server = match &mut upstream {
            Some(server) => server,
            None => match TcpStream::connect(state.upstream).await {
                Ok(stream) => upstream.insert(BufReader::new(stream)),
                Err(_) => return,
            },
        };
        if server.get_mut().write_all(&request.head).await.is_err()
            || server.get_mut().write_all(&request.body).await.is_err()
        {
            return;
        }
        let is_head = request.head.starts_with(b"HEAD ");
        let Ok(Some(response)) = read_response(server, is_head).await else {
            return;
        };
        let out = client.get_mut();
        if fault == Some(Fault::Truncate) && !response.body.is_empty() {
            let _ = out.write_all(&response.head).await;
            let _ = out.write_all(&response.body[..response.body.len() / 2]).await;
            let _ = out.flush().await;
            reset(client.into_inner());
            return;
        }
        if out.write_all(&response.head).await.is_err() || out.write_all(&response.body).await.is_err() {
            return;
        }
    }
}

/// Closes with a TCP reset rather than an orderly close. (A zero linger
/// resets at once; it is a non-zero linger that blocks on drop.)
#[allow(deprecated)]
fn reset(stream: TcpStream) {
    let _ = stream.set_linger(Some(Duration::ZERO));
    drop(stream);
}

fn error_response(status: u16, code: &str) -> Vec<u8> {
    let reason = if status == 503 {
        "Slow Down"
    } else {
        "Internal Server Error"
    };
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code><Message>injected fault</Message></Error>"
    );
    format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A message head up to its blank line, or `None` when the peer closed
/// before a whole head came.
async fn read_head<R: AsyncRead + Unpin>(reader: &mut BufReader<R>) -> std::io::Result<Option<Vec<u8>>> {
    let mut head = Vec::new();
    loop {
        let line = match read_line(reader).await {
            Ok(line) => line,
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        };
        head.extend_from_slice(&line);
        if line == b"\r\n" {
            return Ok(Some(head));
        }
    }
}

fn header<'a>(head: &'a [u8], name: &str) -> Option<&'a str> {
    std::str::from_utf8(head).ok()?.split("\r\n").skip(1).find_map(|line| {
        let (key, value) = line.split_once(':')?;
        key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
    })
}

async fn read_request<R: AsyncRead + Unpin>(reader: &mut BufReader<R>) -> std::io::Result<Option<Message>> {
    let Some(head) = read_head(reader).await? else {
        return Ok(None);
    };
    let body = read_body(reader, &head).await?;
    Ok(Some(Message { head, body }))
}

async fn read_response<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    is_head: bool,
) -> std::io::Result<Option<Message>> {
    let Some(head) = read_head(reader).await? else {
        return Ok(None);
    };
    let status = std::str::from_utf8(&head)
        .ok()
        .and_then(|h| h.split(' ').nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .unwrap_or(0);
    let body = if is_head || status == 204 || status == 304 || (100..200).contains(&status) {
        Vec::new()
    } else {
        read_body(reader, &head).await?
    };
    Ok(Some(Message { head, body }))
}

/// The body by `Content-Length`, or the raw chunked encoding up to and
/// including its last chunk.
async fn read_body<R: AsyncRead + Unpin>(reader: &mut BufReader<R>, head: &[u8]) -> std::io::Result<Vec<u8>> {
    if header(head, "transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        let mut raw = Vec::new();
        loop {
            let line = read_line(reader).await?;
            raw.extend_from_slice(&line);
            let size = std::str::from_utf8(&line)
                .ok()
                .and_then(|l| usize::from_str_radix(l.trim().split(';').next()?, 16).ok())
                .ok_or_else(|| std::io::Error::other("a bad chunk size"))?;
            if size == 0 {
                loop {
                    let trailer = read_line(reader).await?;
                    raw.extend_from_slice(&trailer);
                    if trailer == b"\r\n" {
                        return Ok(raw);
                    }
                }
            }
            let mut chunk = vec![0u8; size + 2];
            reader.read_exact(&mut chunk).await?;
            raw.extend_from_slice(&chunk);
        }
    }
    let length = header(head, "content-length")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).await?;
    Ok(body)
}

/// One line with its `\n`; a line the peer cut off is `UnexpectedEof`.
async fn read_line<R: AsyncRead + Unpin>(reader: &mut BufReader<R>) -> std::io::Result<Vec<u8>> {
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line).await?;
    if line.ends_with(b"\n") {
        Ok(line)
    } else {
        Err(std::io::ErrorKind::UnexpectedEof.into())
    }
}
