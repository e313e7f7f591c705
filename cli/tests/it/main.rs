//! The `skillstore` command, end to end, in one test binary: a module for
//! each command or subject, and `support`, the command and the helpers they
//! share.

mod archive;
mod audit;
mod config;
mod first_day;
mod git;
mod list;
mod locked;
mod mount;
mod prompt;
mod publish;
mod read;
mod release;
mod search;
mod serve;
mod show;
mod signatures;
mod skill;
mod support;
mod sync;
mod sync_operator;
mod sync_volume;
mod usage;
mod validate;
