//! `serve` and `mcp`: the same configuration as every command (or a
//! server file naming tenants), handed to the server crate.

use std::path::Path;

use skillstore_server::{ServerError, Settings};

use super::{Failure, Global, namespace};

fn settings(global: &Global, tenants: Option<&Path>) -> Result<Settings, Failure> {
    match tenants {
        Some(_) if global.locked.is_some() => Err(Failure::usage(
            "--locked applies to the command line's own namespace; with --tenants, set `lock:` in each tenant's configuration",
        )),
        Some(path) => Settings::load(path).map_err(failure),
        None => {
            let mut config = namespace::config(global)?;
            if let Some(file) = namespace::locked_file(global, &config, false)? {
                config.set_lock(&file);
            }
            Ok(Settings::single(config))
        }
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

/// `token-hash`: one token read from standard input, printed as the
/// `sha256: HEX` a server file's token list takes.
pub fn token_hash() -> Result<(), Failure> {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| Failure::failed(format!("cannot read standard input: {e}")))?;
    let token = line.strip_suffix('\n').unwrap_or(&line);
    let token = token.strip_suffix('\r').unwrap_or(token);
    if token.is_empty() {
        return Err(Failure::usage("no token on standard input".to_owned()));
    }
    let hash = skillstore_server::TokenHash::of(token);
    crate::emit(format!("sha256: {}\n", hash.to_hex()).as_bytes())
}
