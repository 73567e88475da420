//! The tools a consumer offers at one moment ([`ToolTable`], immutable) and
//! the rules that build one ([`TableBuilder`]): whoever claims a namespace,
//! an exposed name or a model-safe name first keeps it.
//!
//! Sources are added in the order they arrived, so a newcomer never takes a
//! name from a tool already offered. The hub's index adds one group per
//! tool provider; a consumer with tools of its own (e.g. an ACP session's
//! MCP servers) starts from the hub's table with [`TableBuilder::include`]
//! and adds its groups after it, under the same rules, so no name can mean
//! two tools.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use super::naming::{model_safe_name, MAX_MODEL_NAME_BYTES};
use super::tool::ExposedTool;

/// The tools at one moment, by exposed name, and their model-safe names
/// both ways.
#[derive(Debug, Default, PartialEq)]
pub struct ToolTable {
    tools: BTreeMap<String, Entry>,
    /// Model-safe name → exposed name.
    by_model_name: BTreeMap<String, String>,
    /// The namespaces and tools in the order they were claimed.
    groups: Vec<Group>,
}

#[derive(Debug, PartialEq)]
struct Group {
    owner: String,
    namespace: String,
    /// Exposed names.
    tools: Vec<String>,
}

#[derive(Debug, PartialEq)]
struct Entry {
    tool: Arc<ExposedTool>,
    model_name: Option<String>,
}

impl ToolTable {
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The tool exposed as `name` (`<namespace>__<tool>`).
    pub fn get(&self, name: &str) -> Option<&Arc<ExposedTool>> {
        self.tools.get(name).map(|entry| &entry.tool)
    }

    /// Every tool, by exposed name.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<ExposedTool>> {
        self.tools.values().map(|entry| &entry.tool)
    }

    /// The name a model is offered the tool `exposed` under; `None` if it
    /// has none (too long, or another tool holds its model-safe form).
    pub fn model_name(&self, exposed: &str) -> Option<&str> {
        self.tools.get(exposed)?.model_name.as_deref()
    }

    /// The tool a model called by `model_name`.
    pub fn by_model_name(&self, model_name: &str) -> Option<&Arc<ExposedTool>> {
        self.get(self.by_model_name.get(model_name)?)
    }

    /// The tools a model is offered, by model-safe name.
    pub fn model_tools(&self) -> impl Iterator<Item = (&str, &Arc<ExposedTool>)> {
        self.by_model_name
            .iter()
            .filter_map(|(model, exposed)| Some((model.as_str(), self.get(exposed)?)))
    }
}

/// A name two claimants wanted; the first keeps it. Logged once each.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Conflict {
    /// Two sources claim one namespace: none of `ignored`'s tools is offered.
    Namespace {
        namespace: String,
        holder: String,
        ignored: String,
    },
    /// Two tools of different namespaces make one exposed name
    /// (`a__b` + `c` and `a` + `b__c`): the later one is not offered.
    ExposedName {
        name: String,
        holder: String,
        ignored: String,
    },
    /// Two exposed names have one model-safe form: models are offered the
    /// first one only (MCP hosts still see both).
    ModelName {
        model_name: String,
        holder: String,
        ignored: String,
    },
    /// The model-safe form is too long: models are not offered the tool.
    TooLongForModels { name: String },
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Conflict::Namespace {
                namespace,
                holder,
                ignored,
            } => write!(
                f,
                "two tool sources claim namespace {namespace:?}: serving {holder} (the first), ignoring {ignored}"
            ),
            Conflict::ExposedName {
                name,
                holder,
                ignored,
            } => write!(
                f,
                "two tools are named {name:?}: serving the one of {holder} (the first), ignoring the one of {ignored}"
            ),
            Conflict::ModelName {
                model_name,
                holder,
                ignored,
            } => write!(
                f,
                "{ignored:?} and {holder:?} have one model-safe name, {model_name:?}: only {holder:?} (the first) gets it, so agents on a model API are offered that one only"
            ),
            Conflict::TooLongForModels { name } => write!(
                f,
                "{name:?} is longer than the {MAX_MODEL_NAME_BYTES} characters a model API takes as a function name: it gets no model-safe name, so agents on a model API are not offered it"
            ),
        }
    }
}

/// Builds a [`ToolTable`] from groups added in claim order.
#[derive(Default)]
pub struct TableBuilder {
    table: ToolTable,
    /// Namespace → the backend id that claimed it.
    namespaces: HashMap<String, String>,
    conflicts: Vec<Conflict>,
}

impl TableBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the tools of `owner` (a backend id) under `namespace`. If another
    /// owner claimed the namespace first, nothing is added and `false` is
    /// returned. Every tool must be in `namespace`.
    pub fn add_group(
        &mut self,
        owner: &str,
        namespace: &str,
        tools: impl IntoIterator<Item = Arc<ExposedTool>>,
    ) -> bool {
        match self.namespaces.get(namespace) {
            Some(holder) if holder != owner => {
                self.conflicts.push(Conflict::Namespace {
                    namespace: namespace.to_owned(),
                    holder: holder.clone(),
                    ignored: owner.to_owned(),
                });
                return false;
            }
            Some(_) => {}
            None => {
                self.namespaces
                    .insert(namespace.to_owned(), owner.to_owned());
            }
        }
        let mut claimed = Vec::new();
        for tool in tools {
            debug_assert_eq!(tool.namespace, namespace);
            if let Some(name) = self.add_tool(tool) {
                claimed.push(name);
            }
        }
        match self
            .table
            .groups
            .iter_mut()
            .find(|group| group.namespace == namespace)
        {
            Some(group) => group.tools.extend(claimed),
            None => self.table.groups.push(Group {
                owner: owner.to_owned(),
                namespace: namespace.to_owned(),
                tools: claimed,
            }),
        }
        true
    }

    /// Claims again every namespace and tool of `table`, in the order it
    /// claimed them, so that later groups come after them.
    pub fn include(&mut self, table: &ToolTable) {
        for group in &table.groups {
            let tools = group
                .tools
                .iter()
                .filter_map(|name| table.get(name).cloned());
            self.add_group(&group.owner, &group.namespace, tools);
        }
    }

    /// Adds `tool` unless its exposed name is taken; the name if added.
    fn add_tool(&mut self, tool: Arc<ExposedTool>) -> Option<String> {
        if let Some(holder) = self.table.tools.get(&tool.name) {
            self.conflicts.push(Conflict::ExposedName {
                name: tool.name.clone(),
                holder: holder.tool.backend.id().to_owned(),
                ignored: tool.backend.id().to_owned(),
            });
            return None;
        }
        let model_name = match model_safe_name(&tool.name) {
            None => {
                self.conflicts.push(Conflict::TooLongForModels {
                    name: tool.name.clone(),
                });
                None
            }
            Some(model_name) => match self.table.by_model_name.get(&model_name) {
                Some(holder) => {
                    self.conflicts.push(Conflict::ModelName {
                        model_name,
                        holder: holder.clone(),
                        ignored: tool.name.clone(),
                    });
                    None
                }
                None => {
                    self.table
                        .by_model_name
                        .insert(model_name.clone(), tool.name.clone());
                    Some(model_name)
                }
            },
        };
        let name = tool.name.clone();
        self.table
            .tools
            .insert(name.clone(), Entry { tool, model_name });
        Some(name)
    }

    /// The table, and every name that was contested while building it.
    pub fn finish(self) -> (ToolTable, Vec<Conflict>) {
        (self.table, self.conflicts)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;
    use serde_json::value::RawValue;
    use switchboard_protocol::tool_call::ToolCallRequest;

    use super::*;
    use crate::consumer::{CallError, ListedTool, ToolBackend};
    use crate::tool::BoxFuture;

    /// A source that only has a name: these tests never call a tool.
    struct Source(&'static str);

    impl ToolBackend for Source {
        fn id(&self) -> &str {
            self.0
        }

        fn call(
            &self,
            _request: ToolCallRequest,
            _timeout: Option<Duration>,
        ) -> BoxFuture<Result<Box<RawValue>, CallError>> {
            Box::pin(async { Err(CallError::NotConnected) })
        }
    }

    fn tools(source: &'static str, namespace: &str, names: &[&str]) -> Vec<Arc<ExposedTool>> {
        let backend: Arc<dyn ToolBackend> = Arc::new(Source(source));
        names
            .iter()
            .map(|name| {
                let listed =
                    ListedTool::from_entry(json!({"name": name, "inputSchema": {}})).unwrap();
                Arc::new(ExposedTool::new(namespace, listed, backend.clone()))
            })
            .collect()
    }

    /// A table of `(owner, namespace, tools)` groups added in that order.
    fn build(groups: &[(&'static str, &str, &[&str])]) -> (ToolTable, Vec<Conflict>) {
        let mut builder = TableBuilder::new();
        for (owner, namespace, names) in groups {
            builder.add_group(owner, namespace, tools(owner, namespace, names));
        }
        builder.finish()
    }

    fn names(table: &ToolTable) -> Vec<String> {
        table.tools().map(|tool| tool.name.clone()).collect()
    }

    #[test]
    fn the_first_claim_of_a_namespace_wins() {
        let mut builder = TableBuilder::new();
        assert!(builder.add_group("first", "git", tools("first", "git", &["log"])));
        assert!(!builder.add_group("second", "git", tools("second", "git", &["log", "diff"])));
        let (table, conflicts) = builder.finish();
        assert_eq!(names(&table), ["git__log"]);
        assert_eq!(table.get("git__log").unwrap().backend.id(), "first");
        assert_eq!(
            conflicts,
            [Conflict::Namespace {
                namespace: "git".into(),
                holder: "first".into(),
                ignored: "second".into(),
            }]
        );
    }

    #[test]
    fn one_exposed_name_from_two_namespaces_keeps_the_first() {
        let (table, conflicts) = build(&[("one", "a__b", &["c"]), ("two", "a", &["b__c", "d"])]);
        assert_eq!(names(&table), ["a__b__c", "a__d"]);
        assert_eq!(table.get("a__b__c").unwrap().backend.id(), "one");
        assert!(
            matches!(&conflicts[..], [Conflict::ExposedName { name, .. }] if name == "a__b__c")
        );
    }

    #[test]
    fn model_names_map_both_ways_and_the_first_keeps_a_contested_one() {
        let (table, conflicts) = build(&[
            ("one", "my.ns", &["do it"]),
            ("two", "my_ns", &["do_it", "other"]),
        ]);
        assert_eq!(table.model_name("my.ns__do it"), Some("my_ns__do_it"));
        assert_eq!(
            table.by_model_name("my_ns__do_it").unwrap().name,
            "my.ns__do it"
        );
        // Still exposed (MCP hosts take any name), but not to models.
        assert!(table.get("my_ns__do_it").is_some());
        assert_eq!(table.model_name("my_ns__do_it"), None);
        assert_eq!(
            table
                .model_tools()
                .map(|(model, _)| model)
                .collect::<Vec<_>>(),
            ["my_ns__do_it", "my_ns__other"]
        );
        assert_eq!(
            conflicts,
            [Conflict::ModelName {
                model_name: "my_ns__do_it".into(),
                holder: "my.ns__do it".into(),
                ignored: "my_ns__do_it".into(),
            }]
        );
    }

    #[test]
    fn a_name_too_long_for_models_is_still_exposed() {
        let long = "t".repeat(80);
        let (table, conflicts) = build(&[("one", "ns", &[&long])]);
        let exposed = format!("ns__{long}");
        assert!(table.get(&exposed).is_some());
        assert_eq!(table.model_name(&exposed), None);
        assert_eq!(table.model_tools().count(), 0);
        assert_eq!(conflicts, [Conflict::TooLongForModels { name: exposed }]);
    }

    #[test]
    fn groups_added_after_an_included_table_never_take_its_names() {
        let (hub, _) = build(&[("svc-1", "git", &["log"]), ("svc-2", "fs", &["read"])]);

        let mut session = TableBuilder::new();
        session.include(&hub);
        assert!(!session.add_group("mcp:git", "git", tools("mcp:git", "git", &["status"])));
        assert!(session.add_group("mcp:web", "web", tools("mcp:web", "web", &["fetch"])));
        let (merged, conflicts) = session.finish();
        assert_eq!(names(&merged), ["fs__read", "git__log", "web__fetch"]);
        assert_eq!(merged.get("git__log").unwrap().backend.id(), "svc-1");
        assert_eq!(conflicts.len(), 1);

        // Including a table alone rebuilds it exactly.
        let mut again = TableBuilder::new();
        again.include(&hub);
        assert_eq!(again.finish().0, hub);
    }
}
