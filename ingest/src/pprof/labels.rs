//! The pprof labels that are not plain attributes: `trace_id` (32 hex digits) and `span_id`
//! (16 hex digits) make the sample's link, `profile_id` (32 hex digits, or a UUID with
//! dashes) its OTLP profile's id. A `profile_id` of 16 hex digits is a span id: early
//! `otel-profiling-go` and Pyroscope's Go exemplars wrote the span id under that name. A
//! value that does not parse as such an id stays an ordinary string attribute, so a label
//! we misread is never lost and never fails the upload.

pub(crate) enum Special {
    Trace([u8; 16]),
    Span([u8; 8]),
    Profile([u8; 16]),
}

/// The special meaning of a string label, if it has one and its value parses.
pub(crate) fn special(key: &str, value: &str) -> Option<Special> {
    match key {
        "trace_id" => hex_id(value).map(Special::Trace),
        "span_id" => hex_id(value).map(Special::Span),
        "profile_id" if value.len() == 16 => hex_id(value).map(Special::Span),
        "profile_id" => profile_id(value).map(Special::Profile),
        _ => None,
    }
}

fn hex_id<const N: usize>(value: &str) -> Option<[u8; N]> {
    let mut id = [0u8; N];
    hex::decode_to_slice(value, &mut id).ok()?;
    Some(id)
}

fn profile_id(value: &str) -> Option<[u8; 16]> {
    if value.len() == 36 {
        let b = value.as_bytes();
        if [8, 13, 18, 23].iter().any(|&i| b[i] != b'-') {
            return None;
        }
        let plain: String = value.chars().filter(|&c| c != '-').collect();
        return hex_id(&plain);
    }
    hex_id(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_only_in_their_exact_form() {
        assert!(
            matches!(special("span_id", "00f067aa0ba902b7"), Some(Special::Span(id)) if id == [0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7])
        );
        assert!(
            matches!(special("trace_id", "4BF92F3577B34DA6A3CE929D0E0E4736"), Some(Special::Trace(id)) if id[0] == 0x4b && id[15] == 0x36)
        );
        assert!(special("span_id", "00f067aa0ba902b").is_none());
        assert!(special("span_id", "00f067aa0ba902bz").is_none());
        assert!(special("trace_id", "00f067aa0ba902b7").is_none());
        assert!(special("other", "00f067aa0ba902b7").is_none());
        let uuid = "123e4567-e89b-12d3-a456-426614174000";
        assert!(
            matches!(special("profile_id", uuid), Some(Special::Profile(id)) if id[0] == 0x12 && id[15] == 0)
        );
        assert!(matches!(
            special("profile_id", "123e4567e89b12d3a456426614174000"),
            Some(Special::Profile(_))
        ));
        assert!(
            matches!(special("profile_id", "c717c11b87121639"), Some(Special::Span(id)) if id[0] == 0xc7)
        );
        assert!(special("profile_id", "123e4567-e89b12d3-a456-4266141740000").is_none());
        assert!(special("profile_id", "123e4567-e89b-12d3-a456-42661417400é").is_none());
    }
}
