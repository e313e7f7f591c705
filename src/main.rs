//! The `skillstore` command.

mod cli;

use std::process::ExitCode;

// The catalog reads on blocking threads and parses on runtime threads; an
// allocator with cheap cross-thread frees keeps that from costing page
// faults and lock traffic.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    cli::main()
}
