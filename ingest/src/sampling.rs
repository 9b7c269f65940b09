//! Probabilistic sampling per usage group ([`crate::usage`]), off unless a group sets a
//! `sample_rate` below 1: a profile is kept or dropped by a hash of its profile id (of its
//! series and time when it has none), so a retried export is decided the same way each
//! time and a kept profile is stored once; kept values are divided by the rate, so totals
//! over many profiles stay unbiased; a sampled series carries [`SAMPLE_RATE_LABEL`], so
//! sampled and unsampled data never share a series.

use xxhash_rust::xxh3::xxh3_64;

/// The label of a sampled series: its group's rate, as configured (`0.1`).
pub const SAMPLE_RATE_LABEL: &str = "stackhouse.sample_rate";

/// Whether a profile whose identity is `key` is kept at `rate` (in (0, 1]).
pub fn kept(rate: f64, key: &[u8]) -> bool {
    if rate >= 1.0 {
        return true;
    }
    // The top 53 bits as a fraction in [0, 1): uniform over profile ids.
    let fraction = (xxh3_64(key) >> 11) as f64 / (1u64 << 53) as f64;
    fraction < rate
}

/// A kept value standing for the profiles sampled out beside it.
pub fn scaled(value: i64, rate: f64) -> i64 {
    if rate >= 1.0 {
        return value;
    }
    (value as f64 / rate).round() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn about_the_rate_is_kept_and_the_same_key_is_decided_alike() {
        let keys: Vec<[u8; 16]> = (0u128..20_000)
            .map(|i| (i * 0x9e37_79b9_7f4a_7c15).to_be_bytes())
            .collect();
        let kept_count = keys.iter().filter(|k| kept(0.1, &k[..])).count();
        assert!(
            (1_800..=2_200).contains(&kept_count),
            "{kept_count} of 20000 at 0.1"
        );
        for k in &keys[..100] {
            assert_eq!(kept(0.1, &k[..]), kept(0.1, &k[..]));
        }
        assert!(keys.iter().all(|k| kept(1.0, &k[..])));
        assert_eq!(scaled(7, 0.1), 70);
        assert_eq!(scaled(7, 1.0), 7);
        assert_eq!(scaled(1, 0.3), 3);
    }
}
