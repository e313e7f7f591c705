//! The accept loop: HTTP/1.1 connections served by hyper with a header
//! read timeout, at most `max_connections` open, each counted, and a
//! graceful shutdown bounded by a grace period.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceExt as _;

use crate::service::Service;

/// Accepts and serves connections until the service's shutdown token is
/// cancelled, then waits for open connections to finish, at most `grace`.
pub(super) async fn accept_loop(listener: TcpListener, router: Router, service: &Arc<Service>, grace: Duration) {
    let token = service.shutdown.clone();
    let limits = service.limits;
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true);
    let mut said_out_of_files = None;
    loop {
        let slot = tokio::select! {
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            () = token.cancelled() => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors or a connection reset before it
                    // was accepted: wait a moment rather than spin. Out of
                    // descriptors, nothing is served until some are given
                    // back: say so where an operator looks.
                    if e.raw_os_error() == Some(24) || e.raw_os_error() == Some(23) {
                        if said_out_of_files.is_none_or(|at: std::time::Instant| at.elapsed() > Duration::from_secs(10)) {
                            said_out_of_files = Some(std::time::Instant::now());
                            tracing::error!(error = %e, "cannot accept a connection: out of file descriptors (raise the limit on open files)");
                        }
                    } else {
                        tracing::debug!(error = %e, "accept failed");
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            () = token.cancelled() => break,
        };
        // Streamed MCP answers go out in several writes; without TCP_NODELAY
        // a write waiting on the peer's delayed ACK adds about 40 ms.
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let router = router.clone();
        let handler = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            router.clone().oneshot(request.map(axum::body::Body::new))
        });
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), handler));
        let open = service.metrics.open_connection();
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
            drop(open);
            drop(slot);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(grace) => {
            tracing::warn!("requests still in flight after the shutdown grace period; stopping");
        }
    }
}
