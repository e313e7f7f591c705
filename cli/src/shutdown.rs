//! The signals that end a long-running command, and intervals as flags.

/// Completes on the first SIGINT or SIGTERM (the server's own listener).
pub use skillstore_server::http::shutdown_signal as signal;

/// Parses an interval flag in the grammar of the server file's durations.
pub use skillstore_server::settings::parse_interval;
