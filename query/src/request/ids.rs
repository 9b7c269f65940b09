//! Trace, span and profile ids as requests spell them: hex, one id per `2N` characters.

use std::collections::BTreeSet;

use crate::error::QueryError;

/// Ids of `N` bytes written as `2N` hex characters; duplicates dropped, order kept.
pub fn hex_ids<const N: usize>(name: &str, values: &[String]) -> Result<Vec<[u8; N]>, QueryError> {
    let mut seen = BTreeSet::new();
    let mut ids = Vec::new();
    for value in values {
        let id = hex_id::<N>(name, value)?;
        if seen.insert(id) {
            ids.push(id);
        }
    }
    Ok(ids)
}

pub fn hex_id<const N: usize>(name: &str, value: &str) -> Result<[u8; N], QueryError> {
    let mut id = [0u8; N];
    hex::decode_to_slice(value, &mut id).map_err(|_| {
        QueryError::bad_request(format!(
            "invalid {name} {value:?}: expected {} hex characters",
            2 * N
        ))
    })?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_hex_of_the_right_length() {
        let trace = "0102030405060708090a0b0c0d0e0f10";
        let ids = hex_ids::<16>("trace_id", &[trace.into(), trace.to_uppercase(), "ff".repeat(16)]).unwrap();
        assert_eq!(ids.len(), 2, "duplicates (in any case) are dropped");
        assert_eq!(ids[0][0], 1);
        assert_eq!(ids[0][15], 16);
        assert_eq!(ids[1], [0xff; 16]);
        for bad in [
            "0102",
            "zz02030405060708090a0b0c0d0e0f10",
            "0102030405060708090a0b0c0d0e0f1011",
        ] {
            let e = hex_ids::<16>("trace_id", &[bad.to_string()]).unwrap_err();
            assert!(e.is_client_error());
            let message = e.to_string();
            assert!(message.contains("trace_id") && message.contains(bad), "{message}");
            assert!(message.contains("32 hex"), "{message}");
        }
        let e = hex_ids::<8>("span_id", &["0102030405060708aa".to_string()]).unwrap_err();
        let message = e.to_string();
        assert!(
            message.contains("span_id") && message.contains("16 hex"),
            "{message}"
        );
    }
}
