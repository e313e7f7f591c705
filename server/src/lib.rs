//! Serve Agent Skills to agents from one long-running process: an HTTP
//! API and MCP (over stdio and streamable HTTP), for one or many tenants.
//!
//! Each tenant's namespace is assembled by [`skillstore::Config::open`];
//! its catalog is loaded once, kept in memory ([`skillstore::SharedCatalog`])
//! and refreshed in the background, keeping the last good catalog when a
//! source cannot be listed. A bearer token (kept as its SHA-256) names the
//! tenant and what the caller may do: read, or read and write. Answers name
//! virtual paths only: no bucket, endpoint, host directory or other tenant.

#![warn(missing_docs)]

pub mod counting;
pub mod digest;
pub mod discovery;
pub mod error;
pub mod feeds;
pub mod http;
pub mod jwt;
pub mod manifest;
pub mod metrics;
pub mod service;
pub mod settings;
pub mod tenant;

pub use error::{ApiError, ServerError};
pub use service::{Caller, Service};
pub use settings::{
    Discovery, JwksSource, JwtAlgorithm, JwtSettings, Limits, Scope, ServerFile, Settings, TenantSettings, TokenHash,
};
pub use tenant::Tenant;
pub mod mcp;
pub mod run;
