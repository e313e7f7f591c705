//! `config check [FILE]`: a configuration or a server file read and
//! assembled as `list` or `serve` would (so a refused policy, a missing
//! directory or a token without a value is an error naming the file), and
//! what it would open, without listing or reading any storage.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use skillstore::Config;
use skillstore_server::Settings;

use crate::Failure;

/// Checks `file` (by default the `--config` file, else
/// `./skillstore.yaml`): a file with a top-level `tenants:` is a server
/// file, any other a skillstore configuration. Prints what each namespace
/// mounts and which sources it reads; a file that would be refused fails
/// with exit code 2.
pub fn run(file: Option<&Path>, global_config: Option<&Path>) -> Result<(), Failure> {
    let path: PathBuf = file
        .or(global_config)
        .map_or_else(|| PathBuf::from("skillstore.yaml"), Path::to_path_buf);
    let text = skillstore::location::read_local_text(&path, skillstore::backends::DEFAULT_READ_LIMIT, "configuration")
        .map_err(|e| Failure::usage(e.to_string()))?;
    let shown = path.display();
    let mut out = String::new();
    if text.lines().any(|line| line.starts_with("tenants:")) {
        let settings = Settings::load(&path).map_err(|e| Failure::usage(e.to_string()))?;
        let _ = writeln!(out, "{shown}: a server file with {} tenant(s)", settings.tenants.len());
        if let Some(listen) = &settings.listen {
            let _ = writeln!(out, "listen: {listen}");
        }
        if let Some(jwt) = &settings.jwt {
            let keys = match &jwt.jwks {
                skillstore_server::JwksSource::Url(url) => format!("the JWKS at {url}"),
                skillstore_server::JwksSource::File(path) => format!("the JWKS file {}", path.display()),
            };
            let from_claims = if jwt.tenants_from_claims {
                ", unlisted tenants from the template"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "auth: bearer JWTs ({}) signed by a key of {keys}, issuer {}, audience {}; tenant from `{}`, scope from `{}`{from_claims}",
                jwt.algorithms.iter().map(|a| a.name()).collect::<Vec<_>>().join(", "),
                jwt.issuer,
                jwt.audience,
                jwt.tenant_claim,
                jwt.scope_claim
            );
        }
        for tenant in &settings.tenants {
            let namespace = tenant
                .config
                .open()
                .map_err(|e| Failure::usage(format!("{shown}: tenant `{}`: {e}", tenant.name)))?;
            let published = match tenant.discovery {
                skillstore_server::Discovery::Public => ", published for discovery",
                skillstore_server::Discovery::Private => "",
            };
            let _ = writeln!(
                out,
                "tenant {}: {} token(s){published}",
                tenant.name,
                tenant.tokens.len()
            );
            describe(&mut out, &tenant.config, &namespace, "  ");
        }
    } else {
        let config = Config::load(&path)?;
        let namespace = config.open()?;
        let _ = writeln!(out, "{shown}: a skillstore configuration");
        describe(&mut out, &config, &namespace, "");
    }
    crate::emit(out.as_bytes())
}

fn describe(out: &mut String, config: &Config, namespace: &skillstore::Namespace, indent: &str) {
    for mount in &config.mounts {
        let _ = writeln!(
            out,
            "{indent}mount {} = {}",
            mount.at,
            skillstore::location::redacted(&mount.location)
        );
    }
    for source in namespace.sources().iter() {
        let writable = if source.is_writable() { ", writable" } else { "" };
        let _ = writeln!(out, "{indent}source {} ({}{writable})", source.name(), source.path());
    }
}

/// `config schema config|server`: the JSON Schema of the file, pretty
/// printed. The copies in `docs/schema/` are this output (a test holds them
/// equal).
pub fn schema(kind: crate::SchemaKind) -> Result<(), Failure> {
    let schema = match kind {
        crate::SchemaKind::Config => Config::json_schema(),
        crate::SchemaKind::Server => skillstore_server::ServerFile::json_schema(),
    };
    let mut text = serde_json::to_vec_pretty(&schema).map_err(|e| Failure::failed(e.to_string()))?;
    text.push(b'\n');
    crate::emit(&text)
}
