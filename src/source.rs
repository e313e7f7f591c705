//! Sources: the ordered directories skills are loaded from.

use std::sync::Arc;

use globset::{Glob, GlobSet, GlobSetBuilder};
use skillstore_backends::VPath;

use crate::error::{Error, Result};

/// One directory of skills in the namespace, with a name used in provenance
/// and a label used in prompts. Two sources are equal when every setting
/// is (patterns compared by their text).
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    name: String,
    label: String,
    path: VPath,
    include: Patterns,
    exclude: Patterns,
    writable: bool,
    commit: Option<Arc<str>>,
}

/// A set of glob patterns with the text they were built from.
#[derive(Debug, Clone, Default)]
pub struct Patterns {
    texts: Vec<String>,
    set: Option<GlobSet>,
}

impl PartialEq for Patterns {
    /// The same patterns, by their text.
    fn eq(&self, other: &Self) -> bool {
        self.texts == other.texts
    }
}

impl Patterns {
    /// Compiles glob patterns (`pdf-*`, `{a,b}`); an empty list matches
    /// nothing.
    pub fn new<I, S>(patterns: I) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let texts: Vec<String> = patterns.into_iter().map(Into::into).collect();
        if texts.is_empty() {
            return Ok(Patterns::default());
        }
        let mut builder = GlobSetBuilder::new();
        for text in &texts {
            let glob = Glob::new(text).map_err(|e| Error::Usage(format!("bad glob pattern `{text}`: {e}")))?;
            builder.add(glob);
        }
        let set = builder
            .build()
            .map_err(|e| Error::Usage(format!("bad glob patterns: {e}")))?;
        Ok(Patterns { texts, set: Some(set) })
    }

    /// True when some pattern matches `name`.
    pub fn matches(&self, name: &str) -> bool {
        self.set.as_ref().is_some_and(|s| s.is_match(name))
    }

    /// True when there is no pattern.
    pub fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }

    /// The patterns as written.
    pub fn texts(&self) -> &[String] {
        &self.texts
    }
}

impl Source {
    /// A source at `path`, named after its last segment (`/base/` is
    /// `base`) and labelled as deepagents labels it (`Base`).
    pub fn new(path: VPath) -> Self {
        let name = path.file_name().unwrap_or("root").to_owned();
        let label = derive_label(&path);
        Source {
            name,
            label,
            path,
            include: Patterns::default(),
            exclude: Patterns::default(),
            writable: false,
            commit: None,
        }
    }

    /// A source with a given name, used both in provenance and in prompts.
    pub fn labeled(label: impl Into<String>, path: VPath) -> Self {
        let label = label.into();
        Source {
            name: label.clone(),
            label,
            ..Source::new(path)
        }
    }

    /// Parses `[LABEL=]VPATH`, as the command line takes it. A single
    /// trailing `/` on the path is allowed (`/base/`).
    pub fn parse(spec: &str) -> Result<Self> {
        let (label, path) = match spec.split_once('=') {
            Some((label, path)) if !label.is_empty() && !label.starts_with('/') => (Some(label), path),
            _ => (None, spec),
        };
        let path = parse_dir(path)?;
        Ok(match label {
            Some(label) => Source::labeled(label, path),
            None => Source::new(path),
        })
    }

    /// Loads only skill directories whose names match one of `patterns`.
    pub fn with_include(mut self, patterns: Patterns) -> Self {
        self.include = patterns;
        self
    }

    /// Skips skill directories whose names match one of `patterns`.
    pub fn with_exclude(mut self, patterns: Patterns) -> Self {
        self.exclude = patterns;
        self
    }

    /// Marks the source as one skills may be written to.
    pub fn with_writable(mut self, writable: bool) -> Self {
        self.writable = writable;
        self
    }

    /// Records the Git commit the source's skills are read at (its
    /// provenance: every skill of the source carries it).
    pub fn with_commit(mut self, commit: impl Into<Arc<str>>) -> Self {
        self.commit = Some(commit.into());
        self
    }

    /// The Git commit the source is read at, for a source in a Git
    /// repository.
    pub fn commit(&self) -> Option<&Arc<str>> {
        self.commit.as_ref()
    }

    /// The name used in provenance and JSON (`base`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The label used in prompts (`Base`).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The directory in the namespace.
    pub fn path(&self) -> &VPath {
        &self.path
    }

    /// True when skills may be written here.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// Whether the directory `dir_name` is loaded from this source: never a
    /// hidden one (`.history/`, `.audit/`, `.releases/`, `.skillstore/`,
    /// `.git/`, any `.NAME/`: skillstore's bookkeeping or someone else's,
    /// and a name no skill may have), otherwise by the include and exclude
    /// patterns.
    pub fn admits(&self, dir_name: &str) -> bool {
        !dir_name.starts_with('.')
            && (self.include.is_empty() || self.include.matches(dir_name))
            && !self.exclude.matches(dir_name)
    }

    /// The path shown for this source: its directory with a trailing `/`.
    pub fn display_path(&self) -> String {
        if self.path.is_root() {
            "/".to_owned()
        } else {
            format!("{}/", self.path)
        }
    }
}

/// Parses a directory path as sources and mounts write it: absolute, with
/// at most one trailing `/`.
pub fn parse_dir(text: &str) -> Result<VPath> {
    let trimmed = match text.strip_suffix('/') {
        Some(rest) if !rest.is_empty() => rest,
        _ => text,
    };
    VPath::new(trimmed).map_err(|e| Error::Usage(format!("bad virtual directory `{}`: {e}", text.escape_debug())))
}

/// The label deepagents derives from a source path: the last segment
/// capitalized (`/base/` is `Base`), `built_in_skills` as `Built-in`, a
/// `skills` leaf named after its parent (`/.claude/skills` is `Claude`).
pub fn derive_label(path: &VPath) -> String {
    let segments: Vec<&str> = path.segments().collect();
    let Some(leaf) = segments.last() else {
        return "Unnamed".to_owned();
    };
    if leaf.to_lowercase() == "built_in_skills" {
        return "Built-in".to_owned();
    }
    if leaf.to_lowercase() == "skills" && segments.len() >= 2 {
        let parent = segments[segments.len() - 2].trim_start_matches('.');
        if !parent.is_empty() {
            return title_case(&parent.replace(['_', '-'], " "));
        }
    }
    capitalize(leaf)
}

/// First character upper case, the rest lower case (Python's
/// `str.capitalize`).
fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars.flat_map(char::to_lowercase)).collect(),
        None => String::new(),
    }
}

/// Every word capitalized, words being runs of letters (Python's
/// `str.title`).
fn title_case(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_word = false;
    for c in text.chars() {
        if c.is_alphabetic() {
            if in_word {
                out.extend(c.to_lowercase());
            } else {
                out.extend(c.to_uppercase());
            }
            in_word = true;
        } else {
            out.push(c);
            in_word = false;
        }
    }
    out
}

/// Sources in priority order, lowest first: a later source's skill wins over
/// an earlier one of the same name. Source names are unique.
#[derive(Debug, Clone, Default)]
pub struct SourceList {
    sources: Vec<Source>,
}

impl SourceList {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a source with a higher priority than all before it. Two
    /// sources may not share a name, and once there are two or more, the
    /// first (the base layer) may not be writable.
    pub fn push(&mut self, source: Source) -> Result<()> {
        if let Some(base) = self.sources.first().filter(|b| b.writable) {
            return Err(Error::Usage(format!(
                "the source `{}` is the base layer (the first, lowest priority) and cannot be writable",
                base.name
            )));
        }
        if self.sources.iter().any(|s| s.name == source.name) {
            return Err(Error::Usage(format!(
                "two sources are named `{}`; give one a label (LABEL=/path)",
                source.name
            )));
        }
        self.sources.push(source);
        Ok(())
    }

    /// Builds a list from sources, lowest priority first.
    pub fn from_sources(sources: impl IntoIterator<Item = Source>) -> Result<Self> {
        let mut list = SourceList::new();
        for source in sources {
            list.push(source)?;
        }
        Ok(list)
    }

    /// The sources, lowest priority first.
    pub fn iter(&self) -> std::slice::Iter<'_, Source> {
        self.sources.iter()
    }

    /// How many sources there are.
    pub fn len(&self) -> usize {
        self.sources.len()
    }

    /// True when there is no source.
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// The source with this name.
    pub fn get(&self, name: &str) -> Option<&Source> {
        self.sources.iter().find(|s| s.name == name)
    }
}

impl<'a> IntoIterator for &'a SourceList {
    type Item = &'a Source;
    type IntoIter = std::slice::Iter<'a, Source>;
    fn into_iter(self) -> Self::IntoIter {
        self.sources.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(path: &str) -> String {
        derive_label(&parse_dir(path).unwrap())
    }

    #[test]
    fn labels_follow_deepagents() {
        assert_eq!(label("/base/"), "Base");
        assert_eq!(label("/team"), "Team");
        assert_eq!(label("/myTeam"), "Myteam");
        assert_eq!(label("/x/built_in_skills"), "Built-in");
        assert_eq!(label("/home/.claude/skills"), "Claude");
        assert_eq!(label("/home/my_cool-agent/skills/"), "My Cool Agent");
        assert_eq!(label("/skills"), "Skills");
        assert_eq!(label("/"), "Unnamed");
    }

    #[test]
    fn parse_takes_an_optional_label_and_one_trailing_slash() {
        let s = Source::parse("/base/").unwrap();
        assert_eq!((s.name(), s.label(), s.path().as_str()), ("base", "Base", "/base"));
        let s = Source::parse("Team Skills=/tenants/acme/").unwrap();
        assert_eq!(
            (s.name(), s.label(), s.path().as_str()),
            ("Team Skills", "Team Skills", "/tenants/acme")
        );
        assert_eq!(s.display_path(), "/tenants/acme/");
        for bad in ["base", "/base//", "/a/../b", "x=relative", "/a\\b"] {
            assert!(Source::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn duplicate_names_are_refused() {
        let mut list = SourceList::new();
        list.push(Source::parse("/a/skills").unwrap()).unwrap();
        assert!(list.push(Source::parse("/b/skills").unwrap()).is_err());
        list.push(Source::parse("other=/b/skills").unwrap()).unwrap();
        assert_eq!(list.len(), 2);
    }

    #[test]
    fn the_base_layer_is_never_writable() {
        let alone = SourceList::from_sources([Source::parse("/mine").unwrap().with_writable(true)]).unwrap();
        assert!(alone.get("mine").unwrap().is_writable());
        let layered = SourceList::from_sources([
            Source::parse("/base").unwrap().with_writable(true),
            Source::parse("/team").unwrap(),
        ]);
        assert!(layered.unwrap_err().to_string().contains("base layer"));
        let team = SourceList::from_sources([
            Source::parse("/base").unwrap(),
            Source::parse("/team").unwrap().with_writable(true),
        ])
        .unwrap();
        assert!(team.get("team").unwrap().is_writable());
    }

    #[test]
    fn include_and_exclude_patterns() {
        let s = Source::parse("/base")
            .unwrap()
            .with_include(Patterns::new(["pdf-*", "docx"]).unwrap())
            .with_exclude(Patterns::new(["pdf-legacy"]).unwrap());
        assert!(s.admits("pdf-tools"));
        assert!(s.admits("docx"));
        assert!(!s.admits("pdf-legacy"));
        assert!(!s.admits("xlsx"));
        let all = Source::parse("/skills/").unwrap();
        for hidden in [".audit", ".history", ".releases", ".skillstore", ".git", ".pdf-tools"] {
            assert!(!all.admits(hidden), "{hidden}");
        }
        assert!(Patterns::new(["[unclosed"]).is_err());
    }
}
