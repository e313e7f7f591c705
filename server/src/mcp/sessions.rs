//! MCP sessions over HTTP, bounded and owned: each session belongs to the
//! token that opened it (any other token gets 404 for it, on every method,
//! GET and DELETE included), a token holds at most
//! `mcp_sessions_per_token` and the server `mcp_sessions` in all (more are
//! 429), and a session unused for `mcp_session_idle` is closed and removed
//! from the session manager, so its memory is given back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use std::sync::atomic::Ordering;

use crate::error::ApiError;
use crate::service::{Caller, Service};
use crate::settings::TokenHash;

/// The header naming a session.
const SESSION_HEADER: &str = "mcp-session-id";

/// Who holds a session and when it was last used.
#[derive(Debug)]
struct Held {
    token: Option<TokenHash>,
    /// The tenant a token of the server file named when the session was
    /// opened: the session is closed once the file no longer gives that
    /// token to that tenant. `None` for a JWT or no token.
    file_tenant: Option<String>,
    last_used: Instant,
}

#[derive(Debug, Default)]
struct Table {
    sessions: HashMap<String, Held>,
    /// Sessions being opened (an `initialize` in flight), by token.
    opening: HashMap<Option<TokenHash>, usize>,
}

impl Table {
    fn held_by(&self, token: Option<TokenHash>) -> usize {
        self.sessions.values().filter(|h| h.token == token).count() + self.opening.get(&token).copied().unwrap_or(0)
    }

    fn total(&self) -> usize {
        self.sessions.len() + self.opening.values().sum::<usize>()
    }

    fn done_opening(&mut self, token: Option<TokenHash>) {
        if let Some(n) = self.opening.get_mut(&token) {
            *n -= 1;
            if *n == 0 {
                self.opening.remove(&token);
            }
        }
    }
}

/// The sessions of one server and the manager holding their state.
pub struct Sessions {
    table: Mutex<Table>,
    manager: Arc<LocalSessionManager>,
    service: Arc<Service>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").finish_non_exhaustive()
    }
}

impl Sessions {
    /// Sessions kept in `manager` under `service`'s limits; closes idle
    /// ones in the background until the service shuts down.
    pub fn start(manager: Arc<LocalSessionManager>, service: Arc<Service>) -> Arc<Self> {
        let sessions = Arc::new(Sessions {
            table: Mutex::new(Table::default()),
            manager,
            service,
        });
        let idle = sessions.service.limits.mcp_session_idle;
        let every = (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(15));
        let sweeper = Arc::downgrade(&sessions);
        let shutdown = sessions.service.shutdown.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(every) => {}
                    () = shutdown.cancelled() => break,
                }
                let Some(sessions) = sweeper.upgrade() else { break };
                sessions.close_idle(idle).await;
                sessions.close_revoked().await;
            }
        });
        sessions
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The service the sessions belong to.
    pub fn service(&self) -> &Arc<Service> {
        &self.service
    }

    /// How many sessions are open now.
    pub fn open(&self) -> usize {
        self.table().sessions.len()
    }

    async fn close_idle(&self, idle: Duration) {
        let expired: Vec<String> = {
            let mut table = self.table();
            let now = Instant::now();
            let expired: Vec<String> = table
                .sessions
                .iter()
                .filter(|(_, h)| now.duration_since(h.last_used) >= idle)
                .map(|(id, _)| id.clone())
                .collect();
            for id in &expired {
                table.sessions.remove(id);
            }
            expired
        };
        let metrics = &self.service.metrics;
        for id in expired {
            metrics.mcp_sessions.fetch_sub(1, Ordering::Relaxed);
            metrics.mcp_sessions_expired.fetch_add(1, Ordering::Relaxed);
            let _ = self.manager.close_session(&id.as_str().into()).await;
        }
    }

    /// Closes the sessions opened with a token of the server file that the
    /// file, read again since, no longer gives to the same tenant (rotated
    /// out, or its tenant removed): their open streams end too.
    async fn close_revoked(&self) {
        let revoked: Vec<String> = {
            let mut table = self.table();
            let revoked: Vec<String> = table
                .sessions
                .iter()
                .filter(|(_, h)| match (&h.token, &h.file_tenant) {
                    (Some(token), Some(tenant)) => {
                        self.service.file_token_tenant(token).as_deref() != Some(tenant.as_str())
                    }
                    _ => false,
                })
                .map(|(id, _)| id.clone())
                .collect();
            for id in &revoked {
                table.sessions.remove(id);
            }
            revoked
        };
        for id in revoked {
            self.service.metrics.mcp_sessions.fetch_sub(1, Ordering::Relaxed);
            let _ = self.manager.close_session(&id.as_str().into()).await;
        }
    }

    /// Admits a request of `caller` to `/mcp` under the session rules and
    /// runs it, the time to its answer's start bounded by the request
    /// timeout.
    pub async fn run(&self, caller: &Caller, request: Request, next: Next) -> Response {
        let timeout = self.service.limits.request_timeout;
        let session = request
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let method = request.method().clone();
        if let Some(id) = session {
            {
                let mut table = self.table();
                match table.sessions.get_mut(&id) {
                    Some(held) if held.token == caller.token => held.last_used = Instant::now(),
                    _ => return no_session(),
                }
            }
            let response = bounded(timeout, next.run(request)).await;
            let mut table = self.table();
            if method == Method::DELETE && response.status().is_success() {
                if table.sessions.remove(&id).is_some() {
                    self.service.metrics.mcp_sessions.fetch_sub(1, Ordering::Relaxed);
                }
            } else if let Some(held) = table.sessions.get_mut(&id) {
                held.last_used = Instant::now();
            }
            return response;
        }
        if method != Method::POST {
            return bounded(timeout, next.run(request)).await;
        }
        // A POST without a session may open one: hold a place for it first.
        let limits = self.service.limits;
        {
            let mut table = self.table();
            if table.held_by(caller.token) >= limits.mcp_sessions_per_token || table.total() >= limits.mcp_sessions {
                drop(table);
                self.service
                    .metrics
                    .mcp_sessions_refused
                    .fetch_add(1, Ordering::Relaxed);
                let has_body = crate::http::front::declares_body(request.headers());
                let refused = ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "too_many_sessions",
                    "too many MCP sessions are open; close one (DELETE /mcp) or wait for idle ones to expire",
                )
                .into_response();
                return crate::http::front::unread_body_closes(refused, has_body);
            }
            *table.opening.entry(caller.token).or_default() += 1;
        }
        let response = bounded(timeout, next.run(request)).await;
        let opened = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut table = self.table();
        table.done_opening(caller.token);
        if let Some(id) = opened {
            table.sessions.insert(
                id,
                Held {
                    token: caller.token,
                    file_tenant: caller
                        .token
                        .as_ref()
                        .and_then(|t| self.service.file_token_tenant(t))
                        .filter(|name| name == caller.tenant.name()),
                    last_used: Instant::now(),
                },
            );
            self.service.metrics.mcp_sessions.fetch_add(1, Ordering::Relaxed);
        }
        response
    }
}

/// The answer for a session that does not exist or belongs to another
/// token: the same 404 either way, so no one learns another's session ids.
fn no_session() -> Response {
    ApiError::new(StatusCode::NOT_FOUND, "session_not_found", "no such MCP session").into_response()
}

async fn bounded(timeout: Duration, response: impl Future<Output = Response>) -> Response {
    match tokio::time::timeout(timeout, response).await {
        Ok(response) => response,
        Err(_) => {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "timeout", "the request took too long").into_response()
        }
    }
}
