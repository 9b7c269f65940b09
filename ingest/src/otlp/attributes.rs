//! Attribute keys and values as the strings Stackhouse stores and matches on. Inputs are
//! validated first, so string table indices here are in range.

use stackhouse_proto::otlp_common::{AnyValue, KeyValue, any_value::Value};
use stackhouse_proto::otlp_profiles::KeyValueAndUnit;

use super::dictionary::Dictionary;

/// A `KeyValue` names its key inline or, from newer senders, through the string table.
pub(crate) fn key_value_key<'a>(kv: &'a KeyValue, strings: &'a Dictionary) -> &'a str {
    if kv.key_strindex != 0 {
        strings.string(kv.key_strindex)
    } else {
        &kv.key
    }
}

pub(crate) fn key_value_pair(kv: &KeyValue, strings: &Dictionary) -> (String, String) {
    (
        key_value_key(kv, strings).to_string(),
        value_string(kv.value.as_ref(), strings),
    )
}

pub(crate) fn dictionary_pair(attr: &KeyValueAndUnit, strings: &Dictionary) -> (String, String) {
    (
        strings.string(attr.key_strindex).to_string(),
        value_string(attr.value.as_ref(), strings),
    )
}

/// Scalars as their plain text (bytes in hex, like ids); arrays and key-value lists as
/// compact JSON so that their structure survives.
pub(crate) fn value_string(value: Option<&AnyValue>, strings: &Dictionary) -> String {
    match value.and_then(|v| v.value.as_ref()) {
        None => String::new(),
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::StringValueStrindex(i)) => strings.string(*i).to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        Some(Value::BytesValue(b)) => hex::encode(b),
        Some(Value::ArrayValue(_) | Value::KvlistValue(_)) => json_value(value, strings).to_string(),
    }
}

fn json_value(value: Option<&AnyValue>, strings: &Dictionary) -> serde_json::Value {
    use serde_json::Value as J;
    match value.and_then(|v| v.value.as_ref()) {
        None => J::Null,
        Some(Value::StringValue(s)) => J::from(s.as_str()),
        Some(Value::StringValueStrindex(i)) => J::from(strings.string(*i)),
        Some(Value::BoolValue(b)) => J::from(*b),
        Some(Value::IntValue(i)) => J::from(*i),
        Some(Value::DoubleValue(d)) => J::from(*d),
        Some(Value::BytesValue(b)) => J::from(hex::encode(b)),
        Some(Value::ArrayValue(a)) => {
            J::Array(a.values.iter().map(|v| json_value(Some(v), strings)).collect())
        }
        Some(Value::KvlistValue(kvs)) => J::Object(
            kvs.values
                .iter()
                .map(|kv| {
                    (
                        key_value_key(kv, strings).to_string(),
                        json_value(kv.value.as_ref(), strings),
                    )
                })
                .collect(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stackhouse_proto::otlp_common::{ArrayValue, KeyValueList};
    use stackhouse_proto::otlp_profiles::ProfilesDictionary;

    fn any(v: Value) -> AnyValue {
        AnyValue { value: Some(v) }
    }

    #[test]
    fn values_stringify_by_kind() {
        let strings = Dictionary::from(&ProfilesDictionary {
            string_table: vec![String::new(), "s".to_string()],
            ..ProfilesDictionary::default()
        });
        let cases = [
            (any(Value::StringValue("x".into())), "x"),
            (any(Value::StringValueStrindex(1)), "s"),
            (any(Value::IntValue(-3)), "-3"),
            (any(Value::BoolValue(true)), "true"),
            (any(Value::DoubleValue(1.5)), "1.5"),
            (any(Value::BytesValue(vec![0xab, 0x01])), "ab01"),
            (
                any(Value::ArrayValue(ArrayValue {
                    values: vec![any(Value::IntValue(1)), any(Value::StringValue("a".into()))],
                })),
                r#"[1,"a"]"#,
            ),
            (
                any(Value::KvlistValue(KeyValueList {
                    values: vec![KeyValue {
                        key: String::new(),
                        key_strindex: 1,
                        value: Some(any(Value::BoolValue(false))),
                    }],
                })),
                r#"{"s":false}"#,
            ),
        ];
        for (value, want) in cases {
            assert_eq!(value_string(Some(&value), &strings), want);
        }
        assert_eq!(value_string(None, &strings), "");
    }
}
