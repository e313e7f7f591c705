//! The `skillstore` command, end to end, in one test binary: a module for
//! each subject.

mod cli;
mod first_day;
mod git;
mod locked;
mod search;
mod signatures;
mod sync_operator;
mod sync_volume;
