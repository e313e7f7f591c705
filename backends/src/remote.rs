//! Where a Git repository is, as data: its URL, the same URL as it may be
//! shown, and the commit ids Git names. Parsed without Git support built
//! in, so a location is understood (and refused clearly) by every build.

use crate::error::{Error, ErrorKind, Result};

/// A remote Git repository: its URL as Git takes it, and the same URL
/// without credentials, the only form ever shown.
#[derive(Clone, PartialEq, Eq)]
pub struct GitRemote {
    url: String,
    shown: String,
}

impl std::fmt::Debug for GitRemote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("GitRemote").field(&self.shown).finish()
    }
}

impl std::fmt::Display for GitRemote {
    /// The URL without user name or password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl GitRemote {
    /// A remote at `url`: `https://`, `http://`, `ssh://`, `git://` or
    /// `file://`. Anything else is [`ErrorKind::InvalidPath`].
    pub fn new(url: &str) -> Result<Self> {
        let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or_default();
        if !matches!(scheme, "https" | "http" | "ssh" | "git" | "file") {
            // Not echoed: text without a known scheme may be a secret in a
            // shape no redaction recognizes.
            return Err(Error::new(ErrorKind::InvalidPath)
                .with_detail("a Git URL needs https://, http://, ssh://, git:// or file://"));
        }
        if url::Url::parse(url).is_err() {
            return Err(Error::new(ErrorKind::InvalidPath).with_detail(format!(
                "`{}` is not a valid URL (in a user name or password, `/`, `@`, `:`, `?` and `#` must be percent-encoded)",
                redact(url).escape_debug()
            )));
        }
        Ok(GitRemote {
            url: url.to_owned(),
            shown: redact(url),
        })
    }

    /// The URL with its credentials, for Git alone.
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// `url` as it may be shown: without user name, password, query or
/// fragment (where access tokens travel). Text that does not parse as a URL
/// is shown as its scheme alone, so a malformed secret never shows either.
pub fn redact(url: &str) -> String {
    let Some((scheme, _)) = url.split_once("://") else {
        return url.to_owned();
    };
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.set_query(None);
            parsed.set_fragment(None);
            parsed.to_string()
        }
        Err(_) => format!("{scheme}://(not a valid URL)"),
    }
}

/// True for 40 (SHA-1) or 64 (SHA-256) lowercase or uppercase hex digits.
pub fn is_full_commit_id(text: &str) -> bool {
    matches!(text.len(), 40 | 64) && text.bytes().all(|b| b.is_ascii_hexdigit())
}
