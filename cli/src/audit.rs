//! `audit`: a source's audit log, listed and verified.

use serde::Serialize;
use skillstore::audit::record::since_key;
use skillstore::audit::{AuditLog, AuditRecord, Checkpoint, Verification};

use super::namespace::build;
use super::terminal::shown;
use super::{Failure, Global, emit};

/// What `audit` was asked.
#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// The source whose log is read (default: the highest-priority writable source).
    #[arg(long, value_name = "SOURCE", add = clap_complete::ArgValueCandidates::new(crate::completion::source_labels))]
    pub to: Option<String>,
    /// Walk the whole chain; exit 3 naming the first record that breaks it.
    #[arg(long)]
    pub verify: bool,
    /// With --verify: the log must reach this record unchanged (SEQ:sha256:HEX, as --verify prints
    /// the newest record), which catches its newest records cut off or rewritten.
    #[arg(long, value_name = "SEQ:sha256:HEX", requires = "verify")]
    pub checkpoint: Option<String>,
    /// List only records made at or after this time (2026-11-28, or 2026-11-28T18:30:00Z).
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Print one JSON object {"records": [...], "verification": {...}}.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Output<'a> {
    records: &'a [AuditRecord],
    #[serde(skip_serializing_if = "Option::is_none")]
    verification: Option<&'a Verification>,
}

/// Lists the log of the chosen source, and with `--verify` walks its
/// chain: exit 3 when it does not hold.
pub async fn run(global: &Global, args: &AuditArgs) -> Result<(), Failure> {
    let since = args.since.as_deref().map(since_key).transpose()?;
    let checkpoint: Option<Checkpoint> = args.checkpoint.as_deref().map(str::parse).transpose()?;
    let namespace = build(global)?;
    let source = namespace.write_target(args.to.as_deref())?;
    let log = AuditLog::new(namespace.backend(), source.path())?;
    let verification = match args.verify {
        true => Some(log.verify(checkpoint.as_ref()).await?),
        false => None,
    };
    let breach = verification.as_ref().and_then(|v| v.breach.as_ref());
    let records = match breach {
        // A broken log is not listed: the verdict is what matters.
        Some(_) => Vec::new(),
        None => log.records(since.as_deref()).await?,
    };
    if args.json {
        let output = Output {
            records: &records,
            verification: verification.as_ref(),
        };
        let mut text = serde_json::to_vec_pretty(&output).map_err(|e| Failure::failed(e.to_string()))?;
        text.push(b'\n');
        emit(&text)?;
    } else {
        let mut text = String::new();
        for record in &records {
            text.push_str(&line(record));
        }
        if let Some(Verification {
            records: count,
            tail,
            breach: None,
        }) = &verification
        {
            match tail {
                Some(tail) => text.push_str(&format!(
                    "the chain holds: {count} records; the newest, to keep as a checkpoint: {tail}\n"
                )),
                None => text.push_str("the chain holds: the log is empty\n"),
            }
        }
        emit(text.as_bytes())?;
    }
    match breach {
        Some(breach) => Err(Failure {
            code: 3,
            message: format!("the audit log of `{}` does not verify: {breach}", shown(source.name())),
        }),
        None => Ok(()),
    }
}

/// One record as a line: number, time, actor, action, skill, files.
fn line(record: &AuditRecord) -> String {
    let files = record.files.len();
    let plural = if files == 1 { "" } else { "s" };
    format!(
        "{:>6}  {}  {}  {} {}  ({files} file{plural})\n",
        record.seq,
        record.time,
        shown(&record.actor),
        record.action,
        shown(&record.skill),
    )
}
