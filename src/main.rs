//! The `skillstore` command.

mod cli;

use std::process::ExitCode;

// The catalog reads on blocking threads and parses on runtime threads; an
// allocator with cheap cross-thread frees keeps that from costing page
// faults and lock traffic. Built without transparent huge pages: a command
// that lives for milliseconds touches a few megabytes per thread, and a
// huge page is zeroed whole on its first touch.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    cli::main()
}
