//! The server file: where to listen, how often to refresh, the limits, and
//! the tenants, each with its tokens and its own skillstore configuration
//! (or the shared template with `{tenant}` put into its locations).
//!
//! ```yaml
//! listen: 127.0.0.1:8080        # `serve --listen` wins
//! refresh_interval: 30s         # the poll of every source; with a change feed, its fallback
//! changes:                      # mounts with `changes: journal`
//!   interval: 1s                # one read of each store's journal
//!   poll_interval: 5m           # the safety poll while the journal is followed (default: 10 x refresh_interval)
//! hooks:
//!   git_secrets:                # POST /v1/hooks/git: the secrets push webhooks are signed with
//!     - env: GIT_HOOK_SECRET    # read from the environment, never written in the file
//! limits:
//!   max_body_bytes: 10485760    # default: the read limit, 10 MiB
//!   request_timeout: 30s        # a whole request, body included (MCP: until its answer starts)
//!   max_concurrent_requests: 256
//!   page_size: 100              # resources/list and skills/list pages
//!   header_read_timeout: 10s    # a request's headers, and the wait for them on an idle connection
//!   max_connections: 1024       # open connections; more wait in the kernel's queue
//!   mcp_sessions: 512           # MCP sessions open at once, all tokens
//!   mcp_sessions_per_token: 32
//!   mcp_session_idle: 5m        # an MCP session unused this long is closed
//!   max_loaded_tenants: 1000    # tenants kept loaded; the least recently used is unloaded past it (default: all)
//!   tenant_idle_unload: 10m     # a tenant without requests this long is unloaded (default: never)
//!   max_rendered_bytes: 67108864   # rendered lists, shows and prompts kept, all tenants
//!   anonymous_loads: 2          # public tenants anonymous discovery requests may be loading at once (0: none)
//! allowed_origins: []           # browser origins besides loopback ones allowed to call
//! metrics_tokens:               # who may read /metrics (any token shape below)
//!   - env: METRICS_TOKEN
//! auth:
//!   jwt:                        # bearer JWTs besides the tokens below (see `JwtSpec`)
//!     jwks_url: https://idp.example.com/.well-known/jwks.json
//!     issuer: https://idp.example.com/
//!     audience: skillstore
//!     tenant_claim: tenant
//!     scope_claim: scope
//! template:                     # a skillstore configuration
//!   mounts:
//!     - at: /
//!       location: s3://skills/tenants/{tenant}
//!   sources:
//!     - path: /base
//!     - path: /team
//!       writable: true
//! tenants:
//!   - name: acme
//!     tokens:
//!       - sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
//!         scope: write          # read (default) or write (read and write)
//!       - env: ACME_READ_TOKEN  # the token itself, read from the environment
//!   - name: globex
//!     config: { sources: [ { path: /skills } ] }   # instead of the template
//!     discovery: public         # its winners at /t/globex/.well-known/agent-skills/, no token needed
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use skillstore::Config;
use skillstore::config::MountConfig;

use crate::error::ServerError;

/// The default refresh interval: 30 seconds.
pub const DEFAULT_REFRESH: Duration = Duration::from_secs(30);

/// What a token allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Reading skills.
    #[default]
    Read,
    /// Reading and writing skills (where the tenant's source is writable).
    Write,
}

/// One token of a tenant: its SHA-256 (hex), or the name of an
/// environment variable holding the token itself.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenSpec {
    /// The token's SHA-256, 64 hex digits.
    #[serde(default)]
    pub sha256: Option<String>,
    /// An environment variable holding the token.
    #[serde(default)]
    pub env: Option<String>,
    /// What the token allows.
    #[serde(default)]
    pub scope: Scope,
}

/// Whether a tenant's skills are published for Agent Skills discovery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Discovery {
    /// Not published (the default): the tenant's discovery paths answer
    /// 404, as a tenant that does not exist.
    #[default]
    Private,
    /// Published to anyone, without a token, at
    /// `/t/TENANT/.well-known/agent-skills/`.
    Public,
}

/// One tenant.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TenantSpec {
    /// The tenant's name: lowercase ASCII letters, digits, `-` and `_`.
    pub name: String,
    /// The tokens naming this tenant.
    #[serde(default)]
    pub tokens: Vec<TokenSpec>,
    /// The tenant's own configuration; the template's when absent.
    #[serde(default)]
    pub config: Option<Config>,
    /// Whether its winners are published for discovery.
    #[serde(default)]
    pub discovery: Discovery,
}

/// How callers are authenticated besides the tenants' tokens.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthSpec {
    /// Bearer JWTs, verified against a JWKS: the tenant and the scope come
    /// from the token's claims.
    #[serde(default)]
    pub jwt: Option<JwtSpec>,
}

/// A JWT signature algorithm the server verifies. `none` and HMAC
/// (`HS256`, ...) are never taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
pub enum JwtAlgorithm {
    /// RSASSA-PKCS1-v1_5 with SHA-256, an RSA key (`kty: RSA`) of at least
    /// 2048 bits.
    RS256,
    /// ECDSA on P-256 with SHA-256 (`kty: EC`, `crv: P-256`).
    ES256,
    /// Ed25519 (`kty: OKP`, `crv: Ed25519`).
    #[serde(rename = "EdDSA")]
    EdDsa,
}

impl JwtAlgorithm {
    /// The name a token's `alg` and the server file give it.
    pub fn name(self) -> &'static str {
        match self {
            JwtAlgorithm::RS256 => "RS256",
            JwtAlgorithm::ES256 => "ES256",
            JwtAlgorithm::EdDsa => "EdDSA",
        }
    }
}

/// Bearer JWTs verified against a JWKS (`auth.jwt`).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JwtSpec {
    /// Where the keys are fetched from: an `https://` URL (`http://` only
    /// for a loopback host). Give exactly one of `jwks_url` and `jwks_file`.
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// A local JWKS file, relative to the server file's directory.
    #[serde(default)]
    pub jwks_file: Option<String>,
    /// The `iss` every token must carry.
    pub issuer: String,
    /// A value the token's `aud` must hold.
    pub audience: String,
    /// The algorithms taken (default all three); a token's `alg` must also
    /// match its key's type.
    #[serde(default)]
    pub algorithms: Option<Vec<JwtAlgorithm>>,
    /// The clock skew allowed on `exp` and `nbf` (default `60s`, at most
    /// `5m`; `0` for none).
    #[serde(default)]
    pub clock_skew: Option<String>,
    /// The claim naming the tenant (default `tenant`).
    #[serde(default)]
    pub tenant_claim: Option<String>,
    /// The claim holding the scopes, a space-separated string or an array
    /// (default `scope`).
    #[serde(default)]
    pub scope_claim: Option<String>,
    /// Scope values and what each allows (default `read: read` and
    /// `write: write`); a token with none of them is refused.
    #[serde(default)]
    pub scopes: Option<BTreeMap<String, Scope>>,
    /// Whether a tenant named by a valid token that the file does not list
    /// is served from the `template`.
    #[serde(default)]
    pub tenants_from_claims: bool,
    /// The shortest time between two fetches of the JWKS, whatever its
    /// cache headers say or a token's unknown `kid` asks (default `30s`).
    #[serde(default)]
    pub jwks_min_refetch: Option<String>,
    /// The longest the JWKS is kept before it is fetched again (default
    /// `1h`); its `Cache-Control: max-age` is honoured between the two.
    #[serde(default)]
    pub jwks_max_refetch: Option<String>,
    /// The longest one fetch of the JWKS may take (default `10s`).
    #[serde(default)]
    pub jwks_timeout: Option<String>,
}

/// Request limits.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsSpec {
    /// The largest request body, in bytes.
    #[serde(default)]
    pub max_body_bytes: Option<u64>,
    /// The longest a request may take (`30s`, `2m`).
    #[serde(default)]
    pub request_timeout: Option<String>,
    /// Requests served at once; more wait their turn.
    #[serde(default)]
    pub max_concurrent_requests: Option<usize>,
    /// The most entries one page of a list holds.
    #[serde(default)]
    pub page_size: Option<usize>,
    /// The longest a client may take to send a request's headers, counted
    /// from when the connection is ready for them (`10s`).
    #[serde(default)]
    pub header_read_timeout: Option<String>,
    /// Connections open at once.
    #[serde(default)]
    pub max_connections: Option<usize>,
    /// MCP sessions open at once, all tokens together.
    #[serde(default)]
    pub mcp_sessions: Option<usize>,
    /// MCP sessions one token may hold open.
    #[serde(default)]
    pub mcp_sessions_per_token: Option<usize>,
    /// How long an unused MCP session is kept (`5m`).
    #[serde(default)]
    pub mcp_session_idle: Option<String>,
    /// Tenants kept loaded at once; past it the least recently used is
    /// unloaded (loaded again at its next request).
    #[serde(default)]
    pub max_loaded_tenants: Option<usize>,
    /// A tenant without requests this long is unloaded (`10m`).
    #[serde(default)]
    pub tenant_idle_unload: Option<String>,
    /// Bytes of rendered answers (lists, shows, prompts) kept across all
    /// tenants; past it answers are rendered at each request.
    #[serde(default)]
    pub max_rendered_bytes: Option<usize>,
    /// Tenants that anonymous discovery requests may be loading at once;
    /// past it such a request is answered 503 with `Retry-After`.
    #[serde(default)]
    pub anonymous_loads: Option<usize>,
}

/// The server file's `changes:`: how the journals of mounts set to
/// `changes: journal` are followed.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChangesSpec {
    /// How often each store's journal is read (`1s`).
    #[serde(default)]
    pub interval: Option<String>,
    /// How often a tenant whose journals are all followed is listed anyway
    /// (default ten times `refresh_interval`); a tenant whose journal
    /// cannot be read is listed every `refresh_interval`.
    #[serde(default)]
    pub poll_interval: Option<String>,
}

/// The server file's `hooks:`.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HooksSpec {
    /// The secrets `POST /v1/hooks/git` accepts a push event signed with
    /// (GitHub's and Gitea's HMAC, GitLab's token); none: the route is off.
    #[serde(default)]
    pub git_secrets: Vec<SecretSpec>,
}

/// A secret, named by the environment variable that holds it.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretSpec {
    /// The variable.
    pub env: String,
}

/// A webhook secret's bytes; never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct HookSecret(pub std::sync::Arc<[u8]>);

impl std::fmt::Debug for HookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HookSecret(..)")
    }
}

/// The default interval between two reads of a change journal.
pub const DEFAULT_CHANGES_INTERVAL: Duration = Duration::from_secs(1);

/// The server file as written.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerFile {
    /// The address to listen on.
    #[serde(default)]
    pub listen: Option<String>,
    /// How often each tenant's catalog is refreshed (`30s`).
    #[serde(default)]
    pub refresh_interval: Option<String>,
    /// How change journals are followed.
    #[serde(default)]
    pub changes: ChangesSpec,
    /// Push webhooks.
    #[serde(default)]
    pub hooks: HooksSpec,
    /// Request limits.
    #[serde(default)]
    pub limits: LimitsSpec,
    /// The configuration of every tenant without one of its own, with
    /// `{tenant}` replaced by the tenant's name in mount locations.
    #[serde(default)]
    pub template: Option<Config>,
    /// The tenants.
    #[serde(default)]
    pub tenants: Vec<TenantSpec>,
    /// Browser origins (`https://app.example.com`) allowed besides
    /// loopback ones; any other `Origin` is refused.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// The tokens that may read `/metrics` (their scope is ignored).
    #[serde(default)]
    pub metrics_tokens: Vec<TokenSpec>,
    /// How callers are authenticated besides the tenants' tokens.
    #[serde(default)]
    pub auth: AuthSpec,
}

impl ServerFile {
    /// The JSON Schema (draft 2020-12) of a server file, generated from
    /// these types (a tenant's `config` and the `template` are
    /// `skillstore.yaml` configurations).
    pub fn json_schema() -> serde_json::Value {
        schemars::schema_for!(ServerFile).to_value()
    }
}

/// Limits applied to every request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest request body, in bytes (default 10 MiB).
    pub max_body_bytes: u64,
    /// The longest a request may take (default 30 s).
    pub request_timeout: Duration,
    /// Requests served at once (default 256).
    pub max_concurrent_requests: usize,
    /// The most entries one page of a list holds (default 100, at most 1000).
    pub page_size: usize,
    /// The longest a client may take to send a request's headers, counted
    /// from when the connection is ready for them: it also closes a
    /// connection that is silent, or idle between requests, that long
    /// (default 10 s).
    pub header_read_timeout: Duration,
    /// Connections open at once; past it new ones wait to be accepted
    /// (default 1024).
    pub max_connections: usize,
    /// MCP sessions open at once, all tokens together (default 512).
    pub mcp_sessions: usize,
    /// MCP sessions one token may hold open (default 32).
    pub mcp_sessions_per_token: usize,
    /// How long an MCP session may go unused before it is closed and its
    /// memory given back (default 5 minutes).
    pub mcp_session_idle: Duration,
    /// Tenants kept loaded at once (default: no bound). A tenant is loaded
    /// at its first request; past the bound, the least recently used that
    /// no request used within `request_timeout` is unloaded.
    pub max_loaded_tenants: Option<usize>,
    /// A tenant without requests this long is unloaded (default: never).
    pub tenant_idle_unload: Option<Duration>,
    /// Bytes of rendered answers (lists, shows, prompts) kept across all
    /// tenants (default 64 MiB); past it, answers are rendered at each
    /// request.
    pub max_rendered_bytes: usize,
    /// Public tenants that anonymous discovery requests may be loading at
    /// once (default 2); past it, such a request for a tenant not loaded
    /// is answered 503 with `Retry-After` at once. 0: anonymous requests
    /// never load a tenant, and are served only while another request
    /// keeps it loaded.
    pub anonymous_loads: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: skillstore::backends::DEFAULT_READ_LIMIT,
            request_timeout: Duration::from_secs(30),
            max_concurrent_requests: 256,
            page_size: 100,
            header_read_timeout: Duration::from_secs(10),
            max_connections: 1024,
            mcp_sessions: 512,
            mcp_sessions_per_token: 32,
            mcp_session_idle: Duration::from_secs(300),
            max_loaded_tenants: None,
            tenant_idle_unload: None,
            max_rendered_bytes: 64 * 1024 * 1024,
            anonymous_loads: 2,
        }
    }
}

/// A token, hashed: only the SHA-256 of a token is ever kept.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenHash(pub [u8; 32]);

impl std::fmt::Debug for TokenHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenHash(..)")
    }
}

impl TokenHash {
    /// The hash of `token`.
    pub fn of(token: &str) -> Self {
        TokenHash(Sha256::digest(token.as_bytes()).into())
    }

    /// The 64 lowercase hex digits a server file's `sha256:` takes.
    pub fn to_hex(&self) -> String {
        skillstore::backends::hex(&self.0)
    }

    /// Parses 64 hex digits.
    pub fn from_hex(hex: &str) -> Option<Self> {
        let bytes = hex.as_bytes();
        if bytes.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, pair) in bytes.chunks(2).enumerate() {
            let digit = |b: u8| (b as char).to_digit(16);
            out[i] = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
        }
        Some(TokenHash(out))
    }
}

/// One tenant, ready to open: its name, its configuration and its tokens.
#[derive(Debug, Clone)]
pub struct TenantSettings {
    /// The tenant's name.
    pub name: String,
    /// The configuration [`Config::open`] assembles the tenant's namespace
    /// from.
    pub config: Config,
    /// The tenant's tokens, hashed, with their scopes.
    pub tokens: Vec<(TokenHash, Scope)>,
    /// Whether its winners are published for discovery.
    pub discovery: Discovery,
}

/// Where a JWKS is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    /// Fetched over HTTPS (or plain HTTP on a loopback host).
    Url(String),
    /// A local file.
    File(PathBuf),
}

/// The largest clock skew `auth.jwt.clock_skew` may allow.
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(300);

/// `auth.jwt`, checked.
#[derive(Debug, Clone)]
pub struct JwtSettings {
    /// Where the keys come from.
    pub jwks: JwksSource,
    /// The `iss` every token must carry.
    pub issuer: String,
    /// A value every token's `aud` must hold.
    pub audience: String,
    /// The algorithms taken.
    pub algorithms: Vec<JwtAlgorithm>,
    /// The skew allowed on `exp` and `nbf`.
    pub clock_skew: Duration,
    /// The claim naming the tenant.
    pub tenant_claim: String,
    /// The claim holding the scopes.
    pub scope_claim: String,
    /// Scope values and what each allows.
    pub scopes: BTreeMap<String, Scope>,
    /// Whether an unlisted tenant named by a valid token is served from
    /// the template.
    pub tenants_from_claims: bool,
    /// The shortest time between two fetches of the keys.
    pub min_refetch: Duration,
    /// The longest the keys are kept.
    pub max_refetch: Duration,
    /// The longest one fetch may take.
    pub fetch_timeout: Duration,
}

/// Everything the server needs: tenants, refresh interval and limits.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The tenants; at least one.
    pub tenants: Vec<TenantSettings>,
    /// How often catalogs are refreshed.
    pub refresh_interval: Duration,
    /// How often each change journal is read.
    pub changes_interval: Duration,
    /// How often a tenant whose journals are followed is listed anyway.
    pub journal_poll_interval: Duration,
    /// The secrets push webhooks may be signed with (none: no webhooks).
    pub hook_secrets: Vec<HookSecret>,
    /// Request limits.
    pub limits: Limits,
    /// The address from the server file, if any.
    pub listen: Option<String>,
    /// Browser origins allowed besides loopback ones.
    pub allowed_origins: Vec<String>,
    /// The tokens that may read `/metrics`, hashed.
    pub metrics_tokens: Vec<TokenHash>,
    /// The server file these settings were read from, if any: `serve`
    /// reads it again when it changes and on SIGHUP.
    pub file: Option<PathBuf>,
    /// Bearer JWTs, when the file takes them.
    pub jwt: Option<JwtSettings>,
    /// The template tenants named by a JWT's claim are made from, when the
    /// file serves such tenants (`auth.jwt.tenants_from_claims`).
    pub claims_template: Option<Template>,
}

impl Settings {
    /// One tenant named `default`, with no tokens: allowed on a loopback
    /// address only.
    pub fn single(config: Config) -> Self {
        Settings {
            tenants: vec![TenantSettings {
                name: "default".into(),
                config,
                tokens: Vec::new(),
                discovery: Discovery::Private,
            }],
            refresh_interval: DEFAULT_REFRESH,
            changes_interval: DEFAULT_CHANGES_INTERVAL,
            journal_poll_interval: DEFAULT_REFRESH * 10,
            hook_secrets: Vec::new(),
            limits: Limits::default(),
            listen: None,
            allowed_origins: Vec::new(),
            metrics_tokens: Vec::new(),
            file: None,
            jwt: None,
            claims_template: None,
        }
    }

    /// Reads and parses a server file; relative locations in tenants'
    /// configurations resolve against the file's directory.
    pub fn load(path: &Path) -> Result<Self, ServerError> {
        let text = skillstore::location::read_local_text(path, skillstore::backends::DEFAULT_READ_LIMIT, "server file")
            .map_err(|e| ServerError::Config(e.to_string()))?;
        let base = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut settings = Settings::parse(&text, &base).map_err(|e| match e {
            ServerError::Config(m) => ServerError::Config(format!("{}: {m}", path.display())),
            other => other,
        })?;
        settings.file = Some(path.to_path_buf());
        Ok(settings)
    }

    /// Parses a server file's text; relative locations resolve against
    /// `base`. Tokens named by environment variables are read now.
    pub fn parse(text: &str, base: &Path) -> Result<Self, ServerError> {
        let file: ServerFile =
            serde_yaml::from_str(text).map_err(|e| ServerError::Config(format!("invalid server file: {e}")))?;
        Settings::from_file(file, base, &|name| std::env::var(name).ok())
    }

    /// Builds settings from a parsed file; `env` looks up token variables.
    pub fn from_file(file: ServerFile, base: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Self, ServerError> {
        let from_claims = file.auth.jwt.as_ref().is_some_and(|j| j.tenants_from_claims);
        if file.tenants.is_empty() && !from_claims {
            return Err(ServerError::Config(
                "the server file names no tenants (and takes none from JWT claims: `auth.jwt.tenants_from_claims`)"
                    .into(),
            ));
        }
        let mut tenants = Vec::with_capacity(file.tenants.len());
        for spec in file.tenants {
            check_tenant_name(&spec.name)?;
            if tenants.iter().any(|t: &TenantSettings| t.name == spec.name) {
                return Err(ServerError::Config(format!(
                    "the tenant `{}` is named twice",
                    spec.name
                )));
            }
            let mut config = match (spec.config, &file.template) {
                (Some(config), _) => config,
                (None, Some(template)) => instantiate(template, &spec.name),
                (None, None) => {
                    return Err(ServerError::Config(format!(
                        "the tenant `{}` has no `config` and there is no `template`",
                        spec.name
                    )));
                }
            };
            settle(&mut config, base);
            let mut tokens = Vec::with_capacity(spec.tokens.len());
            for (i, token) in spec.tokens.iter().enumerate() {
                let hash = token_hash(token, env)
                    .map_err(|e| ServerError::Config(format!("token {} of the tenant `{}`: {e}", i + 1, spec.name)))?;
                if tenants
                    .iter()
                    .any(|t: &TenantSettings| t.tokens.iter().any(|(h, _)| *h == hash))
                    || tokens.iter().any(|(h, _)| *h == hash)
                {
                    return Err(ServerError::Config(format!(
                        "token {} of the tenant `{}` is used twice",
                        i + 1,
                        spec.name
                    )));
                }
                tokens.push((hash, token.scope));
            }
            tenants.push(TenantSettings {
                name: spec.name,
                config,
                tokens,
                discovery: spec.discovery,
            });
        }
        let jwt = match &file.auth.jwt {
            Some(spec) => Some(jwt_settings(spec, base, file.template.is_some())?),
            None => None,
        };
        if jwt.is_none() && tenants.len() > 1 && tenants.iter().any(|t| t.tokens.is_empty()) {
            return Err(ServerError::Config(
                "with several tenants, every tenant needs a token: the token names the tenant".into(),
            ));
        }
        let limits = limits(&file.limits)?;
        let refresh_interval = match &file.refresh_interval {
            Some(text) => parse_duration(text, "refresh_interval")?,
            None => DEFAULT_REFRESH,
        };
        let changes_interval = match &file.changes.interval {
            Some(text) => parse_duration(text, "changes.interval")?,
            None => DEFAULT_CHANGES_INTERVAL,
        };
        let mut hook_secrets = Vec::with_capacity(file.hooks.git_secrets.len());
        for (i, secret) in file.hooks.git_secrets.iter().enumerate() {
            match env(&secret.env) {
                Some(value) if !value.is_empty() => hook_secrets.push(HookSecret(value.into_bytes().into())),
                _ => {
                    return Err(ServerError::Config(format!(
                        "hooks.git_secrets {}: the variable `{}` is not set",
                        i + 1,
                        secret.env
                    )));
                }
            }
        }
        let journal_poll_interval = match &file.changes.poll_interval {
            Some(text) => parse_duration(text, "changes.poll_interval")?,
            None => refresh_interval.saturating_mul(10),
        };
        let mut metrics_tokens = Vec::with_capacity(file.metrics_tokens.len());
        for (i, token) in file.metrics_tokens.iter().enumerate() {
            let hash =
                token_hash(token, env).map_err(|e| ServerError::Config(format!("metrics token {}: {e}", i + 1)))?;
            if tenants.iter().any(|t| t.tokens.iter().any(|(h, _)| *h == hash)) {
                return Err(ServerError::Config(format!(
                    "metrics token {} is also a tenant's token",
                    i + 1
                )));
            }
            metrics_tokens.push(hash);
        }
        for origin in &file.allowed_origins {
            crate::http::origin::parse_origin(origin).ok_or_else(|| {
                ServerError::Config(format!(
                    "allowed_origins: `{}` is not an origin (scheme://host[:port])",
                    origin.escape_debug()
                ))
            })?;
        }
        Ok(Settings {
            tenants,
            refresh_interval,
            changes_interval,
            journal_poll_interval,
            hook_secrets,
            limits,
            listen: file.listen,
            allowed_origins: file.allowed_origins,
            metrics_tokens,
            file: None,
            claims_template: match (&jwt, &file.template) {
                (Some(jwt), Some(template)) if jwt.tenants_from_claims => Some(Template {
                    config: template.clone(),
                    base: base.to_path_buf(),
                }),
                _ => None,
            },
            jwt,
        })
    }

    /// True when some tenant can be reached without a token.
    pub fn is_open(&self) -> bool {
        self.jwt.is_none() && self.tenants.iter().any(|t| t.tokens.is_empty())
    }
}

/// The hash a token entry names: its `sha256`, or the hash of the
/// variable `env` holds.
fn token_hash(token: &TokenSpec, env: &dyn Fn(&str) -> Option<String>) -> Result<TokenHash, String> {
    match (&token.sha256, &token.env) {
        (Some(hex), None) => {
            TokenHash::from_hex(&hex.to_ascii_lowercase()).ok_or_else(|| "`sha256` takes 64 hex digits".to_owned())
        }
        (None, Some(var)) => match env(var) {
            Some(value) if !value.is_empty() => Ok(TokenHash::of(&value)),
            _ => Err(format!("the variable `{var}` is not set")),
        },
        _ => Err("give exactly one of `sha256` and `env`".to_owned()),
    }
}

fn limits(spec: &LimitsSpec) -> Result<Limits, ServerError> {
    let defaults = Limits::default();
    let duration_or = |text: &Option<String>, key: &str, default: Duration| match text {
        Some(text) => parse_duration(text, key),
        None => Ok(default),
    };
    Ok(Limits {
        max_body_bytes: spec.max_body_bytes.unwrap_or(defaults.max_body_bytes),
        request_timeout: match &spec.request_timeout {
            Some(text) => parse_duration(text, "limits.request_timeout")?,
            None => defaults.request_timeout,
        },
        max_concurrent_requests: spec
            .max_concurrent_requests
            .unwrap_or(defaults.max_concurrent_requests)
            .max(1),
        page_size: spec.page_size.unwrap_or(defaults.page_size).clamp(1, 1000),
        header_read_timeout: duration_or(
            &spec.header_read_timeout,
            "limits.header_read_timeout",
            defaults.header_read_timeout,
        )?,
        max_connections: spec.max_connections.unwrap_or(defaults.max_connections).max(1),
        mcp_sessions: spec.mcp_sessions.unwrap_or(defaults.mcp_sessions).max(1),
        mcp_sessions_per_token: spec
            .mcp_sessions_per_token
            .unwrap_or(defaults.mcp_sessions_per_token)
            .max(1),
        mcp_session_idle: duration_or(
            &spec.mcp_session_idle,
            "limits.mcp_session_idle",
            defaults.mcp_session_idle,
        )?,
        max_loaded_tenants: spec.max_loaded_tenants.map(|n| n.max(1)),
        tenant_idle_unload: spec
            .tenant_idle_unload
            .as_ref()
            .map(|t| parse_duration(t, "limits.tenant_idle_unload"))
            .transpose()?,
        max_rendered_bytes: spec.max_rendered_bytes.unwrap_or(defaults.max_rendered_bytes),
        anonymous_loads: spec.anonymous_loads.unwrap_or(defaults.anonymous_loads),
    })
}

fn parse_duration(text: &str, key: &str) -> Result<Duration, ServerError> {
    parse_interval(text).map_err(|e| ServerError::Config(format!("`{key}`: {e}")))
}

/// Parses an interval as the server file and the command line's flags
/// write it: a number of seconds (`30`, `0.5`), or a duration with units
/// (`500ms`, `30s`, `5m`, `1h 30m`, as `humantime` reads them). Zero and
/// more than a day are refused.
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let duration = match text.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds >= 0.0 => Duration::from_secs_f64(seconds.min(1e9)),
        Ok(_) => return Err(format!("`{text}` is not an interval (examples: 30s, 500ms, 5m)")),
        Err(_) => humantime::parse_duration(text)
            .map_err(|e| format!("`{text}` is not an interval ({e}; examples: 30s, 500ms, 5m)"))?,
    };
    if duration < Duration::from_millis(1) || duration > Duration::from_secs(86_400) {
        return Err(format!("`{text}`: an interval is between 1ms and 24h"));
    }
    Ok(duration)
}

/// `auth.jwt`, checked: one key source (a file is read and its keys
/// checked now), an issuer and an audience, bounded intervals.
fn jwt_settings(spec: &JwtSpec, base: &Path, has_template: bool) -> Result<JwtSettings, ServerError> {
    let refuse = |why: String| ServerError::Config(format!("auth.jwt: {why}"));
    let jwks = match (&spec.jwks_url, &spec.jwks_file) {
        (Some(url), None) => {
            crate::jwt::check_jwks_url(url).map_err(|e| refuse(format!("`jwks_url`: {e}")))?;
            JwksSource::Url(url.clone())
        }
        (None, Some(file)) => {
            let path = base.join(file);
            crate::jwt::check_jwks_file(&path).map_err(|e| refuse(format!("`jwks_file` {}: {e}", path.display())))?;
            JwksSource::File(path)
        }
        _ => return Err(refuse("give exactly one of `jwks_url` and `jwks_file`".into())),
    };
    if spec.issuer.trim().is_empty() || spec.audience.trim().is_empty() {
        return Err(refuse("`issuer` and `audience` may not be empty".into()));
    }
    let algorithms = match &spec.algorithms {
        Some(list) if list.is_empty() => return Err(refuse("`algorithms` lists none".into())),
        Some(list) => list.clone(),
        None => vec![JwtAlgorithm::RS256, JwtAlgorithm::ES256, JwtAlgorithm::EdDsa],
    };
    let clock_skew = match spec.clock_skew.as_deref().map(str::trim) {
        None => Duration::from_secs(60),
        Some("0" | "0s") => Duration::ZERO,
        Some(text) => parse_duration(text, "auth.jwt.clock_skew")?,
    };
    if clock_skew > MAX_CLOCK_SKEW {
        return Err(refuse("`clock_skew` is at most 5m".into()));
    }
    let claim = |value: &Option<String>, default: &str, key: &str| match value {
        Some(name) if name.is_empty() => Err(refuse(format!("`{key}` may not be empty"))),
        Some(name) => Ok(name.clone()),
        None => Ok(default.to_owned()),
    };
    let tenant_claim = claim(&spec.tenant_claim, "tenant", "tenant_claim")?;
    let scope_claim = claim(&spec.scope_claim, "scope", "scope_claim")?;
    let scopes = match &spec.scopes {
        Some(map) if map.is_empty() => return Err(refuse("`scopes` maps no value".into())),
        Some(map) => map.clone(),
        None => BTreeMap::from([("read".to_owned(), Scope::Read), ("write".to_owned(), Scope::Write)]),
    };
    if scopes.keys().any(|k| k.is_empty() || k.contains(char::is_whitespace)) {
        return Err(refuse("a `scopes` value is one word".into()));
    }
    if spec.tenants_from_claims && !has_template {
        return Err(refuse(
            "`tenants_from_claims` serves tenants from the `template`, and there is none".into(),
        ));
    }
    let interval = |value: &Option<String>, key: &str, default: Duration| match value {
        Some(text) => parse_duration(text, &format!("auth.jwt.{key}")),
        None => Ok(default),
    };
    let min_refetch = interval(&spec.jwks_min_refetch, "jwks_min_refetch", Duration::from_secs(30))?;
    let max_refetch = interval(&spec.jwks_max_refetch, "jwks_max_refetch", Duration::from_secs(3600))?;
    if min_refetch > max_refetch {
        return Err(refuse("`jwks_min_refetch` is longer than `jwks_max_refetch`".into()));
    }
    let fetch_timeout = interval(&spec.jwks_timeout, "jwks_timeout", Duration::from_secs(10))?;
    if fetch_timeout > Duration::from_secs(60) {
        return Err(refuse("`jwks_timeout` is at most 1m".into()));
    }
    Ok(JwtSettings {
        jwks,
        issuer: spec.issuer.clone(),
        audience: spec.audience.clone(),
        algorithms,
        clock_skew,
        tenant_claim,
        scope_claim,
        scopes,
        tenants_from_claims: spec.tenants_from_claims,
        min_refetch,
        max_refetch,
        fetch_timeout,
    })
}

/// Tenant names go into locations and logs: keep them plain. A name taken
/// from a token's claim passes the same rule.
pub(crate) fn check_tenant_name(name: &str) -> Result<(), ServerError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && !name.starts_with(['-', '_']);
    if ok {
        Ok(())
    } else {
        Err(ServerError::Config(format!(
            "the tenant name `{}` is not allowed: use 1 to 64 lowercase letters, digits, `-` and `_`",
            name.escape_debug()
        )))
    }
}

/// A tenant's configuration made ready to open: relative locations
/// against `base`, and the base itself mounted at `/` when nothing is.
fn settle(config: &mut Config, base: &Path) {
    config.base_dir = Some(base.to_path_buf());
    if config.mounts.is_empty() {
        config.mounts.push(MountConfig {
            at: "/".into(),
            location: ".".into(),
            ..MountConfig::default()
        });
    }
}

/// The server file's template, for tenants named by a token's claim
/// rather than listed (`auth.jwt.tenants_from_claims`).
#[derive(Debug, Clone)]
pub struct Template {
    config: Config,
    base: PathBuf,
}

impl Template {
    /// The tenant `name` (which passed the tenant-name rule) as the
    /// template makes it: no tokens of its own, discovery private.
    pub fn tenant(&self, name: &str) -> TenantSettings {
        let mut config = instantiate(&self.config, name);
        settle(&mut config, &self.base);
        TenantSettings {
            name: name.to_owned(),
            config,
            tokens: Vec::new(),
            discovery: Discovery::Private,
        }
    }
}

/// The template with `{tenant}` replaced by `name` in every mount location.
fn instantiate(template: &Config, name: &str) -> Config {
    let mut config = template.clone();
    for mount in &mut config.mounts {
        mount.location = mount.location.replace("{tenant}", name);
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_seconds_or_durations_with_units_between_1ms_and_a_day() {
        for (text, expected) in [
            ("30", Duration::from_secs(30)),
            ("0.5", Duration::from_millis(500)),
            ("30s", Duration::from_secs(30)),
            ("250ms", Duration::from_millis(250)),
            ("1m 30s", Duration::from_secs(90)),
            ("2h", Duration::from_secs(7200)),
            ("24h", Duration::from_secs(86_400)),
        ] {
            assert_eq!(parse_interval(text), Ok(expected), "{text:?}");
        }
        for bad in ["", "0", "0s", "s", "-1", "2 days", "25h", "NaN", "inf", "1e30", "10x"] {
            assert!(parse_interval(bad).is_err(), "{bad:?} was accepted");
        }
    }

    const FILE: &str = "refresh_interval: 5s\ntemplate:\n  mounts:\n    - at: /\n      location: s3://skills/tenants/{tenant}\n  sources:\n    - path: /base\ntenants:\n  - name: acme\n    tokens:\n      - sha256: 9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08\n        scope: write\n  - name: globex\n    tokens:\n      - env: GLOBEX_TOKEN\n    config:\n      sources:\n        - path: /skills\n";

    fn env(name: &str) -> Option<String> {
        (name == "GLOBEX_TOKEN").then(|| "globex-secret".to_owned())
    }

    #[test]
    fn template_locations_name_the_tenant() {
        let file: ServerFile = serde_yaml::from_str(FILE).unwrap();
        let settings = Settings::from_file(file, Path::new("/srv"), &env).unwrap();
        assert_eq!(settings.refresh_interval, Duration::from_secs(5));
        assert_eq!(
            settings.tenants[0].config.mounts[0].location,
            "s3://skills/tenants/acme"
        );
        assert_eq!(settings.tenants[0].tokens, vec![(TokenHash::of("test"), Scope::Write)]);
        assert_eq!(
            settings.tenants[1].tokens,
            vec![(TokenHash::of("globex-secret"), Scope::Read)]
        );
        assert_eq!(settings.tenants[1].config.mounts[0].location, ".");
        assert_eq!(settings.tenants[0].discovery, Discovery::Private);
    }

    #[test]
    fn discovery_is_private_unless_public() {
        let text = FILE.replace(
            "    tokens:\n      - env: GLOBEX_TOKEN\n",
            "    tokens:\n      - env: GLOBEX_TOKEN\n    discovery: public\n",
        );
        let file: ServerFile = serde_yaml::from_str(&text).unwrap();
        let settings = Settings::from_file(file, Path::new("."), &env).unwrap();
        assert_eq!(settings.tenants[1].discovery, Discovery::Public);
        let bad = FILE.replace("    config:\n", "    discovery: open\n    config:\n");
        assert!(serde_yaml::from_str::<ServerFile>(&bad).is_err());
    }

    #[test]
    fn a_missing_token_variable_is_an_error_naming_it() {
        let file: ServerFile = serde_yaml::from_str(FILE).unwrap();
        let err = Settings::from_file(file, Path::new("."), &|_| None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("GLOBEX_TOKEN"), "{err}");
    }

    #[test]
    fn hostile_tenant_names_are_refused() {
        for name in ["", "../x", "a/b", "{tenant}", "Acme", "-x"] {
            assert!(check_tenant_name(name).is_err(), "{name}");
        }
    }

    fn with_auth(auth: &str) -> Result<Settings, String> {
        let text = format!("{FILE}auth:\n  jwt:\n{auth}");
        let file: ServerFile = serde_yaml::from_str(&text).map_err(|e| e.to_string())?;
        Settings::from_file(file, Path::new("/srv"), &env).map_err(|e| e.to_string())
    }

    const JWT: &str = "    jwks_url: https://idp.example.com/jwks.json\n    issuer: https://idp.example.com/\n    audience: skillstore\n";

    #[test]
    fn the_jwt_block_takes_defaults() {
        let settings = with_auth(JWT).unwrap();
        assert!(!settings.is_open());
        let jwt = settings.jwt.unwrap();
        assert_eq!(jwt.jwks, JwksSource::Url("https://idp.example.com/jwks.json".into()));
        assert_eq!(jwt.clock_skew, Duration::from_secs(60));
        assert_eq!(
            jwt.algorithms,
            vec![JwtAlgorithm::RS256, JwtAlgorithm::ES256, JwtAlgorithm::EdDsa]
        );
        assert_eq!(
            (jwt.tenant_claim.as_str(), jwt.scope_claim.as_str()),
            ("tenant", "scope")
        );
        assert_eq!(jwt.scopes.get("write"), Some(&Scope::Write));
        assert!(!jwt.tenants_from_claims);
        let settings = with_auth(&format!(
            "{JWT}    clock_skew: 0\n    algorithms: [EdDSA]\n    scopes: {{skills.read: read}}\n    tenants_from_claims: true\n"
        ))
        .unwrap();
        let jwt = settings.jwt.unwrap();
        assert_eq!(jwt.clock_skew, Duration::ZERO);
        assert_eq!(jwt.algorithms, vec![JwtAlgorithm::EdDsa]);
        assert!(jwt.tenants_from_claims);
    }

    #[test]
    fn a_jwt_block_that_does_not_validate_is_refused_saying_why() {
        for (auth, says) in [
            (
                "    issuer: a\n    audience: b\n",
                "exactly one of `jwks_url` and `jwks_file`",
            ),
            (
                "    jwks_url: https://a/\n    jwks_file: k.json\n    issuer: a\n    audience: b\n",
                "exactly one",
            ),
            (
                "    jwks_url: http://idp.example.com/\n    issuer: a\n    audience: b\n",
                "loopback",
            ),
            ("    jwks_url: https://idp.example.com/\n    audience: b\n", "issuer"),
            ("    jwks_url: https://idp.example.com/\n    issuer: a\n", "audience"),
            (
                "    jwks_url: https://idp.example.com/\n    issuer: ''\n    audience: b\n",
                "may not be empty",
            ),
            (&format!("{JWT}    clock_skew: 10m\n"), "at most 5m"),
            (&format!("{JWT}    algorithms: [HS256]\n"), "HS256"),
            (&format!("{JWT}    algorithms: [none]\n"), "none"),
            (&format!("{JWT}    algorithms: []\n"), "lists none"),
            (&format!("{JWT}    scopes: {{a b: read}}\n"), "one word"),
            (&format!("{JWT}    scopes: {{x: admin}}\n"), "admin"),
            (&format!("{JWT}    jwks_min_refetch: 2h\n"), "longer than"),
            (&format!("{JWT}    jwks_timeout: 5m\n"), "at most 1m"),
            (&format!("{JWT}    tenant_claim: ''\n"), "may not be empty"),
            (
                "    jwks_file: /nonexistent/jwks.json\n    issuer: a\n    audience: b\n",
                "jwks_file",
            ),
        ] {
            let err = with_auth(auth).map(|_| ()).unwrap_err();
            assert!(err.contains(says), "{auth}: {err}");
        }
    }

    #[test]
    fn tenants_from_claims_needs_the_template() {
        let text = "tenants:\n  - name: acme\n    config: { sources: [ { path: /skills } ] }\nauth:\n  jwt:\n    jwks_url: https://idp.example.com/\n    issuer: a\n    audience: b\n    tenants_from_claims: true\n";
        let err = Settings::parse(text, Path::new(".")).unwrap_err().to_string();
        assert!(err.contains("template"), "{err}");
        let settings = Settings::parse(&text.replace("true", "false"), Path::new(".")).unwrap();
        // The JWT names the tenant: a tenant without tokens does not make the server open.
        assert!(!settings.is_open());
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = Settings::parse("tenant: []\n", Path::new(".")).unwrap_err().to_string();
        assert!(err.contains("tenant"), "{err}");
    }
}
