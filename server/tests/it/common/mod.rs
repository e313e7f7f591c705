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
        let client = reqwest::Client::new();
        for _ in 0..2000 {
            let r = client.get(format!("{}/readyz", self.base)).send().await.unwrap();
            if r.status() == 200 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the server never became ready");
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
