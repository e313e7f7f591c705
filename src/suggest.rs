//! "Did you mean": the known name closest to a mistyped one.

/// The candidate most like `name` (Jaro-Winkler similarity, as clap uses
/// for subcommands), when one is close enough to be a likely typo; `None`
/// for an exact match or when nothing is close.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    candidates
        .into_iter()
        .filter(|c| *c != name)
        .map(|c| (strsim::jaro_winkler(name, c), c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// The end of a message about an unknown `name`: " (did you mean `X`?)"
/// when a candidate is close, else the empty string.
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(name, candidates).map_or_else(String::new, |c| format!(" (did you mean `{c}`?)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_finds_its_name_and_a_stranger_finds_none() {
        let names = ["changelog", "code-review", "commit-messages"];
        assert_eq!(closest("chnagelog", names), Some("changelog"));
        assert_eq!(closest("code-reveiw", names), Some("code-review"));
        assert_eq!(closest("zzz", names), None);
        assert_eq!(closest("changelog", names), None);
        assert_eq!(
            did_you_mean("comit-messages", names),
            " (did you mean `commit-messages`?)"
        );
    }
}
