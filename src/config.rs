//! `skillstore.yaml`: mounts, sources, enabled skills, limits and prompt
//! settings. Unknown keys are errors that name the key.
//!
//! ```yaml
//! mounts:                       # default: / on the file's own directory
//!   - at: /
//!     location: .               # a directory, s3://bucket/prefix, or memory:FILE.json
//!     symlinks: within_root     # deny | within_root | follow (directories only)
//!     changes: poll             # poll | journal | {sqs: QUEUE_URL}
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
//!   max_discovery_bytes: 536870912 # one discovery endpoint's skills, together
//! prompt:
//!   style: markdown
//!   max_chars: 40000
//!   always: [code-review]       # listed first, kept when the budget leaves others out
//! sync:                         # bounds of a synced tree (`sync DIR`)
//!   max_files: 10000            # per skill
//!   max_skill_bytes: 67108864   # per skill
//!   max_total_bytes: 1073741824 # the whole tree
//! cache:                        # frontmatters of S3 sources, kept by version
//!   dir: ~/.cache/skillstore    # default: $XDG_CACHE_HOME/skillstore or ~/.cache/skillstore
//!   max_bytes: 67108864
//!   enabled: true
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use skillstore_backends::{DEFAULT_READ_LIMIT, MemoryBackend};

use crate::error::{Error, Result};
use crate::location::{Location, read_local_text};

/// The parsed configuration: what [`Config::open`] assembles into a
/// [`Namespace`]. Built from a file ([`Config::load`]), from text
/// ([`Config::parse`]), or in code; command-line flags are applied with
/// [`Config::set_mount`], [`Config::set_sources`] and
/// [`Config::make_writable`].
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
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
    /// The local cache of frontmatters.
    #[serde(default)]
    pub cache: CacheConfig,
    /// Bounds of a synced tree.
    #[serde(default)]
    pub sync: SyncConfig,
    /// A lock file (`skillstore lock`) every winner must match to be
    /// served, relative to the configuration's directory.
    #[serde(default)]
    pub lock: Option<String>,
    /// The directory relative locations and files are resolved against:
    /// the configuration file's directory, or the working directory.
    #[serde(skip)]
    pub base_dir: Option<PathBuf>,
    /// The file it was loaded from: errors of [`Config::open`] name it.
    #[serde(skip)]
    file: Option<PathBuf>,
    /// Source names made writable beyond the file's `writable: true`.
    #[serde(skip)]
    writable_names: Vec<String>,
}

/// One mount.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MountConfig {
    /// The virtual directory it appears at.
    pub at: String,
    /// A directory, `s3://bucket/prefix`, `memory:FILE.json`,
    /// `git+URL[@REF]` or a discovery endpoint `https://host[/path]`.
    pub location: String,
    /// The symlink policy for a directory: `deny`, `within_root` (default)
    /// or `follow`.
    #[serde(default)]
    pub symlinks: Option<String>,
    /// Read a discovery endpoint (`http://host`) or a Git remote
    /// (`git+http://host/...`) over plain HTTP although its host is not
    /// loopback (default false: refused, as skills and credentials would
    /// travel unencrypted).
    #[serde(default)]
    pub allow_http: bool,
    /// How a long-lived reader learns of changes: `poll` (the default:
    /// list every interval), `journal` (follow the store's change journal,
    /// which writes through skillstore keep; polling stays as the fallback)
    /// or `{sqs: QUEUE_URL}`.
    #[serde(default)]
    pub changes: Option<crate::changes::ChangesConfig>,
    /// The directory a relative `location` is resolved against, when it is
    /// not the configuration's [`Config::base_dir`] (a mount given on the
    /// command line resolves against the working directory).
    #[serde(skip)]
    pub base_dir: Option<PathBuf>,
    /// Files held in memory, mounted instead of opening `location` (which
    /// then only names the mount in messages); set by
    /// [`Config::set_memory_mount`]. Clones of the configuration share it.
    #[serde(skip)]
    pub contents: Option<Arc<MemoryBackend>>,
    /// Set by [`Config::set_mount`] (a mount given on the command line or
    /// in code, not read from the file): a refusal of it names the mount,
    /// not the configuration file.
    #[serde(skip)]
    pub given: bool,
}

/// How a refusal of a mount given outside the file begins (see
/// [`MountConfig::given`]); such a refusal is not put on the file.
pub(crate) const GIVEN_MOUNT: &str = "the mount given at ";

/// A refusal of the given mount at `at`, named as such.
pub(crate) fn given_mount_error(at: &str, location: &str, err: Error) -> Error {
    match err {
        Error::Config(m) => Error::Config(format!("{GIVEN_MOUNT}{at} (`{location}`): {m}")),
        Error::Usage(m) => Error::Usage(format!("{GIVEN_MOUNT}{at} (`{location}`): {m}")),
        other => other,
    }
}

/// One source.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
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
    /// links are then judged against the source's own directory. It may
    /// only narrow the policy of the mount serving the source.
    #[serde(default)]
    pub symlinks: Option<String>,
    /// Whether skills may be written to this source (never the first of
    /// several).
    #[serde(default)]
    pub writable: bool,
    /// Whose SSH signatures this source's skills are checked against.
    #[serde(default)]
    pub signatures: Option<SignaturesConfig>,
    /// Releases served instead of working copies: a skill name (or `*` for
    /// every other skill) -> a channel (`stable`), an exact version
    /// (`1.1.0`) or a Cargo range (`^1`). A skill it covers with no
    /// matching release is not served (`release_not_found`). Only on a
    /// source that is not writable.
    #[serde(default)]
    pub select: std::collections::BTreeMap<String, String>,
}

/// The signatures a source accepts.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignaturesConfig {
    /// An `allowed_signers` file (Git's format), relative to the
    /// configuration's directory.
    pub allowed_signers: String,
    /// Whether an unsigned skill is withheld (`signature_missing`); a
    /// present signature is always checked.
    #[serde(default)]
    pub required: bool,
}

/// Enabled and disabled skills, by name or glob.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
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
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// The largest file read, in bytes (default 10 MiB). Also bounds the
    /// memory and template files the configuration names.
    #[serde(default)]
    pub max_file_bytes: Option<u64>,
    /// Reads in flight at once (default 32).
    #[serde(default)]
    pub concurrency: Option<usize>,
    /// The most bytes the skills of one discovery endpoint may hold
    /// together in one load, downloads in flight included (default 512
    /// MiB); an entry past it is refused with a diagnostic.
    #[serde(default)]
    pub max_discovery_bytes: Option<u64>,
}

/// Prompt settings.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
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
    /// Where the skills will be found by the agent (a synced or mounted
    /// tree such as `/mnt/skills`): each location in the prompt becomes
    /// `ROOT/NAME/SKILL.md` instead of the virtual path.
    #[serde(default)]
    pub location_root: Option<String>,
    /// Skills always listed: first in the list, so a `max_chars` budget
    /// leaves others out before these.
    #[serde(default)]
    pub always: Vec<String>,
}

/// Bounds of a synced tree (`sync DIR`); what passes one is left out whole
/// and reported.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SyncConfig {
    /// The most files one skill may hold (default 10,000).
    #[serde(default)]
    pub max_files: Option<usize>,
    /// The most bytes one skill may hold (default 64 MiB).
    #[serde(default)]
    pub max_skill_bytes: Option<u64>,
    /// The most bytes the whole tree may hold (default 1 GiB).
    #[serde(default)]
    pub max_total_bytes: Option<u64>,
}

/// The local cache of frontmatters read from sources that name their
/// location (S3).
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CacheConfig {
    /// Its directory (relative to the configuration file; `~/` is the home
    /// directory). Default: `$XDG_CACHE_HOME/skillstore`, or
    /// `~/.cache/skillstore`.
    #[serde(default)]
    pub dir: Option<String>,
    /// The most bytes it may take (default 64 MiB).
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// `false` turns it off (as `--no-cache` does).
    #[serde(default)]
    pub enabled: Option<bool>,
}

impl Config {
    /// The JSON Schema (draft 2020-12) of `skillstore.yaml`, generated from
    /// these types, so an editor completes and checks the file as
    /// [`Config::parse`] reads it (unknown keys refused).
    pub fn json_schema() -> serde_json::Value {
        schemars::schema_for!(Config).to_value()
    }

    /// Parses a configuration text. Errors name the unknown key or the line.
    pub fn parse(text: &str) -> Result<Self> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        serde_yaml::from_str(text).map_err(|e| Error::Config(format!("invalid configuration: {e}")))
    }

    /// Reads (under the default 10 MiB read limit) and parses `path`.
    /// Relative locations, memory files and the template resolve against
    /// the file's directory; without mounts, `/` is that directory.
    pub fn load(path: &Path) -> Result<Self> {
        let text = read_local_text(path, DEFAULT_READ_LIMIT, "configuration")?;
        let mut config = Config::parse(&text).map_err(|e| match e {
            Error::Config(m) => Error::Config(format!("{}: {m}", path.display())),
            other => other,
        })?;
        config.file = Some(path.to_path_buf());
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        config.base_dir = Some(if base.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            base
        });
        if config.mounts.is_empty() {
            config.mounts.push(MountConfig {
                at: "/".into(),
                location: ".".into(),
                ..MountConfig::default()
            });
        }
        Ok(config)
    }

    /// The directory relative paths of this configuration resolve against.
    pub fn base(&self) -> PathBuf {
        self.base_dir.clone().unwrap_or_else(|| PathBuf::from("."))
    }

    /// Mounts `location` at `at`, replacing a mount at the same point; a
    /// relative location resolves against `base_dir` (for a command-line
    /// flag, the working directory).
    pub fn set_mount(&mut self, at: &str, location: &str, base_dir: &Path) -> Result<()> {
        let at_path = crate::source::parse_dir(at)?;
        Location::parse(location)?;
        self.mounts
            .retain(|m| crate::source::parse_dir(&m.at).map(|p| p != at_path).unwrap_or(true));
        self.mounts.push(MountConfig {
            at: at.to_owned(),
            location: location.to_owned(),
            base_dir: Some(base_dir.to_path_buf()),
            given: true,
            ..MountConfig::default()
        });
        Ok(())
    }

    /// Mounts files held in memory at `at`, replacing a mount at the same
    /// point: nothing is read from or written to disk. Namespaces opened
    /// from this configuration (and from its clones) share `files`, so a
    /// write through one is seen by the others.
    pub fn set_memory_mount(&mut self, at: &str, files: MemoryBackend) -> Result<()> {
        let at_path = crate::source::parse_dir(at)?;
        self.mounts
            .retain(|m| crate::source::parse_dir(&m.at).map(|p| p != at_path).unwrap_or(true));
        self.mounts.push(MountConfig {
            at: at.to_owned(),
            location: format!("memory:(files held in memory at {at_path})"),
            contents: Some(Arc::new(files)),
            ..MountConfig::default()
        });
        Ok(())
    }

    /// Replaces the sources with `[LABEL=]VPATH` specs, lowest priority
    /// first, as the command line gives them.
    pub fn set_sources<'a>(&mut self, specs: impl IntoIterator<Item = &'a str>) -> Result<()> {
        let mut sources = Vec::new();
        for spec in specs {
            let source = crate::Source::parse(spec)?;
            let labeled = spec
                .split_once('=')
                .is_some_and(|(l, _)| !l.is_empty() && !l.starts_with('/'));
            sources.push(SourceConfig {
                path: source.path().as_str().to_owned(),
                label: labeled.then(|| source.name().to_owned()),
                ..SourceConfig::default()
            });
        }
        self.sources = sources;
        Ok(())
    }

    /// Turns the local cache off for the namespace this configuration
    /// opens.
    pub fn disable_cache(&mut self) {
        self.cache.enabled = Some(false);
    }

    /// Marks the source of this name writable when the namespace is opened
    /// (an error then if no source has the name).
    pub fn make_writable(&mut self, name: &str) {
        self.writable_names.push(name.to_owned());
    }

    /// Checks every winner against the lock file at `path` (relative to
    /// the working directory), in place of the configuration's `lock:`.
    pub fn set_lock(&mut self, path: &Path) {
        self.lock = Some(
            if path.is_relative() {
                std::env::current_dir()
                    .map(|d| d.join(path))
                    .unwrap_or_else(|_| path.to_path_buf())
            } else {
                path.to_path_buf()
            }
            .to_string_lossy()
            .into_owned(),
        );
    }

    /// The file it was loaded from, when it was.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Source names made writable beyond the file's `writable: true`.
    pub(crate) fn writable_names(&self) -> &[String] {
        &self.writable_names
    }

    /// Serves every winner without a lock, whatever the configuration says
    /// (to write a new lock).
    pub fn clear_lock(&mut self) {
        self.lock = None;
    }
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
