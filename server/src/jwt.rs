//! Bearer JWTs (`auth.jwt` in the server file): a token signed with RS256,
//! ES256 or EdDSA by a key of a JWKS, with its issuer, audience, expiry
//! and not-before checked within the configured clock skew, names a tenant
//! and a scope through the configured claims.
//!
//! The JWKS is a local file or an `https://` URL. It is read when first
//! needed, kept as long as its `Cache-Control: max-age` says (between
//! `jwks_min_refetch` and `jwks_max_refetch`), and read again then, or
//! once when a token names a `kid` the kept set lacks (so a rotated key is
//! taken without a restart), never twice within `jwks_min_refetch`. One
//! read at a time, and only a caller that needs it waits for it (keys due
//! for a read are used meanwhile); a fetch is bounded in time and bytes,
//! and a failed one keeps the keys held before.
//!
//! `none`, HMAC and any algorithm not configured are refused, and a
//! token's `alg` must be the one its key's type is for. Keys are taken
//! from the JWKS only, never from the token's header (`jwk`, `jku`,
//! `x5u`, `x5c`), and a header with `crit` is refused. Every refusal is
//! the same to the caller; the reason goes to the debug log only.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

use crate::settings::{JwksSource, JwtAlgorithm, JwtSettings, Scope};

/// The most bytes a JWKS may hold, fetched or read.
pub const MAX_JWKS_BYTES: usize = 1 << 20;

/// The fewest bits of an RSA key taken.
const MIN_RSA_BITS: usize = 2048;

/// What a valid token says: the tenant it names and what it allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The tenant's name, as the claim gives it (it passed the tenant-name
    /// rule).
    pub tenant: String,
    /// The highest scope the token's scope values map to.
    pub scope: Scope,
}

/// One key of the set, ready to verify with.
struct Key {
    kid: Option<String>,
    alg: JwtAlgorithm,
    key: DecodingKey,
}

/// The keys held, and until when.
struct KeySet {
    keys: Vec<Key>,
    /// When the keys should be read again; `None` before the first read.
    expires: Option<Instant>,
}

/// Where the keys are read from, ready to read.
#[derive(Clone)]
enum Source {
    Url(reqwest::Client, reqwest::Url),
    File(std::path::PathBuf),
}

/// Verifies bearer JWTs for the server (see the module's description).
pub struct JwtVerifier {
    settings: JwtSettings,
    source: Source,
    keys: Arc<RwLock<Arc<KeySet>>>,
    /// Held while the keys are read; holds when the last read began.
    reading: tokio::sync::Mutex<Option<Instant>>,
}

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("jwks", &self.settings.jwks)
            .field("issuer", &self.settings.issuer)
            .finish_non_exhaustive()
    }
}

impl JwtVerifier {
    /// A verifier for `settings`; nothing is read yet.
    pub fn new(settings: &JwtSettings) -> Result<Self, String> {
        let source = match &settings.jwks {
            JwksSource::Url(text) => {
                let url = check_jwks_url(text)?;
                let client = reqwest::Client::builder()
                    .timeout(settings.fetch_timeout)
                    .connect_timeout(settings.fetch_timeout)
                    .redirect(reqwest::redirect::Policy::none())
                    .user_agent(concat!("skillstore/", env!("CARGO_PKG_VERSION")))
                    .build()
                    .map_err(|e| format!("cannot build an HTTP client: {e}"))?;
                Source::Url(client, url)
            }
            JwksSource::File(path) => Source::File(path.clone()),
        };
        Ok(JwtVerifier {
            settings: settings.clone(),
            source,
            keys: Arc::new(RwLock::new(Arc::new(KeySet {
                keys: Vec::new(),
                expires: None,
            }))),
            reading: tokio::sync::Mutex::new(None),
        })
    }

    /// Whether a tenant a token names that the file does not list is to be
    /// served from the template.
    pub fn tenants_from_claims(&self) -> bool {
        self.settings.tenants_from_claims
    }

    /// The identity `token` proves, or why it proves none (for the debug
    /// log, never for the caller: one line, at most 300 characters, what
    /// came from the token escaped).
    pub async fn verify(&self, token: &str) -> Result<Identity, String> {
        self.check(token)
            .await
            .map_err(|why| why.chars().take(300).flat_map(char::escape_debug).collect())
    }

    async fn check(&self, token: &str) -> Result<Identity, String> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| format!("malformed token: {e}"))?;
        if header.crit.is_some() {
            return Err("the token names critical header parameters, and none is understood here".into());
        }
        if header.enc.is_some() || header.zip.is_some() {
            return Err("an encrypted or compressed token".into());
        }
        let alg = match header.alg {
            Algorithm::RS256 => JwtAlgorithm::RS256,
            Algorithm::ES256 => JwtAlgorithm::ES256,
            Algorithm::EdDSA => JwtAlgorithm::EdDsa,
            other => return Err(format!("the algorithm {other:?} is never taken")),
        };
        if !self.settings.algorithms.contains(&alg) {
            return Err(format!("the algorithm {} is not configured", alg.name()));
        }
        let kid = header.kid.as_deref();
        let mut set = self.current().await;
        if !set.keys.iter().any(|k| kid.is_none() || k.kid.as_deref() == kid) {
            set = self.read_again(&set, true).await;
        }
        let key = find(&set, kid, alg)?;
        let mut validation = Validation::new(header.alg);
        validation.leeway = self.settings.clock_skew.as_secs();
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = true;
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&[&self.settings.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation)
            .map_err(|e| format!("refused: {e}"))?;
        self.identity(&data.claims)
    }

    /// The tenant and scope of verified claims.
    fn identity(&self, claims: &Map<String, Value>) -> Result<Identity, String> {
        let tenant = claims
            .get(&self.settings.tenant_claim)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("no string claim `{}`", self.settings.tenant_claim))?;
        crate::settings::check_tenant_name(tenant)
            .map_err(|_| format!("the claim `{}` is not a tenant name", self.settings.tenant_claim))?;
        let values: Vec<&str> = match claims.get(&self.settings.scope_claim) {
            Some(Value::String(text)) => text.split_whitespace().collect(),
            Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let mapped = values.iter().filter_map(|v| self.settings.scopes.get(*v));
        let scope = mapped
            .fold(None, |best, s| match (best, s) {
                (Some(Scope::Write), _) | (_, Scope::Write) => Some(Scope::Write),
                _ => Some(Scope::Read),
            })
            .ok_or_else(|| format!("no value of `{}` is a configured scope", self.settings.scope_claim))?;
        Ok(Identity {
            tenant: tenant.to_owned(),
            scope,
        })
    }

    fn held(&self) -> Arc<KeySet> {
        Arc::clone(&self.keys.read().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// The keys, read again first when they are due. While one caller
    /// reads them, the others go on with the keys held, if any.
    async fn current(&self) -> Arc<KeySet> {
        let set = self.held();
        match set.expires {
            Some(expires) if Instant::now() < expires => set,
            _ => {
                let wait = set.keys.is_empty();
                self.read_again(&set, wait).await
            }
        }
    }

    /// Reads the keys again unless a read began within `min_refetch`, or
    /// another caller replaced `seen` while this one waited; the keys held
    /// after. Without `wait`, a read under way is not waited for.
    async fn read_again(&self, seen: &Arc<KeySet>, wait: bool) -> Arc<KeySet> {
        let mut last = if wait {
            self.reading.lock().await
        } else {
            match self.reading.try_lock() {
                Ok(guard) => guard,
                Err(_) => return self.held(),
            }
        };
        let held = self.held();
        if !Arc::ptr_eq(&held, seen) {
            return held;
        }
        if last.is_some_and(|at| at.elapsed() < self.settings.min_refetch) {
            return held;
        }
        *last = Some(Instant::now());
        // The read runs on its own, so a request that gives up does not
        // waste it: its keys are kept for the next.
        let read = tokio::spawn(read_and_keep(
            self.source.clone(),
            Arc::clone(&self.keys),
            Arc::clone(&held),
            (self.settings.min_refetch, self.settings.max_refetch),
        ));
        read.await.unwrap_or(held)
    }
}

/// Reads the keys from `source` and keeps them in `keys` for their
/// lifetime, bounded by `(min, max)`; on failure keeps `held`. The keys
/// kept after.
async fn read_and_keep(
    source: Source,
    keys: Arc<RwLock<Arc<KeySet>>>,
    held: Arc<KeySet>,
    (min, max): (Duration, Duration),
) -> Arc<KeySet> {
    let read = match source {
        Source::Url(client, url) => fetch(&client, &url).await,
        Source::File(path) => tokio::task::spawn_blocking(move || read_jwks_file(&path))
            .await
            .map_err(|e| format!("reading the file: {e}"))
            .and_then(|read| read.map(|keys| (keys, max))),
    };
    match read {
        Ok((read, lifetime)) => {
            tracing::debug!(target: "skillstore::auth", keys = read.len(), "JWKS read");
            let fresh = Arc::new(KeySet {
                keys: read,
                expires: Some(Instant::now() + lifetime.clamp(min, max)),
            });
            *keys.write().unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::clone(&fresh);
            fresh
        }
        Err(why) => {
            tracing::warn!(target: "skillstore::auth", "the JWKS could not be read, the keys held before are kept: {why}");
            held
        }
    }
}

/// The key `kid` names (or, without a `kid`, the one key for `alg`),
/// which must be a key for `alg`.
fn find<'a>(set: &'a KeySet, kid: Option<&str>, alg: JwtAlgorithm) -> Result<&'a Key, String> {
    match kid {
        Some(kid) => {
            let mut named = set.keys.iter().filter(|k| k.kid.as_deref() == Some(kid)).peekable();
            if named.peek().is_none() {
                return Err("the token's kid is not in the JWKS".into());
            }
            named
                .find(|k| k.alg == alg)
                .ok_or_else(|| format!("the key the token's kid names is not a key for {}", alg.name()))
        }
        None => {
            let mut fitting = set.keys.iter().filter(|k| k.alg == alg);
            match (fitting.next(), fitting.next()) {
                (Some(key), None) => Ok(key),
                (None, _) => Err(format!("the JWKS holds no key for {}", alg.name())),
                (Some(_), Some(_)) => Err("a token without a kid, and several keys fit".into()),
            }
        }
    }
}

/// Fetches the JWKS at `url`: a 200 of at most [`MAX_JWKS_BYTES`], kept
/// for its `Cache-Control: max-age` (5 minutes without one).
async fn fetch(client: &reqwest::Client, url: &reqwest::Url) -> Result<(Vec<Key>, Duration), String> {
    let mut response = client
        .get(url.clone())
        .send()
        .await
        .map_err(|e| format!("fetching: {e}"))?;
    if response.status() != reqwest::StatusCode::OK {
        return Err(format!("the JWKS URL answered {}", response.status()));
    }
    if response.content_length().is_some_and(|n| n > MAX_JWKS_BYTES as u64) {
        return Err(format!("the JWKS is over {MAX_JWKS_BYTES} bytes"));
    }
    let lifetime = response
        .headers()
        .get(reqwest::header::CACHE_CONTROL)
        .and_then(|v| v.to_str().ok())
        .and_then(max_age)
        .unwrap_or(Duration::from_secs(300));
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("reading the JWKS: {e}"))? {
        if body.len() + chunk.len() > MAX_JWKS_BYTES {
            return Err(format!("the JWKS is over {MAX_JWKS_BYTES} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((parse_jwks(&body)?, lifetime))
}

/// How long a `Cache-Control` value lets an answer be kept: `max-age`, or
/// zero for `no-store` or `no-cache`.
fn max_age(value: &str) -> Option<Duration> {
    let mut age = None;
    for directive in value.split(',').map(|d| d.trim().to_ascii_lowercase()) {
        if directive == "no-store" || directive == "no-cache" {
            return Some(Duration::ZERO);
        }
        if let Some(seconds) = directive.strip_prefix("max-age=") {
            age = seconds.trim_matches('"').parse::<u64>().ok().map(Duration::from_secs);
        }
    }
    age
}

/// Checks a `jwks_url`: `https://`, or `http://` for a loopback host; a
/// host and no credentials.
pub fn check_jwks_url(text: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(text).map_err(|e| format!("not a URL: {e}"))?;
    let loopback = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    };
    match url.scheme() {
        "https" => {}
        "http" if loopback => {}
        "http" => return Err("plain http:// is taken only for a loopback host".into()),
        other => return Err(format!("`{other}://` is not taken (https://)")),
    }
    if url.host().is_none() || !url.username().is_empty() || url.password().is_some() {
        return Err("a JWKS URL names a host and no credentials".into());
    }
    Ok(url)
}

/// Checks a local JWKS file: how many usable keys it holds (at least one).
pub fn check_jwks_file(path: &std::path::Path) -> Result<usize, String> {
    read_jwks_file(path).map(|keys| keys.len())
}

/// The usable keys of a local JWKS file; a file without one is refused.
fn read_jwks_file(path: &std::path::Path) -> Result<Vec<Key>, String> {
    let text =
        skillstore::location::read_local_text(path, MAX_JWKS_BYTES as u64, "JWKS file").map_err(|e| e.to_string())?;
    parse_jwks(text.as_bytes())
}

/// The usable keys of a JWKS: RSA (2048 bits or more) for RS256, P-256
/// for ES256, Ed25519 for EdDSA; a key whose `alg` says otherwise, one for
/// encryption, a symmetric (`oct`) key and any other kind are left out.
fn parse_jwks(bytes: &[u8]) -> Result<Vec<Key>, String> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let Some(entries) = value.get("keys").and_then(Value::as_array) else {
        return Err("not a JWKS: no `keys` array".into());
    };
    let keys: Vec<Key> = entries.iter().filter_map(usable_key).collect();
    if keys.is_empty() {
        return Err("no usable key (RSA of 2048 bits or more, P-256 or Ed25519)".into());
    }
    Ok(keys)
}

fn usable_key(entry: &Value) -> Option<Key> {
    let jwk: Jwk = serde_json::from_value(entry.clone()).ok()?;
    if matches!(jwk.common.public_key_use, Some(ref u) if *u != PublicKeyUse::Signature) {
        return None;
    }
    let alg = match &jwk.algorithm {
        AlgorithmParameters::RSA(rsa) => {
            let n = base64::Engine::decode(
                &base64::engine::general_purpose::URL_SAFE_NO_PAD,
                rsa.n.trim_end_matches('='),
            )
            .ok()?;
            let bits = n.iter().position(|b| *b != 0).map_or(0, |i| (n.len() - i) * 8);
            (bits >= MIN_RSA_BITS).then_some(JwtAlgorithm::RS256)?
        }
        AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => JwtAlgorithm::ES256,
        AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => JwtAlgorithm::EdDsa,
        _ => return None,
    };
    let stated = match jwk.common.key_algorithm {
        None => alg,
        Some(KeyAlgorithm::RS256) => JwtAlgorithm::RS256,
        Some(KeyAlgorithm::ES256) => JwtAlgorithm::ES256,
        Some(KeyAlgorithm::EdDSA) => JwtAlgorithm::EdDsa,
        Some(_) => return None,
    };
    if stated != alg {
        return None;
    }
    let key = DecodingKey::from_jwk(&jwk).ok()?;
    Some(Key {
        kid: jwk.common.key_id.clone(),
        alg,
        key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_control_gives_the_lifetime() {
        assert_eq!(max_age("max-age=600"), Some(Duration::from_secs(600)));
        assert_eq!(
            max_age("public, Max-Age=60, must-revalidate"),
            Some(Duration::from_secs(60))
        );
        assert_eq!(max_age("no-cache, max-age=600"), Some(Duration::ZERO));
        assert_eq!(max_age("no-store"), Some(Duration::ZERO));
        assert_eq!(max_age("public"), None);
        assert_eq!(max_age("max-age=soon"), None);
    }

    #[test]
    fn jwks_urls_are_https_or_loopback_http() {
        assert!(check_jwks_url("https://idp.example.com/jwks.json").is_ok());
        assert!(check_jwks_url("http://127.0.0.1:8080/jwks").is_ok());
        assert!(check_jwks_url("http://localhost/jwks").is_ok());
        for bad in [
            "http://idp.example.com/jwks",
            "file:///etc/jwks.json",
            "https://user:pw@idp.example.com/",
            "jwks.json",
        ] {
            assert!(check_jwks_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn symmetric_weak_and_mislabelled_keys_are_left_out() {
        let oct = r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "h"}]}"#;
        assert!(parse_jwks(oct.as_bytes()).is_err());
        let small_rsa = r#"{"keys": [{"kty": "RSA", "n": "AQAB", "e": "AQAB", "kid": "r"}]}"#;
        assert!(parse_jwks(small_rsa.as_bytes()).is_err());
        let x = "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo";
        let ed = format!(r#"{{"keys": [{{"kty": "OKP", "crv": "Ed25519", "x": "{x}", "kid": "e"}}]}}"#);
        assert_eq!(parse_jwks(ed.as_bytes()).unwrap()[0].alg, JwtAlgorithm::EdDsa);
        let labelled = format!(r#"{{"keys": [{{"kty": "OKP", "crv": "Ed25519", "x": "{x}", "alg": "RS256"}}]}}"#);
        assert!(parse_jwks(labelled.as_bytes()).is_err());
        let encryption = format!(r#"{{"keys": [{{"kty": "OKP", "crv": "Ed25519", "x": "{x}", "use": "enc"}}]}}"#);
        assert!(parse_jwks(encryption.as_bytes()).is_err());
        assert!(parse_jwks(b"[]").is_err());
    }
}
