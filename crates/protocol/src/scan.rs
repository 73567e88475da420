//! Finding the members of a JSON object that has already been validated.
//!
//! The hub validates each message once while decoding the envelope
//! (`jsonrpc::decode_indexed`), which also records the members of `params`
//! ([`crate::json::MemberIndex`]). This is the fallback for an object with
//! more members than that index holds: [`members`] walks the object's top
//! level and *skips* each value (quotes, escapes and brackets only), which is
//! what routing needs: the bytes of `serviceId`, `method` and `params`,
//! payload untouched.
//!
//! Only call it on text serde_json has validated (a `RawValue`): it does not
//! check syntax, it only relies on it.

use serde_json::value::RawValue;

use crate::json::{JsonStr, Member};

/// The members of the JSON object `object`: each key is the JSON string with
/// its quotes, each value the exact bytes of the value. Yields nothing when
/// `object` is not an object.
pub fn members(object: &RawValue) -> Members<'_> {
    let text = object.get();
    let bytes = text.as_bytes();
    let start = if bytes.first() == Some(&b'{') {
        1
    } else {
        bytes.len()
    };
    Members { text, at: start }
}

pub struct Members<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Iterator for Members<'a> {
    type Item = Member<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        let bytes = self.text.as_bytes();
        let mut i = skip_space(bytes, self.at);
        if bytes.get(i) == Some(&b',') {
            i = skip_space(bytes, i + 1);
        }
        if bytes.get(i) != Some(&b'"') {
            self.at = bytes.len();
            return None;
        }
        let (key_end, key_escaped) = string_end(bytes, i);
        let key = JsonStr {
            raw: &self.text[i..key_end],
            escaped: key_escaped,
        };
        i = skip_space(bytes, key_end);
        // A validated object has ':' here.
        i = skip_space(bytes, i + 1);
        let (value_end, value_escaped) = value_end(bytes, i);
        let value = &self.text[i..value_end];
        self.at = value_end;
        Some(Member {
            key,
            value,
            value_escaped,
        })
    }
}

fn skip_space(bytes: &[u8], mut i: usize) -> usize {
    while matches!(bytes.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// `bytes[start]` is an opening quote: the index just past the closing one,
/// and whether the string has escapes.
fn string_end(bytes: &[u8], start: usize) -> (usize, bool) {
    let mut i = start + 1;
    let mut escaped = false;
    while let Some(offset) = memchr::memchr2(b'"', b'\\', &bytes[i..]) {
        i += offset;
        if bytes[i] == b'\\' {
            escaped = true;
            i += 2;
        } else {
            return (i + 1, escaped);
        }
    }
    (bytes.len(), escaped)
}

/// `bytes[start]` starts a value: the index just past it, and whether it is
/// a string with escapes.
fn value_end(bytes: &[u8], start: usize) -> (usize, bool) {
    let end = match bytes.get(start) {
        Some(b'"') => return string_end(bytes, start),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut i = start;
            while i < bytes.len() {
                match bytes[i] {
                    b'"' => {
                        i = string_end(bytes, i).0;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return (i + 1, false);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            bytes.len()
        }
        Some(_) => {
            let mut i = start;
            while !matches!(
                bytes.get(i),
                None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            ) {
                i += 1;
            }
            i
        }
        None => start,
    };
    (end, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    fn all(text: &str) -> Vec<(String, String)> {
        let value = raw(text);
        members(&value)
            .map(|m| (m.key.raw.to_owned(), m.value.to_owned()))
            .collect()
    }

    #[test]
    fn strings_with_escapes_anywhere_split_like_serde_json() {
        // Escaped quotes and backslashes at every position of strings short
        // and long (memchr's vector width is 32): the members found must be
        // the ones serde_json reads.
        for len in 0..70 {
            for at in 0..=len {
                for escape in [r#"\""#, r"\\"] {
                    let mut text = "a".repeat(len);
                    text.insert_str(at, escape);
                    let object = format!(r#"{{"k{text}":"v{text}","z":1}}"#);
                    let expected: serde_json::Map<String, serde_json::Value> =
                        serde_json::from_str(&object).unwrap();
                    let found = all(&object);
                    assert_eq!(found.len(), 2, "{object}");
                    for (key, value) in found {
                        let key: String = serde_json::from_str(&key).unwrap();
                        let value: serde_json::Value = serde_json::from_str(&value).unwrap();
                        assert_eq!(expected[&key], value, "{object}");
                    }
                }
            }
        }
    }

    #[test]
    fn finds_every_member_with_exact_bytes() {
        let text = r#" { "a" : 1 , "b":"x\"}y" ,"c" : { "d": [1, {"e": "]"}], "f": null } , "g":[ ] ,"h":-1.5e3 } "#;
        let value = RawValue::from_string(text.trim().to_owned()).unwrap();
        let found: Vec<(&str, &str)> = members(&value).map(|m| (m.key.raw, m.value)).collect();
        assert_eq!(
            found,
            vec![
                ("\"a\"", "1"),
                ("\"b\"", r#""x\"}y""#),
                ("\"c\"", r#"{ "d": [1, {"e": "]"}], "f": null }"#),
                ("\"g\"", "[ ]"),
                ("\"h\"", "-1.5e3"),
            ]
        );
    }

    #[test]
    fn empty_objects_and_non_objects_have_no_members() {
        assert!(all("{}").is_empty());
        assert!(all("{ }").is_empty());
        assert!(all("[1,2]").is_empty());
        assert!(all("\"s\"").is_empty());
    }

    #[test]
    fn keys_come_raw_and_decode_to_their_text() {
        let value = raw(r#"{"service\u0049d":"s1","method":"m"}"#);
        let member = members(&value).next().unwrap();
        assert_eq!(member.key.raw, r#""service\u0049d""#, "keys are raw");
        assert!(member.key.escaped && member.key.is("serviceId"));
        assert_eq!(member.value, "\"s1\"");
        assert_eq!(member.value_str().as_deref(), Ok("s1"));
    }

    #[test]
    fn agrees_with_serde_on_nested_values() {
        let text = r#"{"k":{"s":"\\","t":"\\\"","u":[["]"],{"}":"{"}]},"z":true}"#;
        let parsed: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(text).unwrap();
        let value = raw(text);
        for member in members(&value) {
            let key: String = serde_json::from_str(member.key.raw).unwrap();
            let member: serde_json::Value = serde_json::from_str(member.value).unwrap();
            assert_eq!(parsed[&key], member);
        }
        assert_eq!(members(&value).count(), parsed.len());
    }
}
