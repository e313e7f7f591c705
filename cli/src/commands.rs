//! `list`, `show`, `read` and `prompt`.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::Path;

use skillstore::integrity::lock::lock_path;
use skillstore::{Catalog, Diagnostic, FileLimits, PromptStyle, render};

use super::namespace::build;
use super::terminal::shown;
use super::{Failure, Global, ListFormat, emit, list_json};

pub async fn list(global: &Global, format: ListFormat, digests: bool) -> Result<(), Failure> {
    let started = std::time::Instant::now();
    let namespace = build(global)?;
    let mut catalog = namespace.load().await;
    if digests {
        catalog = catalog.with_digests().await;
        // A digest reads every file whole: a skill shown from an index
        // entry its file does not hold is withdrawn then, and shown again
        // as its file says.
        if catalog.withdrawn_count() > 0 {
            catalog = catalog.refresh().await.with_digests().await;
        }
    }
    let degraded = degraded(&catalog);
    if format == ListFormat::Json {
        let written = list_json::write_with_releases(
            catalog.skills(),
            catalog.diagnostics(),
            std::io::stdout(),
            list_json::CHUNK,
            &|skill| namespace.served_release(&skill.source, skill.name()),
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
    if format == ListFormat::Names {
        let mut out = String::new();
        for skill in catalog.skills() {
            let _ = writeln!(out, "{}", shown(skill.name()));
        }
        emit(out.as_bytes())?;
    } else {
        emit(table(&catalog, digests, output_width()).as_bytes())?;
    }
    degraded.map_or(Ok(()), Err)
}

/// The width `list` fits its table to: `COLUMNS` when it is set to a
/// number (as a script or a test asks for a width), else the terminal's
/// when standard output is one; `None` (descriptions whole) when piped.
fn output_width() -> Option<usize> {
    if let Some(columns) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        && columns > 0
    {
        return Some(columns);
    }
    std::io::stdout().is_terminal().then(terminal_width).flatten()
}

/// Standard output's terminal width in columns, also when the terminal
/// reports no rows (as some pseudo-terminals do).
#[cfg(unix)]
fn terminal_width() -> Option<usize> {
    let size = rustix::termios::tcgetwinsize(std::io::stdout()).ok()?;
    (size.ws_col > 0).then_some(usize::from(size.ws_col))
}

/// Standard output's terminal width in columns.
#[cfg(not(unix))]
fn terminal_width() -> Option<usize> {
    terminal_size::terminal_size().map(|(w, _)| usize::from(w.0))
}

/// Exit code 3 when a source could not be listed, is served from an
/// earlier load, or had skills left unloaded because its storage refused
/// or failed them (credentials, endpoint, permissions): what loaded was
/// printed, but it may not be the whole catalog, and a script must not
/// take it for one.
pub fn degraded(catalog: &Catalog) -> Option<Failure> {
    let sources = catalog.incomplete_sources();
    if sources.is_empty() {
        return withheld(catalog);
    }
    let mut kinds: Vec<&str> = Vec::new();
    for d in catalog.diagnostics() {
        if d.severity == skillstore::Severity::Error
            && d.source
                .as_deref()
                .is_some_and(|n| sources.iter().any(|s| s.name() == n))
            && !kinds.contains(&d.kind.as_str())
        {
            kinds.push(d.kind.as_str());
        }
    }
    let names: Vec<String> = sources.iter().map(|s| format!("`{}`", shown(s.name()))).collect();
    let why = if kinds.is_empty() {
        String::new()
    } else {
        format!(" ({})", kinds.join(", "))
    };
    Some(Failure {
        code: 3,
        message: format!(
            "incomplete: the source(s) {} could not be read whole now{why}; the output holds the rest. \
             The diagnostics above say what failed where; RUST_LOG=debug logs the storage's own errors \
             (credentials, endpoints, permissions)",
            names.join(", ")
        ),
    })
}

/// Exit code 3 when a lock withheld winners: what matched was printed,
/// the rest is not served.
fn withheld(catalog: &Catalog) -> Option<Failure> {
    let mut names: Vec<String> = Vec::new();
    let mut by_lock = false;
    for d in catalog.withheld() {
        let name = d.path.as_ref().map_or("-", |p| p.as_str());
        let kind = d.kind.as_str();
        by_lock |= kind == "lock_mismatch" || kind == "not_locked";
        names.push(format!("{} ({kind})", shown(name)));
    }
    if names.is_empty() {
        return None;
    }
    // `lock` accepts what a lock refused; a refused signature is the
    // publisher's or the allowed signers' to mend.
    let advice = if by_lock {
        "; those refused by the lock are accepted by `skillstore lock`, once reviewed"
    } else {
        ""
    };
    Some(Failure {
        code: 3,
        message: format!(
            "{} skill(s) not served, refused by the lock or their signatures: {}{advice}",
            names.len(),
            names.join(", ")
        ),
    })
}

/// A skill the catalog holds but withheld (its lock or signature check
/// refused it): exit 3 with what refused it, instead of "no skill named".
fn withheld_named(catalog: &Catalog, name: &str) -> Option<Failure> {
    let d = catalog.withheld().find(|d| {
        d.path.as_ref().is_some_and(|p| {
            let path = p.as_str();
            let dir = path.strip_suffix("/SKILL.md").unwrap_or(path);
            dir.rsplit('/').next() == Some(name)
        })
    })?;
    let kind = d.kind.as_str();
    let advice = if kind == "lock_mismatch" || kind == "not_locked" {
        "; `skillstore lock` accepts it, once reviewed"
    } else {
        ""
    };
    Some(Failure {
        code: 3,
        message: format!(
            "the skill `{}` exists ({}) but is withheld: [{kind}] {}{advice}",
            shown(name),
            d.path.as_ref().map_or("-", |p| p.as_str()),
            shown(&d.message)
        ),
    })
}

/// The catalog as an aligned table, descriptions cut to the terminal; with
/// `digests`, a DIGEST column (`-` for a skill that could not be digested).
/// The table `list` prints; with a `width`, each description is cut (with
/// `...`) so a line fits it, unless that would leave under 10 columns.
fn table(catalog: &Catalog, digests: bool, width: Option<usize>) -> String {
    let skills = catalog.skills();
    if skills.is_empty() {
        return "no skills found\n".into();
    }
    let name_width = skills
        .iter()
        .map(|s| unicode_width::UnicodeWidthStr::width(shown(s.name()).as_ref()))
        .max()
        .unwrap_or(4)
        .max(4);
    let source_width = skills
        .iter()
        .map(|s| unicode_width::UnicodeWidthStr::width(shown(&s.source).as_ref()))
        .max()
        .unwrap_or(6)
        .max(6);
    let digest_width = if digests {
        skills
            .iter()
            .map(|s| s.digest.as_deref().map_or(1, str::len))
            .max()
            .unwrap_or(1)
            .max(6)
    } else {
        0
    };
    let digest_column = |digest: Option<&str>| -> String {
        if digests {
            format!("{:digest_width$}  ", digest.unwrap_or("-"))
        } else {
            String::new()
        }
    };
    // NAME, SOURCE, SHADOWS and ENABLED with the two spaces after each.
    let fixed = name_width + 2 + source_width + 2 + 9 + 9 + if digests { digest_width + 2 } else { 0 };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:name_width$}  {:source_width$}  SHADOWS  ENABLED  {}DESCRIPTION",
        "NAME",
        "SOURCE",
        digest_column(Some("DIGEST"))
    );
    for skill in skills {
        let description = shown(&skill.metadata.description.replace('\n', " ")).into_owned();
        let description = match width {
            Some(w) if w >= fixed + 10 => cut(&description, w - fixed),
            _ => description,
        };
        let _ = writeln!(
            out,
            "{:name_width$}  {:source_width$}  {:>7}  {:7}  {}{}",
            shown(skill.name()),
            shown(&skill.source),
            skill.shadowed.len(),
            if skill.enabled { "yes" } else { "no" },
            digest_column(skill.digest.as_deref()),
            description
        );
    }
    out
}

/// `text` in at most `width` terminal columns (a wide character takes
/// two): whole when it fits, else its first characters and `...`.
fn cut(text: &str, width: usize) -> String {
    use unicode_width::{UnicodeWidthChar as _, UnicodeWidthStr as _};
    if text.width() <= width {
        return text.to_owned();
    }
    let room = width.saturating_sub(3);
    let mut used = 0;
    let mut out = String::new();
    for c in text.chars() {
        used += c.width().unwrap_or(0);
        if used > room {
            break;
        }
        out.push(c);
    }
    let mut out = out.trim_end().to_owned();
    out.push_str("...");
    out
}

fn report_diagnostics(diagnostics: &[Diagnostic]) {
    for d in diagnostics {
        let path = d.path.as_ref().map(|p| p.as_str()).unwrap_or("-");
        eprintln!(
            "{}: [{}] {}: {}",
            d.severity.as_str(),
            shown(d.kind.as_str()),
            shown(path),
            shown(&d.message)
        );
    }
}

pub async fn show(global: &Global, name: &str, json: bool) -> Result<(), Failure> {
    let namespace = build(global)?;
    let mut catalog = namespace.load().await;
    // The digest below reads the skill whole: one shown from an index entry
    // its file does not hold is then withdrawn, and shown as its file says.
    if catalog.get(name).is_some_and(|s| s.digest.is_none()) {
        let _ = catalog.skill_digest(name).await;
        if catalog.is_withdrawn(name) {
            catalog = catalog.refresh().await;
        }
    }
    let degraded = degraded(&catalog);
    let Some(found) = catalog.get(name) else {
        if let Some(failure) = withheld_named(&catalog, name) {
            return Err(failure);
        }
        return Err(degraded.unwrap_or_else(|| {
            let names = catalog.skills().iter().map(|s| s.name());
            let hint = skillstore::suggest::did_you_mean(name, names);
            Failure::failed(format!("no skill named `{name}` in the catalog{hint}"))
        }));
    };
    let report = catalog.report(found.name()).await?;
    let skill = &report.skill;
    let release = namespace.served_release(&skill.source, skill.name());
    if json {
        let mut text = match &release {
            None => serde_json::to_vec_pretty(&report),
            Some(release) => serde_json::to_value(&report).and_then(|mut value| {
                if let Some(object) = value.as_object_mut() {
                    object.insert("release".into(), serde_json::Value::from(release.as_str()));
                }
                serde_json::to_vec_pretty(&value)
            }),
        }
        .map_err(|e| Failure::failed(e.to_string()))?;
        text.push(b'\n');
        emit(&text)?;
        return degraded.map_or(Ok(()), Err);
    }
    let meta = &skill.metadata;
    let mut out = String::new();
    let _ = writeln!(out, "name:          {}", shown(&meta.name));
    let _ = writeln!(out, "description:   {}", shown(&meta.description));
    let _ = writeln!(out, "source:        {} ({})", shown(&skill.source), skill.path);
    let _ = writeln!(out, "version:       {}", shown(skill.version.as_str()));
    if let Some(release) = &release {
        let _ = writeln!(out, "release:       {}", shown(release));
    }
    if let Some(digest) = &skill.digest {
        let _ = writeln!(out, "digest:        {digest}");
    }
    if let Some(commit) = &skill.commit {
        let _ = writeln!(out, "commit:        {}", shown(commit));
    }
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
        shown(&report.files.join(", ")),
        if report.truncated { ", ..." } else { "" }
    );
    for d in &report.diagnostics {
        let path = d.path.as_ref().map(|p| p.as_str()).unwrap_or("-");
        let _ = writeln!(
            out,
            "{}:       [{}] {}: {}",
            d.severity.as_str(),
            shown(d.kind.as_str()),
            shown(path),
            shown(&d.message)
        );
    }
    emit(out.as_bytes())?;
    degraded.map_or(Ok(()), Err)
}

/// How far `read NAME DIR/` lists a directory's files.
const READ_DIRECTORY_LIMITS: FileLimits = FileLimits {
    max_depth: 16,
    max_files: 10_000,
    max_reported: 100,
};

pub async fn read(global: &Global, name: &str, relpath: Option<&str>) -> Result<(), Failure> {
    let catalog = build(global)?.load().await;
    let degraded = degraded(&catalog);
    if catalog.get(name).is_none()
        && let Some(failure) = withheld_named(&catalog, name)
    {
        return Err(failure);
    }
    if let Some(directory) = relpath.filter(|r| r.ends_with('/')) {
        // A directory, as completion types it: the files under it.
        let listed = catalog.skill_files(name, READ_DIRECTORY_LIMITS).await?;
        let mut files: Vec<String> = listed
            .relatives()
            .into_iter()
            .filter(|f| f.starts_with(directory))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(Failure::failed(format!(
                "no files under `{}` in the skill `{}`",
                shown(directory),
                shown(name)
            )));
        }
        let mut out = String::new();
        for file in files {
            let _ = writeln!(out, "{}", shown(&file));
        }
        emit(out.as_bytes())?;
        return degraded.map_or(Ok(()), Err);
    }
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
            if let skillstore::Error::SkillNotFound(_) = &e {
                let hint = skillstore::suggest::did_you_mean(name, catalog.skills().iter().map(|s| s.name()));
                return Err(Failure::failed(format!("{e}{hint}")));
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
    options.search_hint = Some("`skillstore search WORDS`".to_owned());
    options.read_hint = Some(
        "`skillstore read NAME [PATH]` (by the skill's name and the file's path inside the skill's directory)"
            .to_owned(),
    );
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
    if let Some(frame_chars) = prompt.frame_chars {
        return Err(Failure::failed(format!(
            "nothing fits in {} characters: the prompt's fixed text alone is {frame_chars} characters; \
             raise --max-chars or use a shorter --template",
            options.max_chars.unwrap_or(0)
        )));
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

/// `lock`: every enabled winner's digest and each Git source's commit,
/// written to `output` (default: [`lock_path`], beside the configuration),
/// then a line saying what it pinned and one per change since the lock it
/// replaces. An unchanged lock is not rewritten.
pub async fn lock(global: &Global, output: Option<&Path>) -> Result<(), Failure> {
    let mut config = crate::namespace::config(global)?;
    let path = output.map_or_else(|| lock_path(&config), Path::to_path_buf);
    // The lock being written is not checked against the one it replaces.
    config.clear_lock();
    let namespace = config.open()?;
    let catalog = namespace.load().await;
    if let Some(degraded) = degraded(&catalog) {
        return Err(degraded);
    }
    let lock = skillstore::integrity::Lock::of(&namespace, &catalog).await?;
    let written = skillstore::integrity::lock::write_lock(&path, &lock)?;
    let previous = written.previous;
    let changes = lock.changes_since(previous.as_ref());
    let skills = lock.skills.as_ref().map_or(0, Vec::len);
    let mut out = format!(
        "pinned {skills} skill{} and {} Git commit{} in {}",
        plural(skills),
        lock.git.len(),
        plural(lock.git.len()),
        shown(&path.display().to_string())
    );
    match (&previous, changes.is_empty()) {
        (None, _) if written.replaced => out.push_str(" (the previous file was not a lock this build reads)\n"),
        (Some(_), true) => out.push_str("; nothing changed since the last lock\n"),
        _ => out.push('\n'),
    }
    for change in &changes {
        let _ = writeln!(out, "  {}", shown(&change.to_string()));
    }
    emit(out.as_bytes())
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
