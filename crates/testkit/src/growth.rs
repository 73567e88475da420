//! The soak's rule for "grows without bound".
//!
//! A run is split into thirds by time. For each series (hub RSS, open file
//! descriptors, requests in flight, queued bytes) the largest value of the
//! last third may exceed the largest value of the first third by at most
//! `relative` of it plus `absolute`:
//!
//! ```text
//! max(last third) <= max(first third) * (1 + relative) + absolute
//! ```
//!
//! The first third includes the ramp-up, so a series that levels off passes;
//! one that keeps climbing (a leak) fails once it has climbed further than
//! the slack. The slack absorbs allocator noise and load fluctuation; the
//! soak also checks, after the clients close, that the pending map, the
//! connection table and the descriptors are back to where they started, which
//! catches a slow leak too small for this rule.

/// How much a series may grow between the first and the last third.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    pub relative: f64,
    pub absolute: f64,
}

/// What one series did.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub name: &'static str,
    pub first_max: f64,
    pub last_max: f64,
    pub limit: f64,
}

impl Verdict {
    pub fn grew_without_bound(&self) -> bool {
        self.last_max > self.limit
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: first-third max {}, last-third max {}, limit {:.0}: {}",
            self.name,
            self.first_max,
            self.last_max,
            self.limit,
            if self.grew_without_bound() {
                "GREW"
            } else {
                "bounded"
            }
        )
    }
}

/// Applies the rule to `values` (in time order). `None` when there are too
/// few samples to split into thirds (fewer than 3).
pub fn judge(name: &'static str, values: &[f64], tolerance: Tolerance) -> Option<Verdict> {
    if values.len() < 3 {
        return None;
    }
    let third = values.len() / 3;
    let max = |slice: &[f64]| slice.iter().copied().fold(f64::MIN, f64::max);
    let first_max = max(&values[..third]);
    let last_max = max(&values[values.len() - third..]);
    Some(Verdict {
        name,
        first_max,
        last_max,
        limit: first_max * (1.0 + tolerance.relative) + tolerance.absolute,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEN_PERCENT: Tolerance = Tolerance {
        relative: 0.10,
        absolute: 0.0,
    };

    #[test]
    fn a_series_that_levels_off_is_bounded() {
        let values: Vec<f64> = (0..90)
            .map(|t| 100.0 * (1.0 - (-(t as f64) / 5.0).exp()))
            .collect();
        let verdict = judge("rss", &values, TEN_PERCENT).unwrap();
        assert!(!verdict.grew_without_bound(), "{verdict}");
    }

    #[test]
    fn a_series_that_keeps_climbing_grew() {
        let values: Vec<f64> = (0..90).map(|t| 100.0 + t as f64).collect();
        let verdict = judge("rss", &values, TEN_PERCENT).unwrap();
        assert!(verdict.grew_without_bound(), "{verdict}");
        assert_eq!((verdict.first_max, verdict.last_max), (129.0, 189.0));
    }

    #[test]
    fn the_absolute_slack_covers_noise_around_zero() {
        let values = [0.0, 3.0, 0.0, 1.0, 0.0, 12.0];
        let slack = Tolerance {
            relative: 0.10,
            absolute: 16.0,
        };
        assert!(!judge("pending", &values, slack)
            .unwrap()
            .grew_without_bound());
        assert!(judge("pending", &values, TEN_PERCENT)
            .unwrap()
            .grew_without_bound());
    }

    #[test]
    fn too_few_samples_give_no_verdict() {
        assert_eq!(judge("fds", &[1.0, 2.0], TEN_PERCENT), None);
    }
}
