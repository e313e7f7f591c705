//! The `skillstore` command: flags become a [`skillstore::Config`], the
//! library does the work, and this crate prints and picks the exit code.
//! Exit codes: 0 success (diagnostics allowed), 1 the command's own
//! failure, 2 bad usage, 3 done but a source was unavailable or stale (or
//! an audit log's chain did not verify).

mod archive;
mod audit;
mod commands;
mod completion;
mod config_check;
mod integrity;
mod list_json;
mod namespace;
mod publish;
mod release;
mod search;
mod serve;
mod shutdown;
mod skill;
mod sync;
mod terminal;
mod validate;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod manual;

// The catalog reads on blocking threads and parses on runtime threads; an
// allocator with cheap cross-thread frees keeps that from costing page
// faults and lock traffic. Built without transparent huge pages: a command
// that lives for milliseconds touches a few megabytes per thread, and a
// huge page is zeroed whole on its first touch.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The `--version` line: the release and the commit it was built from.
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("SKILLSTORE_COMMIT"), ")");

/// Store, layer and serve Agent Skills from directories, memory, S3, Git and discovery endpoints.
#[derive(Debug, Parser)]
#[command(name = "skillstore", version = VERSION, about, long_about = None)]
pub struct Args {
    #[command(flatten)]
    pub global: Global,
    /// Log lines on standard error as text or json (logs are on with
    /// RUST_LOG, and at info level for `serve`: one line per request).
    #[arg(long, global = true, help_heading = "Global options", value_enum, default_value_t = LogFormat::Text, env = "SKILLSTORE_LOG_FORMAT", hide_possible_values = true)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

/// How `list` prints the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ListFormat {
    /// One skill name a line.
    Names,
    /// Columns, descriptions fitted to the terminal.
    Table,
    /// One JSON object with skills and diagnostics.
    Json,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines, coloured only on a terminal.
    Text,
    /// One JSON object per line.
    Json,
}

/// Options every command takes.
#[derive(Debug, clap::Args)]
pub struct Global {
    /// Configuration file (default: ./skillstore.yaml when present and no --source is given).
    #[arg(long, global = true, help_heading = "Global options", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Mount a location into the namespace: a directory, s3://bucket[/prefix], memory:FILE.json, git+URL[@REF] or a discovery endpoint https://host[/path].
    #[arg(
        long = "mount",
        global = true,
        help_heading = "Global options",
        value_name = "VPATH=LOCATION"
    )]
    pub mounts: Vec<String>,
    /// A source of skills, lowest priority first; replaces the configuration's sources.
    #[arg(
        long = "source",
        global = true,
        help_heading = "Global options",
        value_name = "[LABEL=]VPATH"
    )]
    pub sources: Vec<String>,
    /// Let skills be written to the source of this name (repeatable; never the first of several).
    #[arg(
        long = "writable",
        global = true,
        help_heading = "Global options",
        value_name = "SOURCE",
        add = clap_complete::ArgValueCandidates::new(completion::source_labels)
    )]
    pub writable: Vec<String>,
    /// Do not read or write the local cache (cache.dir): no SKILL.md frontmatters kept by version (S3,
    /// Git, any deep listing), no search index kept between runs, discovery downloads held in memory
    /// only. Git repositories are still fetched into their own cache (SKILLSTORE_GIT_CACHE).
    #[arg(long, global = true, help_heading = "Global options")]
    pub no_cache: bool,
    /// Serve only the skills whose digests match the lock file, and refuse
    /// to run when a Git source resolved to another commit than it says
    /// (bare: the configuration's `lock:`, else skillstore.lock beside the
    /// configuration file, else in the working directory; `--locked=FILE`:
    /// FILE).
    #[arg(long, global = true, help_heading = "Global options", value_name = "FILE", num_args = 0..=1, require_equals = true)]
    pub locked: Option<Option<PathBuf>>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the merged catalog.
    List {
        /// names: one name a line; table (default): on a terminal, descriptions cut with `...` to its
        /// width (COLUMNS, when set, is the width even when piped), whole when piped; json: one object
        /// with skills and diagnostics.
        #[arg(long, value_enum, value_name = "FORMAT", hide_possible_values = true)]
        format: Option<ListFormat>,
        /// The same as --format json.
        #[arg(long, conflicts_with = "format")]
        json: bool,
        /// Compute every skill's digest (a DIGEST column, the `digest` field
        /// of --json); reads every file whose version was not hashed before.
        #[arg(long)]
        digests: bool,
    },
    /// Show one skill, where it came from and what it shadowed.
    Show {
        /// The skill's name.
        #[arg(add = clap_complete::ArgValueCandidates::new(completion::skill_names))]
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// List the skill's releases (from the highest-priority source that has any) instead.
        #[arg(long)]
        versions: bool,
    },
    /// Print a skill's SKILL.md, or a file inside it, through the winning source
    /// (NAME@VERSION, NAME@CHANNEL or NAME@RANGE: from a release).
    Read {
        /// The skill's name, or NAME@VERSION, NAME@CHANNEL, NAME@RANGE for a release.
        #[arg(add = clap_complete::ArgValueCandidates::new(completion::skill_names))]
        name: String,
        /// A path inside the skill's directory (e.g. references/forms.md); a
        /// directory ending in `/` (references/) lists the files under it.
        relpath: Option<String>,
    },
    /// Render the catalog for a system prompt.
    Prompt {
        /// markdown (also: deepagents) or xml.
        #[arg(long)]
        style: Option<String>,
        /// The most characters the prompt may have.
        #[arg(long, value_name = "N")]
        max_chars: Option<usize>,
        /// A template with {sources}, {skills} and {warnings} placeholders.
        #[arg(long, value_name = "FILE")]
        template: Option<PathBuf>,
        /// Where the agent finds the skills (a synced or mounted tree): locations become ROOT/NAME/SKILL.md.
        #[arg(long, value_name = "DIR")]
        location_root: Option<String>,
    },
    /// Find the skills that best match a query (full-text, over names, descriptions and SKILL.md bodies);
    /// exit 1 when none matches, as grep does.
    Search {
        /// What to look for, in words.
        #[arg(required_unless_present = "batch")]
        query: Option<String>,
        /// The most results.
        #[arg(long, value_name = "N", default_value_t = 10)]
        limit: usize,
        /// Print one JSON object {"results": [{"name", "description", "source", "path", "score"}]}.
        #[arg(long)]
        json: bool,
        /// Read queries as JSON lines {"id", "query", "limit"} on standard input and print one
        /// {"id", "results"} line for each, over one index.
        #[arg(long, conflicts_with = "query")]
        batch: bool,
        /// Let disabled skills be results too.
        #[arg(long)]
        include_disabled: bool,
    },
    /// Validate skill directories (or SKILL.md files) against the specification.
    Validate {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Skill directories, SKILL.md files, or directories of skills (a
        /// layer, or a root of layers): each skill in them is validated.
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
    },
    /// Record every enabled skill's digest and each Git source's commit in a lock file, for --locked;
    /// print what it pinned and what changed since the last lock.
    Lock {
        /// The file to write (default: the configuration's `lock:`, else skillstore.lock beside the
        /// configuration file, else in the working directory).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// List a source's audit log (every change, who made it, the files' digests before and after);
    /// with --verify walk its hash chain and exit 3 naming the first record that breaks it.
    Audit(audit::AuditArgs),
    /// Report every skill's digest, how it stands against the lock (--locked's file, else the one
    /// `lock` writes, when it exists) and who signed it; exit 3 when one would not be served.
    Verify {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Sign local skill directories with an SSH key (written to DIR/.skillstore/signature).
    Sign {
        /// The skills' directories.
        #[arg(required = true, value_name = "SKILL_DIR")]
        dirs: Vec<PathBuf>,
        /// An OpenSSH private key (a passphrase-protected or RSA one signs
        /// through `ssh-keygen`, which asks for the passphrase), or a public
        /// key whose private half the ssh-agent holds; without it, the
        /// ssh-agent's first key.
        #[arg(long, value_name = "KEY")]
        key: Option<PathBuf>,
    },
    /// Upload a local skills tree to a location.
    Publish {
        /// The local directory holding the layer folders.
        dir: PathBuf,
        /// A directory, s3://bucket[/prefix] or memory:FILE.json.
        location: String,
        /// Uploads in flight at once.
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
        /// Upload without strict validation and the content check (refused trees are listed otherwise).
        #[arg(long)]
        no_check: bool,
        /// Require every skill to carry a signature by a key this allowed_signers file allows
        /// (as a source with `signatures: {allowed_signers: FILE, required: true}` checks on install);
        /// nothing is published otherwise.
        #[arg(long, value_name = "FILE")]
        allowed_signers: Option<PathBuf>,
    },
    /// Create, change, delete and roll back skills in a writable source.
    #[command(subcommand)]
    Skill(skill::SkillCommand),
    /// Pack a skill directory into a deterministic .skill archive (validated strictly first).
    Pack {
        /// The skill's directory.
        skill_dir: PathBuf,
        /// The archive to write (default: NAME.skill here).
        #[arg(short = 'o', long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Install skills into a writable source, through every write check: a .skill or .zip archive, or the skills of any location skillstore reads.
    Install {
        /// A .skill or .zip archive; or a directory of skills, one skill's directory, git+URL[@REF], a discovery endpoint (https://HOST), or s3://BUCKET/PREFIX.
        from: String,
        /// Install only this skill of the location (repeatable; default: every skill it holds).
        #[arg(long = "skill", value_name = "NAME")]
        skills: Vec<String>,
        /// Replace a skill of the same name (its files become exactly the archive's).
        #[arg(long)]
        replace: bool,
        #[command(flatten)]
        args: skill::EditArgs,
    },
    /// Materialize the winning skills as DIR/NAME/... for a sandbox, switched in atomically.
    Sync {
        #[command(flatten)]
        flags: sync::SyncFlags,
    },
    /// Serve the winning skills as a read-only FUSE tree at DIR until SIGINT or SIGTERM.
    Mount {
        /// An existing, empty directory.
        dir: PathBuf,
        /// Disabled skills too.
        #[arg(long)]
        all: bool,
        /// Let other users read the tree (a container running as another user).
        #[arg(long)]
        allow_other: bool,
        /// How often the catalog is refreshed (default 30s).
        #[arg(long, value_name = "INTERVAL", value_parser = shutdown::parse_interval)]
        refresh: Option<std::time::Duration>,
        /// How long a request may wait on its source before the reader gets EIO (default 30s).
        #[arg(long, value_name = "INTERVAL", value_parser = shutdown::parse_interval)]
        timeout: Option<std::time::Duration>,
    },
    /// Check a skillstore.yaml or a server file and say what it would open.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Print the `sha256:` line a server file takes for a token read from
    /// standard input (one line; never from the command line, where other
    /// users and the shell's history would see it).
    TokenHash,
    /// Serve the catalog over HTTP, with MCP (streamable HTTP) at /mcp.
    Serve {
        /// The address to listen on (default 127.0.0.1:8080).
        #[arg(long, value_name = "ADDR")]
        listen: Option<String>,
        /// A server file naming tenants, their tokens and configurations.
        #[arg(long, value_name = "FILE")]
        tenants: Option<PathBuf>,
        /// Serve this command's catalog as one tenant whose read token is the value of the environment
        /// variable VAR (as in a container; no server file). Requests without it get 401.
        #[arg(long, value_name = "VAR", conflicts_with = "tenants")]
        token_env: Option<String>,
    },
    /// Serve the catalog over MCP on standard input and output.
    Mcp,
    /// Print a completion script for SHELL (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), or write one page per command into DIR.
    Man {
        /// Write skillstore.1 and skillstore-COMMAND.1 for each command here.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

/// The commands that open no namespace: the global options mean nothing to
/// them, so their help leaves them out and giving one is a usage error.
const WITHOUT_NAMESPACE: [&str; 9] = [
    "validate",
    "sign",
    "publish",
    "pack",
    "token-hash",
    "config",
    "completions",
    "man",
    "help",
];

/// The global options, as clap names them.
const GLOBAL_OPTIONS: [&str; 6] = ["config", "mounts", "sources", "writable", "no_cache", "locked"];

/// The whole command-line definition, with the global options hidden where
/// they do not apply.
pub fn command() -> clap::Command {
    let mut command = <Args as clap::CommandFactory>::command();
    let hidden: Vec<clap::Arg> = command
        .get_arguments()
        .filter(|a| GLOBAL_OPTIONS.contains(&a.get_id().as_str()))
        .map(|a| a.clone().hide(true))
        .collect();
    // A subcommand that already has an argument of a global option's name
    // is not given the global one when clap builds the definition: these
    // hidden copies keep the options out of those help pages.
    for name in WITHOUT_NAMESPACE {
        if command.find_subcommand(name).is_none() {
            continue;
        }
        command = command.mut_subcommand(name, |mut sub| {
            for arg in &hidden {
                // `config check` reads --config; `config schema` does not.
                if name == "config" && arg.get_id() == "config" {
                    let arg = arg.clone().global(false);
                    sub = sub.mut_subcommand("schema", |schema| schema.arg(arg));
                } else {
                    sub = sub.arg(arg.clone());
                }
            }
            sub
        });
    }
    command
}

/// Refuses the global options a command without a namespace was given.
fn refuse_global_options(global: &Global, command: &str, allow_config: bool) -> Result<(), Failure> {
    let given = [
        ("--config", global.config.is_some() && !allow_config),
        ("--mount", !global.mounts.is_empty()),
        ("--source", !global.sources.is_empty()),
        ("--writable", !global.writable.is_empty()),
        ("--no-cache", global.no_cache),
        ("--locked", global.locked.is_some()),
    ];
    match given.iter().find(|(_, set)| *set) {
        Some((flag, _)) => Err(Failure::usage(format!(
            "`{command}` reads no catalog and takes no {flag}"
        ))),
        None => Ok(()),
    }
}

/// `skillstore config ...`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Read and assemble FILE (default: --config, else ./skillstore.yaml) as
    /// the commands would, without reading storage; print its mounts and
    /// sources (each tenant's, for a server file); exit 2 when refused.
    Check {
        /// A skillstore.yaml or a server file (one with `tenants:`).
        file: Option<PathBuf>,
    },
    /// Print the JSON Schema of a skillstore.yaml (`config`) or of a server
    /// file (`server`), for editors that complete and check YAML.
    Schema {
        /// Which file the schema describes.
        #[arg(value_enum)]
        kind: SchemaKind,
    },
}

/// The files `config schema` describes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum SchemaKind {
    /// skillstore.yaml.
    Config,
    /// The server file `serve --tenants` reads.
    Server,
}

/// Why a command failed, and with which exit code.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    /// Bad usage: exit 2.
    pub fn usage(message: impl Into<String>) -> Self {
        Failure {
            code: 2,
            message: message.into(),
        }
    }

    /// An exit code with nothing more to say (what there was to say was
    /// printed already).
    pub fn silent(code: u8) -> Self {
        Failure {
            code,
            message: String::new(),
        }
    }

    /// The command's own failure: exit 1.
    pub fn failed(message: impl Into<String>) -> Self {
        Failure {
            code: 1,
            message: message.into(),
        }
    }
}

impl From<skillstore::Error> for Failure {
    fn from(err: skillstore::Error) -> Self {
        match err {
            skillstore::Error::Usage(_) | skillstore::Error::Config(_) => Failure::usage(err.to_string()),
            _ => Failure::failed(err.to_string()),
        }
    }
}

impl From<skillstore::backends::Error> for Failure {
    fn from(err: skillstore::backends::Error) -> Self {
        Failure::failed(err.to_string())
    }
}

/// Writes to stdout, treating a closed pipe as success.
pub fn emit(bytes: &[u8]) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::failed(format!("cannot write to standard output: {e}"))),
    }
}

fn main() -> ExitCode {
    // `COMPLETE=SHELL skillstore` prints the shell's registration; the
    // shell then calls back with `COMPLETE` set to complete one word.
    clap_complete::CompleteEnv::with_factory(command).complete();
    let args = match <Args as clap::FromArgMatches>::from_arg_matches(&command().get_matches()) {
        Ok(args) => args,
        Err(e) => e.exit(),
    };
    let serving = matches!(args.command, Command::Serve { .. });
    let log_guard = init_tracing(args.log_format, serving);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let code = match runtime.block_on(run(args)) {
        Ok(()) => 0,
        Err(failure) => {
            if !failure.message.is_empty() {
                eprintln!("error: {}", terminal::shown_lines(&failure.message));
            }
            failure.code
        }
    };
    // The log lines still queued are written before leaving.
    drop(log_guard);
    // Output is flushed and nothing is left to do: leave without tearing
    // down the runtime and the catalog, which only returns memory to a
    // process that is ending.
    std::process::exit(i32::from(code))
}

/// Turns logging on (see [`Args::log_format`]). Lines go through a bounded
/// queue to a writer thread: a slow or unread standard error drops log
/// lines rather than stalling a request.
fn init_tracing(format: LogFormat, serving: bool) -> Option<tracing_appender::non_blocking::WorkerGuard> {
    let asked = std::env::var("RUST_LOG").ok();
    let mut filter = match &asked {
        Some(_) => tracing_subscriber::EnvFilter::from_default_env(),
        // A server says what it answers; other commands stay quiet.
        None if serving => tracing_subscriber::EnvFilter::new("warn,skillstore=info,skillstore_server=info"),
        None => return None,
    };
    // The MCP SDK logs session ids at info level; they are bearer
    // credentials of a kind, so they show only when asked for by name.
    if !asked.unwrap_or_default().contains("rmcp") {
        filter = filter.add_directive("rmcp=warn".parse().expect("a valid directive"));
    }
    let (writer, guard) = tracing_appender::non_blocking(std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer);
    let _ = match format {
        LogFormat::Json => builder.json().with_current_span(false).try_init(),
        // Colour only for a terminal: a log written to a file or a pipe stays plain text.
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .try_init(),
    };
    Some(guard)
}

async fn run(args: Args) -> Result<(), Failure> {
    let global = &args.global;
    match &args.command {
        Command::Validate { .. } => refuse_global_options(global, "validate", false)?,
        Command::Publish { .. } => refuse_global_options(global, "publish", false)?,
        Command::Pack { .. } => refuse_global_options(global, "pack", false)?,
        Command::Sign { .. } => refuse_global_options(global, "sign", false)?,
        Command::TokenHash => refuse_global_options(global, "token-hash", false)?,
        Command::Config(ConfigCommand::Check { .. }) => refuse_global_options(global, "config check", true)?,
        Command::Config(ConfigCommand::Schema { .. }) => refuse_global_options(global, "config schema", false)?,
        Command::Completions { .. } => refuse_global_options(global, "completions", false)?,
        Command::Man { .. } => refuse_global_options(global, "man", false)?,
        _ => {}
    }
    match args.command {
        Command::Completions { shell } => manual::completions(shell),
        Command::Man { dir } => manual::man(dir.as_deref()),
        Command::List { format, json, digests } => {
            let format = if json {
                ListFormat::Json
            } else {
                format.unwrap_or(ListFormat::Table)
            };
            commands::list(&args.global, format, digests).await
        }
        Command::Show { name, json, versions } if versions => release::versions(&args.global, &name, json).await,
        Command::Show { name, json, .. } => commands::show(&args.global, &name, json).await,
        Command::Read { name, relpath } => match name.split_once('@') {
            Some((name, selector)) => release::read(&args.global, name, selector, relpath.as_deref()).await,
            None => commands::read(&args.global, &name, relpath.as_deref()).await,
        },
        Command::Prompt {
            style,
            max_chars,
            template,
            location_root,
        } => {
            commands::prompt(
                &args.global,
                style.as_deref(),
                max_chars,
                template.as_deref(),
                location_root,
            )
            .await
        }
        Command::Search {
            query,
            limit,
            json,
            batch,
            include_disabled,
        } => search::run(&args.global, query.as_deref(), limit, json, batch, include_disabled).await,
        Command::Validate { json, paths } => validate::run(&paths, json).await,
        Command::TokenHash => serve::token_hash(),
        Command::Audit(audit) => audit::run(&args.global, &audit).await,
        Command::Verify { json } => integrity::verify(&args.global, json).await,
        Command::Sign { dirs, key } => integrity::sign(&dirs, key.as_deref()).await,
        Command::Lock { output } => commands::lock(&args.global, output.as_deref()).await,
        Command::Config(ConfigCommand::Check { file }) => {
            config_check::run(file.as_deref(), args.global.config.as_deref())
        }
        Command::Config(ConfigCommand::Schema { kind }) => config_check::schema(kind),
        Command::Publish {
            dir,
            location,
            concurrency,
            no_check,
            allowed_signers,
        } => publish::run(&dir, &location, concurrency, !no_check, allowed_signers.as_deref()).await,
        Command::Skill(command) => skill::run(&args.global, command).await,
        Command::Pack { skill_dir, output } => archive::pack(&skill_dir, output.as_deref()).await,
        Command::Install {
            from,
            skills,
            replace,
            args: edit,
        } => archive::install(&args.global, &from, &skills, replace, &edit).await,
        Command::Sync { flags } => sync::run(&args.global, flags).await,
        Command::Mount {
            dir,
            all,
            allow_other,
            refresh,
            timeout,
        } => {
            let mount = sync::MountArgs {
                dir: &dir,
                all,
                allow_other,
                refresh,
                timeout,
            };
            sync::mount(&args.global, mount).await
        }
        Command::Serve {
            listen,
            tenants,
            token_env,
        } => {
            serve::serve(
                &args.global,
                listen.as_deref(),
                tenants.as_deref(),
                token_env.as_deref(),
            )
            .await
        }
        Command::Mcp => serve::mcp(&args.global).await,
    }
}
