//! MCP (the `rmcp` SDK): tools, resources, a prompt and the Skills
//! extension (SEP-2640) over one tenant's catalog, served over stdio
//! (`skillstore mcp`) or streamable HTTP at `/mcp` (`skillstore serve`),
//! where the bearer token names the tenant as on every other route.

mod content;
mod params;
pub mod sessions;
mod tools;
mod uri;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult, CompletionInfo, CustomRequest,
    CustomResult, GetPromptRequestParams, GetPromptResponse, GetPromptResult, GetSkillRequestParams, GetSkillResult,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult,
    ListToolsResult, MetaObject, PaginatedRequestParams, Prompt, PromptArgument, PromptMessage,
    ReadResourceDirectoryRequestParams, ReadResourceDirectoryResult, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, Reference, Resource, ResourceContents, ResourceTemplate, Role, ServerCapabilities,
    ServerConfig, Skill as McpSkill, SkillFrontmatter, SkillResource, SkillResources, SubscriptionFilter,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, ServiceExt};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData as McpError, service::SubscriptionContext};
use skillstore::PromptStyle;
use skillstore::integrity::digest::is_reserved;

use crate::error::{ApiError, ServerError};
use crate::service::{Caller, Service};
use crate::settings::TokenHash;
use crate::tenant::Tenant;
use sessions::Sessions;

/// The `_meta` key of a skill entry listing what its directory holds that
/// is not among its files: `[{"path", "kind"}]`.
pub const LEFT_OUT_META: &str = "io.github.skillstore/leftOut";
/// The `_meta` key set to true when a skill's file list was cut short.
pub const TRUNCATED_META: &str = "io.github.skillstore/truncated";
/// The `_meta` key holding the Git commit a skill's source is read at,
/// for a source in a Git repository.
pub const COMMIT_META: &str = "io.github.skillstore/commit";
/// The `_meta` key holding a skill's digest (`sha256:HEX`, the skill
/// digest over all its files).
pub const DIGEST_META: &str = "io.github.skillstore/digest";

/// The resource template of a skill's files.
const FILE_TEMPLATE: &str = "skill://{name}/{+path}";

/// What the MCP prompt says reads the skills it lists at their paths in
/// the skill store.
pub const READ_HINT: &str = "the `load_skill` tool (by the skill's name) and the `read_skill_file` tool (by the skill's name and the file's path inside the skill's directory)";

/// The MCP server of one session: answers for the tenant its caller names.
#[derive(Clone)]
pub struct SkillsServer {
    service: Arc<Service>,
    /// The caller of a local session (stdio): no token.
    local: Option<Caller>,
    /// The token an HTTP session was opened with; later requests of the
    /// session must carry the same one.
    bound: Arc<OnceLock<Option<TokenHash>>>,
}

impl SkillsServer {
    /// A session over stdio, as the service's one (or first) tenant.
    pub fn local(service: Arc<Service>) -> Self {
        SkillsServer {
            local: Some(service.local_caller()),
            service,
            bound: Arc::new(OnceLock::new()),
        }
    }

    /// A session over HTTP: each request's token names the caller.
    pub fn http(service: Arc<Service>) -> Self {
        SkillsServer {
            service,
            local: None,
            bound: Arc::new(OnceLock::new()),
        }
    }

    fn caller_from(&self, extensions: &rmcp::model::Extensions) -> Result<Caller, McpError> {
        if let Some(local) = &self.local {
            return Ok(local.clone());
        }
        let caller = extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Caller>())
            .cloned()
            .ok_or_else(|| McpError::invalid_request("a valid bearer token is required", None))?;
        let bound = self.bound.get_or_init(|| caller.token);
        if *bound != caller.token {
            return Err(McpError::invalid_request("this session belongs to another token", None));
        }
        Ok(caller)
    }

    fn caller(&self, context: &RequestContext<RoleServer>) -> Result<Caller, McpError> {
        self.caller_from(&context.extensions)
    }

    fn page_size(&self) -> usize {
        self.service.limits.page_size
    }
}

/// An API error as a JSON-RPC error: not-found kinds as `-32002`, the
/// caller's mistakes as `-32602`, the rest as internal errors; the message
/// names the stable kind.
fn protocol_error(err: ApiError) -> McpError {
    let message = format!("{}: {}", err.kind, err.message);
    match err.status.as_u16() {
        404 => McpError::resource_not_found(message, None),
        400..=499 => McpError::invalid_params(message, None),
        _ => McpError::internal_error(message, None),
    }
}

fn offset(request: &Option<PaginatedRequestParams>) -> Result<usize, McpError> {
    match request.as_ref().and_then(|r| r.cursor.as_deref()) {
        None => Ok(0),
        Some(cursor) => cursor
            .parse::<usize>()
            .map_err(|_| McpError::invalid_params("invalid cursor", None)),
    }
}

fn next_cursor(start: usize, taken: usize, total: usize) -> Option<String> {
    (start + taken < total).then(|| (start + taken).to_string())
}

/// Checks a request to `/mcp` from its headers before the MCP layer sees
/// it (the browser checks, then the token), hands the caller to the
/// handler, and runs it under the session rules.
async fn door(State(sessions): State<Arc<Sessions>>, mut request: Request, next: Next) -> Response {
    let service = sessions.service();
    let checked = match service.browser.check(request.method(), request.headers(), true) {
        Ok(()) => service.authenticate(request.headers()).await,
        Err(err) => Err(err),
    };
    let caller = match checked {
        Ok(caller) => caller,
        Err(err) => {
            let has_body = crate::http::front::declares_body(request.headers());
            return crate::http::front::unread_body_closes(err.into_response(), has_body);
        }
    };
    request.extensions_mut().insert(caller.clone());
    service.loaded(&caller.tenant).await;
    sessions.run(&caller, request, next).await
}

/// `/mcp`: MCP over streamable HTTP, behind the browser checks, the token
/// check and the session rules ([`sessions`]).
pub fn http_router(service: Arc<Service>) -> Router {
    let limits = service.limits;
    let mut config = StreamableHttpServerConfig::default()
        .with_cancellation_token(service.shutdown.child_token())
        .with_max_request_body_bytes(usize::try_from(limits.max_body_bytes).unwrap_or(usize::MAX));
    if !service.is_open() {
        // Every request carries a token; the Host check guards open local servers.
        config = config.disable_allowed_hosts();
    }
    let mut manager = LocalSessionManager::default();
    // The session table closes idle sessions first; the manager's own
    // expiry is a backstop for a session whose table entry is gone.
    manager.session_config.keep_alive = Some(limits.mcp_session_idle + Duration::from_secs(30));
    manager.session_config.init_timeout = Some(limits.request_timeout);
    let manager = Arc::new(manager);
    let sessions = Sessions::start(Arc::clone(&manager), Arc::clone(&service));
    let factory_service = Arc::clone(&service);
    let mcp = StreamableHttpService::new(
        move || Ok(SkillsServer::http(Arc::clone(&factory_service))),
        manager,
        config,
    );
    Router::new()
        .route_service("/mcp", mcp)
        .layer(middleware::from_fn_with_state(sessions, door))
}

/// Serves one MCP session over stdin and stdout until the client closes it.
pub async fn serve_stdio(service: Arc<Service>) -> Result<(), ServerError> {
    let (lines, to_stdout) = tokio::sync::mpsc::channel::<String>(64);
    let writer = tokio::spawn(write_lines(to_stdout));
    let incoming = Box::pin(stdin_messages(lines.clone()));
    let outgoing = Box::pin(futures::sink::unfold(
        lines,
        |lines, message: rmcp::service::TxJsonRpcMessage<RoleServer>| async move {
            let line = serde_json::to_string(&message).map_err(std::io::Error::other)?;
            lines
                .send(line)
                .await
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
            Ok::<_, std::io::Error>(lines)
        },
    ));
    let running = SkillsServer::local(service)
        .serve((outgoing, incoming))
        .await
        .map_err(|e| ServerError::Listen(format!("cannot start the MCP session: {e}")))?;
    let ended = running
        .waiting()
        .await
        .map_err(|e| ServerError::Listen(format!("the MCP session failed: {e}")));
    let _ = writer.await;
    ended.map(|_| ())
}

/// The messages read from standard input, one JSON-RPC message a line. A
/// line that is not JSON is answered `-32700`, one that is JSON but no
/// message `-32600`, on standard output; neither ends the session.
fn stdin_messages(
    answers: tokio::sync::mpsc::Sender<String>,
) -> impl futures::Stream<Item = rmcp::service::RxJsonRpcMessage<RoleServer>> + Send {
    use tokio::io::AsyncBufReadExt;
    let lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    futures::stream::unfold((lines, answers), |(mut lines, answers)| async move {
        loop {
            let line = lines.next_line().await.ok().flatten()?;
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str(&line) {
                Ok(message) => return Some((message, (lines, answers))),
                Err(refused) => {
                    answers.send(params::unreadable_line(&line, &refused)).await.ok()?;
                }
            }
        }
    })
}

/// Writes each line to standard output as it comes, until every sender is gone.
async fn write_lines(mut lines: tokio::sync::mpsc::Receiver<String>) -> std::io::Result<()> {
    use tokio::io::AsyncWriteExt;
    let mut stdout = tokio::io::stdout();
    while let Some(mut line) = lines.recv().await {
        line.push('\n');
        stdout.write_all(line.as_bytes()).await?;
        stdout.flush().await?;
    }
    Ok(())
}

impl SkillsServer {
    /// The entry of the Skills extension for the skill `name`; its files
    /// leave out skillstore's own `.skillstore/`, as its digest does.
    /// With `confirm`, a checked skill is listed again first (see
    /// [`crate::tenant::View::manifest`]).
    async fn skill_entry(&self, tenant: &Tenant, name: &str, confirm: bool) -> Result<McpSkill, ApiError> {
        let view = tenant.view()?;
        let manifest = view.manifest(name, confirm).await?;
        let mut frontmatter = SkillFrontmatter::new(name, "");
        for (key, value) in &manifest.frontmatter {
            match (key.as_str(), value) {
                ("name", serde_json::Value::String(v)) => frontmatter.name = v.clone(),
                ("description", serde_json::Value::String(v)) => frontmatter.description = v.clone(),
                _ => {
                    frontmatter.extra.insert(key.clone(), value.clone());
                }
            }
        }
        let files = manifest
            .files
            .iter()
            .filter(|f| !is_reserved(&f.relative))
            .map(|f| SkillResource::new(uri::file(name, &f.relative), f.digest.clone(), f.size))
            .collect();
        let entry = McpSkill::new(
            uri::file(name, skillstore::SKILL_FILE),
            frontmatter,
            SkillResources::Files(files),
        );
        let winner = view.catalog.get(name);
        let commit = winner.and_then(|s| s.commit.clone());
        let digest = match winner.and_then(|s| s.digest.clone()) {
            Some(digest) => Some(digest.to_string()),
            None => manifest.digest.clone(),
        };
        if manifest.left_out.is_empty() && !manifest.truncated && commit.is_none() && digest.is_none() {
            return Ok(entry);
        }
        let mut meta = MetaObject::new();
        if let Some(digest) = digest {
            meta.0.insert(DIGEST_META.into(), serde_json::Value::String(digest));
        }
        if let Some(commit) = commit {
            meta.0
                .insert(COMMIT_META.into(), serde_json::Value::String(commit.to_string()));
        }
        // What the skill's directory holds beyond its files, by relative
        // path and stable kind, so a host can tell a client why.
        if !manifest.left_out.is_empty() || manifest.truncated {
            let left_out: Vec<serde_json::Value> = manifest
                .left_out
                .iter()
                .map(|l| serde_json::json!({"path": l.relative, "kind": l.kind.as_str()}))
                .collect();
            meta.0.insert(LEFT_OUT_META.into(), serde_json::Value::Array(left_out));
        }
        if manifest.truncated {
            meta.0.insert(TRUNCATED_META.into(), serde_json::Value::Bool(true));
        }
        Ok(entry.with_meta(meta))
    }

    async fn read(&self, caller: &Caller, uri_text: &str) -> Result<ReadResourceResult, McpError> {
        let (name, relative) = uri::parse(uri_text)
            .ok_or_else(|| McpError::invalid_params(format!("not a skill file URI: {uri_text}"), None))?;
        let catalog = caller.tenant.snapshot().map_err(protocol_error)?;
        let bytes = catalog
            .read_file(&name, &relative)
            .await
            .map_err(|e| protocol_error(e.into()))?;
        let mime = crate::http::content_type_of(&relative);
        let contents = match content::encode(&bytes) {
            content::Encoded::Text(text) => ResourceContents::text(text, uri_text),
            content::Encoded::Blob(blob) => ResourceContents::blob(blob, uri_text),
        };
        Ok(ReadResourceResult::new(vec![contents.with_mime_type(mime)]))
    }

    /// The entries of a directory of a skill, taken from the skill's files
    /// ([`skillstore::Catalog::skill_files`]): only what a confined read
    /// serves is listed (less skillstore's own `.skillstore/`), and a checked skill that lost or changed a
    /// checked file is refused as a whole.
    async fn directory(&self, caller: &Caller, uri_text: &str) -> Result<Vec<Resource>, McpError> {
        let not_a_directory = || McpError::invalid_params(format!("not a directory: {uri_text}"), None);
        let (name, relative) = uri::parse_dir(uri_text).ok_or_else(not_a_directory)?;
        let catalog = caller.tenant.snapshot().map_err(protocol_error)?;
        let skill = catalog.get(&name).ok_or_else(not_a_directory)?;
        if !relative.is_empty() {
            skill.dir().join(&relative).map_err(|_| not_a_directory())?;
        }
        let listed = catalog
            .skill_files(&name, skillstore::FileLimits::default())
            .await
            .map_err(|e| protocol_error(e.into()))?;
        let prefix = if relative.is_empty() {
            String::new()
        } else {
            format!("{relative}/")
        };
        let mut entries: std::collections::BTreeMap<&str, Option<u64>> = std::collections::BTreeMap::new();
        for file in listed.files.iter().filter(|f| !is_reserved(&f.relative)) {
            let Some(rest) = file.relative.strip_prefix(&prefix) else {
                continue;
            };
            match rest.split_once('/') {
                Some((dir, _)) => entries.entry(dir).or_insert(None),
                None => entries.entry(rest).or_insert(Some(file.size)),
            };
        }
        if entries.is_empty() && !relative.is_empty() {
            return Err(not_a_directory());
        }
        Ok(entries
            .into_iter()
            .map(|(entry, size)| {
                let child = format!("{prefix}{entry}");
                match size {
                    Some(size) => Resource::new(uri::file(&name, &child), entry.to_owned())
                        .with_mime_type(crate::http::content_type_of(&child))
                        .with_size(size),
                    None => Resource::new(uri::dir(&name, &child), entry.to_owned())
                        .with_mime_type(rmcp::model::DIRECTORY_MIME_TYPE),
                }
            })
            .collect())
    }

    /// Sends `notifications/resources/list_changed` on `peer` each time the
    /// tenant's skills change, until the session or the server ends.
    fn watch_changes<F, Fut>(&self, tenant: &Tenant, mut notify: F)
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = bool> + Send,
    {
        let mut changes = tenant.changes();
        changes.mark_unchanged();
        let shutdown = self.service.shutdown.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = changes.changed() => {
                        if changed.is_err() || !notify().await {
                            break;
                        }
                    }
                    () = shutdown.cancelled() => break,
                }
            }
        });
    }
}

impl ServerHandler for SkillsServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_resources_list_changed()
                .enable_prompts()
                .enable_completions()
                .enable_skills_with_directory_read()
                .build(),
        )
        .with_server_info(Implementation::new("skillstore", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Agent Skills: call list_skills to see what is available, load_skill to read one, read_skill_file for the files it points to.",
        )
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let Ok(caller) = self.caller_from(&context.extensions) else {
            return;
        };
        let peer = context.peer.clone();
        self.watch_changes(&caller.tenant, move || {
            let peer = peer.clone();
            async move { peer.notify_resource_list_changed().await.is_ok() }
        });
    }

    fn accepted_subscription_filter(&self, requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
        (requested.resources_list_changed == Some(true))
            .then(|| SubscriptionFilter::builder().resources_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        let caller = self.caller(context.request_context())?;
        let mut changes = caller.tenant.changes();
        changes.mark_unchanged();
        loop {
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() || context.sink().notify_resource_list_changed().await.is_err() {
                        return Ok(());
                    }
                }
                () = context.cancelled() => return Ok(()),
                () = self.service.shutdown.cancelled() => return Ok(()),
            }
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let caller = self.caller(&context)?;
        Ok(ListToolsResult::with_all_items(tools::available(&caller)))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let caller = self.caller(&context)?;
        tools::call(caller, request, context).await
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let caller = self.caller(&context)?;
        let catalog = caller.tenant.snapshot().map_err(protocol_error)?;
        let start = offset(&request)?;
        let enabled: Vec<&skillstore::Skill> = catalog.enabled().collect();
        let page: Vec<Resource> = enabled
            .iter()
            .skip(start)
            .take(self.page_size())
            .map(|skill| {
                Resource::new(uri::file(skill.name(), skillstore::SKILL_FILE), skill.name())
                    .with_description(skill.metadata.description.clone())
                    .with_mime_type("text/markdown")
            })
            .collect();
        let mut result = ListResourcesResult::with_all_items(page);
        result.next_cursor = next_cursor(start, result.resources.len(), enabled.len());
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        self.caller(&context)?;
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(FILE_TEMPLATE, "skill-file")
                .with_description("A file of a skill, by the skill's name and the file's path inside its directory"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let caller = self.caller(&context)?;
        self.read(&caller, &request.uri).await.map(Into::into)
    }

    async fn read_resource_directory(
        &self,
        request: ReadResourceDirectoryRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceDirectoryResult, McpError> {
        let caller = self.caller(&context)?;
        let children = self.directory(&caller, &request.uri).await?;
        let start = match request.cursor.as_deref() {
            None => 0,
            Some(c) => c
                .parse::<usize>()
                .map_err(|_| McpError::invalid_params("invalid cursor", None))?,
        };
        let total = children.len();
        let page: Vec<Resource> = children.into_iter().skip(start).take(self.page_size()).collect();
        let mut result = ReadResourceDirectoryResult::with_all_items(page);
        result.next_cursor = next_cursor(start, result.resources.len(), total);
        Ok(result)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        let caller = self.caller(&context)?;
        let typed = request.argument.value.as_str();
        let template = |r: &Reference| matches!(r, Reference::Resource(t) if t.uri == FILE_TEMPLATE);
        let values: Vec<String> = match (&request.r#ref, request.argument.name.as_str()) {
            (Reference::Prompt(p), "style") if p.name == "skills" => {
                ["markdown", "xml"].into_iter().map(str::to_owned).collect()
            }
            (r, "name") if template(r) => {
                let catalog = caller.tenant.snapshot().map_err(protocol_error)?;
                catalog.enabled().map(|s| s.name().to_owned()).collect()
            }
            (r, "path") if template(r) => {
                let name = request
                    .context
                    .as_ref()
                    .and_then(|c| c.arguments.as_ref())
                    .and_then(|a| a.get("name"));
                let catalog = caller.tenant.snapshot().map_err(protocol_error)?;
                match name {
                    Some(name) if catalog.enabled().any(|s| s.name() == name) => catalog
                        .skill_files(name, skillstore::FileLimits::default())
                        .await
                        .map_err(|e| protocol_error(e.into()))?
                        .files
                        .into_iter()
                        .map(|f| f.relative)
                        .filter(|f| !is_reserved(f))
                        .collect(),
                    _ => Vec::new(),
                }
            }
            _ => Vec::new(),
        };
        let mut values: Vec<String> = values.into_iter().filter(|v| v.starts_with(typed)).collect();
        let total = values.len();
        values.truncate(CompletionInfo::MAX_VALUES);
        let more = total > values.len();
        let completion = CompletionInfo::with_pagination(values, u32::try_from(total).ok(), more)
            .map_err(|e| McpError::internal_error(e, None))?;
        Ok(CompleteResult::new(completion))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        self.caller(&context)?;
        let mut style = PromptArgument::new("style");
        style.description = Some("markdown (default) or xml".into());
        let mut budget = PromptArgument::new("max_chars");
        budget.description = Some("the most characters the section may have".into());
        Ok(ListPromptsResult::with_all_items(vec![Prompt::new(
            "skills",
            Some("The system-prompt section listing the available skills"),
            Some(vec![style, budget]),
        )]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let caller = self.caller(&context)?;
        if request.name != "skills" {
            return Err(McpError::invalid_params(
                format!("no prompt named `{}`", request.name),
                None,
            ));
        }
        let arguments = request.arguments.unwrap_or_default();
        let mut options = caller.tenant.prompt_options().clone();
        options.read_hint = Some(READ_HINT.to_owned());
        options.search_hint = Some(crate::tenant::MCP_SEARCH_HINT.to_owned());
        if let Some(style) = arguments.get("style").and_then(|v| v.as_str()) {
            options.style = style
                .parse::<PromptStyle>()
                .map_err(|e| protocol_error(ApiError::from(e)))?;
        }
        if let Some(value) = arguments.get("max_chars") {
            let parsed = match value {
                serde_json::Value::Number(n) => n.as_u64(),
                serde_json::Value::String(s) => s.parse::<u64>().ok(),
                _ => None,
            };
            let max = parsed.ok_or_else(|| McpError::invalid_params("max_chars takes a whole number", None))?;
            options.max_chars = Some(usize::try_from(max).unwrap_or(usize::MAX));
        }
        let view = caller.tenant.view().map_err(protocol_error)?;
        let text = String::from_utf8_lossy(&view.prompt(&options).map_err(protocol_error)?.body).into_owned();
        Ok(GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
            .with_description("The available skills")
            .into())
    }

    async fn list_skills(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, McpError> {
        let caller = self.caller(&context)?;
        let catalog = caller.tenant.snapshot().map_err(protocol_error)?;
        let start = offset(&request)?;
        let names: Vec<String> = catalog.enabled().map(|s| s.name().to_owned()).collect();
        let mut page = Vec::new();
        let mut taken = 0;
        for name in names.iter().skip(start).take(self.page_size()) {
            taken += 1;
            // A skill whose directory cannot be listed now is left off this
            // page; the others are still listed.
            match self.skill_entry(&caller.tenant, name, false).await {
                Ok(entry) => page.push(entry),
                Err(err) => tracing::debug!(skill = %name, kind = %err.kind, "a skill left off skills/list"),
            }
        }
        let mut result = ListSkillsResult::with_all_items(page);
        result.next_cursor = next_cursor(start, taken, names.len());
        Ok(result)
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        Err(params::unread_request(&request.method, request.params))
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, McpError> {
        let caller = self.caller(&context)?;
        let unknown = || McpError::invalid_params(format!("unknown skill {}", request.uri), None);
        let (name, relative) = uri::parse(&request.uri).ok_or_else(unknown)?;
        if relative != skillstore::SKILL_FILE {
            return Err(unknown());
        }
        let catalog = caller.tenant.snapshot().map_err(protocol_error)?;
        if !catalog.get(&name).is_some_and(|s| s.enabled) {
            return Err(unknown());
        }
        let entry = self
            .skill_entry(&caller.tenant, &name, true)
            .await
            .map_err(protocol_error)?;
        Ok(GetSkillResult::new(entry))
    }
}
