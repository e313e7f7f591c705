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
/// exist). Every page is rendered and written to a new file in DIR first,
/// then renamed over its name: a link or a FIFO planted under a page's
/// name is replaced, never written through, and a failure leaves no page
/// half-written.
pub fn man(dir: Option<&Path>) -> Result<(), Failure> {
    let command = command();
    let Some(dir) = dir else {
        return emit(&page(command)?);
    };
    if !dir.is_dir() {
        return Err(Failure::usage(format!("{}: not a directory", dir.display())));
    }
    let mut pages = Vec::new();
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("skillstore-{}", sub.get_name());
        pages.push((name.clone(), page(sub.clone().name(name))?));
    }
    pages.push(("skillstore".to_owned(), page(command)?));
    let cannot =
        |what: &str, e: std::io::Error| Failure::failed(format!("cannot write {what} in {}: {e}", dir.display()));
    let mut written = Vec::new();
    for (name, roff) in pages {
        let mut file = tempfile::Builder::new()
            .prefix(".skillstore-man-")
            .tempfile_in(dir)
            .map_err(|e| cannot("a page", e))?;
        std::io::Write::write_all(&mut file, &roff).map_err(|e| cannot(&name, e))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let readable = std::fs::Permissions::from_mode(0o644);
            file.as_file().set_permissions(readable).map_err(|e| cannot(&name, e))?;
        }
        written.push((format!("{name}.1"), file.into_temp_path()));
    }
    for (name, temporary) in written {
        temporary.persist(dir.join(&name)).map_err(|e| cannot(&name, e.error))?;
    }
    Ok(())
}
