//! Answers for requests rmcp could not read: a request for a method the
//! server implements whose parameters do not parse reaches the handler as
//! a custom request, and is answered `-32602` (invalid params) saying what
//! was wrong, never `-32601` (method not found); a line of stdio that is
//! not JSON is answered `-32700` (parse error).

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CompleteRequestParams, ErrorCode, GetPromptRequestParams, GetSkillRequestParams,
    InitializeRequestParams, PaginatedRequestParams, ReadResourceDirectoryRequestParams, ReadResourceRequestParams,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The error for a request of `method` that rmcp handed over unread:
/// invalid params for a method this server implements, with the reason
/// the parameters were refused; method not found otherwise.
pub fn unread_request(method: &str, params: Option<Value>) -> McpError {
    let params = params.unwrap_or(Value::Null);
    let problem = match method {
        "initialize" => problem::<InitializeRequestParams>(params),
        "skills/get" => problem::<GetSkillRequestParams>(params),
        "resources/read" => problem::<ReadResourceRequestParams>(params),
        "resources/directory/read" => problem::<ReadResourceDirectoryRequestParams>(params),
        "tools/call" => problem::<CallToolRequestParams>(params),
        "prompts/get" => problem::<GetPromptRequestParams>(params),
        "completion/complete" => problem::<CompleteRequestParams>(params),
        "skills/list" | "resources/list" | "resources/templates/list" | "tools/list" | "prompts/list" => {
            problem::<Option<PaginatedRequestParams>>(params)
        }
        _ => return McpError::new(ErrorCode::METHOD_NOT_FOUND, format!("method not found: {method}"), None),
    };
    McpError::invalid_params(format!("invalid params for {method}: {problem}"), None)
}

fn problem<T: DeserializeOwned>(params: Value) -> String {
    match serde_json::from_value::<T>(params) {
        Err(e) => e.to_string(),
        Ok(_) => "the parameters do not fit the method".to_owned(),
    }
}

/// The JSON-RPC answer to a line of stdio that is no message: `-32700`
/// when it is not JSON, `-32600` (invalid request) when it is JSON but not
/// a JSON-RPC message, with its id when it has one.
pub fn unreadable_line(line: &str, refused: &serde_json::Error) -> String {
    let (id, code, message) = match serde_json::from_str::<Value>(line) {
        Err(e) => (Value::Null, -32700, format!("parse error: {e}")),
        Ok(value) => (
            value.get("id").cloned().unwrap_or(Value::Null),
            -32600,
            format!("invalid request: {refused}"),
        ),
    };
    serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}
