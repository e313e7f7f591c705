//! The signals that end a long-running command, and intervals as flags.

use std::time::Duration;

/// Completes on the first SIGINT or SIGTERM (the server's own listener).
pub use skillstore_server::http::shutdown_signal as signal;

/// Parses an interval flag: a number with an optional unit `ms`, `s`, `m`
/// or `h` (no unit: seconds). Zero and more than a day are refused.
pub fn parse_interval(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not an interval (examples: 30s, 500ms, 5m)"))?;
    let seconds = match unit {
        "" | "s" => value,
        "ms" => value / 1e3,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("`{text}`: the unit must be ms, s, m or h")),
    };
    if !(0.001..=86_400.0).contains(&seconds) {
        return Err(format!("`{text}`: an interval is between 1ms and 24h"));
    }
    Ok(Duration::from_secs_f64(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_parse_with_and_without_units() {
        assert_eq!(parse_interval("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_interval("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_interval("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_interval("1.5m").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_interval("2h").unwrap(), Duration::from_secs(7200));
        for bad in ["", "0", "s", "10d", "-1", "2 days", "25h", "NaNs"] {
            assert!(parse_interval(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
