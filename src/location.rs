//! Where a mount's bytes live: a local directory, an object-store URL, a
//! `memory:` file, a Git repository or an Agent Skills discovery endpoint,
//! parsed once for every front end.

use std::fmt;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use skillstore_backends::GitRemote;

use crate::error::{Error, Result};

/// A parsed location.
///
/// Text forms: a local directory (`./skills`, `/srv/skills`,
/// `file:///srv/skills`); an object-store URL, recognized by
/// `object_store`'s own scheme parsing (`s3://bucket[/prefix]`; `gs://` and
/// `az://` are recognized and refused as not built in); `memory:FILE.json`,
/// a flat `{"/path": "content"}` JSON file loaded into memory; a Git
/// repository, `git+https://`, `git+http://`, `git+ssh://`, `git+git://`
/// (a `git daemon`) or `git+file:///path`, each with an optional `@REF` (a
/// branch, a tag or a full commit id; the remote's `HEAD` without one); an
/// Agent Skills discovery endpoint, `https://host[/path]` (`http://` for a
/// loopback host only). A Git location shows (in `Display` and every
/// message) without the URL's credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A local directory.
    Dir(PathBuf),
    /// An S3 bucket, optionally under a key prefix (no leading or trailing
    /// `/`; may be empty).
    S3 {
        /// The bucket.
        bucket: String,
        /// The key prefix.
        prefix: String,
    },
    /// A JSON file whose contents are held in memory.
    Memory(PathBuf),
    /// A Git repository at one reference.
    Git {
        /// The remote (shown without credentials).
        remote: GitRemote,
        /// The branch, tag or full commit id; `None` for the remote's HEAD.
        reference: Option<String>,
    },
    /// An Agent Skills discovery endpoint: `https://host[/path]` (or
    /// `http://` on a loopback host), without query or fragment.
    Discovery(String),
}

impl Location {
    /// Parses a location. Relative paths stay relative: see
    /// [`Location::resolved_against`].
    pub fn parse(text: &str) -> Result<Location> {
        if text.is_empty() {
            return Err(Error::Usage(
                "an empty location; expected a directory, s3://bucket[/prefix], memory:FILE.json, git+URL[@REF] or https://HOST[/PATH]"
                    .into(),
            ));
        }
        if let Some(file) = text.strip_prefix("memory:")
            && !file.starts_with("//")
        {
            if file.is_empty() {
                return Err(Error::Usage("`memory:` needs a file: memory:FILE.json".into()));
            }
            return Ok(Location::Memory(PathBuf::from(file)));
        }
        if let Some(url) = text.strip_prefix("git+") {
            return parse_git(url);
        }
        if !text.contains("://") {
            return Ok(Location::Dir(PathBuf::from(text)));
        }
        let url = url::Url::parse(text)
            .map_err(|e| Error::Usage(format!("bad location `{}`: {e}", redacted(text).escape_debug())))?;
        if matches!(url.scheme(), "https" | "http") {
            return discovery(url);
        }
        match url.scheme() {
            "file" => Ok(Location::Dir(PathBuf::from(url.path()))),
            "s3" | "s3a" => {
                let bucket = url.host_str().unwrap_or_default().to_owned();
                if bucket.is_empty() {
                    return Err(Error::Usage(format!("`{text}` names no bucket")));
                }
                let prefix = percent_encoding::percent_decode_str(url.path())
                    .decode_utf8()
                    .map_err(|_| Error::Usage(format!("`{text}` holds a key prefix that is not UTF-8")))?;
                Ok(Location::S3 {
                    bucket,
                    prefix: prefix.trim_matches('/').to_owned(),
                })
            }
            scheme => match object_store_name(scheme) {
                Some(name) => Err(Error::Usage(format!(
                    "`{}` is a {name} location, which this build does not support; use a directory, s3://bucket[/prefix] or memory:FILE.json",
                    text.escape_debug(),
                ))),
                None => Err(Error::Usage(format!(
                    "unknown location scheme `{scheme}://`; expected a directory, s3://bucket[/prefix], memory:FILE.json, git+URL[@REF] or https://HOST[/PATH]"
                ))),
            },
        }
    }

    /// The location with a relative directory or memory file resolved
    /// against `base` (a configuration file's directory, or the working
    /// directory for command-line flags).
    pub fn resolved_against(self, base: &Path) -> Location {
        match self {
            Location::Dir(path) if path.is_relative() => Location::Dir(base.join(path)),
            Location::Memory(path) if path.is_relative() => Location::Memory(base.join(path)),
            other => other,
        }
    }

    /// True for a local directory.
    pub fn is_local_dir(&self) -> bool {
        matches!(self, Location::Dir(_))
    }

    /// True for a Git repository.
    pub fn is_git(&self) -> bool {
        matches!(self, Location::Git { .. })
    }

    /// The host of a location read over plain `http://` (a discovery
    /// endpoint or `git+http://`) when it is not a loopback host: what is
    /// read from it travels unencrypted and can be changed on the way, so
    /// a mount must allow it (`allow_http: true`).
    pub fn plain_http_host(&self) -> Option<String> {
        let text = match self {
            Location::Discovery(url) => url.clone(),
            Location::Git { remote, .. } => remote.to_string(),
            _ => return None,
        };
        let url = url::Url::parse(&text).ok()?;
        let loopback = match url.host()? {
            url::Host::Ipv4(ip) => ip.is_loopback(),
            url::Host::Ipv6(ip) => ip.is_loopback(),
            url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
        };
        (url.scheme() == "http" && !loopback).then(|| url.host_str().unwrap_or_default().to_owned())
    }
}

/// `URL[@REF]` after `git+`: the reference follows the last `@` of the
/// path (an `@` before the host is the URL's user).
fn parse_git(url: &str) -> Result<Location> {
    let shown = redacted(&format!("git+{url}"));
    let shown = shown.trim_start_matches("git+");
    let path_start = url
        .split_once("://")
        .map(|(scheme, rest)| scheme.len() + 3 + rest.find('/').unwrap_or(rest.len()))
        .unwrap_or(0);
    let (url, reference) = match url[path_start..].rfind('@') {
        Some(at) => {
            let (url, reference) = url.split_at(path_start + at);
            (url, Some(reference[1..].to_owned()))
        }
        None => (url, None),
    };
    // An `@` left in the path, or a "reference" that is a repository's
    // path, is a user's password holding a raw `/`
    // (`https://user:pa/ss@host/r.git` parses as host `user`, a port, a
    // path): nothing of it is shown.
    let looks_like_a_path = reference
        .as_deref()
        .is_some_and(|r| r.contains('/') && r.ends_with(".git"));
    // `https://user:4821/pa@ss…` with a password `4821/pa…` parses as host
    // `user`, port 4821 and a one-segment path: a reference after a
    // one-segment path without `.git` is that shape or a repository no
    // host names so; either way it is refused.
    let remote_path = &url[path_start..];
    let one_bare_segment = remote_path.trim_matches('/').split('/').count() <= 1 && !remote_path.ends_with(".git");
    let ambiguous = reference.is_some() && one_bare_segment;
    if remote_path.contains('@') || looks_like_a_path || ambiguous {
        let scheme = url.split_once("://").map_or("", |(scheme, _)| scheme);
        return Err(Error::Usage(format!(
            "`git+{scheme}://…` holds an `@` that may be part of a password: a password holding `/` \
             must be written percent-encoded (`%2F`), and a repository at a one-segment path needs \
             its `.git` suffix before `@REF`"
        )));
    }
    // Git's own rules for a reference's characters: a `?` or `#` after it
    // is a query or fragment (where tokens travel), never part of a ref.
    if let Some(reference) = &reference
        && (reference.is_empty()
            || reference.starts_with('-')
            || reference.chars().any(|c| c.is_control() || " ?#~^:*[\\".contains(c)))
    {
        return Err(Error::Usage(format!(
            "`git+{}` names an invalid reference after `@`",
            shown.escape_debug()
        )));
    }
    let remote = GitRemote::new(url)
        .map_err(|e| Error::Usage(format!("bad Git location `git+{}`: {e}", shown.escape_debug())))?;
    Ok(Location::Git { remote, reference })
}

/// `text`, a location as written, as it may be shown in a message: a URL
/// without user name, password, query or fragment, and text that is not a
/// valid URL after its scheme as the scheme alone.
pub fn redacted(text: &str) -> String {
    match text.strip_prefix("git+") {
        Some(rest) if rest.contains("://") => format!("git+{}", skillstore_backends::git_redact(rest)),
        Some(_) => "git+(not a URL)".to_owned(),
        None if text.contains("://") => skillstore_backends::git_redact(text),
        None => text.to_owned(),
    }
}

/// A discovery endpoint's URL, checked: a host, and no credentials, query
/// or fragment. (`http://` to a host that is not loopback is refused when
/// the namespace is assembled, unless its mount allows it.)
fn discovery(url: url::Url) -> Result<Location> {
    let shown = redacted(url.as_str());
    let refuse = |why: &str| Err(Error::Usage(format!("`{shown}` is not a discovery endpoint: {why}")));
    if url.host().is_none() {
        return refuse("it names no host");
    }
    if !url.username().is_empty() || url.password().is_some() || url.query().is_some() || url.fragment().is_some() {
        return refuse("it may hold no credentials, query or fragment");
    }
    Ok(Location::Discovery(url.as_str().trim_end_matches('/').to_owned()))
}

/// The kind of object store a URL scheme names, for the schemes other
/// object-store clients take and skillstore does not.
fn object_store_name(scheme: &str) -> Option<&'static str> {
    match scheme {
        "gs" => Some("Google Cloud Storage"),
        "az" | "adl" | "azure" | "abfs" | "abfss" => Some("Azure storage"),
        "memory" => Some("object_store memory"),
        _ => None,
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Dir(path) => write!(f, "{}", path.display()),
            Location::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            Location::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
            Location::Memory(path) => write!(f, "memory:{}", path.display()),
            Location::Discovery(url) => f.write_str(url),
            Location::Git {
                remote,
                reference: None,
            } => write!(f, "git+{remote}"),
            Location::Git {
                remote,
                reference: Some(reference),
            } => write!(f, "git+{remote}@{reference}"),
        }
    }
}

impl std::str::FromStr for Location {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Location::parse(s)
    }
}

/// Reads a local text file that is not a skill (a configuration, template
/// or memory file) under `limit` bytes: a larger file, or one that is not
/// a regular file, is refused with a message naming `what`.
pub fn read_local_text(path: &Path, limit: u64, what: &str) -> Result<String> {
    let bytes = read_local_file(path, limit, what)?;
    String::from_utf8(bytes).map_err(|_| Error::Config(format!("the {what} {} is not UTF-8", path.display())))
}

/// Reads a local file that is not a skill (an archive to install, say)
/// under `limit` bytes, opened non-blocking and refused unless it is a
/// regular file; a file that grows past the limit while read is refused
/// too.
pub fn read_local_file(path: &Path, limit: u64, what: &str) -> Result<Vec<u8>> {
    let mut open = std::fs::OpenOptions::new();
    open.read(true);
    // A FIFO would block the open until a writer came; opened non-blocking
    // it is refused by the type check below instead.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut open, rustix::fs::OFlags::NONBLOCK.bits() as i32);
    let cannot = |e: std::io::Error| Error::Config(format!("cannot read the {what} {}: {e}", path.display()));
    let file = open.open(path).map_err(cannot)?;
    let meta = file.metadata().map_err(cannot)?;
    if !meta.is_file() {
        return Err(Error::Config(format!(
            "the {what} {} is not a regular file",
            path.display()
        )));
    }
    let too_large = || {
        Error::Config(format!(
            "the {what} {} is larger than the {limit}-byte limit",
            path.display()
        ))
    };
    if meta.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        assert_eq!(Location::parse("./skills").unwrap(), Location::Dir("./skills".into()));
        assert_eq!(
            Location::parse("file:///srv/skills").unwrap(),
            Location::Dir("/srv/skills".into())
        );
        assert_eq!(
            Location::parse("s3://bucket/tenants/acme/").unwrap(),
            Location::S3 {
                bucket: "bucket".into(),
                prefix: "tenants/acme".into()
            }
        );
        assert_eq!(
            Location::parse("s3://bucket").unwrap(),
            Location::S3 {
                bucket: "bucket".into(),
                prefix: String::new()
            }
        );
        assert_eq!(
            Location::parse("memory:team.json").unwrap(),
            Location::Memory("team.json".into())
        );
    }

    #[test]
    fn other_object_stores_are_recognized_and_refused() {
        for url in ["gs://bucket/x", "az://container/x"] {
            let err = Location::parse(url).unwrap_err().to_string();
            assert!(err.contains("does not support"), "{url}: {err}");
        }
        assert!(
            Location::parse("ftp://host/x")
                .unwrap_err()
                .to_string()
                .contains("unknown location scheme")
        );
        assert!(Location::parse("").is_err());
        assert!(Location::parse("memory:").is_err());
    }

    #[test]
    fn git_locations_take_a_reference_and_hide_credentials() {
        let parsed = |text: &str| match Location::parse(text).unwrap() {
            Location::Git { remote, reference } => (remote.url().to_owned(), reference),
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(
            parsed("git+https://host/org/repo.git"),
            ("https://host/org/repo.git".into(), None)
        );
        assert_eq!(
            parsed("git+https://host/org/repo.git@v1.2"),
            ("https://host/org/repo.git".into(), Some("v1.2".into()))
        );
        assert_eq!(
            parsed("git+ssh://git@host/org/repo.git@main"),
            ("ssh://git@host/org/repo.git".into(), Some("main".into()))
        );
        assert_eq!(parsed("git+ssh://git@host/org/repo.git").1, None);
        assert_eq!(parsed("git+file:///srv/repo@feature/x").1, Some("feature/x".into()));
        assert_eq!(
            parsed("git+http://127.0.0.1:8080/r.git").0,
            "http://127.0.0.1:8080/r.git"
        );
        assert_eq!(parsed("git+git://127.0.0.1:9418/r.git@v1").1, Some("v1".into()));
        let secret = Location::parse("git+https://user:hunter2@host/r.git@main").unwrap();
        assert_eq!(secret.to_string(), "git+https://host/r.git@main");
        assert!(!format!("{secret:?}").contains("hunter2"));
        for bad in [
            "git+ftp://host/r",
            "git+https://host/r.git@",
            "git+https://host/r.git@-x",
        ] {
            let err = Location::parse(bad).unwrap_err().to_string();
            assert!(!err.contains("hunter2"), "{err}");
        }
        let err = Location::parse("git+ftp://u:hunter2@host/r").unwrap_err().to_string();
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[test]
    fn web_addresses_are_discovery_endpoints() {
        for (text, url) in [
            ("https://example.com", "https://example.com"),
            ("https://example.com/", "https://example.com"),
            ("https://example.com/t/acme/", "https://example.com/t/acme"),
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
            ("http://localhost:8080/docs", "http://localhost:8080/docs"),
            ("http://[::1]:8080", "http://[::1]:8080"),
        ] {
            assert_eq!(
                Location::parse(text).unwrap(),
                Location::Discovery(url.into()),
                "{text}"
            );
        }
        // Plain http:// parses for any host; only a loopback one is read
        // without a mount's `allow_http` (see `plain_http_host`).
        for (text, host) in [
            ("http://example.com", Some("example.com")),
            ("http://10.0.0.1/x", Some("10.0.0.1")),
            ("http://127.0.0.1:8080", None),
            ("http://localhost/x", None),
            ("https://example.com", None),
            ("git+http://mirror.internal/r.git@main", Some("mirror.internal")),
            ("git+http://[::1]:9/r.git", None),
            ("git+https://example.com/r.git", None),
        ] {
            let parsed = Location::parse(text).unwrap();
            assert_eq!(parsed.plain_http_host().as_deref(), host, "{text}");
        }
        for secret in [
            "https://u:SEKRIT@skills.example.com/",
            "https://skills.example.com/?token=SEKRIT",
            "https://u:SEK/RIT@skills.example.com/",
            "git+https://host/r.git@main?token=SEKRIT",
            "git+https:/user:SEKRIT@host/r.git",
            "git+user:SEKRIT@host:r.git",
        ] {
            let Err(Error::Usage(message)) = Location::parse(secret) else {
                panic!("{secret} must be refused");
            };
            assert!(!message.contains("SEKRIT") && !message.contains("RIT@"), "{message}");
            assert!(!redacted(secret).contains("SEKRIT"), "{}", redacted(secret));
        }
        for bad in [
            "https://user:pw@example.com",
            "https://example.com/?q=1",
            "https://example.com/#x",
        ] {
            assert!(Location::parse(bad).is_err(), "{bad}");
        }
    }

    /// Finding: `git+https://deploy:4821/S3CRETPW@host/repo.git@main`
    /// parsed as host `deploy`, port 4821, so nothing was redacted and
    /// `config check` and debug logs showed the password.
    #[test]
    fn a_git_password_holding_a_raw_slash_is_refused_and_never_shown() {
        for text in [
            "git+https://deploy:4821/S3CRETPW@host/repo.git@main",
            "git+https://deploy:4821/S3CRETPW@host/repo.git",
            "git+ssh://deploy:22/S3CRETPW@host/repo.git@v1",
            "git+https://deploy:4821/S3CRETPW@host/repo",
            "git+https://deploy:4821/S3CRETPW@host",
            "git+https://deploy:4821/S3CRETPW@host/repo.git/",
            "git+ssh://deploy:48/S3CRETPW@host/repo",
        ] {
            let Err(Error::Usage(message)) = Location::parse(text) else {
                panic!("{text} must be refused");
            };
            for secret in ["S3CRETPW", "deploy", "4821", "host/repo"] {
                assert!(!message.contains(secret), "{message}");
            }
            assert!(
                message.contains("`git+https://…`") || message.contains("`git+ssh://…`"),
                "{message}"
            );
        }
        // Ordinary locations, with ports and references, still parse.
        for text in [
            "git+https://host:8443/org/repo.git@main",
            "git+https://host:8443/repo.git@feature/x",
            "git+https://host/org/repo@v1",
            "git+https://host/repo",
            "git+file:///srv/repo@feature/x",
        ] {
            assert!(Location::parse(text).is_ok(), "{text}");
        }
        // Percent-encoded, the same password is a user's and is redacted.
        let encoded = Location::parse("git+https://deploy:S3CRET%2FPW@host/repo.git@main").unwrap();
        assert_eq!(encoded.to_string(), "git+https://host/repo.git@main");
    }

    #[test]
    fn relative_paths_resolve_against_a_base() {
        let base = Path::new("/etc/skillstore");
        assert_eq!(
            Location::parse("memory:team.json").unwrap().resolved_against(base),
            Location::Memory("/etc/skillstore/team.json".into())
        );
        assert_eq!(
            Location::parse("skills").unwrap().resolved_against(base),
            Location::Dir("/etc/skillstore/skills".into())
        );
        let s3 = Location::parse("s3://b/p").unwrap();
        assert_eq!(s3.clone().resolved_against(base), s3);
    }

    #[test]
    fn local_text_is_read_under_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.yaml");
        std::fs::write(&path, "x".repeat(101)).unwrap();
        assert!(read_local_text(&path, 101, "configuration").is_ok());
        let err = read_local_text(&path, 100, "configuration").unwrap_err().to_string();
        assert!(err.contains("larger than the 100-byte limit"), "{err}");
        let err = read_local_text(dir.path(), 100, "configuration")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }
}
