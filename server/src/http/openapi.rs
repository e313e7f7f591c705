//! `GET /openapi.json`: the HTTP API described as OpenAPI 3.1, so clients
//! can be generated and requests checked against it. It describes every
//! route of [`super::ROUTES`] (every route but `/mcp`), each with exactly
//! the methods the router answers there; `server/tests/it/http.rs` holds the
//! two equal against the served router, and `scripts/test.sh` validates the
//! served document with `openapi-spec-validator`.

use axum::Json;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

fn error(description: &str) -> Value {
    json!({"description": description, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
}

fn errors(codes: &[(&str, &str)]) -> serde_json::Map<String, Value> {
    codes
        .iter()
        .map(|(code, what)| ((*code).to_owned(), error(what)))
        .collect()
}

fn with(mut responses: serde_json::Map<String, Value>, code: &str, answer: Value) -> Value {
    responses.insert(code.to_owned(), answer);
    Value::Object(responses)
}

/// The document.
pub fn document() -> Value {
    let name = json!({"name": "name", "in": "path", "required": true, "schema": {"type": "string"}});
    let path = json!({"name": "path", "in": "path", "required": true,
        "description": "a path inside the skill's directory, e.g. references/forms.md",
        "schema": {"type": "string"}});
    let if_none_match =
        json!({"name": "If-None-Match", "in": "header", "required": false, "schema": {"type": "string"}});
    let if_match = json!({"name": "If-Match", "in": "header", "required": false,
        "description": "the ETag of the bytes being replaced; 412 when it is not the current one",
        "schema": {"type": "string"}});
    let read_errors = [
        ("304", "not modified (If-None-Match)"),
        ("400", "a bad name or path"),
        ("401", "no or unknown token"),
        ("404", "no such skill or file"),
        (
            "409",
            "the skill changed since its lock or signature was checked (changed_since_checked); a refresh checks it again",
        ),
        ("413", "the file is over the read limit"),
        ("503", "a source cannot be reached"),
    ];
    let write_errors = [
        ("400", "a bad name, path or body, an invalid skill, blocked content"),
        ("401", "no or unknown token"),
        ("403", "a read token, or a read-only source"),
        (
            "409",
            "the skill exists, or a patch found its text the wrong number of times",
        ),
        ("412", "If-Match is not the current version"),
        ("413", "the body is over the limit"),
        ("503", "a source cannot be reached"),
    ];
    let change = json!({"description": "the change, with the new tags",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Change"}}}});
    let tenant = json!({"name": "tenant", "in": "path", "required": true, "schema": {"type": "string"}});
    let artifact = json!({"name": "artifact", "in": "path", "required": true,
        "description": "NAME.zip: the skill's rooted archive", "schema": {"type": "string"}});
    let discovery_errors = [
        ("304", "not modified (If-None-Match)"),
        ("404", "no such skill or artifact, or discovery is not public here"),
        ("409", "the skill changed since its lock or signature was checked"),
        ("503", "a source cannot be reached"),
    ];
    let discovery = |summary: &str, media: &str, schema: Value| {
        json!({"summary": summary, "security": [], "parameters": [if_none_match],
            "responses": with(errors(&discovery_errors), "200",
                json!({"description": summary, "content": {(media): {"schema": schema}}}))})
    };
    let discovery_index = discovery(
        "The Agent Skills discovery index (schema 0.2.0) of the open server or of a tenant with `discovery: public`",
        "application/json",
        json!({"type": "object"}),
    );
    let discovery_archive = discovery(
        "A skill as a rooted zip archive",
        "application/zip",
        json!({"type": "string", "format": "binary"}),
    );
    let discovery_skill_md = discovery("A skill's SKILL.md", "text/markdown", json!({"type": "string"}));
    let text = |description: &str| json!({"description": description, "content": {"text/plain": {"schema": {"type": "string"}}}});
    let object = |description: &str| json!({"description": description, "content": {"application/json": {"schema": {"type": "object"}}}});
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "skillstore",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Agent Skills from layered sources, per tenant. A bearer token names the tenant and its scope (read, or read and write)."
        },
        "security": [{"bearer": []}],
        "paths": {
            "/v1/skills": {"get": {
                "summary": "The merged catalog (the `list --json` object)",
                "parameters": [if_none_match],
                "responses": with(errors(&read_errors), "200", object("skills and diagnostics"))
            }},
            "/v1/skills/{name}": {
                "parameters": [name],
                "get": {"summary": "One skill with its provenance (the `show --json` object)",
                    "parameters": [if_none_match],
                    "responses": with(errors(&read_errors), "200", object("the skill"))},
                "put": {"summary": "Create the skill (201) or replace its SKILL.md (200)",
                    "parameters": [if_match, {"name": "If-None-Match", "in": "header", "required": false,
                        "description": "`*`: create only", "schema": {"type": "string"}}],
                    "requestBody": {"required": true, "content": {"text/markdown": {"schema": {"type": "string"}}}},
                    "responses": with(errors(&write_errors), "200", change.clone())},
                "patch": {"summary": "Find and replace in SKILL.md or a supporting file",
                    "parameters": [if_match],
                    "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Patch"}}}},
                    "responses": with(errors(&write_errors), "200", change.clone())},
                "delete": {"summary": "Delete the skill",
                    "parameters": [if_match],
                    "responses": with(errors(&write_errors), "200", change.clone())}
            },
            "/v1/skills/{name}/files/{path}": {
                "parameters": [name, path],
                "get": {"summary": "A file of the winning skill, confined to its directory",
                    "parameters": [if_none_match],
                    "responses": with(errors(&read_errors), "200", json!({"description": "the file's bytes",
                        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}))},
                "put": {"summary": "Write a supporting file (references/x.md, LICENSE.txt; never a hidden path)",
                    "parameters": [if_match],
                    "requestBody": {"required": true, "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}},
                    "responses": with(errors(&write_errors), "200", change.clone())},
                "delete": {"summary": "Remove a supporting file",
                    "parameters": [if_match],
                    "responses": with(errors(&write_errors), "200", change.clone())}
            },
            "/v1/skills/{name}/history": {"get": {
                "summary": "The skill's recorded changes in the writable source, oldest first (no contents, no versions)",
                "parameters": [name],
                "responses": with(errors(&read_errors), "200", json!({"description": "the entries",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/History"}}}}))
            }},
            "/v1/skills/{name}/rollback": {"post": {
                "summary": "Restore every file the history mentions to what it was right after entry `id`",
                "parameters": [name],
                "requestBody": {"required": true, "content": {"application/json": {"schema": {
                    "type": "object", "required": ["id"], "additionalProperties": false,
                    "properties": {"id": {"type": "integer", "minimum": 1}}}}}},
                "responses": with(errors(&write_errors), "200", change.clone())
            }},
            "/v1/archives": {"post": {
                "summary": "Install a .skill or .zip archive through every archive guard and the editor",
                "parameters": [{"name": "replace", "in": "query", "required": false, "schema": {"type": "boolean"}}],
                "requestBody": {"required": true, "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}}}},
                "responses": with(errors(&write_errors), "201", change)
            }},
            "/v1/prompt": {"get": {
                "summary": "The catalog rendered for a system prompt",
                "parameters": [
                    {"name": "style", "in": "query", "required": false, "schema": {"enum": ["markdown", "xml"]}},
                    {"name": "max_chars", "in": "query", "required": false, "schema": {"type": "integer", "minimum": 0}},
                    if_none_match
                ],
                "responses": with(errors(&read_errors), "200", text("the rendered section"))
            }},
            "/v1/search": {"get": {
                "summary": "The caller's enabled skills that best match the words of `q`, best first",
                "parameters": [
                    {"name": "q", "in": "query", "required": true, "schema": {"type": "string"}},
                    {"name": "limit", "in": "query", "required": false,
                        "schema": {"type": "integer", "minimum": 0, "maximum": 1000, "default": 10}}
                ],
                "responses": with(errors(&[
                    ("400", "no `q`, or a bad `limit`"),
                    ("401", "no or unknown token"),
                    ("503", "a source cannot be reached"),
                ]), "200", json!({"description": "the hits",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SearchResults"}}}}))
            }},
            "/v1/refresh": {"post": {
                "summary": "Refresh the caller's tenant now",
                "responses": with(errors(&[("401", "no or unknown token")]), "200", object("the refreshed catalog's size"))
            }},
            "/v1/hooks/git": {"post": {
                "summary": "A Git push event (GitHub, Gitea, GitLab) refreshes the loaded tenants whose Git mounts follow its repository and reference",
                "description": "Signed, not bearer-authenticated: X-Hub-Signature-256 (GitHub) or X-Gitea-Signature (HMAC-SHA256 of the raw body), or X-Gitlab-Token, against the server file's hooks.git_secrets. Only push events are acted on; the body is at most 1 MiB.",
                "security": [],
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object"}}}},
                "responses": with(errors(&[
                    ("400", "no event header, or a push naming no reference or repository"),
                    ("401", "unsigned, or not signed with a configured secret"),
                    ("404", "webhooks are off, or no mount follows that repository and reference"),
                    ("413", "the body is larger than 1 MiB"),
                ]), "200", object("how many loaded tenants were refreshed"))
            }},
            "/healthz": {"get": {"summary": "Liveness", "security": [], "responses": {"200": object("ok")}}},
            "/readyz": {"get": {"summary": "Every tenant's first load is done", "security": [],
                "responses": {"200": object("ready"), "503": object("still loading")}}},
            "/metrics": {"get": {
                "summary": "Prometheus text: requests by route and status, latency, connections, MCP sessions, catalog size, refreshes, storage calls",
                "description": "Answers a token listed under `metrics_tokens` only; a tenant's token is refused.",
                "responses": with(errors(&[("401", "no or unknown token"), ("403", "not a metrics token")]),
                    "200", json!({"description": "the metrics",
                        "content": {"text/plain": {"schema": {"type": "string"}}}}))
            }},
            "/openapi.json": {"get": {"summary": "This document", "security": [],
                "responses": {"200": object("the OpenAPI document")}}},
            "/.well-known/agent-skills/index.json": {"get": discovery_index.clone()},
            "/.well-known/agent-skills/{artifact}": {"parameters": [artifact.clone()], "get": discovery_archive.clone()},
            "/.well-known/agent-skills/{name}/SKILL.md": {"parameters": [name.clone()], "get": discovery_skill_md.clone()},
            "/t/{tenant}/.well-known/agent-skills/index.json": {"parameters": [tenant.clone()], "get": discovery_index},
            "/t/{tenant}/.well-known/agent-skills/{artifact}": {"parameters": [tenant.clone(), artifact],
                "get": discovery_archive},
            "/t/{tenant}/.well-known/agent-skills/{name}/SKILL.md": {"parameters": [tenant, name],
                "get": discovery_skill_md}
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {"type": "object", "required": ["error"], "properties": {"error": {
                    "type": "object", "required": ["kind", "message"],
                    "properties": {"kind": {"type": "string", "description": "a stable snake_case kind"},
                                   "message": {"type": "string"}}}}},
                "Patch": {"type": "object", "required": ["find", "replace"], "additionalProperties": false, "properties": {
                    "file": {"type": "string", "description": "a supporting file instead of SKILL.md"},
                    "find": {"type": "string"}, "replace": {"type": "string"},
                    "count": {"type": "integer", "minimum": 1, "description": "how many times `find` must occur (default 1)"}}},
                "History": {"type": "object", "properties": {
                    "skill": {"type": "string"},
                    "entries": {"type": "array", "items": {"type": "object", "properties": {
                        "id": {"type": "integer"}, "time": {"type": "string", "format": "date-time"},
                        "action": {"type": "string"}, "author": {"type": "string"},
                        "rollback_to": {"type": "integer"},
                        "files": {"type": "array", "items": {"type": "object", "properties": {
                            "path": {"type": "string"},
                            "event": {"enum": ["created", "modified", "removed"]}}}}}}}}},
                "SearchResults": {"type": "object", "required": ["results"], "properties": {
                    "results": {"type": "array", "items": {"type": "object", "properties": {
                        "name": {"type": "string"}, "description": {"type": "string"},
                        "source": {"type": "string"}, "path": {"type": "string"},
                        "score": {"type": "number"}}}}}},
                "Change": {"type": "object", "properties": {
                    "action": {"type": "string"}, "skill": {"type": "string"}, "history_id": {"type": "integer"},
                    "files": {"type": "array", "items": {"type": "object", "properties": {
                        "path": {"type": "string"}, "etag": {"type": ["string", "null"]}}}},
                    "warnings": {"type": "array", "items": {"type": "object"}}}}
            }
        }
    })
}

/// `GET /openapi.json`.
pub async fn serve() -> Response {
    Json(document()).into_response()
}
