//! Bytes at safe virtual paths: the storage layer of `skillstore`.
//!
//! Every backend implements [`SkillBackend`]: list, stat, read, and (where
//! supported) put and delete, all addressed by [`VPath`], the only path type
//! accepted. The guards hold in every backend:
//!
//! - **traversal**: a [`VPath`] cannot name a parent directory, and no
//!   backend resolves outside its root;
//! - **symlinks** ([`FsBackend`]): reads follow links by a [`SymlinkPolicy`]
//!   enforced at every component (by the kernel's `openat2` on Linux, or by
//!   a per-component walk, [`PathResolver`]); writes and deletes never
//!   follow a link at any component ([`ErrorKind::WriteThroughSymlink`]);
//! - **confinement**: a read may be confined to a directory of its path
//!   ([`ReadOptions::confinement`], such as a skill's own directory): once
//!   every link is resolved it stays beneath it, or is refused;
//! - **size**: a read of an object larger than its limit (10 MiB by default)
//!   is refused before the bytes are held, and checked again while reading;
//! - **file type**: only regular files are read; a FIFO is never waited on;
//! - **messages**: an [`Error`] shows the virtual path and its kind, never a
//!   host path, endpoint, bucket or URL (those stay in its source, for
//!   logs). A full disk or quota is [`ErrorKind::StorageFull`].
//!
//! [`SkillBackendExt::walk`] lists every file under a directory within
//! [`WalkLimits`], never descending into a directory link ([`Entry::symlink`])
//! and reporting what it passed over.
//!
//! Backends: [`MemoryBackend`], [`FsBackend`] (feature `fs`, any Unix),
//! [`ObjectStoreBackend`] (feature `object-store`; S3 locations with feature
//! `s3`), `GitBackend` (feature `git`: one commit of a Git repository, read
//! from its object database), and [`MountTable`], which joins several into one namespace. The
//! conformance suite and the matrix of backends it runs on are in `testkit`
//! (feature `testkit`).
//!
//! ```
//! use std::sync::Arc;
//! use skillstore_backends::{MemoryBackend, MountTable, PutMode, SkillBackend, SkillBackendExt, VPath};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let team = MemoryBackend::new();
//! team.put(&VPath::new("/pdf/SKILL.md")?, "---\nname: pdf\n---\n".into(), PutMode::Create).await?;
//!
//! let mut ns = MountTable::new();
//! ns.mount(VPath::new("/team")?, Arc::new(team))?;
//! let text = ns.read_to_string(&VPath::new("/team/pdf/SKILL.md")?).await?;
//! assert!(text.contains("name: pdf"));
//! assert!(VPath::new("/team/../etc/passwd").is_err());
//! # Ok::<(), skillstore_backends::Error>(())
//! # }).unwrap();
//! ```

#![warn(missing_docs)]

mod backend;
mod error;
mod layer;
mod memory;
mod mount;
mod remote;
mod rules;
mod subtree;
mod vpath;
mod vpath_checked;
mod walk;

#[cfg(feature = "discovery")]
mod discovery;
#[cfg(all(feature = "fs", unix))]
mod fs;
#[cfg(all(feature = "git", unix))]
mod git;
#[cfg(feature = "object-store")]
mod object;
#[cfg(feature = "s3")]
mod s3;

#[cfg(feature = "testkit")]
pub mod testkit;

pub use backend::{
    Blob, Capabilities, DEFAULT_READ_LIMIT, DeepFile, DeepLimits, DeepListing, Entry, EntryKind, Listing, Metadata,
    PutMode, ReadOptions, SkillBackend, SkillBackendExt, Version,
};
#[cfg(feature = "discovery")]
pub use discovery::{DiscoveryBackend, DiscoveryLimits, SCHEMA_V2, Unpack};
pub use error::{Error, ErrorKind, Result};
#[cfg(all(feature = "fs", unix))]
pub use fs::{FsBackend, PathResolver, SymlinkPolicy};
#[cfg(all(feature = "git", unix))]
pub use git::{GitBackend, GitCache, Resolution as GitResolution};
pub use layer::Layered;
pub use memory::MemoryBackend;
pub use mount::MountTable;
#[cfg(feature = "object-store")]
pub use object::ObjectStoreBackend;
#[cfg(feature = "object-store")]
pub use object_store;
pub use remote::{GitRemote, is_full_commit_id, redact as git_redact};
pub use rules::{hex, is_index_name};
#[cfg(feature = "s3")]
pub use s3::{S3Location, S3Options};
pub use subtree::Subtree;
pub use vpath::{MAX_PATH_BYTES, VPath, is_valid_segment};
pub use walk::{PassReason, PassedOver, Walk, WalkLimits, WalkedFile};
