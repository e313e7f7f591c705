//! `serve` and `mcp`: the same configuration as every command (or a
//! server file naming tenants), handed to the server crate.

use std::path::Path;

use skillstore_server::{Scope, ServerError, Settings};

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

/// `serve`: a server file's tenants, or the command line's namespace as
/// one tenant (with `token_env`, its read token is that variable's value,
/// which reads `/metrics` too: there is no server file to name another).
pub async fn serve(
    global: &Global,
    listen: Option<&str>,
    tenants: Option<&Path>,
    token_env: Option<&str>,
) -> Result<(), Failure> {
    let mut settings = settings(global, tenants)?;
    if let Some(var) = token_env {
        let token = skillstore_server::TokenHash::of(&token_from_env(var, std::env::var_os(var))?);
        for tenant in &mut settings.tenants {
            tenant.tokens.push((token, Scope::Read));
        }
        settings.metrics_tokens.push(token);
    }
    let served = skillstore_server::run::serve_http(settings, listen).await;
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

/// The token `--token-env VAR` names: refused, naming the variable (never
/// its value), when it is unset, empty, not UTF-8, or holds what no
/// header can carry.
fn token_from_env(var: &str, value: Option<std::ffi::OsString>) -> Result<String, Failure> {
    let Some(value) = value else {
        return Err(Failure::usage(format!(
            "--token-env: the environment variable {var} is not set; set it to the token clients send"
        )));
    };
    let Some(token) = value.to_str() else {
        return Err(Failure::usage(format!("--token-env: {var} is not valid UTF-8")));
    };
    let token = token.trim();
    if token.is_empty() {
        return Err(Failure::usage(format!(
            "--token-env: the environment variable {var} is empty; set it to the token clients send"
        )));
    }
    // A bearer token travels in a header: anything but visible ASCII could
    // never be sent, and every client would be refused.
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Failure::usage(format!(
            "--token-env: {var} holds a space, a control character or a non-ASCII character, which no \
             Authorization header can carry; set it to the token clients send"
        )));
    }
    Ok(token.to_owned())
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
