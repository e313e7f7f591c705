//! `skillstore.yaml`: mounts, sources, enabled skills, limits and prompt
//! settings. Unknown keys are errors that name the key.
//!
//! ```yaml
//! mounts:                       # default: / on the file's own directory
//!   - at: /
//!     location: .               # a directory, s3://bucket/prefix, or memory:FILE.json
//!     symlinks: within_root     # deny | within_root | follow (directories only)
//! sources:                      # lowest priority first
//!   - path: /examples/skills/base
//!   - path: /examples/skills/team
//!     label: Team
//!     include: ["*"]
//!     exclude: ["draft-*"]
//!     writable: true            # skills may be written here (never the first source)
//! skills:
//!   disabled: ["legacy-*"]
//! limits:
//!   max_file_bytes: 10485760
//!   concurrency: 32
//! prompt:
//!   style: markdown
//!   max_chars: 40000
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, Result};

/// The parsed configuration file. Relative local locations are resolved
/// against the file's directory by [`Config::load`].
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Backends mounted into the namespace.
    #[serde(default)]
    pub mounts: Vec<MountConfig>,
    /// Sources, lowest priority first.
    #[serde(default)]
    pub sources: Vec<SourceConfig>,
    /// Which skills are enabled.
    #[serde(default)]
    pub skills: SkillsConfig,
    /// Read limits.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// Prompt settings.
    #[serde(default)]
    pub prompt: PromptConfig,
}

/// One mount.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MountConfig {
    /// The virtual directory it appears at.
    pub at: String,
    /// A directory, `s3://bucket/prefix`, or `memory:FILE.json`.
    pub location: String,
    /// The symlink policy for a directory: `deny`, `within_root` (default)
    /// or `follow`.
    #[serde(default)]
    pub symlinks: Option<String>,
    /// Whether skills may be written through this mount.
    #[serde(default)]
    pub writable: bool,
}

/// One source.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// The virtual directory holding skill directories.
    pub path: String,
    /// The name shown in prompts and provenance; derived from the path when
    /// absent.
    #[serde(default)]
    pub label: Option<String>,
    /// Load only skill directories matching one of these globs.
    #[serde(default)]
    pub include: Vec<String>,
    /// Skip skill directories matching one of these globs.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// A symlink policy for this source alone (local directories only):
    /// links are then judged against the source's own directory.
    #[serde(default)]
    pub symlinks: Option<String>,
    /// Whether skills may be written to this source.
    #[serde(default)]
    pub writable: bool,
}

/// Enabled and disabled skills, by name or glob.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillsConfig {
    /// When given, only these skills are enabled.
    #[serde(default)]
    pub enabled: Option<Vec<String>>,
    /// These skills are disabled.
    #[serde(default)]
    pub disabled: Vec<String>,
}

/// Limits.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// The largest file read, in bytes (default 10 MiB).
    #[serde(default)]
    pub max_file_bytes: Option<u64>,
    /// Reads in flight at once (default 32).
    #[serde(default)]
    pub concurrency: Option<usize>,
}

/// Prompt settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptConfig {
    /// `markdown` or `xml`.
    #[serde(default)]
    pub style: Option<String>,
    /// The most characters a prompt may have.
    #[serde(default)]
    pub max_chars: Option<usize>,
    /// A template file (relative to the configuration file).
    #[serde(default)]
    pub template: Option<String>,
}

impl Config {
    /// Parses a configuration text. Errors name the unknown key or the line.
    pub fn parse(text: &str) -> Result<Self> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        serde_yaml::from_str(text).map_err(|e| Error::Config(format!("invalid configuration: {e}")))
    }

    /// Reads and parses `path`, resolving relative local locations and the
    /// template against the file's directory. Without mounts, `/` is the
    /// file's directory.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Config(format!("cannot read the configuration {}: {e}", path.display())))?;
        let mut config = Config::parse(&text).map_err(|e| match e {
            Error::Config(m) => Error::Config(format!("{}: {m}", path.display())),
            other => other,
        })?;
        let base = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        let base = if base.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            base
        };
        if config.mounts.is_empty() {
            config.mounts.push(MountConfig {
                at: "/".into(),
                location: base.to_string_lossy().into_owned(),
                symlinks: None,
                writable: false,
            });
        } else {
            for mount in &mut config.mounts {
                if is_local(&mount.location) && Path::new(&mount.location).is_relative() {
                    mount.location = base.join(&mount.location).to_string_lossy().into_owned();
                }
            }
        }
        if let Some(template) = &mut config.prompt.template
            && Path::new(template.as_str()).is_relative()
        {
            *template = base.join(&*template).to_string_lossy().into_owned();
        }
        Ok(config)
    }
}

/// True for a location naming a local directory (not `s3://` or `memory:`).
pub fn is_local(location: &str) -> bool {
    !location.starts_with("s3://") && !location.starts_with("memory:")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_full_file() {
        let config = Config::parse(
            "mounts:\n  - at: /\n    location: .\n    symlinks: deny\nsources:\n  - path: /base\n  - path: /team\n    label: Team\n    exclude: [\"draft-*\"]\nskills:\n  disabled: [legacy]\nlimits:\n  concurrency: 8\nprompt:\n  style: xml\n  max_chars: 1000\n",
        )
        .unwrap();
        assert_eq!(config.mounts[0].symlinks.as_deref(), Some("deny"));
        assert_eq!(config.sources.len(), 2);
        assert_eq!(config.sources[1].label.as_deref(), Some("Team"));
        assert_eq!(config.skills.disabled, ["legacy"]);
        assert_eq!(config.limits.concurrency, Some(8));
        assert_eq!(config.prompt.max_chars, Some(1000));
    }

    #[test]
    fn unknown_keys_are_named() {
        let err = Config::parse("sources:\n  - path: /base\n    lable: Base\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("lable"), "{err}");
        let err = Config::parse("mount: []\n").unwrap_err().to_string();
        assert!(err.contains("mount"), "{err}");
    }

    #[test]
    fn empty_file_is_the_default() {
        assert!(Config::parse("").unwrap().sources.is_empty());
    }
}
