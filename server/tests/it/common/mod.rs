//! Shared by the server's tests: a served port, fixtures and a client.

#![allow(dead_code)]

pub mod mcp_client;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use skillstore::Config;
use skillstore_server::{Limits, Scope, Service, Settings, TenantSettings, TokenHash};
use tokio::sync::oneshot;

/// A server on `127.0.0.1:0`, stopped when dropped.
pub struct Served {
    pub base: String,
    pub service: Arc<Service>,
    stop: Option<oneshot::Sender<()>>,
    pub done: Option<tokio::task::JoinHandle<()>>,
}

impl Served {
    pub async fn start(settings: Settings) -> Served {
        let served = Served::start_unready(settings).await;
        served.wait_ready().await;
        served
    }

    /// Starts serving without waiting for `/readyz`.
    pub async fn start_unready(settings: Settings) -> Served {
        let service = Service::open(&settings).expect("tenants open");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        service.start_refresh();
        let router = skillstore_server::http::router(
            service.clone(),
            Some(skillstore_server::mcp::http_router(service.clone())),
        );
        let (tx, rx) = oneshot::channel::<()>();
        let done = tokio::spawn({
            let service = service.clone();
            async move {
                skillstore_server::http::serve(
                    listener,
                    router,
                    service,
                    async move {
                        let _ = rx.await;
                    },
                    Duration::from_secs(30),
                )
                .await
                .unwrap();
            }
        });
        Served {
            base: format!("http://{addr}"),
            service,
            stop: Some(tx),
            done: Some(done),
        }
    }

    /// Polls /readyz until every tenant is loaded.
    pub async fn wait_ready(&self) {
        assert!(
            ready(&reqwest::Client::new(), &self.base).await,
            "the server never became ready"
        );
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Asks the server to stop and waits until it has.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(done) = self.done.take() {
            done.await.unwrap();
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

/// Polls `BASE/readyz` every 5 ms, 2000 times at most, until it answers
/// 200 (every tenant loaded): whether it did. A request that fails counts
/// as not ready yet.
pub async fn ready(client: &reqwest::Client, base: &str) -> bool {
    for _ in 0..2000 {
        let answer = client.get(format!("{base}/readyz")).send().await;
        if answer.is_ok_and(|r| r.status() == 200) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    false
}

/// `skillstore serve --listen 127.0.0.1:0 ARGS` (the binary of
/// [`skillstore_binary`]), its standard error piped and the process killed
/// when dropped, to start with [`ServeProcess::start`] once the caller has
/// set its directory or environment.
pub fn serve_command(args: &[&str]) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(skillstore_binary());
    command
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(args)
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    command
}

/// `skillstore serve` as a process, killed when dropped: where it listens,
/// what it said until then, the rest of its standard error, and a client.
pub struct ServeProcess {
    pub child: tokio::process::Child,
    /// `http://ADDRESS`, as the process said it listens.
    pub base: String,
    /// The lines of standard error up to the one naming the address, that
    /// one included.
    pub said: Vec<String>,
    /// The lines of standard error after those.
    pub lines: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>,
    pub client: reqwest::Client,
}

impl ServeProcess {
    /// Starts `command` (from [`serve_command`]) and reads its standard
    /// error up to the line that names the address it listens on.
    pub async fn start(command: &mut tokio::process::Command) -> ServeProcess {
        use tokio::io::AsyncBufReadExt as _;
        let mut child = command.spawn().unwrap();
        let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let mut said = Vec::new();
        let mut base = None;
        while let Some(line) = lines.next_line().await.unwrap() {
            let address = line
                .split("on http://")
                .nth(1)
                .map(|rest| format!("http://{}", rest.split_whitespace().next().unwrap()));
            said.push(line);
            if address.is_some() {
                base = address;
                break;
            }
        }
        ServeProcess {
            child,
            base: base.expect("the address it listens on"),
            said,
            lines,
            client: reqwest::Client::new(),
        }
    }

    /// Polls /readyz as [`ready`] does; the requests after it fail if the
    /// server never became ready.
    pub async fn wait_ready(&self) {
        ready(&self.client, &self.base).await;
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

/// A request sent, and its response whatever its status: `.sent().await`
/// for `.send().await.unwrap()`.
pub trait Sent {
    fn sent(self) -> impl std::future::Future<Output = reqwest::Response>;
}

impl Sent for reqwest::RequestBuilder {
    async fn sent(self) -> reqwest::Response {
        self.send().await.unwrap()
    }
}

/// `GET url` with `token` as the bearer; the response, whatever its status.
pub async fn get(
    client: &reqwest::Client,
    url: impl reqwest::IntoUrl,
    token: impl std::fmt::Display,
) -> reqwest::Response {
    client.get(url).bearer_auth(token).send().await.unwrap()
}

pub fn write(root: &Path, relative: &str, text: &str) {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

pub fn skill_md(name: &str, description: &str) -> String {
    format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nSteps for {name}.\n")
}

/// Two layers in a directory: `base` (read-only) and `team` (writable).
pub fn layered_tree(root: &Path) {
    write(root, "base/alpha/SKILL.md", &skill_md("alpha", "Alpha from base."));
    write(root, "base/alpha/references/guide.md", "# Guide\n");
    write(root, "base/beta/SKILL.md", &skill_md("beta", "Beta, the base way."));
    write(root, "base/beta/scripts/run.py", "print('beta')\n");
    write(
        root,
        "team/alpha/SKILL.md",
        &skill_md("alpha", "Alpha, the team's way."),
    );
    write(root, "team/alpha/references/guide.md", "# Team guide\n");
}

pub fn layered_config(root: &Path) -> Config {
    let mut config = Config::parse("sources:\n  - path: /base\n  - path: /team\n    writable: true\n").unwrap();
    config.set_mount("/", root.to_str().unwrap(), Path::new(".")).unwrap();
    config
}

/// The token that may read `/metrics` in [`settings`].
pub const METRICS_TOKEN: &str = "metrics-token";

/// A tenant: its name, configuration and tokens with their scopes.
pub type TenantFixture<'a> = (&'a str, Config, Vec<(&'a str, Scope)>);

pub fn settings(tenants: Vec<TenantFixture<'_>>) -> Settings {
    Settings {
        tenants: tenants
            .into_iter()
            .map(|(name, config, tokens)| TenantSettings {
                name: name.to_owned(),
                config,
                tokens: tokens.into_iter().map(|(t, s)| (TokenHash::of(t), s)).collect(),
                discovery: skillstore_server::Discovery::Private,
            })
            .collect(),
        refresh_interval: Duration::from_secs(3600),
        changes_interval: Duration::from_secs(1),
        journal_poll_interval: Duration::from_secs(3600),
        hook_secrets: Vec::new(),
        limits: Limits {
            max_body_bytes: 64 * 1024,
            ..Limits::default()
        },
        listen: None,
        allowed_origins: Vec::new(),
        metrics_tokens: vec![TokenHash::of(METRICS_TOKEN)],
        file: None,
        jwt: None,
        claims_template: None,
    }
}

/// The `skillstore` binary, built by cargo for this workspace.
pub fn skillstore_binary() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .parent()
                .unwrap()
                .to_path_buf();
            let status = std::process::Command::new(env!("CARGO"))
                .args(["build", "-q", "-p", "skillstore-cli", "--bin", "skillstore"])
                .current_dir(&workspace)
                .status()
                .expect("cargo runs");
            assert!(status.success(), "building the skillstore binary");
            let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace.join("target"), PathBuf::from);
            target.join("debug").join("skillstore")
        })
        .clone()
}

/// Starts a test S3 server, points the `AWS_*` variables at it, and runs
/// `test` on a two-thread runtime. Called first in a test, which then runs
/// alone in a process of its own (`in_own_process`): the variables are set
/// before any other thread of that process runs.
pub fn with_s3_env<F, Fut>(test: F)
where
    F: FnOnce(skillstore_backends::testkit::s3_server::S3TestServer) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    if !crate::own_process::in_own_process() {
        return;
    }
    let s3 = skillstore_backends::testkit::s3_server::S3TestServer::start();
    for (key, value) in s3.env() {
        // SAFETY: no other thread of this process has started yet.
        unsafe { std::env::set_var(key, value) };
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(test(s3));
}
