//! Store, layer and serve Agent Skills.
//!
//! An Agent Skill is a directory holding a `SKILL.md`: YAML frontmatter
//! (`name`, `description`, optional `license`, `compatibility`, `metadata`,
//! `allowed-tools`) and a Markdown body, beside optional `scripts/`,
//! `references/` and `assets/`. `skillstore` loads skills from an ordered
//! [`SourceList`] over any storage backend (a directory, memory, S3), merges
//! them into a [`Catalog`] where a later source's skill wins, keeps where
//! every skill came from and what it shadowed, and renders the catalog for
//! a system prompt.
//!
//! ```
//! use std::sync::Arc;
//! use skillstore::{Catalog, LoadOptions, Source, SourceList};
//! use skillstore::backends::{MemoryBackend, PutMode, SkillBackend, VPath};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let files = MemoryBackend::new();
//! for (path, text) in [
//!     ("/base/pdf/SKILL.md", "---\nname: pdf\ndescription: Read PDFs.\n---\nSteps..."),
//!     ("/team/pdf/SKILL.md", "---\nname: pdf\ndescription: Read PDFs, the team's way.\n---\n..."),
//! ] {
//!     files.put(&VPath::new(path)?, text.into(), PutMode::Overwrite).await?;
//! }
//! let sources = SourceList::from_sources([Source::parse("/base/")?, Source::parse("/team/")?])?;
//! let catalog = Catalog::load(Arc::new(files), sources, LoadOptions::default()).await;
//!
//! let pdf = catalog.get("pdf").unwrap();
//! assert_eq!(pdf.source, "team");
//! assert_eq!(pdf.shadowed[0].path.as_str(), "/base/pdf/SKILL.md");
//! let body = catalog.read_skill("pdf").await?;
//! assert!(body.starts_with(b"---\nname: pdf"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

#![warn(missing_docs)]

pub mod archive;
pub mod audit;
pub mod cache;
pub mod catalog;
pub mod changes;
pub mod config;
pub mod content;
pub mod diagnostic;
pub mod dir_name;
pub mod display;
pub mod edit;
pub mod error;
mod frontmatter;
#[cfg(feature = "git")]
pub mod git_source;
pub mod index;
pub mod integrity;
pub mod location;
pub mod namespace;
pub mod prompt;
pub mod release;
#[cfg(feature = "search")]
pub mod search;
mod shared_catalog;
pub mod skill;
pub mod skill_files;
pub mod source;
pub mod source_pool;
pub mod suggest;
pub mod sync;
pub mod validate;

pub use skillstore_backends as backends;

pub use archive::{
    ArchiveError, ArchiveFile, ArchiveLimits, InstallOptions, Refusal, SkillArchive, pack, pack_dir, pack_rooted,
};
pub use catalog::{Catalog, LoadOptions, Shadowed, Skill, SkillFilter};
pub use config::Config;
pub use diagnostic::{Diagnostic, DiagnosticKind};
pub use edit::check::{ContentCheck, DefaultContentCheck, PendingFile, Verdict};
pub use edit::history::{Action, FileEntry, FileEvent, HistoryEntry, Record};
pub use edit::{Change, Patch, SkillEditor};
pub use error::{Error, Result};
pub use frontmatter::MAX_FRONTMATTER_BYTES;
pub use location::Location;
pub use namespace::{Namespace, PromptSettings};
pub use prompt::{Prompt, PromptOptions, PromptStyle, render};
pub use release::{Releases, Selector};
pub use shared_catalog::SharedCatalog;
pub use skill::{
    LOWERCASE_SKILL_FILE, Parsed, Problem, ProblemKind, SKILL_FILE, Severity, SkillMetadata, Strictness,
    parse_frontmatter, parse_frontmatter_reference, parse_skill_md,
};
pub use skill_files::{FileLimits, LeftOut, LeftOutKind, SkillFile, SkillFiles};
pub use source::{Patterns, Source, SourceList};
pub use sync::{SyncOptions, SyncRefusal, SyncReport};

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The book's Rust examples (`docs/src/`), compiled and run as doctests.
#[doc = include_str!("../docs/src/library.md")]
#[doc = include_str!("../docs/src/writing.md")]
#[cfg(doctest)]
pub struct BookDoctests;
