//! The MCP tools, for hosts that do not speak the Skills extension: read
//! tools for every caller, write tools where the tenant has a writable
//! source and the token may write. Each tool's input schema is derived
//! from its typed parameters and its calls are dispatched by rmcp's tool
//! router. A failure is a tool error whose text starts with the stable
//! kind; the session goes on.

use std::sync::LazyLock;

use rmcp::ErrorData as McpError;
use rmcp::handler::server::tool::{IntoCallToolResult, ToolCallContext, ToolRouter};
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ResourceContents, Tool};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{tool, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use skillstore::integrity::digest::is_reserved;
use skillstore::{FileLimits, Patch, SKILL_FILE};

use super::content::Encoded;

use crate::error::ApiError;
use crate::service::Caller;
use crate::settings::Scope;

/// The read tools in the order `tools/list` gives them.
const READ_TOOLS: [&str; 4] = ["list_skills", "search_skills", "load_skill", "read_skill_file"];
/// The write tools in the order `tools/list` gives them.
const WRITE_TOOLS: [&str; 6] = [
    "create_skill",
    "patch_skill",
    "write_skill_file",
    "delete_skill",
    "skill_history",
    "rollback_skill",
];

/// Every tool, read and write; who may see and call which is decided by
/// [`available`] and [`call`].
static ROUTER: LazyLock<ToolRouter<Tools>> = LazyLock::new(|| Tools::read_router() + Tools::write_router());

/// The tools `caller` may use.
pub fn available(caller: &Caller) -> Vec<Tool> {
    let write: &[&str] = if may_write(caller) { &WRITE_TOOLS } else { &[] };
    READ_TOOLS
        .iter()
        .chain(write)
        .filter_map(|name| ROUTER.get(name).cloned())
        .collect()
}

fn may_write(caller: &Caller) -> bool {
    caller.scope == Scope::Write && caller.tenant.check_writable().is_ok()
}

/// The start rmcp gives the text of a tool error for arguments that do not
/// fit the tool's parameters.
const UNFIT_ARGUMENTS: &str = "failed to deserialize parameters: ";

/// Runs the tool the request names; a tool the caller may not see is a
/// protocol error, as an unknown one is, any other failure (arguments that
/// do not fit the schema included) a tool error.
pub async fn call(
    caller: Caller,
    request: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResponse, McpError> {
    let name = request.name.clone();
    let hidden = WRITE_TOOLS.contains(&name.as_ref()) && !may_write(&caller);
    if hidden || ROUTER.get(&name).is_none() {
        return Err(McpError::invalid_params(
            format!("no tool named `{}`", shown_name(&name)),
            None,
        ));
    }
    let tools = Tools(caller);
    let mut response = ROUTER.call(ToolCallContext::new(&tools, request, context)).await?;
    if let CallToolResponse::Complete(result) = &mut response
        && result.is_error == Some(true)
        && let [ContentBlock::Text(text)] = result.content.as_mut_slice()
        && let Some(problem) = text.text.strip_prefix(UNFIT_ARGUMENTS)
    {
        let err = ApiError::bad_request(format!("the arguments do not fit `{name}`: {problem}"));
        text.text = format!("{}: {}", err.kind, err.message);
    }
    Ok(response)
}

/// A tool name a client sent, as an answer or a log line shows it: escaped,
/// and cut at 64 characters (a name is the client's own text, of any
/// length).
fn shown_name(name: &str) -> String {
    const MAX: usize = 64;
    let mut shown: String = name.chars().take(MAX).collect::<String>().escape_debug().collect();
    if name.chars().nth(MAX).is_some() {
        shown.push_str("...");
    }
    shown
}

/// A tool's failure: answered as a tool error whose text starts with the
/// stable kind.
struct Failure(ApiError);

impl<E: Into<ApiError>> From<E> for Failure {
    fn from(err: E) -> Self {
        Failure(err.into())
    }
}

impl IntoCallToolResult for Failure {
    fn into_call_tool_result(self) -> Result<CallToolResponse, McpError> {
        let Failure(err) = self;
        Ok(CallToolResult::error(vec![ContentBlock::text(format!("{}: {}", err.kind, err.message))]).into())
    }
}

type Answer = Result<CallToolResult, Failure>;

/// The tools as one caller uses them.
struct Tools(Caller);

#[derive(Deserialize, JsonSchema)]
struct ListArgs {
    /// Only skills whose name or description contains this text (case-insensitive)
    query: Option<String>,
}

/// The most results `search_skills` returns.
const SEARCH_MAX: u64 = 50;

#[derive(Deserialize, JsonSchema)]
struct SearchArgs {
    /// What the task is about, in words
    query: String,
    /// The most results (default 10)
    #[schemars(range(min = 1, max = 50))]
    limit: Option<u64>,
}

#[derive(Deserialize, JsonSchema)]
struct NameArgs {
    /// The skill's name
    name: String,
}

#[derive(Deserialize, JsonSchema)]
struct FileArgs {
    /// The skill's name
    name: String,
    /// The file's path inside the skill's directory
    path: String,
}

#[derive(Deserialize, JsonSchema)]
struct CreateArgs {
    /// The skill's name (lowercase letters, digits, hyphens)
    name: String,
    /// The whole SKILL.md
    content: String,
}

#[derive(Deserialize, JsonSchema)]
struct PatchArgs {
    /// The skill's name
    name: String,
    /// The exact text to replace
    find: String,
    /// The new text
    replace: String,
    /// The file, relative to the skill's directory (default SKILL.md)
    file: Option<String>,
    /// How many times the text occurs
    #[schemars(range(min = 1))]
    count: Option<usize>,
}

#[derive(Deserialize, JsonSchema)]
struct WriteFileArgs {
    /// The skill's name
    name: String,
    /// The file's path inside the skill's directory
    path: String,
    /// The file's text
    content: String,
}

#[derive(Deserialize, JsonSchema)]
struct RollbackArgs {
    /// The skill's name
    name: String,
    /// The history entry to restore
    #[schemars(range(min = 1))]
    id: u64,
}

/// How far `load_skill` lists a skill's other files.
const LOAD_LIMITS: FileLimits = FileLimits {
    max_depth: 6,
    max_files: 500,
    max_reported: 0,
};

#[tool_router(router = read_router)]
impl Tools {
    #[tool(
        description = "List the available skills: name, description and where to read more. Optionally filter by a word in the name or description."
    )]
    async fn list_skills(&self, Parameters(args): Parameters<ListArgs>) -> Answer {
        let query = args.query.map(|q| q.to_lowercase()).filter(|q| !q.is_empty());
        let catalog = self.0.tenant.snapshot()?;
        let skills: Vec<Value> = catalog
            .enabled()
            .filter(|s| {
                query.as_ref().is_none_or(|q| {
                    s.name().to_lowercase().contains(q.as_str())
                        || s.metadata.description.to_lowercase().contains(q.as_str())
                })
            })
            .map(|s| {
                json!({
                    "name": s.name(),
                    "description": s.metadata.description,
                    "source": s.source,
                    "uri": super::uri::file(s.name(), SKILL_FILE),
                    "read_with": {"tool": "load_skill", "arguments": {"name": s.name()}},
                })
            })
            .collect();
        Ok(CallToolResult::structured(json!({"skills": skills})))
    }

    /// The tenant's enabled skills that best match the query, each with its
    /// `skill://` URI and how to read it.
    #[tool(
        description = "Find the skills that best match a task described in words (full-text over names, descriptions and instructions), best first; follow with load_skill."
    )]
    async fn search_skills(&self, Parameters(args): Parameters<SearchArgs>) -> Answer {
        let limit = match args.limit {
            None => 10,
            Some(n) if (1..=SEARCH_MAX).contains(&n) => n,
            Some(_) => {
                return Err(Failure(ApiError::bad_request(format!(
                    "`limit` takes a whole number from 1 to {SEARCH_MAX}"
                ))));
            }
        };
        let hits = self.0.tenant.search(&args.query, limit as usize).await?;
        let results: Vec<Value> = hits
            .iter()
            .map(|hit| {
                json!({
                    "name": hit.name,
                    "description": hit.description,
                    "source": hit.source,
                    "path": hit.path,
                    "score": hit.score,
                    "uri": super::uri::file(&hit.name, SKILL_FILE),
                    "read_with": {"tool": "load_skill", "arguments": {"name": hit.name}},
                })
            })
            .collect();
        Ok(CallToolResult::structured(json!({"results": results})))
    }

    /// The SKILL.md once, as text, and the skill's other files in the
    /// structured content; skillstore's own `.skillstore/` is not offered.
    #[tool(description = "Read a skill's SKILL.md (its instructions) and the list of its other files.")]
    async fn load_skill(&self, Parameters(NameArgs { name }): Parameters<NameArgs>) -> Answer {
        let catalog = self.0.tenant.snapshot()?;
        let text = catalog.read_skill(&name).await?;
        let listed = catalog.skill_files(&name, LOAD_LIMITS).await?;
        let others: Vec<String> = listed
            .relatives()
            .into_iter()
            .filter(|f| f != SKILL_FILE && !is_reserved(f))
            .collect();
        let text = String::from_utf8_lossy(&text).into_owned();
        let mut result = CallToolResult::structured(json!({
            "name": name,
            "files": others,
            "files_truncated": listed.truncated,
        }));
        let listing = if others.is_empty() {
            String::new()
        } else {
            format!(
                "\n\n---\nOther files of this skill (read them with read_skill_file): {}",
                others.join(", ")
            )
        };
        result.content = vec![ContentBlock::text(format!("{text}{listing}"))];
        Ok(result)
    }

    /// The file once, as text or as a base64 blob (see [`super::content`]);
    /// the structured content says which.
    #[tool(
        description = "Read a file of a skill, by a path relative to the skill's directory (such as references/forms.md)."
    )]
    async fn read_skill_file(&self, Parameters(FileArgs { name, path }): Parameters<FileArgs>) -> Answer {
        let catalog = self.0.tenant.snapshot()?;
        let bytes = catalog.read_file(&name, &path).await?;
        let encoded = super::content::encode(&bytes);
        let mut result = CallToolResult::structured(json!({
            "name": name,
            "path": path,
            "encoding": encoded.name(),
            "size": bytes.len(),
        }));
        drop(bytes);
        result.content = vec![match encoded {
            Encoded::Text(text) => ContentBlock::text(text),
            Encoded::Blob(blob) => ContentBlock::resource(
                ResourceContents::blob(blob, super::uri::file(&name, &path))
                    .with_mime_type(crate::http::content_type_of(&path)),
            ),
        }];
        Ok(result)
    }
}

/// What a write tool answers: the recorded change.
fn changed(caller: &Caller, name: &str, change: skillstore::Change) -> Answer {
    caller.tenant.written();
    let files: Vec<&str> = change.record.files.iter().map(|f| f.path.as_str()).collect();
    Ok(CallToolResult::structured(json!({
        "action": change.record.action,
        "skill": name,
        "files": files,
        "history_id": change.record.id,
        "warnings": change.warnings,
    })))
}

#[tool_router(router = write_router)]
impl Tools {
    #[tool(
        description = "Create a new skill from a complete SKILL.md (YAML frontmatter with name and description, then Markdown)."
    )]
    async fn create_skill(&self, Parameters(CreateArgs { name, content }): Parameters<CreateArgs>) -> Answer {
        let change = self.0.tenant.editor()?.create(&name, content).await?;
        changed(&self.0, &name, change)
    }

    #[tool(
        description = "Replace text in a file of a skill (SKILL.md by default); the text must occur exactly `count` times (default 1)."
    )]
    async fn patch_skill(&self, Parameters(args): Parameters<PatchArgs>) -> Answer {
        let editor = self.0.tenant.editor()?;
        let mut patch = Patch::new(&args.find, &args.replace);
        if let Some(file) = args.file {
            patch.file = file;
        }
        if let Some(count) = args.count {
            patch.count = count;
        }
        let change = editor.patch_with_retry(&args.name, &patch, 3).await?;
        changed(&self.0, &args.name, change)
    }

    #[tool(
        description = "Write a supporting file of an existing skill (references/x.md, LICENSE.txt; never a path with a segment starting with a dot)."
    )]
    async fn write_skill_file(&self, Parameters(args): Parameters<WriteFileArgs>) -> Answer {
        let editor = self.0.tenant.editor()?;
        let change = editor.write_file(&args.name, &args.path, args.content, None).await?;
        changed(&self.0, &args.name, change)
    }

    #[tool(description = "Delete a skill from the writable source (recorded in its history).")]
    async fn delete_skill(&self, Parameters(NameArgs { name }): Parameters<NameArgs>) -> Answer {
        let change = self.0.tenant.editor()?.delete(&name, None).await?;
        changed(&self.0, &name, change)
    }

    #[tool(
        description = "List the recorded changes of a skill in the writable source, oldest first: id, time, action, author and which files were created, modified or removed (no contents)."
    )]
    async fn skill_history(&self, Parameters(NameArgs { name }): Parameters<NameArgs>) -> Answer {
        let editor = self.0.tenant.editor()?;
        let entries = self.0.tenant.history_entries(&editor, &name).await?;
        Ok(CallToolResult::structured(json!({"skill": name, "entries": entries})))
    }

    #[tool(
        description = "Restore every file of a skill to what it was right after history entry `id` (the rollback is recorded too)."
    )]
    async fn rollback_skill(&self, Parameters(RollbackArgs { name, id }): Parameters<RollbackArgs>) -> Answer {
        let editor = self.0.tenant.editor()?;
        self.0.tenant.check_history_entry(&editor, &name, id).await?;
        let change = editor.rollback(&name, id).await?;
        changed(&self.0, &name, change)
    }
}
