//! `sign`: a local skill directory's digest signed with an SSH key, the
//! signature written into the skill at [`SIGNATURE_FILE`].

use std::path::Path;

use bytes::Bytes;
use skillstore_backends::{FsBackend, PutMode, SkillBackend, SymlinkPolicy, VPath};

use crate::error::{Error, Result};
use crate::integrity::digest::FileDigests;
use crate::integrity::signature::SIGNATURE_FILE;
use crate::integrity::signing_key::SigningKey;
use crate::skill_files::{FileLimits, list};

/// Signs the skill in the local directory `dir` with `key`: computes its digest through the same confined listing
/// and reads as serving (links refused), and writes the signature to
/// `dir/.skillstore/signature` without following a link. Returns the
/// digest signed.
pub async fn sign_dir(dir: &Path, key: &SigningKey, read_limit: u64) -> Result<String> {
    let shown = dir.display();
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::Usage(format!("`{shown}` names no skill directory")))?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let backend = FsBackend::with_policy(&parent, SymlinkPolicy::Deny)
        .map_err(|e| Error::Usage(format!("cannot open `{shown}`: {e}")))?;
    let at = VPath::new(format!("/{name}")).map_err(|e| Error::Usage(format!("`{shown}`: {e}")))?;
    let listed = list(&backend, &at, read_limit, FileLimits::default()).await?;
    if !listed.files.iter().any(|f| f.relative == crate::SKILL_FILE) {
        return Err(Error::Usage(format!("`{shown}` holds no {}", crate::SKILL_FILE)));
    }
    let digest = FileDigests::new().skill_digest(&backend, &listed).await?.digest;
    let signature = key.sign(&digest).await?;
    let path = at.join(SIGNATURE_FILE).map_err(|e| Error::Usage(e.to_string()))?;
    backend.put(&path, Bytes::from(signature), PutMode::Overwrite).await?;
    Ok(digest)
}
