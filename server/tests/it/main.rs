//! The server's integration tests, in one test binary: a module for each
//! subject, `common`, the served port, fixtures and clients they share, and
//! `replicas_run`, the body of the replica tests on either S3 server.

mod anonymous_property;
mod backends;
mod change_feeds;
mod common;
mod content_rule;
mod discovery;
mod discovery_read;
mod discovery_skills_cli;
mod git;
mod git_hooks;
mod hardening;
mod http;
mod integrity;
mod isolation;
mod isolation_property;
mod jwt;
mod mcp;
mod replicas;
mod replicas_moto;
mod replicas_run;
mod report;
mod request_log;
mod shared_sources;
mod shutdown;
mod tenancy;

#[path = "../../../tests/support/own_process.rs"]
mod own_process;
