//! A Git push event (GitHub, Gitea, GitLab), as far as a reader needs it:
//! which repository and which reference moved, and whether a mount follows
//! them. Checking who sent the event (its signature) is the receiver's job
//! before this is asked.

use crate::location::Location;

/// The most repository URLs an event may name.
const MAX_URLS: usize = 16;
/// The longest URL or reference kept, in bytes.
const MAX_TEXT: usize = 2048;

/// The repository and reference a push event names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitPush {
    /// The repository's URLs as the event gives them (clone, SSH, web).
    pub urls: Vec<String>,
    /// The reference pushed, `refs/heads/NAME` or `refs/tags/NAME`.
    pub reference: String,
    /// The repository's default branch, when the event says it.
    pub default_branch: Option<String>,
}

impl GitPush {
    /// Reads a push event's JSON body (GitHub's, Gitea's or GitLab's
    /// shape); `None` when it names no reference or no repository URL.
    pub fn parse(body: &[u8]) -> Option<GitPush> {
        let value: serde_json::Value = serde_json::from_slice(body).ok()?;
        let reference = text(&value["ref"])?.to_owned();
        let mut urls = Vec::new();
        for owner in ["repository", "project"] {
            for key in [
                "clone_url",
                "git_url",
                "ssh_url",
                "html_url",
                "url",
                "git_http_url",
                "git_ssh_url",
                "web_url",
                "homepage",
            ] {
                if let Some(url) = text(&value[owner][key])
                    && !urls.iter().any(|u| u == url)
                    && urls.len() < MAX_URLS
                {
                    urls.push(url.to_owned());
                }
            }
        }
        if urls.is_empty() {
            return None;
        }
        let default_branch = ["repository", "project"]
            .iter()
            .find_map(|owner| text(&value[owner]["default_branch"]))
            .map(str::to_owned);
        Some(GitPush {
            urls,
            reference,
            default_branch,
        })
    }

    /// True when `location` is a Git location of this repository following
    /// the reference pushed: the same host and path (scheme, credentials,
    /// a trailing `.git` and case of the host set aside), and its
    /// reference the one pushed, or no reference when the push is to the
    /// default branch (or the event does not say which that is).
    pub fn moves(&self, location: &Location) -> bool {
        let Location::Git { remote, reference } = location else {
            return false;
        };
        let mounted = normalize(remote.url());
        if !self.urls.iter().any(|u| normalize(u) == mounted) {
            return false;
        }
        let short = self
            .reference
            .strip_prefix("refs/heads/")
            .or_else(|| self.reference.strip_prefix("refs/tags/"))
            .unwrap_or(&self.reference);
        match reference {
            Some(wanted) => wanted == short || *wanted == self.reference,
            None => self.default_branch.as_deref().is_none_or(|d| d == short),
        }
    }
}

/// A string of the event, when it is one of at most [`MAX_TEXT`] bytes.
fn text(value: &serde_json::Value) -> Option<&str> {
    value.as_str().filter(|s| !s.is_empty() && s.len() <= MAX_TEXT)
}

/// A repository URL as `host/path`: no scheme, no credentials, the host in
/// lowercase, no trailing `/` or `.git`; an SCP-like `user@host:path` is
/// taken as `host/path`.
fn normalize(url: &str) -> String {
    let url = url.strip_prefix("git+").unwrap_or(url);
    let rest = match url.split_once("://") {
        Some((_, rest)) => rest.to_owned(),
        None => match url.split_once(':') {
            Some((host, path)) => format!("{host}/{}", path.trim_start_matches('/')),
            None => url.to_owned(),
        },
    };
    let (authority, path) = rest.split_once('/').unwrap_or((&rest, ""));
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let path = path.trim_end_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    format!("{}/{path}", host.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(body: serde_json::Value) -> GitPush {
        GitPush::parse(&serde_json::to_vec(&body).unwrap()).unwrap()
    }

    #[test]
    fn the_same_repository_under_its_several_urls() {
        for (a, b) in [
            ("https://github.com/org/skills.git", "git+https://GitHub.com/org/skills"),
            (
                "git@github.com:org/skills.git",
                "git+ssh://git@github.com/org/skills.git",
            ),
            ("https://user:pw@host/org/skills/", "git+https://host/org/skills.git"),
            ("http://127.0.0.1:9/skills.git", "git+http://127.0.0.1:9/skills.git"),
        ] {
            assert_eq!(normalize(a), normalize(b), "{a} {b}");
        }
        assert_ne!(
            normalize("https://host/org/skills"),
            normalize("https://host/org/skills2")
        );
        assert_ne!(
            normalize("https://host/org/skills"),
            normalize("https://evil/org/skills")
        );
    }

    #[test]
    fn a_push_moves_the_mounts_of_its_repository_and_branch() {
        let github = push(serde_json::json!({
            "ref": "refs/heads/main",
            "repository": {"clone_url": "https://github.com/org/skills.git", "default_branch": "main"},
        }));
        let at = |text: &str| Location::parse(text).unwrap();
        assert!(github.moves(&at("git+https://github.com/org/skills.git@main")));
        assert!(github.moves(&at("git+https://github.com/org/skills.git")));
        assert!(!github.moves(&at("git+https://github.com/org/skills.git@dev")));
        assert!(!github.moves(&at("git+https://github.com/org/other.git@main")));
        let gitlab = push(serde_json::json!({
            "ref": "refs/heads/dev",
            "project": {"git_http_url": "https://gitlab.example/org/skills.git", "default_branch": "main"},
        }));
        assert!(gitlab.moves(&at("git+https://gitlab.example/org/skills.git@dev")));
        assert!(!gitlab.moves(&at("git+https://gitlab.example/org/skills.git")));
        assert!(GitPush::parse(b"{\"ref\": \"refs/heads/main\"}").is_none());
        assert!(GitPush::parse(b"not json").is_none());
    }
}
