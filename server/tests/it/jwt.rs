//! Bearer JWTs through the server (`auth.jwt`): keys made here (RSA,
//! P-256, Ed25519), tokens signed here without the verifier's library, the
//! JWKS as a file or served over loopback HTTP. Every refusal must be the
//! very 401 an unknown token gets.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::common;
use crate::common::{Sent, Served, layered_tree, skill_md};
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair, RSA_PKCS1_SHA256, RsaKeyPair,
    RsaPublicKeyComponents,
};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use skillstore_server::{Settings, TokenHash};

const ISSUER: &str = "https://idp.test/";
const AUDIENCE: &str = "skillstore";
const FILE_TOKEN: &str = "acme-file-token";

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

enum Pair {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair),
    Ed(Ed25519KeyPair),
}

/// A signing key and the `kid` its JWK carries.
struct Signer {
    kid: String,
    pair: Arc<Pair>,
}

/// RSA keys take a while to make: two, made once, shared by every test.
fn rsa_pair(which: usize) -> Arc<Pair> {
    static PAIRS: OnceLock<Vec<Arc<Pair>>> = OnceLock::new();
    let pairs = PAIRS.get_or_init(|| {
        (0..2)
            .map(|_| {
                Arc::new(Pair::Rsa(
                    RsaKeyPair::generate(aws_lc_rs::rsa::KeySize::Rsa2048).unwrap(),
                ))
            })
            .collect()
    });
    Arc::clone(&pairs[which])
}

impl Signer {
    fn rsa(kid: &str, which: usize) -> Self {
        Signer {
            kid: kid.into(),
            pair: rsa_pair(which),
        }
    }

    fn ec(kid: &str) -> Self {
        Signer {
            kid: kid.into(),
            pair: Arc::new(Pair::Ec(
                EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap(),
            )),
        }
    }

    fn ed(kid: &str) -> Self {
        Signer {
            kid: kid.into(),
            pair: Arc::new(Pair::Ed(Ed25519KeyPair::generate().unwrap())),
        }
    }

    /// The same key under another `kid`.
    fn named(&self, kid: &str) -> Self {
        Signer {
            kid: kid.into(),
            pair: Arc::clone(&self.pair),
        }
    }

    fn alg(&self) -> &'static str {
        match *self.pair {
            Pair::Rsa(_) => "RS256",
            Pair::Ec(_) => "ES256",
            Pair::Ed(_) => "EdDSA",
        }
    }

    fn jwk(&self) -> Value {
        match &*self.pair {
            Pair::Rsa(pair) => {
                let parts = RsaPublicKeyComponents::<Vec<u8>>::from(pair.public_key());
                json!({"kty": "RSA", "kid": self.kid, "use": "sig", "n": b64(&parts.n), "e": b64(&parts.e)})
            }
            Pair::Ec(pair) => {
                let point = pair.public_key().as_ref();
                json!({"kty": "EC", "crv": "P-256", "kid": self.kid, "x": b64(&point[1..33]), "y": b64(&point[33..])})
            }
            Pair::Ed(pair) => {
                json!({"kty": "OKP", "crv": "Ed25519", "kid": self.kid, "x": b64(pair.public_key().as_ref())})
            }
        }
    }

    fn raw_sign(&self, message: &[u8]) -> Vec<u8> {
        let rng = SystemRandom::new();
        match &*self.pair {
            Pair::Rsa(pair) => {
                let mut signature = vec![0; pair.public_modulus_len()];
                pair.sign(&RSA_PKCS1_SHA256, &rng, message, &mut signature).unwrap();
                signature
            }
            Pair::Ec(pair) => pair.sign(&rng, message).unwrap().as_ref().to_vec(),
            Pair::Ed(pair) => pair.sign(message).as_ref().to_vec(),
        }
    }

    fn sign_with(&self, header: &Value, claims: &Value) -> String {
        let message = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        format!("{message}.{}", b64(&self.raw_sign(message.as_bytes())))
    }

    fn sign(&self, claims: &Value) -> String {
        self.sign_with(&json!({"alg": self.alg(), "typ": "JWT", "kid": self.kid}), claims)
    }

    /// The bytes of the public key an HS256 confusion would use as its
    /// secret: the DER of the SubjectPublicKeyInfo.
    fn public_der(&self) -> Vec<u8> {
        match &*self.pair {
            Pair::Rsa(pair) => pair.public_key().as_der().unwrap().as_ref().to_vec(),
            _ => unreachable!(),
        }
    }
}

fn jwks(signers: &[&Signer]) -> String {
    json!({"keys": signers.iter().map(|s| s.jwk()).collect::<Vec<_>>()}).to_string()
}

fn now() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

/// Valid claims for `tenant` with the scope `scope`.
fn claims(tenant: &str, scope: &str) -> Value {
    json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "someone", "iat": now(), "exp": now() + 300, "tenant": tenant, "scope": scope})
}

fn with(mut claims: Value, key: &str, value: Value) -> Value {
    claims[key] = value;
    claims
}

/// A server with `acme` (a file token with the write scope, and JWTs) and
/// `globex` (no file token: JWTs only), each over a layered tree, and
/// `auth.jwt` made of `jwt` (its lines, indented four spaces).
fn server_file(root: &Path, jwt: &str) -> Settings {
    for tenant in ["acme", "globex"] {
        layered_tree(&root.join(tenant));
    }
    let config = |tenant: &str| {
        format!(
            "{{mounts: [{{at: /, location: \"{}\"}}], sources: [{{path: /base}}, {{path: /team, writable: true}}]}}",
            root.join(tenant).display()
        )
    };
    let text = format!(
        "template: {}\ntenants:\n  - name: acme\n    tokens: [{{sha256: {}, scope: write}}]\n    config: {}\n  - name: globex\n    config: {}\nauth:\n  jwt:\n    issuer: {ISSUER}\n    audience: {AUDIENCE}\n{jwt}",
        config("acme"),
        TokenHash::of(FILE_TOKEN).to_hex(),
        config("acme"),
        config("globex"),
    );
    Settings::parse(&text, root).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// A server whose keys are `signers` in `jwks.json` beside the file.
async fn serve_file(root: &Path, signers: &[&Signer], extra: &str) -> Served {
    std::fs::write(root.join("jwks.json"), jwks(signers)).unwrap();
    Served::start(server_file(root, &format!("    jwks_file: jwks.json\n{extra}"))).await
}

async fn status_and_body(response: reqwest::Response) -> (u16, Vec<u8>) {
    let status = response.status().as_u16();
    (status, response.bytes().await.unwrap().to_vec())
}

/// The answer to an unknown token: what every refusal must be, byte for byte.
async fn unknown_token_answer(server: &Served) -> (u16, Vec<u8>) {
    let client = reqwest::Client::new();
    let answer = status_and_body(common::get(&client, server.url("/v1/skills"), "no-such-token").await).await;
    assert_eq!(answer.0, 401);
    answer
}

/// `GET /v1/skills` with `token`: its status and body.
async fn list(server: &Served, token: &str) -> (u16, Vec<u8>) {
    let client = reqwest::Client::new();
    status_and_body(common::get(&client, server.url("/v1/skills"), token).await).await
}

/// Asserts every token of `tokens` is refused exactly as an unknown token.
async fn assert_refused(server: &Served, tokens: &[(&str, String)]) {
    let unknown = unknown_token_answer(server).await;
    for (what, token) in tokens {
        assert_eq!(list(server, token).await, unknown, "{what}");
    }
}

#[tokio::test]
async fn valid_tokens_read_and_write_as_their_scope_says_with_every_algorithm() {
    let dir = tempfile::tempdir().unwrap();
    let (rsa, ec, ed) = (Signer::rsa("rsa-1", 0), Signer::ec("ec-1"), Signer::ed("ed-1"));
    let server = serve_file(dir.path(), &[&rsa, &ec, &ed], "").await;
    let client = reqwest::Client::new();
    for signer in [&rsa, &ec, &ed] {
        let (status, body) = list(&server, &signer.sign(&claims("acme", "read"))).await;
        assert_eq!(status, 200, "{}: {}", signer.alg(), String::from_utf8_lossy(&body));
        let listed: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(listed["skills"].as_array().unwrap().len(), 2, "{listed}");
    }
    // The tenant comes from the claim: globex has no file token at all.
    let (status, _) = list(&server, &ed.sign(&claims("globex", "read"))).await;
    assert_eq!(status, 200);

    let reader = rsa.sign(&claims("acme", "read"));
    let put = |token: String| {
        client
            .put(server.url("/v1/skills/gamma"))
            .bearer_auth(token)
            .body(skill_md("gamma", "Gamma."))
            .send()
    };
    assert_eq!(put(reader).await.unwrap().status(), 403);
    // A space-separated scope claim: the highest value that maps wins.
    let writer = ec.sign(&claims("acme", "openid read write"));
    assert_eq!(put(writer.clone()).await.unwrap().status(), 201);
    let response = common::get(&client, server.url("/v1/skills/gamma"), &writer).await;
    assert_eq!(response.status(), 200);
    // An array scope claim works too.
    let writer = ed.sign(&with(claims("acme", ""), "scope", json!(["write"])));
    let response = client
        .delete(server.url("/v1/skills/gamma"))
        .bearer_auth(writer)
        .sent()
        .await;
    assert!(response.status().is_success(), "{}", response.status());
    // Over MCP as well: a valid JWT opens a session.
    let response = client
        .post(server.url("/mcp"))
        .bearer_auth(rsa.sign(&claims("acme", "read")))
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
        .sent()
        .await;
    assert_eq!(response.status(), 200);
    server.stop().await;
}

#[tokio::test]
async fn a_file_token_still_works_beside_jwts_and_a_token_without_a_known_scope_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rsa = Signer::rsa("rsa-1", 0);
    let server = serve_file(dir.path(), &[&rsa], "    scopes: {skills.read: read}\n").await;
    assert_eq!(list(&server, FILE_TOKEN).await.0, 200);
    assert_eq!(list(&server, &rsa.sign(&claims("acme", "skills.read"))).await.0, 200);
    assert_refused(
        &server,
        &[
            ("a scope not configured", rsa.sign(&claims("acme", "read write"))),
            (
                "no scope claim",
                rsa.sign(&with(claims("acme", ""), "scope", Value::Null)),
            ),
        ],
    )
    .await;
    server.stop().await;
}

#[tokio::test]
async fn expiry_and_not_before_are_checked_within_the_clock_skew() {
    let dir = tempfile::tempdir().unwrap();
    let ed = Signer::ed("ed-1");
    let server = serve_file(dir.path(), &[&ed], "    clock_skew: 60s\n").await;
    let valid = claims("acme", "read");
    for (what, claims) in [
        (
            "expired 30 s ago, within the skew",
            with(valid.clone(), "exp", json!(now() - 30)),
        ),
        (
            "valid in 30 s, within the skew",
            with(valid.clone(), "nbf", json!(now() + 30)),
        ),
    ] {
        assert_eq!(list(&server, &ed.sign(&claims)).await.0, 200, "{what}");
    }
    let mut no_exp = valid.clone();
    no_exp.as_object_mut().unwrap().remove("exp");
    assert_refused(
        &server,
        &[
            ("expired", ed.sign(&with(valid.clone(), "exp", json!(now() - 3600)))),
            (
                "expired past the skew",
                ed.sign(&with(valid.clone(), "exp", json!(now() - 120))),
            ),
            (
                "not yet valid",
                ed.sign(&with(valid.clone(), "nbf", json!(now() + 3600))),
            ),
            (
                "valid past the skew",
                ed.sign(&with(valid.clone(), "nbf", json!(now() + 120))),
            ),
            ("no exp", ed.sign(&no_exp)),
            (
                "exp not a number",
                ed.sign(&with(valid.clone(), "exp", json!("tomorrow"))),
            ),
        ],
    )
    .await;
    server.stop().await;
}

#[tokio::test]
async fn a_wrong_issuer_audience_or_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (rsa, ec) = (Signer::rsa("rsa-1", 0), Signer::ec("ec-1"));
    let server = serve_file(dir.path(), &[&rsa, &ec], "").await;
    let valid = claims("acme", "read");
    let mut no_aud = valid.clone();
    no_aud.as_object_mut().unwrap().remove("aud");
    let mut no_iss = valid.clone();
    no_iss.as_object_mut().unwrap().remove("iss");
    // Another key under a kid of the set.
    let impostor_rsa = Signer::rsa("rsa-1", 1);
    let impostor_ec = Signer::ec("ec-1");
    assert_refused(
        &server,
        &[
            (
                "wrong issuer",
                rsa.sign(&with(valid.clone(), "iss", json!("https://evil.test/"))),
            ),
            ("no issuer", rsa.sign(&no_iss)),
            (
                "wrong audience",
                rsa.sign(&with(valid.clone(), "aud", json!("another-service"))),
            ),
            (
                "wrong audiences",
                rsa.sign(&with(valid.clone(), "aud", json!(["a", "b"]))),
            ),
            ("no audience", rsa.sign(&no_aud)),
            ("another RSA key, same kid", impostor_rsa.sign(&valid)),
            ("another EC key, same kid", impostor_ec.sign(&valid)),
            ("a kid not in the set", ec.named("ec-2").sign(&valid)),
        ],
    )
    .await;
    assert_eq!(
        list(&server, &rsa.sign(&with(valid, "aud", json!(["x", AUDIENCE]))))
            .await
            .0,
        200
    );
    server.stop().await;
}

#[tokio::test]
async fn none_hmac_and_algorithms_that_do_not_fit_the_key_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (rsa, ed) = (Signer::rsa("rsa-1", 0), Signer::ed("ed-1"));
    let server = serve_file(dir.path(), &[&rsa, &ed], "    algorithms: [RS256, EdDSA]\n").await;
    let valid = claims("acme", "write");
    let payload = b64(valid.to_string().as_bytes());
    let unsigned = |alg: &str| {
        format!(
            "{}.{payload}.",
            b64(json!({"alg": alg, "kid": "rsa-1"}).to_string().as_bytes())
        )
    };
    let hs256 = |secret: &[u8]| {
        let message = format!(
            "{}.{payload}",
            b64(json!({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"})
                .to_string()
                .as_bytes())
        );
        let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, secret);
        format!(
            "{message}.{}",
            b64(aws_lc_rs::hmac::sign(&key, message.as_bytes()).as_ref())
        )
    };
    let jwks_text = std::fs::read(dir.path().join("jwks.json")).unwrap();
    let n = rsa.jwk()["n"].as_str().unwrap().to_owned();
    // An Ed25519 signature under an RSA kid, and RS256 claimed for the Ed25519 key.
    let ed_as_rsa = ed.sign_with(&json!({"alg": "EdDSA", "kid": "rsa-1"}), &valid);
    let rsa_as_ed = rsa.sign_with(&json!({"alg": "RS256", "kid": "ed-1"}), &valid);
    // ES256 is not configured here, whatever signs it.
    let ec = Signer::ec("rsa-1");
    // A key of the attacker's own, offered in the header under a known kid.
    let attacker = Signer::ed("ed-1");
    let embedded = attacker.sign_with(&json!({"alg": "EdDSA", "kid": "ed-1", "jwk": attacker.jwk()}), &valid);
    let fetched = attacker.sign_with(
        &json!({"alg": "EdDSA", "kid": "ed-1", "jku": "http://127.0.0.1:9/jwks.json", "x5u": "http://127.0.0.1:9/x"}),
        &valid,
    );
    let critical = ed.sign_with(&json!({"alg": "EdDSA", "kid": "ed-1", "crit": ["exp"]}), &valid);
    assert_refused(
        &server,
        &[
            ("alg none", unsigned("none")),
            ("alg None", unsigned("None")),
            ("alg none with a signature", format!("{}sig", unsigned("none"))),
            ("HS256 with the public key's DER", hs256(&rsa.public_der())),
            ("HS256 with the JWKS", hs256(&jwks_text)),
            ("HS256 with the modulus", hs256(n.as_bytes())),
            ("EdDSA under an RSA kid", ed_as_rsa),
            ("RS256 under an Ed25519 kid", rsa_as_ed),
            ("an algorithm not configured", ec.sign(&valid)),
            ("a key embedded in the header", embedded),
            ("a key URL in the header", fetched),
            ("a critical header parameter", critical),
            ("not a JWT", "a.b.c".into()),
            ("two parts", format!("{}.{payload}", b64(b"{\"alg\":\"RS256\"}"))),
            ("garbage", "x".repeat(4000)),
            ("a signature cut short", {
                let token = rsa.sign(&valid);
                token[..token.len() - 10].to_owned()
            }),
        ],
    )
    .await;
    server.stop().await;
}

#[tokio::test]
async fn a_tenant_the_file_does_not_list_or_a_hostile_name_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ed = Signer::ed("ed-1");
    let server = serve_file(dir.path(), &[&ed], "").await;
    let mut no_tenant = claims("acme", "read");
    no_tenant.as_object_mut().unwrap().remove("tenant");
    let mut tokens = vec![
        ("an unknown tenant", ed.sign(&claims("initech", "read"))),
        ("no tenant claim", ed.sign(&no_tenant)),
        (
            "a tenant that is not a string",
            ed.sign(&with(claims("acme", "read"), "tenant", json!(["acme"]))),
        ),
    ];
    for name in [
        "../x",
        "a/b",
        "../acme",
        "acme/../globex",
        "Acme",
        "",
        "acme\n",
        "%2e%2e",
        "{tenant}",
    ] {
        tokens.push(("a hostile tenant name", ed.sign(&claims(name, "read"))));
    }
    assert_refused(&server, &tokens).await;
    server.stop().await;

    // Allowed by the file, a tenant it does not list is made from the
    // template at its first request, its own and nobody else's; a hostile
    // name, or one whose storage the template cannot open, is refused as
    // any unknown token.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(root.join("jwks.json"), jwks(&[&ed])).unwrap();
    for tenant in ["acme", "initech"] {
        layered_tree(&root.join("tenants").join(tenant));
    }
    common::write(
        &root.join("tenants/initech"),
        "team/initech-only/SKILL.md",
        &common::skill_md("initech-only", "Initech's own."),
    );
    let text = format!(
        "template: {{mounts: [{{at: /, location: \"{}\"}}], sources: [{{path: /base}}, {{path: /team, writable: true}}]}}\ntenants:\n  - name: acme\nauth:\n  jwt:\n    issuer: {ISSUER}\n    audience: {AUDIENCE}\n    jwks_file: jwks.json\n    tenants_from_claims: true\n",
        root.join("tenants").join("{tenant}").display()
    );
    let server = Served::start(Settings::parse(&text, root).unwrap()).await;
    let (status, body) = list(&server, &ed.sign(&claims("initech", "read"))).await;
    assert_eq!(status, 200);
    let body = String::from_utf8(body).unwrap();
    assert!(body.contains("initech-only"), "{body}");
    let (status, body) = list(&server, &ed.sign(&claims("acme", "read"))).await;
    assert_eq!(status, 200);
    assert!(!String::from_utf8(body).unwrap().contains("initech-only"));
    assert_refused(
        &server,
        &[
            ("a tenant the template cannot open", ed.sign(&claims("nobody", "read"))),
            ("a hostile tenant name", ed.sign(&claims("../x", "read"))),
            ("a hostile tenant name", ed.sign(&claims("a/b", "read"))),
        ],
    )
    .await;
    server.stop().await;
}

#[tokio::test]
async fn a_file_that_lists_no_tenant_serves_those_tokens_name() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let ed = Signer::ed("ed-1");
    std::fs::write(root.join("jwks.json"), jwks(&[&ed])).unwrap();
    layered_tree(&root.join("tenants").join("initech"));
    let text = format!(
        "template: {{mounts: [{{at: /, location: \"{}\"}}], sources: [{{path: /base}}, {{path: /team, writable: true}}]}}\ntenants: []\nauth:\n  jwt:\n    issuer: {ISSUER}\n    audience: {AUDIENCE}\n    jwks_file: jwks.json\n    tenants_from_claims: true\n",
        root.join("tenants").join("{tenant}").display()
    );
    let server = Served::start(Settings::parse(&text, root).unwrap()).await;
    let (status, body) = list(&server, &ed.sign(&claims("initech", "write"))).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_refused(&server, &[("anonymous-looking", "not-a-jwt".to_owned())]).await;
    server.stop().await;
    // Without tenants_from_claims, an empty list is refused.
    let refused = Settings::parse(&text.replace("    tenants_from_claims: true\n", ""), root).unwrap_err();
    assert!(refused.to_string().contains("names no tenants"), "{refused}");
}

/// What the server logs under `skillstore` targets, every level, from the
/// moment the first test asks for it.
fn logs() -> &'static Mutex<Vec<String>> {
    struct Recorder;
    struct Fields(String);
    impl tracing::field::Visit for Fields {
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            self.0.push_str(&format!(" {}={value:?}", field.name()));
        }
    }
    impl tracing::Subscriber for Recorder {
        fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
            metadata.target().starts_with("skillstore")
        }
        fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
            tracing::span::Id::from_u64(1)
        }
        fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
        fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
        fn event(&self, event: &tracing::Event<'_>) {
            let mut fields = Fields(format!("{} {}", event.metadata().level(), event.metadata().target()));
            event.record(&mut fields);
            LINES.lock().unwrap().push(fields.0);
        }
        fn enter(&self, _: &tracing::span::Id) {}
        fn exit(&self, _: &tracing::span::Id) {}
    }
    static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| tracing::subscriber::set_global_default(Recorder).unwrap());
    &LINES
}

#[tokio::test]
async fn each_refusal_is_logged_at_debug_with_its_reason_and_never_the_token() {
    let logs = logs();
    let dir = tempfile::tempdir().unwrap();
    let (ed, rsa) = (Signer::ed("ed-1"), Signer::rsa("rsa-1", 0));
    let server = serve_file(dir.path(), &[&ed, &rsa], "").await;
    let valid = claims("acme", "read");
    let hs256 = format!(
        "{}.{}.c2ln",
        b64(br#"{"alg":"HS256","kid":"rsa-1"}"#),
        b64(valid.to_string().as_bytes())
    );
    let cases = [
        (
            ed.sign(&with(valid.clone(), "exp", json!(now() - 3600))),
            "ExpiredSignature",
        ),
        (
            ed.sign(&with(valid.clone(), "nbf", json!(now() + 3600))),
            "ImmatureSignature",
        ),
        (
            ed.sign(&with(valid.clone(), "iss", json!("https://evil.test/"))),
            "InvalidIssuer",
        ),
        (ed.sign(&with(valid.clone(), "aud", json!("other"))), "InvalidAudience"),
        (Signer::ed("ed-1").sign(&valid), "InvalidSignature"),
        (ed.named("ed-9").sign(&valid), "kid is not in the JWKS"),
        (hs256, "HS256 is never taken"),
        (
            format!("{}.{}.", b64(br#"{"alg":"none\n"}"#), b64(b"{}")),
            "malformed token",
        ),
        (ed.sign(&claims("initech", "read")), "its tenant is not served"),
        (ed.sign(&claims("../x", "read")), "is not a tenant name"),
        (ed.sign(&claims("acme", "admin")), "is a configured scope"),
    ];
    for (token, reason) in &cases {
        assert_eq!(list(&server, token).await.0, 401, "{reason}");
        let lines = logs.lock().unwrap();
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("DEBUG skillstore::auth") && l.contains(reason)),
            "{reason} is not logged: {lines:#?}"
        );
    }
    server.stop().await;
    let lines = logs.lock().unwrap();
    for line in lines.iter() {
        // Every JWT's header starts `{"`, base64 `eyJ`; tokens are never logged.
        assert!(!line.contains("eyJ") && !line.contains(FILE_TOKEN), "{line}");
        assert!(!line.contains('\n'), "one line each: {line}");
    }
}

/// A JWKS served over loopback HTTP, its keys and cache header changed
/// at will, its fetches counted.
struct Idp {
    url: String,
    body: Arc<Mutex<(String, String)>>,
    delay: Arc<Mutex<Duration>>,
    fetches: Arc<AtomicUsize>,
    _task: tokio::task::JoinHandle<()>,
}

impl Idp {
    async fn start(jwks: String, cache_control: &str) -> Idp {
        let body = Arc::new(Mutex::new((jwks, cache_control.to_owned())));
        let fetches = Arc::new(AtomicUsize::new(0));
        let delay = Arc::new(Mutex::new(Duration::ZERO));
        let app = axum::Router::new().route(
            "/jwks.json",
            axum::routing::get({
                let body = Arc::clone(&body);
                let fetches = Arc::clone(&fetches);
                let delay = Arc::clone(&delay);
                move || {
                    let (jwks, cache) = body.lock().unwrap().clone();
                    let delay = *delay.lock().unwrap();
                    fetches.fetch_add(1, Ordering::SeqCst);
                    async move {
                        tokio::time::sleep(delay).await;
                        (
                            [
                                ("content-type", "application/json".to_owned()),
                                ("cache-control", cache),
                            ],
                            jwks,
                        )
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Idp {
            url,
            body,
            delay,
            fetches,
            _task: task,
        }
    }

    fn delay(&self, delay: Duration) {
        *self.delay.lock().unwrap() = delay;
    }

    fn set(&self, jwks: String) {
        self.body.lock().unwrap().0 = jwks;
    }

    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

#[tokio::test]
async fn a_key_rotated_in_the_jwks_is_taken_without_a_restart_and_unknown_kids_refetch_at_most_once() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (Signer::rsa("2026-old", 0), Signer::ec("2026-new"));
    let idp = Idp::start(jwks(&[&old]), "public, max-age=3600").await;
    // Long enough for the checks within it to run on a loaded machine.
    let min = Duration::from_secs(3);
    let server = Served::start(server_file(
        dir.path(),
        &format!(
            "    jwks_url: {}\n    jwks_min_refetch: {}ms\n",
            idp.url,
            min.as_millis()
        ),
    ))
    .await;
    assert_eq!(idp.fetches(), 0, "the keys are read when first needed");
    assert_eq!(list(&server, &old.sign(&claims("acme", "read"))).await.0, 200);
    assert_eq!(list(&server, &old.sign(&claims("globex", "read"))).await.0, 200);
    assert_eq!(idp.fetches(), 1, "max-age keeps the keys");

    // The provider rotates: the new key is published, the old one dropped.
    idp.set(jwks(&[&new]));
    tokio::time::sleep(min + Duration::from_millis(100)).await;
    assert_eq!(list(&server, &new.sign(&claims("acme", "read"))).await.0, 200);
    assert_eq!(idp.fetches(), 2, "one fetch for the unknown kid");
    // The old key is gone with the set it was in.
    assert_refused(
        &server,
        &[("a key dropped from the JWKS", old.sign(&claims("acme", "read")))],
    )
    .await;

    // A flood of unknown kids within the minimum interval fetches nothing more.
    let flood: Vec<(&str, String)> = (0..20)
        .map(|i| {
            (
                "an unknown kid",
                new.named(&format!("nope-{i}")).sign(&claims("acme", "read")),
            )
        })
        .collect();
    assert_refused(&server, &flood).await;
    assert_eq!(idp.fetches(), 2, "unknown kids within jwks_min_refetch fetch nothing");
    // After the interval, unknown kids cost at most one fetch between them.
    tokio::time::sleep(min + Duration::from_millis(100)).await;
    let answers = futures::future::join_all(flood.iter().map(|(_, token)| list(&server, token))).await;
    assert!(answers.iter().all(|(status, _)| *status == 401));
    assert_eq!(idp.fetches(), 3, "one fetch for all the unknown kids at once");
    assert_eq!(list(&server, &new.sign(&claims("acme", "read"))).await.0, 200);
    server.stop().await;
}

#[tokio::test]
async fn an_expired_jwks_is_fetched_again_and_a_failed_fetch_keeps_the_keys() {
    let dir = tempfile::tempdir().unwrap();
    let ed = Signer::ed("ed-1");
    // no-cache: kept only jwks_min_refetch.
    let idp = Idp::start(jwks(&[&ed]), "no-cache").await;
    let server = Served::start(server_file(
        dir.path(),
        &format!("    jwks_url: {}\n    jwks_min_refetch: 2s\n", idp.url),
    ))
    .await;
    assert_eq!(list(&server, &ed.sign(&claims("acme", "read"))).await.0, 200);
    assert_eq!(list(&server, &ed.sign(&claims("acme", "read"))).await.0, 200);
    assert_eq!(idp.fetches(), 1);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    // The provider now answers something that is no JWKS: the keys held are kept.
    idp.set("<html>maintenance</html>".into());
    assert_eq!(list(&server, &ed.sign(&claims("acme", "read"))).await.0, 200);
    assert_eq!(idp.fetches(), 2);
    server.stop().await;
}

#[tokio::test]
async fn a_slow_or_oversized_jwks_keeps_the_keys_and_holds_up_only_the_request_that_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let (ed, next) = (Signer::ed("ed-1"), Signer::ec("ec-2"));
    let idp = Idp::start(jwks(&[&ed]), "max-age=0").await;
    let server = Served::start(server_file(
        dir.path(),
        &format!(
            "    jwks_url: {}\n    jwks_min_refetch: 1s\n    jwks_timeout: 2s\n",
            idp.url
        ),
    ))
    .await;
    let token = ed.sign(&claims("acme", "read"));
    assert_eq!(list(&server, &token).await.0, 200);
    let due = Duration::from_millis(1100);
    tokio::time::sleep(due).await;
    // The keys are due; the provider now hangs past the fetch timeout.
    idp.delay(Duration::from_secs(5));
    let reader = async {
        let started = std::time::Instant::now();
        (list(&server, &token).await.0, started.elapsed())
    };
    let other = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let started = std::time::Instant::now();
        (list(&server, &token).await.0, started.elapsed())
    };
    let ((read_status, read_took), (other_status, other_took)) = tokio::join!(reader, other);
    assert_eq!(read_status, 200, "a failed read keeps the keys");
    assert!(read_took >= Duration::from_millis(1900), "{read_took:?}");
    assert_eq!(other_status, 200);
    assert!(
        other_took < Duration::from_secs(1),
        "waited for the read: {other_took:?}"
    );
    assert_eq!(idp.fetches(), 2);

    // An answer over 1 MiB is not taken either.
    idp.delay(Duration::ZERO);
    idp.set(format!(
        "{{\"keys\": [{}], \"pad\": \"{}\"}}",
        next.jwk(),
        "x".repeat(1 << 20)
    ));
    tokio::time::sleep(due).await;
    assert_eq!(list(&server, &token).await.0, 200);
    assert_eq!(idp.fetches(), 3);
    assert_refused(
        &server,
        &[("a key of the refused answer", next.sign(&claims("acme", "read")))],
    )
    .await;

    // A good answer again: its keys replace the old ones.
    idp.set(jwks(&[&next]));
    tokio::time::sleep(due).await;
    assert_eq!(list(&server, &next.sign(&claims("acme", "read"))).await.0, 200);
    assert_eq!(idp.fetches(), 4);
    assert_refused(&server, &[("a key no longer published", token)]).await;
    server.stop().await;
}

#[tokio::test]
async fn a_key_rotated_in_a_jwks_file_is_taken_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (old, new) = (Signer::ed("old"), Signer::ed("new"));
    let server = serve_file(dir.path(), &[&old], "    jwks_min_refetch: 1s\n").await;
    assert_eq!(list(&server, &old.sign(&claims("acme", "read"))).await.0, 200);
    std::fs::write(dir.path().join("jwks.json"), jwks(&[&new])).unwrap();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(list(&server, &new.sign(&claims("acme", "read"))).await.0, 200);
    assert_refused(
        &server,
        &[("a key taken out of the file", old.sign(&claims("acme", "read")))],
    )
    .await;
    server.stop().await;
}

#[tokio::test]
async fn one_tenant_without_file_tokens_is_not_open_when_jwts_name_it() {
    let dir = tempfile::tempdir().unwrap();
    layered_tree(dir.path());
    let ed = Signer::ed("ed-1");
    std::fs::write(dir.path().join("jwks.json"), jwks(&[&ed])).unwrap();
    let text = format!(
        "tenants:\n  - name: acme\n    config: {{mounts: [{{at: /, location: \"{}\"}}], sources: [{{path: /base}}, {{path: /team, writable: true}}]}}\nauth:\n  jwt:\n    jwks_file: jwks.json\n    issuer: {ISSUER}\n    audience: {AUDIENCE}\n",
        dir.path().display()
    );
    let settings = Settings::parse(&text, dir.path()).unwrap();
    assert!(!settings.is_open());
    let server = Served::start(settings).await;
    assert!(!server.service.is_open());
    let client = reqwest::Client::new();
    let unknown = unknown_token_answer(&server).await;
    let anonymous = client.get(server.url("/v1/skills")).sent().await;
    assert_eq!(status_and_body(anonymous).await, unknown);
    let anonymous_write = client
        .put(server.url("/v1/skills/gamma"))
        .header("content-type", "text/markdown")
        .body(skill_md("gamma", "Gamma."))
        .sent()
        .await;
    assert_eq!(anonymous_write.status(), 401);
    assert_eq!(list(&server, &ed.sign(&claims("acme", "read"))).await.0, 200);
    server.stop().await;
}

#[test]
fn a_server_file_with_a_bad_jwks_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    layered_tree(dir.path());
    let file = |jwks: &str| {
        std::fs::write(dir.path().join("jwks.json"), jwks).unwrap();
        let text = format!(
            "tenants:\n  - name: acme\n    config: {{mounts: [{{at: /, location: \"{}\"}}], sources: [{{path: /base}}]}}\nauth:\n  jwt:\n    jwks_file: jwks.json\n    issuer: a\n    audience: b\n",
            dir.path().display()
        );
        std::fs::write(dir.path().join("server.yaml"), text).unwrap();
        Settings::load(&dir.path().join("server.yaml"))
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    for (jwks, says) in [
        ("not json", "not JSON"),
        ("{\"keys\": 1}", "no `keys` array"),
        ("{\"keys\": [{\"kty\": \"oct\", \"k\": \"c2VjcmV0\"}]}", "no usable key"),
    ] {
        let err = file(jwks).unwrap_err();
        assert!(err.contains(says) && err.contains("jwks_file"), "{jwks}: {err}");
    }
    assert!(file(&jwks(&[&Signer::ed("e")])).is_ok());
}
