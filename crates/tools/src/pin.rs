//! Schema pins: `tp1:<tool>:<sha256 hex>:<semantics>` (docs/reference/tool-calls.md).
//!
//! The digest is SHA-256 over the RFC 8785 (JCS) canonical form of the
//! tool's `inputSchema` with the `description` keyword removed from every
//! schema and subschema, so a description edit keeps the pin while any other
//! schema edit changes it.

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use switchboard_protocol::tool_call::SchemaPin;

/// Keywords whose value is one subschema.
const SCHEMA_KEYWORDS: &[&str] = &[
    "additionalItems",
    "additionalProperties",
    "contains",
    "contentSchema",
    "else",
    "if",
    "items",
    "not",
    "propertyNames",
    "then",
    "unevaluatedItems",
    "unevaluatedProperties",
];

/// Keywords whose value is an array of subschemas (`items` in its old array
/// form is handled by [`strip_schema`] through `SCHEMA_KEYWORDS`).
const SCHEMA_ARRAY_KEYWORDS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];

/// Keywords whose value maps names to subschemas. The names are data (a
/// property may well be called `description`), only the values are schemas.
const SCHEMA_MAP_KEYWORDS: &[&str] = &[
    "$defs",
    "definitions",
    "dependentSchemas",
    "patternProperties",
    "properties",
];

/// The schema with the `description` keyword removed from it and from every
/// subschema, at every depth. Values of non-schema keywords (`default`,
/// `const`, `enum`, `examples`, unknown keywords) are data and stay as they
/// are, even when they hold a `description` member.
pub fn strip_descriptions(schema: &Value) -> Value {
    strip_schema(schema)
}

fn strip_schema(schema: &Value) -> Value {
    let Value::Object(object) = schema else {
        // `true`/`false` schemas, or something that is not a schema at all.
        return schema.clone();
    };
    let mut stripped = Map::new();
    for (keyword, value) in object {
        let keyword_str = keyword.as_str();
        let value = if keyword_str == "description" {
            continue;
        } else if SCHEMA_KEYWORDS.contains(&keyword_str) {
            match value {
                // `items` (draft 4 to 2019-09) may be an array of schemas.
                Value::Array(items) => Value::Array(items.iter().map(strip_schema).collect()),
                other => strip_schema(other),
            }
        } else if SCHEMA_ARRAY_KEYWORDS.contains(&keyword_str) {
            match value {
                Value::Array(items) => Value::Array(items.iter().map(strip_schema).collect()),
                other => other.clone(),
            }
        } else if SCHEMA_MAP_KEYWORDS.contains(&keyword_str) {
            match value {
                Value::Object(entries) => Value::Object(
                    entries
                        .iter()
                        .map(|(name, sub)| (name.clone(), strip_schema(sub)))
                        .collect(),
                ),
                other => other.clone(),
            }
        } else if keyword_str == "dependencies" {
            // Draft 7: each value is a schema or an array of property names.
            match value {
                Value::Object(entries) => Value::Object(
                    entries
                        .iter()
                        .map(|(name, sub)| {
                            let sub = if sub.is_object() {
                                strip_schema(sub)
                            } else {
                                sub.clone()
                            };
                            (name.clone(), sub)
                        })
                        .collect(),
                ),
                other => other.clone(),
            }
        } else {
            value.clone()
        };
        stripped.insert(keyword.clone(), value);
    }
    Value::Object(stripped)
}

/// The canonical (RFC 8785) text a pin's digest is taken over.
pub fn canonical_schema(schema: &Value) -> String {
    canonical_json(&strip_descriptions(schema))
}

/// RFC 8785 canonical JSON of any value.
pub fn canonical_json(value: &Value) -> String {
    // A `Value` always serializes: its keys are strings and its numbers are
    // finite, so the error branch cannot be reached.
    serde_jcs::to_string(value).unwrap_or_else(|_| value.to_string())
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The digest part of a pin for `schema`.
pub fn schema_digest(schema: &Value) -> String {
    sha256_hex(canonical_schema(schema).as_bytes())
}

/// The full pin of a tool.
pub fn schema_pin(tool: &str, input_schema: &Value, semantics: u64) -> String {
    SchemaPin::format(tool, &schema_digest(input_schema), semantics)
}

/// Why a caller's pin does not admit the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinMismatch {
    /// Passes the token rule but is not `tp1:<tool>:<hex>:<semantics>`.
    Malformed,
    /// A well-formed pin of another tool.
    OtherTool { pinned_tool: String },
    /// A well-formed pin of this tool that is not the current one.
    Changed,
}

/// Checks a caller's pin (already through the token rule) against the
/// tool's current pin.
pub fn check_pin(caller_pin: &str, tool: &str, current_pin: &str) -> Result<(), PinMismatch> {
    let Some(parsed) = SchemaPin::parse(caller_pin) else {
        return Err(PinMismatch::Malformed);
    };
    if parsed.tool != tool {
        return Err(PinMismatch::OtherTool {
            pinned_tool: parsed.tool.to_owned(),
        });
    }
    if caller_pin != current_pin {
        return Err(PinMismatch::Changed);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn description_keyword_goes_at_every_depth_but_properties_named_description_stay() {
        let schema = json!({
            "description": "top",
            "type": "object",
            "properties": {
                "description": {"type": "string", "description": "a property named description"},
                "list": {"type": "array", "items": {"type": "string", "description": "item"}},
                "tuple": {"items": [{"description": "first"}, true]},
            },
            "$defs": {"thing": {"description": "def", "oneOf": [{"description": "x", "type": "null"}]}},
            "dependencies": {"a": ["b"], "c": {"description": "dep"}},
            "default": {"description": "data, not a schema"},
            "x-custom": {"description": "unknown keyword: left alone"},
        });
        let stripped = strip_descriptions(&schema);
        assert_eq!(
            stripped,
            json!({
                "type": "object",
                "properties": {
                    "description": {"type": "string"},
                    "list": {"type": "array", "items": {"type": "string"}},
                    "tuple": {"items": [{}, true]},
                },
                "$defs": {"thing": {"oneOf": [{"type": "null"}]}},
                "dependencies": {"a": ["b"], "c": {}},
                "default": {"description": "data, not a schema"},
                "x-custom": {"description": "unknown keyword: left alone"},
            })
        );
    }

    #[test]
    fn pin_checks() {
        let schema = json!({"type": "object"});
        let pin = schema_pin("echo", &schema, 2);
        assert_eq!(check_pin(&pin, "echo", &pin), Ok(()));
        assert_eq!(
            check_pin("tp1:echo:zz:1", "echo", &pin),
            Err(PinMismatch::Malformed)
        );
        let other = schema_pin("other", &schema, 2);
        assert_eq!(
            check_pin(&other, "echo", &pin),
            Err(PinMismatch::OtherTool {
                pinned_tool: "other".into()
            })
        );
        let older = schema_pin("echo", &schema, 1);
        assert_eq!(check_pin(&older, "echo", &pin), Err(PinMismatch::Changed));
    }
}
