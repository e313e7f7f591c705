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

use crate::frontmatter::{self, Entries, Fence, Key, MAX_FRONTMATTER_BYTES, type_name};

/// The file that makes a directory a skill.
pub const SKILL_FILE: &str = "SKILL.md";
/// The lowercase name the reference validator also accepts for
/// [`SKILL_FILE`]; such a skill is read, with a warning.
pub const LOWERCASE_SKILL_FILE: &str = "skill.md";

/// True for a file name that makes its directory a skill, as a catalog
/// load takes it: [`SKILL_FILE`], or [`LOWERCASE_SKILL_FILE`] (served with
/// a warning). Whatever checks skills before they are handed on (a
/// signature check before `publish`) treats exactly these as skills.
pub fn is_skill_file_name(name: &str) -> bool {
    name == SKILL_FILE || name == LOWERCASE_SKILL_FILE
}

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
    /// The skill's file is named `skill.md` instead of `SKILL.md`.
    LowercaseSkillMd,
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
    /// A key or value holds a control character (C0 other than tab and
    /// newline, DEL, or C1).
    ControlCharacter,
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
    /// The description is still the placeholder `skill new` writes.
    DescriptionPlaceholder,
}

impl ProblemKind {
    /// Every kind, in declaration order.
    pub const ALL: [ProblemKind; 25] = [
        ProblemKind::MissingSkillMd,
        ProblemKind::LowercaseSkillMd,
        ProblemKind::NoFrontmatter,
        ProblemKind::UnclosedFrontmatter,
        ProblemKind::FrontmatterTooLarge,
        ProblemKind::InvalidYaml,
        ProblemKind::NotAMapping,
        ProblemKind::YamlAlias,
        ProblemKind::YamlTooDeep,
        ProblemKind::NotUtf8,
        ProblemKind::FileTooLarge,
        ProblemKind::UnexpectedField,
        ProblemKind::MissingName,
        ProblemKind::MissingDescription,
        ProblemKind::InvalidFieldType,
        ProblemKind::ControlCharacter,
        ProblemKind::NameTooLong,
        ProblemKind::NameNotLowercase,
        ProblemKind::NameHyphenEdge,
        ProblemKind::NameConsecutiveHyphens,
        ProblemKind::NameInvalidChars,
        ProblemKind::NameMismatch,
        ProblemKind::DescriptionTooLong,
        ProblemKind::CompatibilityTooLong,
        ProblemKind::DescriptionPlaceholder,
    ];

    /// The stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ProblemKind::MissingSkillMd => "missing_skill_md",
            ProblemKind::LowercaseSkillMd => "lowercase_skill_md",
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
            ProblemKind::ControlCharacter => "control_character",
            ProblemKind::NameTooLong => "name_too_long",
            ProblemKind::NameNotLowercase => "name_not_lowercase",
            ProblemKind::NameHyphenEdge => "name_hyphen_edge",
            ProblemKind::NameConsecutiveHyphens => "name_consecutive_hyphens",
            ProblemKind::NameInvalidChars => "name_invalid_chars",
            ProblemKind::NameMismatch => "name_mismatch",
            ProblemKind::DescriptionTooLong => "description_too_long",
            ProblemKind::CompatibilityTooLong => "compatibility_too_long",
            ProblemKind::DescriptionPlaceholder => "description_placeholder",
        }
    }
}

impl std::fmt::Display for ProblemKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The description `skill new` writes when none is given: valid, so the
/// skeleton can be saved, and warned of (`description_placeholder`) by
/// every check until it is replaced.
pub fn placeholder_description(name: &str) -> String {
    format!("Describe what {name} does and when to use it.")
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
/// ([`Strictness::Lenient`], for loading a catalog). A few problems the
/// specification's reference validator accepts stay warnings either way: a
/// number or boolean read as text, a control character, a lowercase
/// `skill.md`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strictness {
    /// Load what can be loaded; name rules, unknown fields and over-long
    /// texts are warnings (texts are cut to their limit).
    #[default]
    Lenient,
    /// Every problem is an error, except the warnings named above.
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
    if let Err(e) = std::str::from_utf8(bytes) {
        return Parsed::failed(
            ProblemKind::NotUtf8,
            format!("the file is not UTF-8 text (bad byte at offset {})", e.valid_up_to()),
        );
    }
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
    // Only the frontmatter has to be text at load time: fences are ASCII,
    // so they are found in the bytes and the YAML between them is decoded.
    let not_utf8 = |offset: usize| {
        Scan::Failed(Parsed::failed(
            ProblemKind::NotUtf8,
            format!("the file is not UTF-8 text (bad byte at offset {offset})"),
        ))
    };
    match frontmatter::locate(bytes, complete) {
        Fence::Closed { yaml } => match std::str::from_utf8(yaml) {
            Ok(yaml) => Scan::Yaml(yaml),
            Err(e) => not_utf8(e.valid_up_to()),
        },
        Fence::Unclosed if complete => match frontmatter::decode(bytes, true) {
            Ok(_) => Scan::Failed(Parsed::failed(
                ProblemKind::UnclosedFrontmatter,
                "the frontmatter opened with `---` is never closed by a `---` line",
            )),
            Err(e) => not_utf8(e.valid_up_to()),
        },
        Fence::Unclosed if bytes.len() <= MAX_FRONTMATTER_BYTES + 8 => Scan::NeedMore,
        Fence::Unclosed => Scan::Failed(Parsed::failed(
            ProblemKind::FrontmatterTooLarge,
            format!("no closing `---` within the first {MAX_FRONTMATTER_BYTES} bytes"),
        )),
        Fence::Missing => match frontmatter::decode(bytes, complete) {
            Ok(_) => Scan::Failed(Parsed::failed(
                ProblemKind::NoFrontmatter,
                "the file must start with a `---` line opening the YAML frontmatter",
            )),
            Err(e) => not_utf8(e.valid_up_to()),
        },
    }
}

/// Parses the YAML of a frontmatter and applies the specification's rules.
pub fn parse_frontmatter(yaml: &str, dir_name: Option<&str>, strictness: Strictness) -> Parsed {
    parse_with(yaml, dir_name, strictness, frontmatter::parse)
}

/// [`parse_frontmatter`] with the YAML read by `serde_yaml` alone, never
/// the fast path: the two give equal results on every input, which the
/// differential fuzz target checks through this.
#[doc(hidden)]
pub fn parse_frontmatter_reference(yaml: &str, dir_name: Option<&str>, strictness: Strictness) -> Parsed {
    parse_with(yaml, dir_name, strictness, frontmatter::parse_reference)
}

fn parse_with(
    yaml: &str,
    dir_name: Option<&str>,
    strictness: Strictness,
    read: fn(&str) -> Result<Entries<'_>, (ProblemKind, String)>,
) -> Parsed {
    if yaml.len() > MAX_FRONTMATTER_BYTES {
        return Parsed::failed(
            ProblemKind::FrontmatterTooLarge,
            format!(
                "the frontmatter is {} bytes; at most {MAX_FRONTMATTER_BYTES} are allowed",
                yaml.len()
            ),
        );
    }
    let mut entries = match read(yaml) {
        Ok(entries) => entries,
        Err((kind, message)) => return Parsed::failed(kind, message),
    };
    if depth(&entries) > MAX_YAML_DEPTH {
        return Parsed::failed(
            ProblemKind::YamlTooDeep,
            format!("the frontmatter nests lists and maps more than {MAX_YAML_DEPTH} levels deep"),
        );
    }
    let mut rules = Rules {
        problems: Vec::new(),
        strictness,
    };
    rules.scalars_as_text(yaml, &mut entries);
    rules.control_characters(&entries);
    let skill = rules.apply(entries, dir_name);
    let problems = rules.problems;
    let skill = skill.filter(|_| problems.iter().all(|p| p.severity < Severity::Error));
    Parsed { skill, problems }
}

/// NFKC normalization; ASCII text is already normalized.
fn nfkc_owned(text: String) -> String {
    if text.is_ascii() { text } else { text.nfkc().collect() }
}

fn depth(entries: &Entries<'_>) -> usize {
    fn of(value: &Value) -> usize {
        match value {
            Value::Mapping(m) => 1 + m.values().map(of).max().unwrap_or(0),
            Value::Sequence(s) => 1 + s.iter().map(of).max().unwrap_or(0),
            Value::Tagged(t) => of(&t.value),
            _ => 0,
        }
    }
    1 + entries.iter().map(|(_, v)| of(v)).max().unwrap_or(0)
}

/// The YAML text of a scalar; `None` for null, lists and maps.
fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        other => owned_scalar_text(other.clone()),
    }
}

/// Like [`scalar_text`], moving the string out instead of copying it.
fn owned_scalar_text(value: Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Tagged(t) => owned_scalar_text(t.value),
        Value::Null | Value::Sequence(_) | Value::Mapping(_) => None,
    }
}

/// The fields whose values are text, read as text whatever YAML type
/// their scalar has.
const TEXT_FIELDS: [&str; 4] = ["name", "description", "license", "compatibility"];

/// True for a number or a boolean, tagged or not.
fn is_typed_scalar(value: &Value) -> bool {
    match value {
        Value::Bool(_) | Value::Number(_) => true,
        Value::Tagged(t) => is_typed_scalar(&t.value),
        _ => false,
    }
}

/// True for a character that may act on a terminal or a prompt
/// ([`crate::display::acts_on_display`]) other than tab and newline, which
/// YAML text carries.
fn is_control(c: char) -> bool {
    crate::display::acts_on_display(c) && c != '\t' && c != '\n'
}

/// The first such character of `text`. Text without a byte that can start
/// one (C0, DEL, C1's lead byte, the lead byte of U+2000 to U+2FFF) is
/// passed at once.
fn first_control(text: &str) -> Option<char> {
    if !text
        .bytes()
        .any(|b| (b < 0x20 && b != b'\t' && b != b'\n') || b == 0x7f || b == 0xc2 || b == 0xe2)
    {
        return None;
    }
    text.chars().find(|c| is_control(*c))
}

/// The first control character in any string of `value`, keys included.
fn first_control_in(value: &Value) -> Option<char> {
    match value {
        Value::String(s) => first_control(s),
        Value::Sequence(items) => items.iter().find_map(first_control_in),
        Value::Mapping(m) => m
            .iter()
            .find_map(|(k, v)| first_control_in(k).or_else(|| first_control_in(v))),
        Value::Tagged(t) => first_control_in(&t.value),
        Value::Null | Value::Bool(_) | Value::Number(_) => None,
    }
}

/// The longest key shown in a message, in characters.
const SHOWN_KEY_CHARS: usize = 64;

/// A key as a message shows it: escaped, and cut when long.
fn shown_key(key: &Key<'_>) -> String {
    let text = match key {
        Key::Text(text) => (*text).to_owned(),
        Key::Yaml(value) => scalar_text(value).unwrap_or_else(|| format!("<{}>", type_name(value))),
    };
    let mut shown: String = text
        .chars()
        .take(SHOWN_KEY_CHARS)
        .flat_map(char::escape_debug)
        .collect();
    if text.chars().nth(SHOWN_KEY_CHARS).is_some() {
        shown.push('…');
    }
    shown
}

/// The keys that are not fields of the specification: the first few, for
/// the message, and how many in all.
#[derive(Default)]
struct UnknownFields {
    first: Vec<String>,
    count: usize,
}

impl UnknownFields {
    /// How many keys a message names.
    const NAMED: usize = 5;

    fn add(&mut self, key: &Key<'_>) {
        if self.first.len() < Self::NAMED {
            self.first.push(shown_key(key));
        }
        self.count += 1;
    }

    /// One message for them all, or `None` when there are none.
    fn message(&self) -> Option<String> {
        let named = self
            .first
            .iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let known = KNOWN_FIELDS.join(", ");
        Some(match self.count {
            0 => return None,
            1 => format!("{named} is not a field of the specification (known fields: {known})"),
            n if n <= Self::NAMED => {
                format!("{named} are not fields of the specification (known fields: {known})")
            }
            n => format!(
                "{named} and {} more ({n} in all) are not fields of the specification (known fields: {known})",
                n - Self::NAMED
            ),
        })
    }
}

/// `text` without surrounding white space, reusing it when there is none.
fn trimmed(text: String) -> String {
    let t = text.trim();
    if t.len() == text.len() { text } else { t.to_owned() }
}

/// The known fields of a frontmatter, moved out of the mapping.
#[derive(Default)]
struct Fields {
    name: Option<Value>,
    description: Option<Value>,
    license: Option<Value>,
    compatibility: Option<Value>,
    metadata: Option<Value>,
    allowed_tools: Option<Value>,
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

    /// Records a problem that stays a warning under every strictness.
    fn advise(&mut self, kind: ProblemKind, message: String) {
        self.problems.push(Problem {
            kind,
            severity: Severity::Warning,
            message,
        });
    }

    /// Reads every text field that YAML types as a number or a boolean as
    /// the text written in the file, with a warning: one rule for every
    /// text field, as the specification's reference validator reads them.
    fn scalars_as_text(&mut self, yaml: &str, entries: &mut Entries<'_>) {
        let typed: Vec<(usize, &'static str)> = entries
            .iter()
            .enumerate()
            .filter(|(_, (_, value))| is_typed_scalar(value))
            .filter_map(|(i, (key, _))| Some((i, *TEXT_FIELDS.iter().find(|f| key.as_str() == Some(**f))?)))
            .collect();
        if typed.is_empty() {
            return;
        }
        let fields: Vec<&str> = typed.iter().map(|(_, f)| *f).collect();
        let written = frontmatter::scalar_texts(yaml, &fields);
        for (i, field) in typed {
            let value = &mut entries[i].1;
            let kind = type_name(value);
            let Some(text) = written
                .iter()
                .find(|(f, _)| f == field)
                .map(|(_, t)| t.clone())
                .or_else(|| owned_scalar_text(value.clone()))
            else {
                continue;
            };
            self.advise(
                ProblemKind::InvalidFieldType,
                format!(
                    "`{field}` should be a string; {kind} was read as the text `{}`",
                    text.escape_debug()
                ),
            );
            *value = Value::String(text);
        }
    }

    /// Warns once for each field whose key or value (at any depth) holds a
    /// control character.
    fn control_characters(&mut self, entries: &Entries<'_>) {
        for (key, value) in entries {
            let found = match key {
                Key::Text(text) => first_control(text),
                Key::Yaml(key) => first_control_in(key),
            }
            .or_else(|| first_control_in(value));
            if let Some(c) = found {
                self.advise(
                    ProblemKind::ControlCharacter,
                    format!(
                        "`{}` holds U+{:04X}, a control or reordering character; it may act on a terminal or a prompt",
                        shown_key(key),
                        c as u32
                    ),
                );
            }
        }
    }

    fn apply(&mut self, entries: Entries<'_>, dir_name: Option<&str>) -> Option<SkillMetadata> {
        let mut fields = Fields::default();
        let mut unknown = UnknownFields::default();
        for (key, value) in entries {
            let slot = match key.as_str() {
                Some("name") => &mut fields.name,
                Some("description") => &mut fields.description,
                Some("license") => &mut fields.license,
                Some("compatibility") => &mut fields.compatibility,
                Some("metadata") => &mut fields.metadata,
                Some("allowed-tools") => &mut fields.allowed_tools,
                _ => {
                    unknown.add(&key);
                    continue;
                }
            };
            *slot = Some(value);
        }
        if let Some(message) = unknown.message() {
            self.report(ProblemKind::UnexpectedField, Severity::Warning, message);
        }
        let name = self.required_text(fields.name, "name", ProblemKind::MissingName);
        let description = self.required_text(fields.description, "description", ProblemKind::MissingDescription);
        let name = name.map(nfkc_owned);
        if let Some(name) = &name {
            self.check_name(name, dir_name);
        }
        let description =
            description.map(|d| self.cut(d, MAX_DESCRIPTION_CHARS, ProblemKind::DescriptionTooLong, "description"));
        if let (Some(name), Some(description)) = (&name, &description)
            && *description == placeholder_description(name)
        {
            self.advise(
                ProblemKind::DescriptionPlaceholder,
                "the description is the placeholder `skill new` wrote: say what the skill does and when to use it"
                    .into(),
            );
        }
        let license = self.optional_text(fields.license, "license");
        let compatibility = self.optional_text(fields.compatibility, "compatibility").map(|c| {
            self.cut(
                c,
                MAX_COMPATIBILITY_CHARS,
                ProblemKind::CompatibilityTooLong,
                "compatibility",
            )
        });
        let metadata = self.metadata(fields.metadata);
        let allowed_tools = self.allowed_tools(fields.allowed_tools);
        Some(SkillMetadata {
            name: name?,
            description: description?,
            license,
            compatibility,
            metadata,
            allowed_tools,
        })
    }

    fn required_text(&mut self, value: Option<Value>, field: &str, missing: ProblemKind) -> Option<String> {
        let value = value.unwrap_or(Value::Null);
        if matches!(value, Value::Sequence(_) | Value::Mapping(_)) {
            self.report(
                ProblemKind::InvalidFieldType,
                Severity::Error,
                format!("`{field}` must be a string, not {}", type_name(&value)),
            );
            return None;
        }
        let text = owned_scalar_text(value).map(trimmed).unwrap_or_default();
        if text.is_empty() {
            self.report(
                missing,
                Severity::Error,
                format!("the required field `{field}` is missing or empty"),
            );
            return None;
        }
        Some(text)
    }

    fn optional_text(&mut self, value: Option<Value>, field: &str) -> Option<String> {
        let value = value?;
        match value {
            Value::Null => None,
            Value::Sequence(_) | Value::Mapping(_) => {
                self.report(
                    ProblemKind::InvalidFieldType,
                    Severity::Warning,
                    format!("`{field}` must be a string, not {}; it is ignored", type_name(&value)),
                );
                None
            }
            _ => Some(trimmed(owned_scalar_text(value)?)).filter(|t| !t.is_empty()),
        }
    }

    fn cut(&mut self, text: String, limit: usize, kind: ProblemKind, field: &str) -> String {
        // Fewer bytes than the limit means fewer characters too.
        if text.len() <= limit {
            return text;
        }
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
        let ascii = name.is_ascii();
        let chars = if ascii { name.len() } else { name.chars().count() };
        if chars > MAX_NAME_CHARS {
            self.report(
                ProblemKind::NameTooLong,
                Severity::Warning,
                format!("the name is {chars} characters long; at most {MAX_NAME_CHARS} are allowed"),
            );
        }
        let has_upper = if ascii {
            name.bytes().any(|b| b.is_ascii_uppercase())
        } else {
            name.to_lowercase() != name
        };
        if has_upper {
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
            let dir = if dir.is_ascii() {
                std::borrow::Cow::Borrowed(dir)
            } else {
                std::borrow::Cow::Owned(dir.nfkc().collect::<String>())
            };
            if dir != name {
                self.report(
                    ProblemKind::NameMismatch,
                    Severity::Warning,
                    format!("the name `{name}` differs from its directory `{dir}`"),
                );
            }
        }
    }

    fn metadata(&mut self, value: Option<Value>) -> IndexMap<String, String> {
        let mut out = IndexMap::new();
        match value {
            None | Some(Value::Null) => {}
            Some(Value::Mapping(entries)) => {
                out.reserve(entries.len());
                for (key, value) in entries {
                    let Some(key) = owned_scalar_text(key.clone()) else {
                        self.report(
                            ProblemKind::InvalidFieldType,
                            Severity::Warning,
                            format!("a `metadata` key is {}; keys must be strings", type_name(&key)),
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
                                type_name(&value)
                            ),
                        ),
                        other => {
                            if let Some(text) = owned_scalar_text(other) {
                                out.insert(key, text);
                            }
                        }
                    }
                }
            }
            Some(other) => self.report(
                ProblemKind::InvalidFieldType,
                Severity::Warning,
                format!("`metadata` must be a mapping, not {}; it is ignored", type_name(&other)),
            ),
        }
        out
    }

    fn allowed_tools(&mut self, value: Option<Value>) -> Vec<String> {
        match value {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => s
                .split(|c: char| c.is_whitespace() || c == ',')
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect(),
            Some(Value::Sequence(items)) => items
                .into_iter()
                .filter_map(|item| match item {
                    Value::String(s) => Some(trimmed(s)),
                    _ => None,
                })
                .filter(|t| !t.is_empty())
                .collect(),
            Some(other) => {
                self.report(
                    ProblemKind::InvalidFieldType,
                    Severity::Warning,
                    format!(
                        "`allowed-tools` must be a string or a list, not {}; it is ignored",
                        type_name(&other)
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
    fn the_placeholder_description_is_valid_and_always_warned_of() {
        let text = format!("---\nname: a\ndescription: {}\n---\n", placeholder_description("a"));
        for strictness in [Strictness::Lenient, Strictness::Strict] {
            let parsed = parse_skill_md(text.as_bytes(), Some("a"), strictness);
            assert_eq!(kinds(&parsed), [ProblemKind::DescriptionPlaceholder]);
            assert_eq!(parsed.problems[0].severity, Severity::Warning);
            assert!(parsed.skill.is_some());
        }
        let other = parse_skill_md(
            format!("---\nname: b\ndescription: {}\n---\n", placeholder_description("a")).as_bytes(),
            Some("b"),
            Strictness::Strict,
        );
        assert!(
            other.problems.is_empty(),
            "another skill's placeholder is a description like any other"
        );
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

    /// Finding 13: thousands of unknown keys make one diagnostic naming the
    /// first few and the count, found in one linear pass.
    #[test]
    fn fourteen_thousand_unknown_keys_make_one_small_diagnostic() {
        // Three-letter keys, so 14,000 fit in a frontmatter: `aaa`, `aab`, ...
        let keys: Vec<String> = (0..14_000u32)
            .map(|i| {
                [i / 676, i / 26 % 26, i % 26]
                    .iter()
                    .map(|d| char::from(b'a' + *d as u8))
                    .collect()
            })
            .collect();
        let flow = format!("---\n{{name: a, description: d, {}}}\n---\n", keys.join(","));
        let block = format!(
            "---\nname: a\ndescription: d\n{}---\n",
            keys[..13_000].iter().map(|k| format!("{k}:\n")).collect::<String>()
        );
        for (text, count) in [(flow, 14_000), (block, 13_000)] {
            let parsed = lenient(&text, "a");
            assert_eq!(kinds(&parsed), [ProblemKind::UnexpectedField]);
            let message = &parsed.problems[0].message;
            assert!(message.len() < 300, "{} bytes: {message}", message.len());
            let expected = format!(
                "`aaa`, `aab`, `aac`, `aad`, `aae` and {} more ({count} in all) are not fields",
                count - 5
            );
            assert!(message.starts_with(&expected), "{message}");
            assert!(parsed.skill.is_some());
            // A duplicate among them is still found.
            let twice = text
                .replace("\n---\n", "\naaq: again\n---\n")
                .replacen("}\naaq: again", ", aaq}", 1);
            assert_eq!(kinds(&lenient(&twice, "a")), [ProblemKind::InvalidYaml], "{count}");
        }
    }

    #[test]
    fn a_long_unknown_key_is_cut_and_escaped_in_the_message() {
        let key = "x".repeat(500);
        let parsed = lenient(
            &format!("---\nname: a\ndescription: d\n{key}: 1\n\"t\\ab\": 2\n---\n"),
            "a",
        );
        let message = &parsed.problems[0].message;
        assert!(message.len() < 400, "{message}");
        assert!(message.contains("`t\\u{7}b`"), "{message}");
    }

    /// Finding 5: a control character in any key or value is a warning,
    /// under either strictness; tabs and newlines YAML allows are not.
    #[test]
    fn control_characters_in_any_field_warn() {
        let text = "---\nname: a\ndescription: \"rings \\a\"\nmetadata:\n  \"k\\e\": v\n  w: \"\\u0085\"\n\
                    allowed-tools:\n  - \"x\\x7f\"\nlicense: |\n  tab\there\n  lines\n---\n";
        for strictness in [Strictness::Lenient, Strictness::Strict] {
            let parsed = parse_skill_md(text.as_bytes(), Some("a"), strictness);
            assert_eq!(
                kinds(&parsed),
                [ProblemKind::ControlCharacter; 3],
                "{:?}",
                parsed.problems
            );
            assert!(parsed.is_valid());
            assert!(parsed.problems.iter().all(|p| p.severity == Severity::Warning));
            assert!(parsed.problems[0].message.contains("`description`"));
            assert!(parsed.problems[0].message.contains("U+0007"));
            assert_eq!(parsed.skill.unwrap().description, "rings \u{7}");
        }
        let c1 = lenient("---\nname: a\ndescription: \"\\u009b31m\"\n---\n", "a");
        assert_eq!(kinds(&c1), [ProblemKind::ControlCharacter]);
        let bidi = lenient("---\nname: a\ndescription: \"safe \u{202e}txt.exe\"\n---\n", "a");
        assert_eq!(kinds(&bidi), [ProblemKind::ControlCharacter]);
        assert!(bidi.problems[0].message.contains("U+202E"), "{:?}", bidi.problems);
    }

    /// Numbers and booleans in text fields are read as the text written,
    /// with a warning that stays a warning when validating.
    #[test]
    fn numbers_and_booleans_in_text_fields_read_as_written() {
        let text = "---\nname: 2024\ndescription: 42\nlicense: 2.10\ncompatibility: TRUE\n---\n";
        for strictness in [Strictness::Lenient, Strictness::Strict] {
            let parsed = parse_skill_md(text.as_bytes(), Some("2024"), strictness);
            assert_eq!(
                kinds(&parsed),
                [ProblemKind::InvalidFieldType; 4],
                "{:?}",
                parsed.problems
            );
            assert!(parsed.is_valid());
            let skill = parsed.skill.unwrap();
            assert_eq!(skill.name, "2024");
            assert_eq!(skill.description, "42");
            assert_eq!(skill.license.as_deref(), Some("2.10"));
            assert_eq!(skill.compatibility.as_deref(), Some("TRUE"));
        }
        let parsed = lenient("---\nname: a\ndescription: 1e3\nlicense: 0x1F\n---\n", "a");
        let skill = parsed.skill.unwrap();
        assert_eq!(
            (skill.description.as_str(), skill.license.as_deref()),
            ("1e3", Some("0x1F"))
        );
    }
}
