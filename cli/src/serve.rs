//! `serve` and `mcp`: the same configuration as every command (or a
//! server file naming tenants), handed to the server crate.

use std::path::Path;

use skillstore_server::{ServerError, Settings};

use super::{Failure, Global, namespace};

fn settings(global: &Global, tenants: Option<&Path>) -> Result<Settings, Failure> {
    match tenants {
        Some(path) => Settings::load(path).map_err(failure),
        None => Ok(Settings::single(namespace::config(global)?)),
    }
}

fn failure(err: ServerError) -> Failure {
    match err {
        ServerError::Config(_) | ServerError::Listen(_) => Failure::usage(err.to_string()),
        other => Failure::failed(other.to_string()),
    }
}

/// As [`failure`], for a server of the command line's own namespace (no
/// tenants file): a namespace it cannot open fails as any command's would,
/// without naming a tenant the user never made.
fn own_namespace_failure(err: ServerError) -> Failure {
    match err {
        ServerError::Tenant { source, .. } => Failure::from(source),
        other => failure(other),
    }
}

pub async fn serve(global: &Global, listen: Option<&str>, tenants: Option<&Path>) -> Result<(), Failure> {
    let served = skillstore_server::run::serve_http(settings(global, tenants)?, listen).await;
    served.map_err(if tenants.is_some() {
        failure
    } else {
        own_namespace_failure
    })
}

pub async fn mcp(global: &Global) -> Result<(), Failure> {
    skillstore_server::run::serve_stdio(settings(global, None)?)
        .await
        .map_err(own_namespace_failure)
}
