//! The one naming rule for exposed tools, and its model-safe form.
//!
//! A tool is exposed as `<namespace>__<tool>`: the namespace its source
//! claimed and the provider's bare tool name, exactly as listed. That is the
//! name MCP hosts see through `switchboard mcp` and the key of a
//! [`ToolTable`](super::ToolTable).
//!
//! Model APIs are stricter: a function name is `[A-Za-z0-9_-]{1,64}`
//! (OpenAI's rule; the other OpenAI-compatible servers are no looser). The
//! model-safe form replaces every other character with `_`. That can map
//! two exposed names to one, so only the forward direction is computed here;
//! the way back is a lookup in the table that handed the name out
//! ([`ToolTable::by_model_name`](super::ToolTable::by_model_name)), which
//! also settles who keeps a contested name.

/// Between the namespace and the bare tool name.
pub const SEPARATOR: &str = "__";

/// The longest function name a model API takes.
pub const MAX_MODEL_NAME_BYTES: usize = 64;

/// `<namespace>__<tool>`.
pub fn exposed_name(namespace: &str, tool: &str) -> String {
    format!("{namespace}{SEPARATOR}{tool}")
}

/// `text` with every character outside `[A-Za-z0-9_-]` (what a function
/// name may hold) made `_`.
pub fn model_safe_chars(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The model-safe form of an exposed name: every character outside
/// `[A-Za-z0-9_-]` becomes `_`. `None` when the result is longer than
/// [`MAX_MODEL_NAME_BYTES`] (or empty): no model API would take it.
pub fn model_safe_name(exposed: &str) -> Option<String> {
    let safe = model_safe_chars(exposed);
    // Every character is ASCII now, so bytes and characters agree.
    (!safe.is_empty() && safe.len() <= MAX_MODEL_NAME_BYTES).then_some(safe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposed_names_keep_the_listed_text() {
        assert_eq!(exposed_name("git", "log"), "git__log");
        assert_eq!(exposed_name("my.ns", "do it"), "my.ns__do it");
    }

    #[test]
    fn model_safe_names_hold_only_what_function_names_may() {
        assert_eq!(model_safe_name("git__log").as_deref(), Some("git__log"));
        assert_eq!(
            model_safe_name("my.ns__do it").as_deref(),
            Some("my_ns__do_it")
        );
        assert_eq!(model_safe_name("ns__ümlaut").as_deref(), Some("ns___mlaut"));
        assert_eq!(model_safe_name("a-b__c_d").as_deref(), Some("a-b__c_d"));
    }

    #[test]
    fn model_safe_names_stop_at_the_length_limit() {
        let at_limit = exposed_name("n", &"t".repeat(MAX_MODEL_NAME_BYTES - 3));
        assert_eq!(at_limit.len(), MAX_MODEL_NAME_BYTES);
        assert_eq!(model_safe_name(&at_limit), Some(at_limit.clone()));
        let over = format!("{at_limit}t");
        assert_eq!(model_safe_name(&over), None);
        // A multi-byte character counts once: it becomes one `_`.
        let wide = exposed_name("n", &format!("{}é", "t".repeat(MAX_MODEL_NAME_BYTES - 4)));
        assert_eq!(
            model_safe_name(&wide).map(|n| n.len()),
            Some(MAX_MODEL_NAME_BYTES)
        );
    }
}
