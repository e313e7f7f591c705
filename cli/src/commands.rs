//! `list`, `show`, `read` and `prompt`.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::Path;

use serde::Serialize;
use skillstore::{Catalog, Diagnostic, PromptStyle, Skill, render};

use super::namespace::build;
use super::terminal::shown;
use super::{Failure, Global, emit, list_json};

pub async fn list(global: &Global, json: bool) -> Result<(), Failure> {
    let started = std::time::Instant::now();
    let catalog = build(global)?.load().await;
    let degraded = degraded(&catalog);
    if json {
        let written = list_json::write(
            catalog.skills(),
            catalog.diagnostics(),
            std::io::stdout(),
            list_json::CHUNK,
        );
        tracing::debug!(loaded_ms = started.elapsed().as_secs_f64() * 1e3, "catalog written");
        // The process ends next; dropping thousands of records first would
        // only return memory to it.
        std::mem::forget(catalog);
        match written {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Err(e) => return Err(Failure::failed(format!("cannot write to standard output: {e}"))),
        }
        return degraded.map_or(Ok(()), Err);
    }
    report_diagnostics(catalog.diagnostics());
    emit(table(&catalog).as_bytes())?;
    degraded.map_or(Ok(()), Err)
}

/// Exit code 3 when a source could not be listed (unreachable, refused)
/// or is served from an earlier load: what loaded was printed, but it may
/// not be the whole catalog.
pub fn degraded(catalog: &Catalog) -> Option<Failure> {
    let mut names: Vec<&str> = catalog.unlisted_sources().iter().map(|s| s.name()).collect();
    for d in catalog.diagnostics() {
        if d.kind.as_str() == "source_stale"
            && let Some(name) = d.source.as_deref()
            && !names.contains(&name)
        {
            names.push(name);
        }
    }
    if names.is_empty() {
        return None;
    }
    let names: Vec<String> = names.iter().map(|n| format!("`{}`", shown(n))).collect();
    Some(Failure {
        code: 3,
        message: format!(
            "incomplete: the source(s) {} could not be read now; the output holds the others",
            names.join(", ")
        ),
    })
}

/// The catalog as an aligned table, descriptions cut to the terminal.
fn table(catalog: &Catalog) -> String {
    let skills = catalog.skills();
    if skills.is_empty() {
        return "no skills found\n".into();
    }
    let name_width = skills
        .iter()
        .map(|s| shown(s.name()).chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    let source_width = skills
        .iter()
        .map(|s| shown(&s.source).chars().count())
        .max()
        .unwrap_or(6)
        .max(6);
    let fixed = name_width + source_width + 8 + 8 + 8;
    let width = std::io::stdout()
        .is_terminal()
        .then(|| terminal_size::terminal_size().map(|(w, _)| w.0 as usize))
        .flatten();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:name_width$}  {:source_width$}  SHADOWS  ENABLED  DESCRIPTION",
        "NAME", "SOURCE"
    );
    for skill in skills {
        let description = shown(&skill.metadata.description.replace('\n', " ")).into_owned();
        let description = match width {
            Some(w) if w > fixed + 10 => cut(&description, w - fixed),
            _ => description,
        };
        let _ = writeln!(
            out,
            "{:name_width$}  {:source_width$}  {:>7}  {:7}  {}",
            shown(skill.name()),
            shown(&skill.source),
            skill.shadowed.len(),
            if skill.enabled { "yes" } else { "no" },
            description
        );
    }
    out
}

fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn report_diagnostics(diagnostics: &[Diagnostic]) {
    for d in diagnostics {
        let path = d.path.as_ref().map(|p| p.as_str()).unwrap_or("-");
        eprintln!(
            "{}: [{}] {path}: {}",
            d.severity.as_str(),
            shown(d.kind.as_str()),
            shown(&d.message)
        );
    }
}

#[derive(Serialize)]
struct ShowOutput<'a> {
    #[serde(flatten)]
    skill: &'a Skill,
    files: Vec<String>,
    diagnostics: Vec<&'a Diagnostic>,
}

pub async fn show(global: &Global, name: &str, json: bool) -> Result<(), Failure> {
    let catalog = build(global)?.load().await;
    let degraded = degraded(&catalog);
    let Some(skill) = catalog.get(name) else {
        return Err(degraded.unwrap_or_else(|| Failure::failed(format!("no skill named `{name}` in the catalog"))));
    };
    let (files, truncated) = catalog.list_files(name, 6, 500).await?;
    let diagnostics: Vec<&Diagnostic> = catalog
        .diagnostics()
        .iter()
        .filter(|d| {
            d.path
                .as_ref()
                .is_some_and(|p| *p == skill.path || skill.shadowed.iter().any(|s| s.path == *p))
        })
        .collect();
    if json {
        let output = ShowOutput {
            skill,
            files,
            diagnostics,
        };
        let mut text = serde_json::to_vec_pretty(&output).map_err(|e| Failure::failed(e.to_string()))?;
        text.push(b'\n');
        emit(&text)?;
        return degraded.map_or(Ok(()), Err);
    }
    let meta = &skill.metadata;
    let mut out = String::new();
    let _ = writeln!(out, "name:          {}", shown(&meta.name));
    let _ = writeln!(out, "description:   {}", shown(&meta.description));
    let _ = writeln!(out, "source:        {} ({})", shown(&skill.source), skill.path);
    if let Some(license) = &meta.license {
        let _ = writeln!(out, "license:       {}", shown(license));
    }
    if let Some(compatibility) = &meta.compatibility {
        let _ = writeln!(out, "compatibility: {}", shown(compatibility));
    }
    if !meta.allowed_tools.is_empty() {
        let _ = writeln!(out, "allowed tools: {}", shown(&meta.allowed_tools.join(", ")));
    }
    for (key, value) in &meta.metadata {
        let _ = writeln!(out, "metadata:      {} = {}", shown(key), shown(&value.to_string()));
    }
    let _ = writeln!(out, "enabled:       {}", if skill.enabled { "yes" } else { "no" });
    if skill.shadowed.is_empty() {
        let _ = writeln!(out, "shadows:       nothing");
    }
    for shadowed in &skill.shadowed {
        let _ = writeln!(out, "shadows:       {} ({})", shown(&shadowed.source), shadowed.path);
    }
    let _ = writeln!(
        out,
        "files:         {}{}",
        shown(&files.join(", ")),
        if truncated { ", ..." } else { "" }
    );
    for d in diagnostics {
        let _ = writeln!(
            out,
            "{}:       [{}] {}",
            d.severity.as_str(),
            shown(d.kind.as_str()),
            shown(&d.message)
        );
    }
    emit(out.as_bytes())?;
    degraded.map_or(Ok(()), Err)
}

pub async fn read(global: &Global, name: &str, relpath: Option<&str>) -> Result<(), Failure> {
    let catalog = build(global)?.load().await;
    let degraded = degraded(&catalog);
    let bytes = match relpath {
        None => catalog.read_skill(name).await,
        Some(relative) => catalog.read_file(name, relative).await,
    };
    match bytes {
        Ok(bytes) => emit(&bytes)?,
        Err(e) => {
            if let Some(degraded) = degraded {
                eprintln!("error: {}", shown(&e.to_string()));
                return Err(degraded);
            }
            return Err(e.into());
        }
    }
    degraded.map_or(Ok(()), Err)
}

pub async fn prompt(
    global: &Global,
    style: Option<&str>,
    max_chars: Option<usize>,
    template: Option<&Path>,
    location_root: Option<String>,
) -> Result<(), Failure> {
    let namespace = build(global)?;
    let mut options = namespace.prompt_options()?;
    if location_root.is_some() {
        options.location_root = location_root;
    }
    if let Some(style) = style {
        options.style = style.parse::<PromptStyle>()?;
    }
    if max_chars.is_some() {
        options.max_chars = max_chars;
    }
    if let Some(path) = template {
        options.template = Some(skillstore::location::read_local_text(
            path,
            namespace.load_options().read_limit,
            "template",
        )?);
    }
    let catalog = namespace.load().await;
    let prompt = render(&catalog, &options);
    for left in &prompt.left_out {
        eprintln!("warning: {}", shown(&left.to_string()));
    }
    if prompt.omitted > 0 || prompt.shortened > 0 {
        eprintln!(
            "note: to fit {} characters, {} description(s) were shortened and {} skill(s) left out",
            options.max_chars.unwrap_or(0),
            prompt.shortened,
            prompt.omitted
        );
    }
    let mut text = prompt.text;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    emit(text.as_bytes())?;
    degraded(&catalog).map_or(Ok(()), Err)
}
