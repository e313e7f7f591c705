//! Writing a packed archive to a local file.

use std::io::{self, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

/// Writes `bytes` to the local file `output`, whole or not at all, without
/// following or overwriting anything planted beside it: the bytes go into
/// a new file created exclusively (`O_EXCL`, so never through a link and
/// never over an existing file) under a random hidden name in `output`'s
/// directory, are synced, and the file is renamed over `output`. A link at
/// `output` itself is replaced, not followed. On failure the temporary file
/// is removed and `output` is as it was. The file is made `0644` (less the
/// umask).
pub fn save(output: &Path, bytes: &[u8]) -> io::Result<()> {
    let name = output
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the output names no file"))?;
    let dir = match output.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let mut prefix = std::ffi::OsString::from(".");
    prefix.push(name);
    prefix.push(".");
    let mut file = tempfile::Builder::new()
        .prefix(&prefix)
        .suffix(".partial")
        .permissions(std::fs::Permissions::from_mode(0o644))
        .tempfile_in(dir)?;
    file.write_all(bytes)?;
    file.as_file().sync_all()?;
    file.persist(output).map_err(|e| e.error)?;
    Ok(())
}
