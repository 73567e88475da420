//! Tool search: with a profile's `tool_search = true` (or `switchboard
//! mcp --tool-search`) a client lists two tools, `search_tools` (a query →
//! the best-matching tools with their schemas) and `call_tool` (a name and
//! its arguments), plus the profile's `pinned` ones, instead of every tool
//! of every provider; the full list of many servers fills a model's
//! context.
//!
//! Ranking is BM25 (the `bm25` crate: its English tokenizer stems and drops
//! stop words) over each tool's name split into words, its title and
//! description, and its parameters' names and descriptions. The index is
//! built once per tool table, on the first search after a change.

use std::sync::Arc;

use bm25::{Language, SearchEngine, SearchEngineBuilder};
use serde_json::{json, Value};

/// The tool that searches.
pub const SEARCH_TOOL: &str = "search_tools";
/// The tool that calls a tool found by name.
pub const CALL_TOOL: &str = "call_tool";
/// Tools a search returns unless it asks for another number.
pub const DEFAULT_RESULTS: usize = 5;
/// The most a search returns.
pub const MAX_RESULTS: usize = 20;

/// The two tools a client with tool search lists.
pub fn meta_tools() -> [Value; 2] {
    [
        json!({
            "name": SEARCH_TOOL,
            "title": "Search tools",
            "description": "Find the tools for a task among every tool this server can run. \
                Describe what you want to do in a few words; the best matches come back \
                with their names, descriptions and input schemas. Then run one with call_tool.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What you want to do, in a few words."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS,
                              "description": format!("How many tools to return (default {DEFAULT_RESULTS}).")},
                },
                "required": ["query"],
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false},
        }),
        json!({
            "name": CALL_TOOL,
            "title": "Call a tool",
            "description": "Run a tool that search_tools found, by its exact name, \
                with arguments that follow its input schema.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The tool's name, as search_tools gave it."},
                    "arguments": {"type": "object", "description": "The tool's arguments."},
                },
                "required": ["name"],
            },
        }),
    ]
}

/// The tools of one table, ready to search.
pub struct ToolIndex {
    engine: SearchEngine<u32>,
    /// Every definition a client may be shown, by document id.
    definitions: Arc<[Value]>,
}

impl ToolIndex {
    pub fn build(definitions: Arc<[Value]>) -> ToolIndex {
        let documents: Vec<bm25::Document<u32>> = definitions
            .iter()
            .enumerate()
            .map(|(id, definition)| bm25::Document::new(id as u32, document(definition)))
            .collect();
        let engine =
            SearchEngineBuilder::<u32>::with_documents(Language::English, documents).build();
        ToolIndex {
            engine,
            definitions,
        }
    }

    /// The definitions that match `query` best, best first, that `keep`
    /// lets through, at most `limit`.
    pub fn search(&self, query: &str, limit: usize, keep: impl Fn(&Value) -> bool) -> Vec<Value> {
        self.engine
            .search(query, None)
            .into_iter()
            .filter_map(|found| self.definitions.get(found.document.id as usize))
            .filter(|definition| keep(definition))
            .take(limit)
            .cloned()
            .collect()
    }
}

/// The text a tool is found by.
fn document(definition: &Value) -> String {
    let mut text = String::new();
    let mut add = |part: &str| {
        text.push_str(part);
        text.push('\n');
    };
    if let Some(name) = definition["name"].as_str() {
        add(&words(name));
    }
    for key in ["title", "description"] {
        if let Some(part) = definition[key].as_str() {
            add(part);
        }
    }
    if let Some(properties) = definition["inputSchema"]["properties"].as_object() {
        for (name, property) in properties {
            add(&words(name));
            if let Some(description) = property["description"].as_str() {
                add(description);
            }
        }
    }
    text
}

/// An identifier as words: `git__create_branch`, `getSum` → `git create
/// branch`, `get Sum`.
fn words(identifier: &str) -> String {
    let mut out = String::with_capacity(identifier.len() + 8);
    let mut previous_lower = false;
    for c in identifier.chars() {
        if c == '_' || c == '-' || c == '.' {
            out.push(' ');
            previous_lower = false;
            continue;
        }
        if c.is_uppercase() && previous_lower {
            out.push(' ');
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_become_words() {
        assert_eq!(words("git__create_branch"), "git  create branch");
        assert_eq!(words("getSum"), "get Sum");
        assert_eq!(
            words("trigger-long-running-operation"),
            "trigger long running operation"
        );
    }

    #[test]
    fn the_best_match_comes_first_and_keep_filters() {
        let definitions: Arc<[Value]> = vec![
            json!({"name": "git__commit", "description": "Record changes to the repository.",
                   "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}}),
            json!({"name": "slack__post_message", "description": "Send a message to a channel.",
                   "inputSchema": {"type": "object", "properties": {"channel": {"type": "string"}}}}),
        ]
        .into();
        let index = ToolIndex::build(definitions);
        let found = index.search("post a message in a slack channel", 5, |_| true);
        assert_eq!(found[0]["name"], "slack__post_message");
        let found = index.search("post a message in a slack channel", 5, |d| {
            d["name"] != "slack__post_message"
        });
        assert!(found.iter().all(|d| d["name"] != "slack__post_message"));
        assert!(index.search("zebra", 5, |_| true).is_empty());
    }
}
