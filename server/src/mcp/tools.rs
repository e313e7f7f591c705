//! The MCP tools, for hosts that do not speak the Skills extension: read
//! tools for every caller, write tools where the tenant has a writable
//! source and the token may write. A failure is a tool error whose text
//! starts with the stable kind; the session goes on.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, ResourceContents, Tool};
use serde_json::{Value, json};
use skillstore::{FileLimits, Patch, SKILL_FILE};

use super::content::Encoded;

use crate::error::ApiError;
use crate::service::Caller;
use crate::settings::Scope;

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => unreachable!("schemas are objects"),
    }
}

fn tool(name: &'static str, description: &'static str, input: Value) -> Tool {
    Tool::new(name, description, schema(input))
}

fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

/// The tools `caller` may use.
pub fn available(caller: &Caller) -> Vec<Tool> {
    let mut tools = vec![
        tool(
            "list_skills",
            "List the available skills: name, description and where to read more. Optionally filter by a word in the name or description.",
            json!({"type": "object", "properties": {"query": string("Only skills whose name or description contains this text (case-insensitive)")}}),
        ),
        tool(
            "search_skills",
            "Find the skills that best match a task described in words (full-text over names, descriptions and instructions), best first; follow with load_skill.",
            json!({"type": "object", "properties": {"query": string("What the task is about, in words"), "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "The most results (default 10)"}}, "required": ["query"]}),
        ),
        tool(
            "load_skill",
            "Read a skill's SKILL.md (its instructions) and the list of its other files.",
            json!({"type": "object", "properties": {"name": string("The skill's name")}, "required": ["name"]}),
        ),
        tool(
            "read_skill_file",
            "Read a file of a skill, by a path relative to the skill's directory (such as references/forms.md).",
            json!({"type": "object", "properties": {"name": string("The skill's name"), "path": string("The file's path inside the skill's directory")}, "required": ["name", "path"]}),
        ),
    ];
    if may_write(caller) {
        tools.extend([
            tool(
                "create_skill",
                "Create a new skill from a complete SKILL.md (YAML frontmatter with name and description, then Markdown).",
                json!({"type": "object", "properties": {"name": string("The skill's name (lowercase letters, digits, hyphens)"), "content": string("The whole SKILL.md")}, "required": ["name", "content"]}),
            ),
            tool(
                "patch_skill",
                "Replace text in a file of a skill (SKILL.md by default); the text must occur exactly `count` times (default 1).",
                json!({"type": "object", "properties": {"name": string("The skill's name"), "find": string("The exact text to replace"), "replace": string("The new text"), "file": string("The file, relative to the skill's directory (default SKILL.md)"), "count": {"type": "integer", "minimum": 1, "description": "How many times the text occurs"}}, "required": ["name", "find", "replace"]}),
            ),
            tool(
                "write_skill_file",
                "Write a supporting file of an existing skill (references/x.md, LICENSE.txt; never a path with a segment starting with a dot).",
                json!({"type": "object", "properties": {"name": string("The skill's name"), "path": string("The file's path inside the skill's directory"), "content": string("The file's text")}, "required": ["name", "path", "content"]}),
            ),
            tool(
                "delete_skill",
                "Delete a skill from the writable source (recorded in its history).",
                json!({"type": "object", "properties": {"name": string("The skill's name")}, "required": ["name"]}),
            ),
            tool(
                "skill_history",
                "List the recorded changes of a skill in the writable source, oldest first: id, time, action, author and which files were created, modified or removed (no contents).",
                json!({"type": "object", "properties": {"name": string("The skill's name")}, "required": ["name"]}),
            ),
            tool(
                "rollback_skill",
                "Restore every file of a skill to what it was right after history entry `id` (the rollback is recorded too).",
                json!({"type": "object", "properties": {"name": string("The skill's name"), "id": {"type": "integer", "minimum": 1, "description": "The history entry to restore"}}, "required": ["name", "id"]}),
            ),
        ]);
    }
    tools
}

fn may_write(caller: &Caller) -> bool {
    caller.scope == Scope::Write && caller.tenant.namespace().sources().iter().any(|s| s.is_writable())
}

fn failure(err: ApiError) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!("{}: {}", err.kind, err.message))])
}

fn argument<'a>(arguments: &'a JsonObject, key: &str) -> Result<&'a str, ApiError> {
    arguments
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::bad_request(format!("the argument `{key}` (a string) is required")))
}

/// Runs the tool `name`; an unknown tool is a protocol error, any other
/// failure a tool error.
pub async fn call(caller: &Caller, name: &str, arguments: &JsonObject) -> Result<CallToolResult, McpError> {
    let result = match name {
        "list_skills" => list(caller, arguments),
        "search_skills" => search(caller, arguments).await,
        "load_skill" => load(caller, arguments).await,
        "read_skill_file" => read_file(caller, arguments).await,
        "create_skill" | "patch_skill" | "write_skill_file" | "delete_skill" | "skill_history" | "rollback_skill" => {
            if !may_write(caller) {
                return Err(McpError::invalid_params(format!("no tool named `{name}`"), None));
            }
            write(caller, name, arguments).await
        }
        other => return Err(McpError::invalid_params(format!("no tool named `{other}`"), None)),
    };
    Ok(result.unwrap_or_else(failure))
}

fn list(caller: &Caller, arguments: &JsonObject) -> Result<CallToolResult, ApiError> {
    let query = arguments
        .get("query")
        .and_then(Value::as_str)
        .map(str::to_lowercase)
        .filter(|q| !q.is_empty());
    let catalog = caller.tenant.snapshot()?;
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

/// The most results `search_skills` returns.
const SEARCH_MAX: u64 = 50;

/// `search_skills`: the tenant's enabled skills that best match the query,
/// each with its `skill://` URI and how to read it.
async fn search(caller: &Caller, arguments: &JsonObject) -> Result<CallToolResult, ApiError> {
    let query = argument(arguments, "query")?;
    let limit = match arguments.get("limit") {
        None | Some(Value::Null) => 10,
        Some(value) => value
            .as_u64()
            .filter(|n| (1..=SEARCH_MAX).contains(n))
            .ok_or_else(|| ApiError::bad_request(format!("`limit` takes a whole number from 1 to {SEARCH_MAX}")))?,
    };
    let hits = caller.tenant.search(query, limit as usize).await?;
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

/// How far `load_skill` lists a skill's other files.
const LOAD_LIMITS: FileLimits = FileLimits {
    max_depth: 6,
    max_files: 500,
    max_reported: 0,
};

/// `load_skill`: the SKILL.md once, as text, and the skill's other files
/// in the structured content.
async fn load(caller: &Caller, arguments: &JsonObject) -> Result<CallToolResult, ApiError> {
    let name = argument(arguments, "name")?;
    let catalog = caller.tenant.snapshot()?;
    let text = catalog.read_skill(name).await?;
    let listed = catalog.skill_files(name, LOAD_LIMITS).await?;
    let others: Vec<String> = listed.relatives().into_iter().filter(|f| f != SKILL_FILE).collect();
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

/// `read_skill_file`: the file once, as text or as a base64 blob (see
/// [`super::content`]); the structured content says which.
async fn read_file(caller: &Caller, arguments: &JsonObject) -> Result<CallToolResult, ApiError> {
    let name = argument(arguments, "name")?;
    let path = argument(arguments, "path")?;
    let catalog = caller.tenant.snapshot()?;
    let bytes = catalog.read_file(name, path).await?;
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
            ResourceContents::blob(blob, super::uri::file(name, path))
                .with_mime_type(crate::http::content_type_of(path)),
        ),
    }];
    Ok(result)
}

async fn write(caller: &Caller, tool: &str, arguments: &JsonObject) -> Result<CallToolResult, ApiError> {
    let name = argument(arguments, "name")?;
    let editor = caller.tenant.editor()?;
    let change = match tool {
        "skill_history" => {
            let entries = caller.tenant.history_entries(&editor, name).await?;
            return Ok(CallToolResult::structured(json!({"skill": name, "entries": entries})));
        }
        "rollback_skill" => {
            let id = arguments
                .get("id")
                .and_then(Value::as_u64)
                .ok_or_else(|| ApiError::bad_request("the argument `id` (a whole number) is required"))?;
            caller.tenant.check_history_entry(&editor, name, id).await?;
            editor.rollback(name, id).await?
        }
        "create_skill" => editor.create(name, argument(arguments, "content")?.to_owned()).await?,
        "patch_skill" => {
            let mut patch = Patch::new(argument(arguments, "find")?, argument(arguments, "replace")?);
            if let Some(file) = arguments.get("file").and_then(Value::as_str) {
                patch.file = file.to_owned();
            }
            if let Some(count) = arguments.get("count") {
                patch.count = count
                    .as_u64()
                    .and_then(|c| usize::try_from(c).ok())
                    .ok_or_else(|| ApiError::bad_request("`count` takes a whole number"))?;
            }
            editor.patch_with_retry(name, &patch, 3).await?
        }
        "write_skill_file" => {
            let path = argument(arguments, "path")?;
            editor
                .write_file(name, path, argument(arguments, "content")?.to_owned(), None)
                .await?
        }
        _ => editor.delete(name, None).await?,
    };
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
