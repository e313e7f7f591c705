//! A test that changes what the whole process shares (its environment) or
//! measures the whole process (its descriptors, its memory) cannot share
//! the process with the other tests of its binary running on other threads.
//! [`in_own_process`] runs such a test alone in a process of its own: the
//! test binary run again for that one test. Included by path (`#[path]`) in
//! each crate's test binary that needs it.

#![allow(dead_code)]

use std::process::Command;

/// Set in the process [`in_own_process`] starts, to the test it runs.
const ALONE: &str = "SKILLSTORE_TEST_ALONE";

/// Whether the calling test is alone in this process and should run its
/// body. Called first in a test: in the process the harness runs it in, it
/// runs the test binary again with only this test (`--exact`, one thread)
/// and returns false once that run passed (it fails the test, with the run's
/// output, otherwise); in that run it returns true. The test's name is the
/// name of its thread, as the harness gives it.
pub fn in_own_process() -> bool {
    let current = std::thread::current();
    let name = current
        .name()
        .filter(|name| *name != "main")
        .expect("called on the thread the test harness runs a test on, which bears its name");
    if std::env::var_os(ALONE).is_some_and(|alone| alone == name) {
        return true;
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--include-ignored", "--test-threads=1", "--nocapture"])
        .env(ALONE, name)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    print!("{stdout}");
    eprint!("{stderr}");
    assert!(
        output.status.success(),
        "{name}, run alone in a process of its own, failed ({}): see its output above",
        output.status
    );
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "{name} did not run in the process started for it: see its output above"
    );
    false
}
