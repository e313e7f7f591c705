//! `completions` and `man`: generated from the same clap definition the
//! command parses with, so they never drift from it.

use std::path::Path;

use super::{Failure, command, emit};

/// `completions SHELL`: the completion script on standard output.
pub fn completions(shell: clap_complete::Shell) -> Result<(), Failure> {
    let mut command = command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "skillstore", &mut script);
    emit(&script)
}

fn page(command: clap::Command) -> Result<Vec<u8>, Failure> {
    let mut roff = Vec::new();
    clap_mangen::Man::new(command)
        .render(&mut roff)
        .map_err(|e| Failure::failed(format!("cannot render the manual page: {e}")))?;
    Ok(roff)
}

/// `man [--dir DIR]`: `skillstore.1` on standard output, or that page and
/// `skillstore-COMMAND.1` for each command written into DIR (which must
/// exist).
pub fn man(dir: Option<&Path>) -> Result<(), Failure> {
    let command = command();
    let Some(dir) = dir else {
        return emit(&page(command)?);
    };
    if !dir.is_dir() {
        return Err(Failure::usage(format!("{}: not a directory", dir.display())));
    }
    let write = |name: &str, roff: Vec<u8>| {
        let path = dir.join(format!("{name}.1"));
        std::fs::write(&path, roff).map_err(|e| Failure::failed(format!("cannot write {}: {e}", path.display())))
    };
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("skillstore-{}", sub.get_name());
        write(&name, page(sub.clone().name(name.clone()))?)?;
    }
    write("skillstore", page(command)?)
}
