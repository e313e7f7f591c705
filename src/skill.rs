//! SKILL.md parsing and the rules of the Agent Skills specification.
//!
//! [`parse_skill_md`] turns the bytes of a SKILL.md into [`SkillMetadata`]
//! and a list of [`Problem`]s, each with a stable [`ProblemKind`]. Problems
//! carry the severity the lenient catalog gives them (a skill with an
//! error is skipped; a warning loads); [`Strictness::Strict`] makes every
//! problem an error, as `skillstore validate` does.

use indexmap::IndexMap;
use serde::Serialize;
use serde_yaml::Value;
use unicode_normalization::UnicodeNormalization;

use crate::frontmatter::{self, Fence, MAX_FRONTMATTER_BYTES};

/// The longest name the specification allows, in characters.
pub const MAX_NAME_CHARS: usize = 64;
/// The longest description the specification allows, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// The longest compatibility note the specification allows, in characters.
pub const MAX_COMPATIBILITY_CHARS: usize = 500;
/// The deepest nesting of lists and maps accepted in a frontmatter.
pub const MAX_YAML_DEPTH: usize = 8;
/// The frontmatter fields the specification defines.
pub const KNOWN_FIELDS: [&str; 6] = [
    "name",
    "description",
    "license",
    "compatibility",
    "metadata",
    "allowed-tools",
];

/// One rule of the specification, or one way a SKILL.md can be unusable.
/// [`ProblemKind::as_str`] is the stable name used in diagnostics and JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProblemKind {
    /// The skill directory holds no SKILL.md.
    MissingSkillMd,
    /// The file does not start with a `---` line.
    NoFrontmatter,
    /// The opening `---` has no closing `---`.
    UnclosedFrontmatter,
    /// The frontmatter is longer than 64 KiB.
    FrontmatterTooLarge,
    /// The frontmatter is not valid YAML.
    InvalidYaml,
    /// The frontmatter is YAML but not a mapping.
    NotAMapping,
    /// The frontmatter uses a YAML anchor or alias.
    YamlAlias,
    /// The frontmatter nests lists or maps too deeply.
    YamlTooDeep,
    /// The file is not valid UTF-8.
    NotUtf8,
    /// The file is larger than the read limit.
    FileTooLarge,
    /// A field the specification does not define.
    UnexpectedField,
    /// No `name`, or an empty one.
    MissingName,
    /// No `description`, or an empty one.
    MissingDescription,
    /// A field has the wrong YAML type.
    InvalidFieldType,
    /// The name is longer than 64 characters.
    NameTooLong,
    /// The name has uppercase letters.
    NameNotLowercase,
    /// The name starts or ends with a hyphen.
    NameHyphenEdge,
    /// The name has two hyphens in a row.
    NameConsecutiveHyphens,
    /// The name has characters other than letters, digits and hyphens.
    NameInvalidChars,
    /// The name differs from the skill's directory name.
    NameMismatch,
    /// The description is longer than 1024 characters.
    DescriptionTooLong,
    /// The compatibility note is longer than 500 characters.
    CompatibilityTooLong,
}

impl ProblemKind {
    /// The stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ProblemKind::MissingSkillMd => "missing_skill_md",
            ProblemKind::NoFrontmatter => "no_frontmatter",
            ProblemKind::UnclosedFrontmatter => "unclosed_frontmatter",
            ProblemKind::FrontmatterTooLarge => "frontmatter_too_large",
            ProblemKind::InvalidYaml => "invalid_yaml",
            ProblemKind::NotAMapping => "not_a_mapping",
            ProblemKind::YamlAlias => "yaml_alias",
            ProblemKind::YamlTooDeep => "yaml_too_deep",
            ProblemKind::NotUtf8 => "not_utf8",
            ProblemKind::FileTooLarge => "file_too_large",
            ProblemKind::UnexpectedField => "unexpected_field",
            ProblemKind::MissingName => "missing_name",
            ProblemKind::MissingDescription => "missing_description",
            ProblemKind::InvalidFieldType => "invalid_field_type",
            ProblemKind::NameTooLong => "name_too_long",
            ProblemKind::NameNotLowercase => "name_not_lowercase",
            ProblemKind::NameHyphenEdge => "name_hyphen_edge",
            ProblemKind::NameConsecutiveHyphens => "name_consecutive_hyphens",
            ProblemKind::NameInvalidChars => "name_invalid_chars",
            ProblemKind::NameMismatch => "name_mismatch",
            ProblemKind::DescriptionTooLong => "description_too_long",
            ProblemKind::CompatibilityTooLong => "compatibility_too_long",
        }
    }
}

impl std::fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How bad a problem is. Ordered: `Warning < Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The skill loads; something should be fixed.
    Warning,
    /// The skill cannot be used (lenient) or is invalid (strict).
    Error,
}

impl Severity {
    /// `warning` or `error`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

/// Whether every problem is an error ([`Strictness::Strict`], for
/// validation) or only those that make a skill unusable
/// ([`Strictness::Lenient`], for loading a catalog).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strictness {
    /// Load what can be loaded; name rules, unknown fields and over-long
    /// texts are warnings (texts are cut to their limit).
    #[default]
    Lenient,
    /// Every problem is an error.
    Strict,
}

/// One thing wrong with a SKILL.md.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// Which rule.
    pub kind: ProblemKind,
    /// How bad, under the strictness it was found with.
    pub severity: Severity,
    /// What is wrong, for a person.
    pub message: String,
}

/// The level-1 view of a skill: what its frontmatter says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillMetadata {
    /// The skill's name (NFKC-normalized, trimmed).
    pub name: String,
    /// What the skill does and when to use it (at most 1024 characters).
    pub description: String,
    /// The licence, when given.
    pub license: Option<String>,
    /// Environment requirements, when given (at most 500 characters).
    pub compatibility: Option<String>,
    /// Free-form string pairs, in file order. A scalar keeps its YAML text
    /// (`42` is `"42"`); a null value is left out.
    pub metadata: IndexMap<String, String>,
    /// Tools the skill may use.
    pub allowed_tools: Vec<String>,
}

/// What parsing a SKILL.md found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// The metadata, unless an error-level problem made the skill unusable.
    pub skill: Option<SkillMetadata>,
    /// Every problem found, in the order found.
    pub problems: Vec<Problem>,
}

impl Parsed {
    fn failed(kind: ProblemKind, message: impl Into<String>) -> Self {
        Parsed {
            skill: None,
            problems: vec![Problem {
                kind,
                severity: Severity::Error,
                message: message.into(),
            }],
        }
    }

    /// True when no problem is an error.
    pub fn is_valid(&self) -> bool {
        self.problems.iter().all(|p| p.severity < Severity::Error)
    }
}

/// Parses a whole SKILL.md. `dir_name` is the name of the directory that
/// holds it, checked against the frontmatter's name when given.
pub fn parse_skill_md(bytes: &[u8], dir_name: Option<&str>, strictness: Strictness) -> Parsed {
    match scan(bytes, true) {
        Scan::Yaml(yaml) => parse_frontmatter(yaml, dir_name, strictness),
        Scan::NeedMore => unreachable!("a complete file never needs more bytes"),
        Scan::Failed(parsed) => parsed,
    }
}

/// The result of looking for the frontmatter in (a prefix of) a file.
#[derive(Debug)]
pub(crate) enum Scan<'a> {
    /// The YAML between the fences.
    Yaml(&'a str),
    /// The prefix ends before the frontmatter does.
    NeedMore,
    /// The file cannot hold a usable frontmatter.
    Failed(Parsed),
}

/// Looks for the frontmatter in `bytes`, a prefix of the file unless
/// `complete`.
pub(crate) fn scan(bytes: &[u8], complete: bool) -> Scan<'_> {
    let text = match frontmatter::decode(bytes, complete) {
        Ok(text) => text,
        Err(e) => {
            return Scan::Failed(Parsed::failed(
                ProblemKind::NotUtf8,
                format!("the file is not UTF-8 text (bad byte at offset {})", e.valid_up_to()),
            ));
        }
    };
    match frontmatter::locate(text, complete) {
        Fence::Closed { yaml } => Scan::Yaml(yaml),
        Fence::Unclosed if !complete && text.len() <= MAX_FRONTMATTER_BYTES + 8 => Scan::NeedMore,
        Fence::Unclosed if !complete => Scan::Failed(Parsed::failed(
            ProblemKind::FrontmatterTooLarge,
            format!("no closing `---` within the first {MAX_FRONTMATTER_BYTES} bytes"),
        )),
        Fence::Unclosed => Scan::Failed(Parsed::failed(
            ProblemKind::UnclosedFrontmatter,
            "the frontmatter opened with `---` is never closed by a `---` line",
        )),
        Fence::Missing => Scan::Failed(Parsed::failed(
            ProblemKind::NoFrontmatter,
            "the file must start with a `---` line opening the YAML frontmatter",
        )),
    }
}

/// Parses the YAML of a frontmatter and applies the specification's rules.
pub fn parse_frontmatter(yaml: &str, dir_name: Option<&str>, strictness: Strictness) -> Parsed {
    if yaml.len() > MAX_FRONTMATTER_BYTES {
        return Parsed::failed(
            ProblemKind::FrontmatterTooLarge,
            format!(
                "the frontmatter is {} bytes; at most {MAX_FRONTMATTER_BYTES} are allowed",
                yaml.len()
            ),
        );
    }
    if frontmatter::uses_anchors(yaml) {
        return Parsed::failed(
            ProblemKind::YamlAlias,
            "YAML anchors and aliases (`&name`, `*name`) are not accepted in a frontmatter",
        );
    }
    let value: Value = match serde_yaml::from_str(yaml) {
        Ok(value) => value,
        Err(e) => {
            return Parsed::failed(
                ProblemKind::InvalidYaml,
                format!("the frontmatter is not valid YAML: {e}"),
            );
        }
    };
    let mapping = match value {
        Value::Mapping(mapping) => mapping,
        Value::Null => serde_yaml::Mapping::new(),
        other => {
            return Parsed::failed(
                ProblemKind::NotAMapping,
                format!("the frontmatter must be a mapping of fields, not {}", type_name(&other)),
            );
        }
    };
    if depth(&mapping) > MAX_YAML_DEPTH {
        return Parsed::failed(
            ProblemKind::YamlTooDeep,
            format!("the frontmatter nests lists and maps more than {MAX_YAML_DEPTH} levels deep"),
        );
    }
    let mut rules = Rules {
        problems: Vec::new(),
        strictness,
    };
    let skill = rules.apply(&mapping, dir_name);
    let problems = rules.problems;
    let skill = skill.filter(|_| problems.iter().all(|p| p.severity < Severity::Error));
    Parsed { skill, problems }
}

fn depth(mapping: &serde_yaml::Mapping) -> usize {
    fn of(value: &Value) -> usize {
        match value {
            Value::Mapping(m) => 1 + m.values().map(of).max().unwrap_or(0),
            Value::Sequence(s) => 1 + s.iter().map(of).max().unwrap_or(0),
            Value::Tagged(t) => of(&t.value),
            _ => 0,
        }
    }
    1 + mapping.values().map(of).max().unwrap_or(0)
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a mapping",
        Value::Tagged(_) => "a tagged value",
    }
}

/// The YAML text of a scalar; `None` for null, lists and maps.
fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Tagged(t) => scalar_text(&t.value),
        Value::Null | Value::Sequence(_) | Value::Mapping(_) => None,
    }
}

fn is_string(value: &Value) -> bool {
    match value {
        Value::String(_) => true,
        Value::Tagged(t) => is_string(&t.value),
        _ => false,
    }
}

struct Rules {
    problems: Vec<Problem>,
    strictness: Strictness,
}

impl Rules {
    /// Records a problem; `lenient` is its severity when loading a catalog.
    fn report(&mut self, kind: ProblemKind, lenient: Severity, message: String) {
        let severity = match self.strictness {
            Strictness::Strict => Severity::Error,
            Strictness::Lenient => lenient,
        };
        self.problems.push(Problem {
            kind,
            severity,
            message,
        });
    }

    fn apply(&mut self, mapping: &serde_yaml::Mapping, dir_name: Option<&str>) -> Option<SkillMetadata> {
        for key in mapping.keys() {
            let known = key.as_str().is_some_and(|k| KNOWN_FIELDS.contains(&k));
            if !known {
                let shown = scalar_text(key).unwrap_or_else(|| format!("<{}>", type_name(key)));
                self.report(
                    ProblemKind::UnexpectedField,
                    Severity::Warning,
                    format!(
                        "`{shown}` is not a field of the specification (known fields: {})",
                        KNOWN_FIELDS.join(", ")
                    ),
                );
            }
        }
        let name = self.required_text(mapping, "name", ProblemKind::MissingName);
        let description = self.required_text(mapping, "description", ProblemKind::MissingDescription);
        let name = name.map(|n| n.nfkc().collect::<String>());
        if let Some(name) = &name {
            self.check_name(name, dir_name);
        }
        let description =
            description.map(|d| self.cut(d, MAX_DESCRIPTION_CHARS, ProblemKind::DescriptionTooLong, "description"));
        let license = self.optional_text(mapping, "license");
        let compatibility = self.optional_text(mapping, "compatibility").map(|c| {
            self.cut(
                c,
                MAX_COMPATIBILITY_CHARS,
                ProblemKind::CompatibilityTooLong,
                "compatibility",
            )
        });
        let metadata = self.metadata(mapping);
        let allowed_tools = self.allowed_tools(mapping);
        Some(SkillMetadata {
            name: name?,
            description: description?,
            license,
            compatibility,
            metadata,
            allowed_tools,
        })
    }

    fn required_text(&mut self, mapping: &serde_yaml::Mapping, field: &str, missing: ProblemKind) -> Option<String> {
        let value = mapping.get(field).unwrap_or(&Value::Null);
        if matches!(value, Value::Sequence(_) | Value::Mapping(_)) {
            self.report(
                ProblemKind::InvalidFieldType,
                Severity::Error,
                format!("`{field}` must be a string, not {}", type_name(value)),
            );
            return None;
        }
        let text = scalar_text(value).map(|t| t.trim().to_owned()).unwrap_or_default();
        if text.is_empty() {
            self.report(
                missing,
                Severity::Error,
                format!("the required field `{field}` is missing or empty"),
            );
            return None;
        }
        if !is_string(value) {
            self.report(
                ProblemKind::InvalidFieldType,
                Severity::Warning,
                format!(
                    "`{field}` should be a string; {} was read as the text `{text}`",
                    type_name(value)
                ),
            );
        }
        Some(text)
    }

    fn optional_text(&mut self, mapping: &serde_yaml::Mapping, field: &str) -> Option<String> {
        let value = mapping.get(field)?;
        match value {
            Value::Null => None,
            Value::Sequence(_) | Value::Mapping(_) => {
                self.report(
                    ProblemKind::InvalidFieldType,
                    Severity::Warning,
                    format!("`{field}` must be a string, not {}; it is ignored", type_name(value)),
                );
                None
            }
            _ => {
                let text = scalar_text(value)?.trim().to_owned();
                if !is_string(value) {
                    self.report(
                        ProblemKind::InvalidFieldType,
                        Severity::Warning,
                        format!(
                            "`{field}` should be a string; {} was read as the text `{text}`",
                            type_name(value)
                        ),
                    );
                }
                Some(text).filter(|t| !t.is_empty())
            }
        }
    }

    fn cut(&mut self, text: String, limit: usize, kind: ProblemKind, field: &str) -> String {
        let chars = text.chars().count();
        if chars <= limit {
            return text;
        }
        let kept = match self.strictness {
            Strictness::Lenient => format!("; only the first {limit} are kept"),
            Strictness::Strict => String::new(),
        };
        self.report(
            kind,
            Severity::Warning,
            format!("`{field}` is {chars} characters long; the limit is {limit}{kept}"),
        );
        text.chars().take(limit).collect()
    }

    fn check_name(&mut self, name: &str, dir_name: Option<&str>) {
        let chars = name.chars().count();
        if chars > MAX_NAME_CHARS {
            self.report(
                ProblemKind::NameTooLong,
                Severity::Warning,
                format!("the name is {chars} characters long; at most {MAX_NAME_CHARS} are allowed"),
            );
        }
        if name.to_lowercase() != name {
            self.report(
                ProblemKind::NameNotLowercase,
                Severity::Warning,
                format!("the name `{name}` must be lowercase"),
            );
        }
        if name.starts_with('-') || name.ends_with('-') {
            self.report(
                ProblemKind::NameHyphenEdge,
                Severity::Warning,
                format!("the name `{name}` must not start or end with a hyphen"),
            );
        }
        if name.contains("--") {
            self.report(
                ProblemKind::NameConsecutiveHyphens,
                Severity::Warning,
                format!("the name `{name}` must not hold two hyphens in a row"),
            );
        }
        if let Some(bad) = name.chars().find(|c| !(c.is_alphanumeric() || *c == '-')) {
            self.report(
                ProblemKind::NameInvalidChars,
                Severity::Warning,
                format!(
                    "the name `{name}` holds `{}`; only letters, digits and hyphens are allowed",
                    bad.escape_debug()
                ),
            );
        }
        if let Some(dir) = dir_name {
            let dir: String = dir.nfkc().collect();
            if dir != name {
                self.report(
                    ProblemKind::NameMismatch,
                    Severity::Warning,
                    format!("the name `{name}` differs from its directory `{dir}`"),
                );
            }
        }
    }

    fn metadata(&mut self, mapping: &serde_yaml::Mapping) -> IndexMap<String, String> {
        let mut out = IndexMap::new();
        match mapping.get("metadata") {
            None | Some(Value::Null) => {}
            Some(Value::Mapping(entries)) => {
                for (key, value) in entries {
                    let Some(key) = scalar_text(key) else {
                        self.report(
                            ProblemKind::InvalidFieldType,
                            Severity::Warning,
                            format!("a `metadata` key is {}; keys must be strings", type_name(key)),
                        );
                        continue;
                    };
                    match value {
                        Value::Null => {}
                        Value::Sequence(_) | Value::Mapping(_) => self.report(
                            ProblemKind::InvalidFieldType,
                            Severity::Warning,
                            format!(
                                "`metadata.{key}` is {}; values must be strings, so it is ignored",
                                type_name(value)
                            ),
                        ),
                        _ => {
                            if let Some(text) = scalar_text(value) {
                                out.insert(key, text);
                            }
                        }
                    }
                }
            }
            Some(other) => self.report(
                ProblemKind::InvalidFieldType,
                Severity::Warning,
                format!("`metadata` must be a mapping, not {}; it is ignored", type_name(other)),
            ),
        }
        out
    }

    fn allowed_tools(&mut self, mapping: &serde_yaml::Mapping) -> Vec<String> {
        match mapping.get("allowed-tools") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => s
                .split(|c: char| c.is_whitespace() || c == ',')
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect(),
            Some(Value::Sequence(items)) => items
                .iter()
                .filter_map(|item| item.as_str())
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect(),
            Some(other) => {
                self.report(
                    ProblemKind::InvalidFieldType,
                    Severity::Warning,
                    format!(
                        "`allowed-tools` must be a string or a list, not {}; it is ignored",
                        type_name(other)
                    ),
                );
                Vec::new()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lenient(text: &str, dir: &str) -> Parsed {
        parse_skill_md(text.as_bytes(), Some(dir), Strictness::Lenient)
    }

    fn kinds(parsed: &Parsed) -> Vec<ProblemKind> {
        parsed.problems.iter().map(|p| p.kind).collect()
    }

    #[test]
    fn parses_every_field() {
        let parsed = lenient(
            "---\nname: pdf\ndescription: Work with PDFs.\nlicense: MIT\ncompatibility: Python 3.11\n\
             metadata:\n  author: sre\n  version: 42\n  ratio: 1.5\n  flag: true\n  gone: ~\n\
             allowed-tools: Read, Bash  Write\n---\nbody\n",
            "pdf",
        );
        assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
        let skill = parsed.skill.unwrap();
        assert_eq!(skill.name, "pdf");
        assert_eq!(skill.description, "Work with PDFs.");
        assert_eq!(skill.license.as_deref(), Some("MIT"));
        assert_eq!(skill.compatibility.as_deref(), Some("Python 3.11"));
        let meta: Vec<_> = skill.metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            meta,
            [("author", "sre"), ("version", "42"), ("ratio", "1.5"), ("flag", "true")]
        );
        assert_eq!(skill.allowed_tools, ["Read", "Bash", "Write"]);
    }

    #[test]
    fn allowed_tools_as_a_list_skips_non_strings() {
        let parsed = lenient(
            "---\nname: a\ndescription: d\nallowed-tools:\n  - Read\n  - 3\n  - ' '\n  - Bash\n---\n",
            "a",
        );
        assert_eq!(parsed.skill.unwrap().allowed_tools, ["Read", "Bash"]);
    }

    #[test]
    fn null_fields_are_absent_not_the_text_none() {
        let parsed = lenient(
            "---\nname: a\ndescription: d\nlicense: null\ncompatibility: ~\n---\n",
            "a",
        );
        let skill = parsed.skill.unwrap();
        assert_eq!(skill.license, None);
        assert_eq!(skill.compatibility, None);
        let parsed = lenient("---\nname: null\ndescription: d\n---\n", "a");
        assert_eq!(kinds(&parsed), [ProblemKind::MissingName]);
        assert!(parsed.skill.is_none());
    }

    #[test]
    fn a_numeric_name_loads_with_its_text_and_a_warning() {
        let parsed = lenient("---\nname: 123\ndescription: d\n---\n", "123");
        assert_eq!(kinds(&parsed), [ProblemKind::InvalidFieldType]);
        assert_eq!(parsed.skill.unwrap().name, "123");
    }

    #[test]
    fn unusable_files_are_errors() {
        let cases = [
            ("no fence\n", ProblemKind::NoFrontmatter),
            ("---\nname: a\n", ProblemKind::UnclosedFrontmatter),
            ("---\nname: [a\n---\n", ProblemKind::InvalidYaml),
            ("---\n- a\n- b\n---\n", ProblemKind::NotAMapping),
            ("---\nname: &n a\ndescription: *n\n---\n", ProblemKind::YamlAlias),
            ("---\ndescription: d\n---\n", ProblemKind::MissingName),
            ("---\nname: a\n---\n", ProblemKind::MissingDescription),
            (
                "---\nname: a\ndescription: '   '\n---\n",
                ProblemKind::MissingDescription,
            ),
            ("---\nname: [a]\ndescription: d\n---\n", ProblemKind::InvalidFieldType),
            (
                "---\nname: a\ndescription: d\nmetadata: {a: {b: {c: {d: {e: {f: {g: {h: 1}}}}}}}}\n---\n",
                ProblemKind::YamlTooDeep,
            ),
        ];
        for (text, kind) in cases {
            let parsed = lenient(text, "a");
            assert!(parsed.skill.is_none(), "{text:?}");
            assert!(kinds(&parsed).contains(&kind), "{text:?}: {:?}", parsed.problems);
        }
        let latin1 = parse_skill_md(b"---\nname: caf\xe9\n---\n", Some("a"), Strictness::Lenient);
        assert_eq!(kinds(&latin1), [ProblemKind::NotUtf8]);
    }

    #[test]
    fn name_rules_warn_when_lenient_and_fail_when_strict() {
        let cases = [
            ("Upper-Case", ProblemKind::NameNotLowercase),
            ("under_score", ProblemKind::NameInvalidChars),
            ("-edge", ProblemKind::NameHyphenEdge),
            ("edge-", ProblemKind::NameHyphenEdge),
            ("double--hyphen", ProblemKind::NameConsecutiveHyphens),
        ];
        for (name, kind) in cases {
            let text = format!("---\nname: {name}\ndescription: d\n---\n");
            let parsed = lenient(&text, name);
            assert_eq!(kinds(&parsed), [kind], "{name}");
            assert!(parsed.skill.is_some());
            let strict = parse_skill_md(text.as_bytes(), Some(name), Strictness::Strict);
            assert!(!strict.is_valid());
            assert!(strict.skill.is_none());
        }
        let long = "a".repeat(65);
        let parsed = lenient(&format!("---\nname: {long}\ndescription: d\n---\n"), &long);
        assert_eq!(kinds(&parsed), [ProblemKind::NameTooLong]);
    }

    #[test]
    fn unicode_lowercase_names_are_valid_and_nfkc_normalized() {
        let parsed = parse_skill_md(
            "---\nname: café-outil\ndescription: d\n---\n".as_bytes(),
            Some("café-outil"),
            Strictness::Strict,
        );
        assert!(parsed.is_valid(), "{:?}", parsed.problems);
        // Decomposed é in the file, composed in the directory name.
        let parsed = lenient("---\nname: cafe\u{301}\ndescription: d\n---\n", "café");
        assert!(parsed.problems.is_empty());
        assert_eq!(parsed.skill.unwrap().name, "café");
        // Fullwidth letters fold to ASCII under NFKC.
        let parsed = lenient("---\nname: ｐｄｆ\ndescription: d\n---\n", "pdf");
        assert_eq!(parsed.skill.unwrap().name, "pdf");
    }

    #[test]
    fn mismatch_and_unknown_fields_warn() {
        let parsed = lenient("---\nname: beta\ndescription: d\nversion: 2\n---\n", "alpha");
        assert_eq!(
            kinds(&parsed),
            [ProblemKind::UnexpectedField, ProblemKind::NameMismatch]
        );
        assert_eq!(parsed.skill.unwrap().name, "beta");
    }

    #[test]
    fn long_texts_are_cut_by_characters() {
        let desc = "é".repeat(1030);
        let compat = "x".repeat(501);
        let parsed = lenient(
            &format!("---\nname: a\ndescription: {desc}\ncompatibility: {compat}\n---\n"),
            "a",
        );
        assert_eq!(
            kinds(&parsed),
            [ProblemKind::DescriptionTooLong, ProblemKind::CompatibilityTooLong]
        );
        let skill = parsed.skill.unwrap();
        assert_eq!(skill.description.chars().count(), 1024);
        assert_eq!(skill.compatibility.unwrap().len(), 500);
        let exact = "é".repeat(1024);
        let parsed = lenient(&format!("---\nname: a\ndescription: {exact}\n---\n"), "a");
        assert!(parsed.problems.is_empty());
    }

    #[test]
    fn frontmatter_size_limit() {
        let big = format!(
            "---\nname: a\ndescription: {}\n---\n",
            "x".repeat(MAX_FRONTMATTER_BYTES)
        );
        assert_eq!(kinds(&lenient(&big, "a")), [ProblemKind::FrontmatterTooLarge]);
    }

    #[test]
    fn prefixes_ask_for_more_only_while_the_frontmatter_may_close() {
        assert!(matches!(scan(b"---\nname: a\ndescr", false), Scan::NeedMore));
        assert!(matches!(scan(b"---\nname: a\n---\nbo", false), Scan::Yaml("name: a\n")));
        let huge = format!("---\n{}", "a: b\n".repeat(20_000));
        assert!(matches!(
            scan(huge.as_bytes(), false),
            Scan::Failed(Parsed { ref problems, .. }) if problems[0].kind == ProblemKind::FrontmatterTooLarge
        ));
    }

    #[test]
    fn metadata_and_tools_of_the_wrong_shape_are_ignored_with_a_warning() {
        let parsed = lenient(
            "---\nname: a\ndescription: d\nmetadata: [1, 2]\nallowed-tools: {a: b}\nlicense: [x]\n---\n",
            "a",
        );
        let skill = parsed.skill.clone().unwrap();
        assert!(skill.metadata.is_empty());
        assert!(skill.allowed_tools.is_empty());
        assert_eq!(skill.license, None);
        assert_eq!(kinds(&parsed), [ProblemKind::InvalidFieldType; 3]);
    }
}
