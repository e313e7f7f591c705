//! `verify` and `sign`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use skillstore::integrity::sign::sign_dir;
use skillstore::integrity::signing_key::SigningKey;
use skillstore::integrity::verify::verify as report;

use super::namespace::build_checking;
use super::terminal::shown;
use super::{Failure, Global, emit};

/// `verify [--json]`: every winner's digest, lock status and signer; exit 3
/// when one would not be served.
/// The lock is `--locked`'s, the configuration's `lock:`, or the file `lock`
/// writes when it exists; `--json` names it in `lock_file` (null: none),
/// the text on standard error.
pub async fn verify(global: &Global, json: bool) -> Result<(), Failure> {
    let (namespace, lock_file) = build_checking(global, true)?;
    let reports = report(&namespace).await;
    let failed = reports.iter().filter(|r| !r.passes()).count();
    let lock_name = lock_file.as_ref().map(|f| f.display().to_string());
    if json {
        let mut text = serde_json::to_vec_pretty(&serde_json::json!({ "lock_file": lock_name, "skills": reports }))
            .map_err(|e| Failure::failed(e.to_string()))?;
        text.push(b'\n');
        emit(&text)?;
    } else {
        match &lock_name {
            Some(name) => eprintln!("against the lock file {}", shown(name)),
            None => eprintln!("no lock file: every skill is no_lock"),
        }
        let mut out = String::new();
        for r in &reports {
            let lock = r.lock.as_str();
            let signer = r
                .signer
                .as_deref()
                .map_or(String::new(), |s| format!(" by {}", shown(s)));
            let _ = writeln!(
                out,
                "{}  {}  {}  {}{signer}{}",
                shown(&r.name),
                r.digest.as_deref().unwrap_or("-"),
                lock,
                r.signature,
                r.problem
                    .as_deref()
                    .map_or(String::new(), |p| format!("  ({})", shown(p)))
            );
        }
        emit(out.as_bytes())?;
    }
    if failed > 0 {
        return Err(Failure {
            code: 3,
            message: format!("{failed} skill(s) would not be served"),
        });
    }
    Ok(())
}

/// `sign SKILL_DIR... [--key KEY]`: with the key file given, or the
/// ssh-agent's first key.
pub async fn sign(dirs: &[PathBuf], key: Option<&Path>) -> Result<(), Failure> {
    let key = match key {
        Some(key) => SigningKey::from_file(key)?,
        None => SigningKey::from_agent()?,
    };
    for dir in dirs {
        let digest = sign_dir(dir, &key, skillstore::backends::DEFAULT_READ_LIMIT).await?;
        emit(format!("signed {} {digest}\n", dir.display()).as_bytes())?;
    }
    Ok(())
}
