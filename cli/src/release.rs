//! `skill release|tag|yank`, `show NAME --versions` and `read NAME@SELECTOR`:
//! flags into the library's releases, and their output.

use std::fmt::Write as _;

use serde::Serialize;
use skillstore::release::{Channels, Manifest, ReleaseInfo, Released};
use skillstore::{Releases, Selector};

use super::namespace::build;
use super::skill::{EditArgs, author};
use super::terminal::shown;
use super::{Failure, Global, emit};

/// The releases of the source `--to` names (or the highest-priority
/// writable one), as `args` says who writes.
fn target(global: &Global, args: &EditArgs) -> Result<Releases, Failure> {
    let namespace = build(global)?;
    Ok(namespace.releases(args.to.as_deref())?.with_author(author(args)))
}

fn json_line<T: Serialize>(value: &T) -> Result<(), Failure> {
    let mut text = serde_json::to_vec(value).map_err(|e| Failure::failed(e.to_string()))?;
    text.push(b'\n');
    emit(&text)
}

#[derive(Serialize)]
struct ReleasedOutput<'a> {
    skill: &'a str,
    version: &'a str,
    digest: &'a str,
    files: usize,
    warnings: &'a [String],
}

/// `skill release NAME VERSION [--notes TEXT]`.
pub async fn release(
    global: &Global,
    name: &str,
    version: &str,
    notes: Option<&str>,
    args: &EditArgs,
) -> Result<(), Failure> {
    let Released { manifest, warnings } = target(global, args)?.release(name, version, notes).await?;
    if args.json {
        return json_line(&ReleasedOutput {
            skill: &manifest.skill,
            version: &manifest.version,
            digest: &manifest.digest,
            files: manifest.files.len(),
            warnings: &warnings,
        });
    }
    for warning in &warnings {
        eprintln!("warning: {}", shown(warning));
    }
    emit(
        format!(
            "released {}@{} ({} files, {})\n",
            shown(&manifest.skill),
            manifest.version,
            manifest.files.len(),
            manifest.digest
        )
        .as_bytes(),
    )
}

#[derive(Serialize)]
struct ChannelsOutput<'a> {
    skill: &'a str,
    channels: std::collections::BTreeMap<&'a str, String>,
    yanked: Vec<String>,
}

fn channels_output(name: &str, channels: &Channels, json: bool) -> Result<(), Failure> {
    let output = ChannelsOutput {
        skill: name,
        channels: channels
            .channels
            .iter()
            .map(|(c, v)| (c.as_str(), v.to_string()))
            .collect(),
        yanked: channels.yanked.iter().map(ToString::to_string).collect(),
    };
    if json {
        return json_line(&output);
    }
    let mut out = String::new();
    for (channel, version) in &output.channels {
        let _ = writeln!(out, "{channel} -> {version}");
    }
    if !output.yanked.is_empty() {
        let _ = writeln!(out, "yanked: {}", output.yanked.join(", "));
    }
    emit(out.as_bytes())
}

/// `skill tag NAME CHANNEL VERSION`.
pub async fn tag(global: &Global, name: &str, channel: &str, version: &str, args: &EditArgs) -> Result<(), Failure> {
    let channels = target(global, args)?.tag(name, channel, version).await?;
    channels_output(name, &channels, args.json)
}

/// `skill yank NAME VERSION`.
pub async fn yank(global: &Global, name: &str, version: &str, args: &EditArgs) -> Result<(), Failure> {
    let channels = target(global, args)?.yank(name, version).await?;
    channels_output(name, &channels, args.json)
}

/// The releases of `name` in the highest-priority source that has any.
async fn releases_of(global: &Global, name: &str) -> Result<Releases, Failure> {
    build(global)?
        .releases_of(name)
        .await?
        .ok_or_else(|| Failure::failed(format!("no source has released `{}`", shown(name))))
}

#[derive(Serialize)]
struct VersionOutput<'a> {
    version: &'a str,
    digest: &'a str,
    author: &'a str,
    time: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    notes: Option<&'a str>,
    yanked: bool,
    channels: &'a [String],
}

#[derive(Serialize)]
struct VersionsOutput<'a> {
    skill: &'a str,
    source: &'a str,
    versions: Vec<VersionOutput<'a>>,
}

/// `show NAME --versions [--json]`: every release, oldest first.
pub async fn versions(global: &Global, name: &str, json: bool) -> Result<(), Failure> {
    let releases = releases_of(global, name).await?;
    let infos: Vec<ReleaseInfo> = releases.versions(name).await?;
    let output = VersionsOutput {
        skill: name,
        source: releases.source().name(),
        versions: infos
            .iter()
            .map(|i| VersionOutput {
                version: &i.manifest.version,
                digest: &i.manifest.digest,
                author: &i.manifest.author,
                time: &i.manifest.time,
                notes: i.manifest.notes.as_deref(),
                yanked: i.yanked,
                channels: &i.channels,
            })
            .collect(),
    };
    if json {
        let mut text = serde_json::to_vec_pretty(&output).map_err(|e| Failure::failed(e.to_string()))?;
        text.push(b'\n');
        return emit(&text);
    }
    let width = |column: &str, cells: Vec<usize>| cells.into_iter().chain([column.len()]).max().unwrap_or(0);
    let version_width = width("VERSION", output.versions.iter().map(|v| v.version.len()).collect());
    let author_width = width(
        "AUTHOR",
        output
            .versions
            .iter()
            .map(|v| shown(v.author).chars().count())
            .collect(),
    );
    let mut out = format!(
        "{:<version_width$}  {:<24}  {:<author_width$}  CHANNELS\n",
        "VERSION", "TIME", "AUTHOR"
    );
    for v in &output.versions {
        let channels = if v.yanked {
            "(yanked)".to_owned()
        } else {
            v.channels.join(", ")
        };
        let line = format!(
            "{:<version_width$}  {:<24}  {:<author_width$}  {}",
            v.version,
            shown(v.time),
            shown(v.author),
            shown(&channels)
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    emit(out.as_bytes())
}

/// `read NAME@SELECTOR [FILE]`: a file of the release the selector picks
/// (an exact version, yanked or not; a channel; a range).
pub async fn read(global: &Global, name: &str, selector: &str, relpath: Option<&str>) -> Result<(), Failure> {
    let selector = Selector::parse(selector)?;
    let releases = releases_of(global, name).await?;
    let manifest: Manifest = releases.require_resolved(name, &selector).await?;
    let file = relpath.unwrap_or(skillstore::SKILL_FILE);
    if file.ends_with('/') {
        let mut out = String::new();
        for f in manifest.files.iter().filter(|f| f.path.starts_with(file)) {
            let _ = writeln!(out, "{}", shown(&f.path));
        }
        if out.is_empty() {
            return Err(Failure::failed(format!(
                "no files under `{}` in `{}@{}`",
                shown(file),
                shown(name),
                manifest.version
            )));
        }
        return emit(out.as_bytes());
    }
    emit(&releases.read_file(&manifest, file).await?)
}
