//! The integration tests of `skillstore`, in one test binary: a module for
//! each subject, and `common`, the helpers they share.

mod archive;
mod archive_rooted;
mod audit;
mod catalog;
mod changes;
mod common;
mod concurrency;
mod edit_rules;
mod editing;
mod faults;
mod git_source;
mod hash_cache;
mod incomplete;
mod index_forgery;
mod integrity;
mod integrity_whole;
mod namespace;
mod odd_keys;
mod prompt;
mod real_data;
mod reference_validator;
mod s3_floor;
mod search;
mod skill_files;
mod source_pool;
mod sync;
mod sync_ownership;
mod sync_volume;
mod tenants;
mod withdrawal_property;

#[path = "../support/own_process.rs"]
mod own_process;
