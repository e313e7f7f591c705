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

/// One line of a batch, but its `id`.
#[derive(Deserialize)]
struct Request {
    query: String,
    #[serde(default)]
    limit: Option<usize>,
}

/// The longest batch line read; a longer one is answered with an error and
/// skipped without being held in memory.
const MAX_LINE_BYTES: usize = 64 * 1024;

/// One line of standard input, as far as a batch is concerned.
enum Line {
    Text(String),
    NotUtf8,
    TooLong,
}

/// The next line of `input` (its newline removed), never holding more than
/// [`MAX_LINE_BYTES`] of it; `None` at the end of the input.
fn next_line(input: &mut impl BufRead) -> std::io::Result<Option<Line>> {
    let mut bytes = Vec::new();
    let mut too_long = false;
    let mut seen = false;
    loop {
        let available = input.fill_buf()?;
        if available.is_empty() {
            if !seen {
                return Ok(None);
            }
            break;
        }
        seen = true;
        let end = available.iter().position(|&b| b == b'\n');
        let chunk = &available[..end.unwrap_or(available.len())];
        if !too_long {
            if bytes.len() + chunk.len() > MAX_LINE_BYTES {
                too_long = true;
                bytes = Vec::new();
            } else {
                bytes.extend_from_slice(chunk);
            }
        }
        let used = end.map_or(available.len(), |i| i + 1);
        input.consume(used);
        if end.is_some() {
            break;
        }
    }
    Ok(Some(if too_long {
        Line::TooLong
    } else {
        String::from_utf8(bytes).map_or(Line::NotUtf8, Line::Text)
    }))
}

/// A batch line's `id` (when it has a usable one) and its request, or why
/// it is not one: an object with a string `query`, an optional `limit`,
/// and an optional `id` that is a string, a 64-bit integer or null (echoed
/// as it came).
fn parse_request(text: &str) -> Result<(Option<serde_json::Value>, Request), (Option<serde_json::Value>, String)> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| (None, format!("not a query object: {e}")))?;
    let serde_json::Value::Object(mut fields) = value else {
        return Err((None, "not a query object: a JSON object is expected".into()));
    };
    let id = match fields.remove("id") {
        None => None,
        Some(id) if id.is_string() || id.is_i64() || id.is_u64() || id.is_null() => Some(id),
        Some(_) => return Err((None, "an id is a string, a 64-bit integer or null".into())),
    };
    match serde_json::from_value::<Request>(serde_json::Value::Object(fields)) {
        Ok(request) => Ok((id, request)),
        Err(e) => Err((id, format!("not a query object: {e}"))),
    }
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
    if let Some(failure) = degraded(&catalog) {
        return Err(failure);
    }
    // As grep and rg: nothing found is exit 1, said once (above) on a terminal's stderr.
    if results.is_empty() {
        return Err(Failure::silent(1));
    }
    Ok(())
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
    let mut stdin = std::io::stdin().lock();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut refused = 0usize;
    let mut number = 0usize;
    while let Some(line) =
        next_line(&mut stdin).map_err(|e| Failure::failed(format!("cannot read standard input: {e}")))?
    {
        number += 1;
        let parsed = match &line {
            Line::Text(text) if text.trim().is_empty() => continue,
            Line::Text(text) => parse_request(text),
            Line::NotUtf8 => Err((None, "not a query object: not UTF-8".to_owned())),
            Line::TooLong => Err((None, format!("longer than {MAX_LINE_BYTES} bytes"))),
        };
        let answer = match parsed {
            Ok((id, request)) => {
                let options = SearchOptions {
                    limit: request.limit.unwrap_or(options.limit),
                    ..options
                };
                match index.search(catalog, &request.query, options) {
                    Ok(results) => serde_json::to_vec(&Answer {
                        id: id.as_ref(),
                        results: &results,
                    }),
                    Err(e) => {
                        refused += 1;
                        serde_json::to_vec(&Refusal {
                            id: id.as_ref(),
                            line: number,
                            error: e.to_string(),
                        })
                    }
                }
            }
            Err((id, error)) => {
                refused += 1;
                serde_json::to_vec(&Refusal {
                    id: id.as_ref(),
                    line: number,
                    error,
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
