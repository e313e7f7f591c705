//! Choosing one release among a skill's releases: the rule every selector
//! follows, with no storage in sight.

use super::channels::Channels;
use super::version::Selector;

/// The release `selector` picks among `existing` (the versions whose
/// manifests exist), or `None`:
///
/// - an exact version picks itself when it exists, yanked or not;
/// - a channel picks the version it points to when that exists and is not
///   yanked;
/// - a range picks the greatest existing version that matches it and is
///   not yanked.
pub fn select(selector: &Selector, existing: &[semver::Version], channels: &Channels) -> Option<semver::Version> {
    let listed = |v: &semver::Version| existing.contains(v);
    match selector {
        Selector::Exact(v) => listed(v).then(|| v.clone()),
        Selector::Channel(name) => channels
            .channels
            .get(name)
            .filter(|v| listed(v) && !channels.yanked.contains(v))
            .cloned(),
        Selector::Range(range) => existing
            .iter()
            .filter(|v| range.matches(v) && !channels.yanked.contains(v))
            .max()
            .cloned(),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn version() -> impl Strategy<Value = semver::Version> {
        (0u64..4, 0u64..4, 0u64..3, prop::option::of(0u8..3)).prop_map(|(a, b, c, pre)| {
            let mut v = semver::Version::new(a, b, c);
            if let Some(pre) = pre {
                v.pre = semver::Prerelease::new(&format!("rc.{pre}")).unwrap();
            }
            v
        })
    }

    fn range() -> impl Strategy<Value = semver::VersionReq> {
        let op = prop::sample::select(vec!["^", "~", "=", ">=", "<", ">", "<=", ""]);
        (op, version(), prop::option::of((0u64..4, 0u64..4)))
            .prop_map(|(op, v, upper)| {
                let mut text = format!("{op}{v}");
                if let Some((a, b)) = upper {
                    text.push_str(&format!(", <{a}.{b}.0"));
                }
                text
            })
            .prop_filter_map("a range", |text| semver::VersionReq::parse(&text).ok())
    }

    proptest! {
        /// A range never selects a yanked release, one outside it, or one
        /// that does not exist, and misses nothing greater that it could
        /// have taken.
        #[test]
        fn a_range_never_selects_a_yanked_release_or_one_outside_it(
            existing in prop::collection::vec(version(), 0..12),
            yanked in prop::collection::vec(version(), 0..6),
            range in range(),
        ) {
            let channels = Channels { yanked: yanked.iter().cloned().collect(), ..Channels::default() };
            let picked = select(&Selector::Range(range.clone()), &existing, &channels);
            let allowed: Vec<_> = existing.iter().filter(|v| range.matches(v) && !channels.yanked.contains(v)).collect();
            match picked {
                Some(v) => {
                    prop_assert!(range.matches(&v));
                    prop_assert!(!channels.yanked.contains(&v));
                    prop_assert!(existing.contains(&v));
                    prop_assert!(allowed.iter().all(|a| **a <= v));
                }
                None => prop_assert!(allowed.is_empty()),
            }
        }

        /// A channel never selects a yanked release; an exact pin selects
        /// what exists, yanked or not.
        #[test]
        fn channels_skip_yanked_releases_and_pins_do_not(
            existing in prop::collection::vec(version(), 1..8),
            target in version(),
            yank in any::<bool>(),
        ) {
            let mut channels = Channels::default();
            channels.channels.insert("stable".into(), target.clone());
            if yank {
                channels.yanked.insert(target.clone());
            }
            let by_channel = select(&Selector::Channel("stable".into()), &existing, &channels);
            prop_assert_eq!(by_channel.is_some(), existing.contains(&target) && !yank);
            let pinned = select(&Selector::Exact(target.clone()), &existing, &channels);
            prop_assert_eq!(pinned.is_some(), existing.contains(&target));
        }
    }
}
