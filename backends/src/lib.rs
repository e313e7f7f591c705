//! Bytes at safe virtual paths: the storage layer of `skillstore`.
//!
//! Every backend implements [`SkillBackend`]: list, stat, read, and (where
//! supported) put and delete, all addressed by [`VPath`], the only path type
//! accepted. The read guards hold in every backend:
//!
//! - **traversal**: a [`VPath`] cannot name a parent directory, and no
//!   backend resolves outside its root;
//! - **symlinks** ([`FsBackend`]): a [`SymlinkPolicy`] enforced by the kernel;
//! - **size**: a read of an object larger than its limit (10 MiB by default)
//!   is refused before the bytes are held, and checked again while reading;
//! - **file type**: only regular files are read; a FIFO is never waited on.
//!
//! Backends: [`MemoryBackend`], [`FsBackend`] (feature `fs`, Linux),
//! [`ObjectStoreBackend`] (feature `object-store`; S3 locations with feature
//! `s3`), and [`MountTable`], which joins several into one namespace.
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
mod memory;
mod mount;
mod vpath;
mod vpath_checked;
mod walk;

#[cfg(all(feature = "fs", unix))]
mod fs;
#[cfg(feature = "object-store")]
mod object;
#[cfg(feature = "s3")]
mod s3;

#[cfg(feature = "testkit")]
pub mod testkit;

pub use backend::{
    Blob, Capabilities, DEFAULT_READ_LIMIT, Entry, EntryKind, Metadata, PutMode, ReadOptions, SkillBackend,
    SkillBackendExt, Version,
};
pub use error::{Error, ErrorKind, Result};
#[cfg(all(feature = "fs", unix))]
pub use fs::{FsBackend, PathResolver, SymlinkPolicy};
pub use memory::MemoryBackend;
pub use mount::MountTable;
#[cfg(feature = "object-store")]
pub use object::ObjectStoreBackend;
#[cfg(feature = "object-store")]
pub use object_store;
#[cfg(feature = "s3")]
pub use s3::{S3Location, S3Options};
pub use vpath::{MAX_PATH_BYTES, VPath, is_valid_segment};
pub use walk::{PassReason, PassedOver, Walk, WalkLimits, WalkedFile};
