//! Git's own servers on loopback, for tests of fetching: `git daemon` (the
//! `git://` protocol) and `git http-backend` (smart HTTP) behind a small
//! HTTP/1.1 server that runs it as CGI, one process per request.
//!
//! Both serve every repository below a base directory and stop when
//! dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// A `git daemon` serving every repository below a base directory.
pub struct GitDaemon {
    child: Child,
    port: u16,
}

impl GitDaemon {
    /// Starts `git daemon --export-all` on a free loopback port and waits
    /// until it accepts connections.
    pub fn start(base: &Path) -> GitDaemon {
        let port = free_port();
        let child = Command::new("git")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .args([
                "daemon",
                "--export-all",
                "--reuseaddr",
                "--listen=127.0.0.1",
                &format!("--port={port}"),
                &format!("--base-path={}", base.display()),
            ])
            .arg(base)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting git daemon");
        let daemon = GitDaemon { child, port };
        wait_for(port);
        daemon
    }

    /// The `git://` URL of the repository `name` below the base.
    pub fn url(&self, name: &str) -> String {
        format!("git://127.0.0.1:{}/{name}", self.port)
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Smart HTTP: `git http-backend` as CGI behind a loopback HTTP/1.1 server.
pub struct GitHttpServer {
    port: u16,
    stop: Arc<AtomicBool>,
    requests: Arc<AtomicUsize>,
}

impl GitHttpServer {
    /// Serves every repository below `base` at `http://127.0.0.1:PORT/`.
    pub fn start(base: &Path) -> GitHttpServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding a loopback port");
        let port = listener.local_addr().expect("a local address").port();
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicUsize::new(0));
        let base = base.to_owned();
        let (stopping, counted) = (Arc::clone(&stop), Arc::clone(&requests));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                counted.fetch_add(1, Ordering::SeqCst);
                let base = base.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &base);
                });
            }
        });
        GitHttpServer { port, stop, requests }
    }

    /// The `http://` URL of the repository `name` below the base.
    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.port)
    }

    /// How many HTTP requests have been received so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for GitHttpServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Answers the requests of one connection, closing it after each answer.
fn serve(stream: TcpStream, base: &Path) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, target) = (
        parts.next().unwrap_or("").to_owned(),
        parts.next().unwrap_or("/").to_owned(),
    );
    let mut headers = Vec::new();
    loop {
        let mut header = String::new();
        reader.read_line(&mut header)?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let header = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    let body = if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        read_chunked(&mut reader)?
    } else {
        let len: usize = header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
        let mut body = vec![0; len];
        reader.read_exact(&mut body)?;
        body
    };
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let mut cgi = Command::new("git");
    cgi.arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_PROJECT_ROOT", base)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", &method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("CONTENT_LENGTH", body.len().to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(kind) = header("content-type") {
        cgi.env("CONTENT_TYPE", kind);
    }
    if let Some(protocol) = header("git-protocol") {
        cgi.env("GIT_PROTOCOL", protocol);
    }
    if let Some(encoding) = header("content-encoding") {
        cgi.env("HTTP_CONTENT_ENCODING", encoding);
    }
    let mut child = cgi.spawn()?;
    let mut stdin = child.stdin.take().expect("piped");
    let writer = std::thread::spawn(move || stdin.write_all(&body));
    let output = child.wait_with_output()?;
    let _ = writer.join();
    let out = output.stdout;
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, 4))
        .or_else(|| out.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)));
    let (head, content) = match split {
        Some((i, n)) => (String::from_utf8_lossy(&out[..i]).into_owned(), &out[i + n..]),
        None => (String::new(), &out[..]),
    };
    let mut status = "200 OK".to_owned();
    let mut response = Vec::new();
    let mut lines = Vec::new();
    for line in head.lines() {
        match line.split_once(':') {
            Some((name, value)) if name.eq_ignore_ascii_case("status") => status = value.trim().to_owned(),
            Some(_) => lines.push(line.to_owned()),
            None => {}
        }
    }
    write!(response, "HTTP/1.1 {status}\r\n")?;
    for line in lines {
        write!(response, "{line}\r\n")?;
    }
    write!(
        response,
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        content.len()
    )?;
    response.extend_from_slice(content);
    let mut stream = stream;
    stream.write_all(&response)?;
    stream.flush()
}

fn read_chunked(reader: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size)?;
        let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        if size == 0 {
            let mut end = String::new();
            while reader.read_line(&mut end)? > 0 && !end.trim().is_empty() {
                end.clear();
            }
            return Ok(body);
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        let mut crlf = [0; 2];
        reader.read_exact(&mut crlf)?;
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// Waits (up to 30 s) until something accepts connections on `port`.
fn wait_for(port: u16) {
    for _ in 0..300 {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("nothing listens on port {port}");
}

/// A bare copy of the repository at `work`, named `name` below `base`,
/// as a server would hold it; returns its path.
pub fn publish_bare(work: &Path, base: &Path, name: &str) -> PathBuf {
    let target = base.join(name);
    super::git_repo::git(
        base,
        &[
            "clone",
            "-q",
            "--bare",
            &work.to_string_lossy(),
            &target.to_string_lossy(),
        ],
    );
    target
}
