//! MCP: placeholder replaced by the full handler.

use std::sync::Arc;

use axum::Router;

use crate::error::ServerError;
use crate::service::Service;

/// The streamable HTTP endpoint at `/mcp`.
pub fn http_router(_service: Arc<Service>) -> Router {
    Router::new()
}

/// MCP over stdio.
pub async fn serve_stdio(_service: Arc<Service>) -> Result<(), ServerError> {
    Ok(())
}
