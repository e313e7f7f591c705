//! `validate`: strict specification checks of skill directories, by the
//! library's [`skillstore::validate::validate_path`].

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;
use skillstore::validate::{Outcome, skill_dirs, validate_path};

use super::terminal::shown;
use super::{Failure, emit};

#[derive(Serialize)]
struct Report {
    results: Vec<Outcome>,
}

pub async fn run(paths: &[PathBuf], json: bool) -> Result<(), Failure> {
    let mut results = Vec::with_capacity(paths.len());
    for path in paths.iter().flat_map(|p| skill_dirs(p)) {
        results.push(validate_path(&path).await);
    }
    let invalid = results.iter().filter(|r| !r.valid).count();
    let total = results.len();
    if json {
        let mut text = serde_json::to_vec(&Report { results }).map_err(|e| Failure::failed(e.to_string()))?;
        text.push(b'\n');
        emit(&text)?;
    } else {
        let mut out = String::new();
        for result in &results {
            let verdict = if result.valid { "ok     " } else { "invalid" };
            let _ = writeln!(out, "{verdict}  {}", shown(&result.path));
            for p in &result.problems {
                let _ = writeln!(
                    out,
                    "  {} [{}] {}",
                    p.severity.as_str(),
                    p.kind.as_str(),
                    shown(&p.message)
                );
            }
        }
        emit(out.as_bytes())?;
    }
    if invalid == 0 {
        Ok(())
    } else {
        Err(Failure::failed(format!("{invalid} of {total} skill(s) are invalid")))
    }
}
