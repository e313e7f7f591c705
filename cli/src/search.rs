//! `search`: the catalog's skills that best match a query, or a batch of
//! queries read as JSON lines.

use std::io::{BufRead, Write};

use serde::{Deserialize, Serialize};
use skillstore::search::{SearchHit, SearchOptions};

use super::commands::degraded;
use super::namespace::build;
use super::terminal::shown;
use super::{Failure, Global, emit};

/// The JSON answer to one query.
#[derive(Serialize)]
struct Answer<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a serde_json::Value>,
    results: &'a [SearchHit],
}

/// The answer to a batch line that could not be answered.
#[derive(Serialize)]
struct Refusal<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a serde_json::Value>,
    line: usize,
    error: String,
}

/// One line of a batch.
#[derive(Deserialize)]
struct Request {
    #[serde(default)]
    id: Option<serde_json::Value>,
    query: String,
    #[serde(default)]
    limit: Option<usize>,
}

pub async fn run(
    global: &Global,
    query: Option<&str>,
    limit: usize,
    json: bool,
    batch: bool,
    include_disabled: bool,
) -> Result<(), Failure> {
    let namespace = build(global)?;
    let catalog = namespace.load().await;
    let index = namespace.search_index_for(&catalog).await?;
    let options = SearchOptions {
        limit,
        include_disabled,
    };
    if batch {
        return run_batch(&catalog, &index, options);
    }
    let query = query.ok_or_else(|| Failure::usage("search needs a QUERY, or --batch"))?;
    let results = index.search(&catalog, query, options)?;
    if json {
        let mut text = serde_json::to_string(&Answer {
            id: None,
            results: &results,
        })
        .map_err(|e| Failure::failed(e.to_string()))?;
        text.push('\n');
        emit(text.as_bytes())?;
    } else {
        let mut text = String::new();
        for hit in &results {
            text.push_str(&format!(
                "{}  ({}, {:.2})\n    {}\n",
                shown(&hit.name),
                shown(&hit.source),
                hit.score,
                shown(&hit.description)
            ));
        }
        if results.is_empty() {
            eprintln!("no skill matches");
        }
        emit(text.as_bytes())?;
    }
    degraded(&catalog).map_or(Ok(()), Err)
}

/// `--batch`: one answer line per query line, written as soon as it is
/// known (a driver may wait for each answer before its next query). A line
/// that is not a query object, or a query that cannot be answered, gets an
/// `{"line", "error"}` answer and the batch goes on; the command then
/// exits with a usage error.
fn run_batch(
    catalog: &skillstore::Catalog,
    index: &skillstore::search::SearchIndex,
    options: SearchOptions,
) -> Result<(), Failure> {
    let stdin = std::io::stdin().lock();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut refused = 0usize;
    for (number, line) in stdin.lines().enumerate() {
        let line = line.map_err(|e| Failure::failed(format!("cannot read standard input: {e}")))?;
        if line.trim().is_empty() {
            continue;
        }
        let answer = match serde_json::from_str::<Request>(&line) {
            Ok(request) => {
                let options = SearchOptions {
                    limit: request.limit.unwrap_or(options.limit),
                    ..options
                };
                match index.search(catalog, &request.query, options) {
                    Ok(results) => serde_json::to_vec(&Answer {
                        id: request.id.as_ref(),
                        results: &results,
                    }),
                    Err(e) => {
                        refused += 1;
                        serde_json::to_vec(&Refusal {
                            id: request.id.as_ref(),
                            line: number + 1,
                            error: e.to_string(),
                        })
                    }
                }
            }
            Err(e) => {
                refused += 1;
                serde_json::to_vec(&Refusal {
                    id: None,
                    line: number + 1,
                    error: format!("not a query object: {e}"),
                })
            }
        };
        let written = answer
            .map_err(std::io::Error::other)
            .and_then(|bytes| out.write_all(&bytes))
            .and_then(|()| out.write_all(b"\n"))
            .and_then(|()| out.flush());
        if let Err(e) = written {
            if e.kind() == std::io::ErrorKind::BrokenPipe {
                break;
            }
            return Err(Failure::failed(format!("cannot write to standard output: {e}")));
        }
    }
    if refused > 0 {
        return Err(Failure::usage(format!(
            "{refused} line(s) of the batch were not answered (see their \"error\")"
        )));
    }
    degraded(catalog).map_or(Ok(()), Err)
}
