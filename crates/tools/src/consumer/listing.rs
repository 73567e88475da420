//! What a provider lists, by kind: its tools (every version) and, for a
//! version-2 provider (`docs/reference/tool-calls.md` section 9), its
//! resources, resource templates and prompts. Each kind has its method, the
//! member its answer holds, the metadata revision that says it changed and
//! the capability that says the provider serves it.

use serde_json::value::RawValue;
use serde_json::{Map, Value};
use switchboard_protocol::tool_call::{v2, TOOLS_LIST};

use super::tool::ListedTool;

/// One list a provider serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ListKind {
    Tools,
    Resources,
    Templates,
    Prompts,
}

impl ListKind {
    pub const ALL: [ListKind; 4] = [
        ListKind::Tools,
        ListKind::Resources,
        ListKind::Templates,
        ListKind::Prompts,
    ];

    /// The method that lists it.
    pub fn method(self) -> &'static str {
        match self {
            ListKind::Tools => TOOLS_LIST,
            ListKind::Resources => v2::RESOURCES_LIST,
            ListKind::Templates => v2::RESOURCE_TEMPLATES_LIST,
            ListKind::Prompts => v2::PROMPTS_LIST,
        }
    }

    /// The member of the answer that holds the list.
    pub fn member(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Resources => "resources",
            ListKind::Templates => "resourceTemplates",
            ListKind::Prompts => "prompts",
        }
    }

    /// The member of an entry that identifies it (`name`, `uri`, `uriTemplate`).
    pub fn key(self) -> &'static str {
        match self {
            ListKind::Tools | ListKind::Prompts => "name",
            ListKind::Resources => "uri",
            ListKind::Templates => "uriTemplate",
        }
    }

    /// The metadata member a provider bumps when this list changes
    /// (templates share the resources' revision).
    pub fn revision(self) -> &'static str {
        match self {
            ListKind::Tools => "toolsRevision",
            ListKind::Resources | ListKind::Templates => "resourcesRevision",
            ListKind::Prompts => "promptsRevision",
        }
    }

    /// The MCP server capability that says a provider serves it.
    pub fn capability(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Resources | ListKind::Templates => "resources",
            ListKind::Prompts => "prompts",
        }
    }

    /// Whether a provider of `version` with `capabilities` serves it: a
    /// version-1 provider lists tools only; a version-2 provider what its
    /// capabilities declare (tools only if it declares none at all).
    pub fn served(self, version: u64, capabilities: &Value) -> bool {
        if version < 2 || !capabilities.is_object() {
            return self == ListKind::Tools;
        }
        capabilities
            .get(self.capability())
            .is_some_and(|declared| !declared.is_null())
    }
}

/// One entry of a resources, templates or prompts list: its key (the
/// prompt's bare name, the resource's URI, the template) and the entry as
/// the provider listed it, key included.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedItem {
    pub key: String,
    pub definition: Map<String, Value>,
}

impl ListedItem {
    /// Reads one entry of a `kind` list; `Err` says why it cannot be offered.
    pub fn from_entry(kind: ListKind, entry: Value) -> Result<ListedItem, String> {
        let Value::Object(definition) = entry else {
            return Err("the entry is not an object".into());
        };
        let member = kind.key();
        let key = match definition.get(member) {
            Some(Value::String(key)) if !key.is_empty() => key.clone(),
            Some(Value::String(_)) => return Err(format!("{member} is empty")),
            _ => return Err(format!("there is no {member}")),
        };
        Ok(ListedItem { key, definition })
    }
}

/// A provider's answer to one list, read.
#[derive(Debug, Clone, PartialEq)]
pub enum Listing {
    Tools(Vec<ListedTool>),
    Items(Vec<ListedItem>),
}

impl Listing {
    /// Reads a whole answer of `kind` (`{"<member>": [...]}`). Entries that
    /// cannot be offered are skipped, each with a warning naming `source`;
    /// an answer of another shape is an error.
    pub fn from_answer(kind: ListKind, answer: &RawValue, source: &str) -> Result<Listing, String> {
        if kind == ListKind::Tools {
            return ListedTool::from_answer(answer, source).map(Listing::Tools);
        }
        let member = kind.member();
        let malformed =
            |why: &dyn std::fmt::Display| format!("malformed {} answer: {why}", kind.method());
        let mut answer: Map<String, Value> =
            serde_json::from_str(answer.get()).map_err(|error| malformed(&error))?;
        let Some(Value::Array(entries)) = answer.remove(member) else {
            return Err(malformed(&format_args!("no {member} array")));
        };
        let mut items = Vec::with_capacity(entries.len());
        for (index, entry) in entries.into_iter().enumerate() {
            match ListedItem::from_entry(kind, entry) {
                Ok(item) => items.push(item),
                Err(reason) => {
                    tracing::warn!(
                        source,
                        index,
                        reason,
                        list = kind.method(),
                        "skipping a list entry"
                    )
                }
            }
        }
        Ok(Listing::Items(items))
    }

    pub fn empty(kind: ListKind) -> Listing {
        match kind {
            ListKind::Tools => Listing::Tools(Vec::new()),
            _ => Listing::Items(Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn raw(value: Value) -> Box<RawValue> {
        RawValue::from_string(value.to_string()).unwrap()
    }

    #[test]
    fn a_version_one_provider_serves_tools_only_and_a_version_two_what_it_declares() {
        let everything = json!({"tools": {}, "resources": {"subscribe": true}, "prompts": {}});
        assert!(ListKind::Tools.served(1, &everything));
        assert!(!ListKind::Prompts.served(1, &everything));
        for kind in ListKind::ALL {
            assert!(kind.served(2, &everything), "{kind:?}");
        }
        let tools_only = json!({"tools": {"listChanged": true}, "prompts": null});
        assert!(ListKind::Tools.served(2, &tools_only));
        assert!(!ListKind::Resources.served(2, &tools_only));
        assert!(!ListKind::Templates.served(2, &tools_only));
        assert!(!ListKind::Prompts.served(2, &tools_only));
        assert!(ListKind::Tools.served(2, &Value::Null));
        assert!(!ListKind::Resources.served(2, &Value::Null));
    }

    #[test]
    fn items_keep_their_whole_entry_and_bad_ones_are_skipped() {
        let answer = raw(json!({"resources": [
            {"uri": "file:///a", "name": "a", "mimeType": "text/plain"},
            {"name": "no uri"},
            {"uri": ""},
            "text",
        ]}));
        let Listing::Items(items) =
            Listing::from_answer(ListKind::Resources, &answer, "svc").unwrap()
        else {
            panic!("not items")
        };
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].key, "file:///a");
        assert_eq!(items[0].definition["mimeType"], "text/plain");
        assert_eq!(items[0].definition["uri"], "file:///a");
    }

    #[test]
    fn an_answer_of_another_shape_is_an_error() {
        for (kind, answer) in [
            (ListKind::Prompts, json!({"prompt": []})),
            (ListKind::Templates, json!({"resourceTemplates": {}})),
            (ListKind::Resources, json!([1])),
        ] {
            let error = Listing::from_answer(kind, &raw(answer.clone()), "svc").unwrap_err();
            assert!(error.starts_with("malformed "), "{answer}: {error}");
        }
        let templates =
            raw(json!({"resourceTemplates": [{"uriTemplate": "db://{table}", "name": "t"}]}));
        assert!(matches!(
            Listing::from_answer(ListKind::Templates, &templates, "svc"),
            Ok(Listing::Items(items)) if items[0].key == "db://{table}"
        ));
    }
}
