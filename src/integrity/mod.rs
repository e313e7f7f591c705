//! Integrity: one identity for a skill, pinned and signed.
//!
//! - [`digest`]: the skill digest, one `sha256:` value over a skill's
//!   files as a confined read serves them, and the per-file-version cache
//!   it is computed through;
//! - [`lock`]: the lock file (`skillstore lock`, `--locked`), each enabled
//!   winner's digest and each Git mount's commit;
//! - [`pin`]: reads of a checked skill held to the file versions its
//!   check digested;
//! - [`signature`]: SSH signatures over skill digests and the
//!   `allowed_signers` files that accept them;
//! - [`sign`]: `skillstore sign`, a local skill directory signed;
//! - [`signing_key`]: the key it is signed with, in this process or
//!   through `ssh-keygen` (passphrases, RSA, the ssh-agent);
//! - [`policy`]: what a namespace checks before it serves a skill;
//! - [`verify`]: `skillstore verify`, every winner against those checks.

pub mod digest;
pub mod lock;
pub mod pin;
pub mod policy;
pub mod sign;
pub mod signature;
pub mod signing_key;
pub mod verify;

pub use digest::{DigestedFile, FileDigests, HashedHead, RESERVED_DIR, SkillDigest, digest_lines, sha256_hex};
pub use lock::{LOCK_FILE, Lock, LockedGit, LockedSkill};
pub use policy::{Integrity, SignaturePolicy, SignatureStatus};
