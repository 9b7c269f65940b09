//! Byte sizes in flags: `512MiB`, `2GiB`, `100MB`, or a plain number of bytes.

/// A byte size: a whole number, optionally followed by a unit `B`, `KiB`, `MiB`, `GiB`,
/// `TiB` (powers of 1024) or `KB`, `MB`, `GB`, `TB` (powers of 1000), case-insensitive.
pub fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("invalid size {text:?}: expected a number such as 512MiB"))?;
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        other => {
            return Err(format!(
                "invalid size unit {other:?} in {text:?}: use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB"
            ));
        }
    };
    number
        .checked_mul(multiplier)
        .and_then(|bytes| usize::try_from(bytes).ok())
        .ok_or_else(|| format!("size {text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("2gib"), Ok(2 << 30));
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("1 KiB"), Ok(1024));
        for bad in ["", "MiB", "1.5GiB", "12 parsecs", "-1", "99999999999TiB"] {
            assert!(parse_size(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
