//! The two long-running front ends the command line starts: `serve`
//! (HTTP API and MCP at `/mcp`) and `mcp` (MCP over stdio).

use std::net::SocketAddr;

use tokio::net::TcpListener;

use crate::error::ServerError;
use crate::service::Service;
use crate::settings::Settings;

/// How often `serve` looks whether its server file changed.
pub const FILE_CHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// The address `serve` listens on when none is given.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// Serves `settings` over HTTP on `listen` (else the server file's
/// address, else [`DEFAULT_LISTEN`]) until SIGINT or SIGTERM, then lets
/// requests in flight finish and returns.
pub async fn serve_http(settings: Settings, listen: Option<&str>) -> Result<(), ServerError> {
    let address = listen
        .map(str::to_owned)
        .or_else(|| settings.listen.clone())
        .unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
    let service = Service::open(&settings)?;
    let addr: SocketAddr = tokio::net::lookup_host(&address)
        .await
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| ServerError::Listen(format!("cannot resolve the address `{address}`")))?;
    service.check_listen(&addr)?;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| ServerError::Listen(format!("cannot listen on {addr}: {e}")))?;
    let bound = listener.local_addr().unwrap_or(addr);
    if service.is_open() {
        eprintln!("note: serving one tenant without tokens, on loopback only");
    }
    eprintln!(
        "serving {} tenant(s) on http://{bound} (MCP at http://{bound}/mcp)",
        service.tenants().len()
    );
    service.start_refresh();
    if let Some(file) = &settings.file {
        service.follow_file(file.clone(), FILE_CHECK);
    }
    let router = crate::http::router(service.clone(), Some(crate::mcp::http_router(service.clone())));
    crate::http::serve(
        listener,
        router,
        service,
        crate::http::shutdown_signal(),
        crate::http::SHUTDOWN_GRACE,
    )
    .await
}

/// Serves MCP over standard input and output to one client, as the one
/// tenant of `settings`, until the client closes the stream.
pub async fn serve_stdio(settings: Settings) -> Result<(), ServerError> {
    let service = Service::open(&settings)?;
    service.load_all().await;
    service.start_refresh();
    let result = crate::mcp::serve_stdio(service.clone()).await;
    service.shutdown.cancel();
    result
}
