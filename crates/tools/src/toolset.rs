//! A provider's tools, compiled: pins computed, schemas compiled, the
//! `tools/list` answer encoded once. Immutable; a change builds a new set.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{json, Value};

use crate::errors::{ArgumentError, MAX_ARGUMENT_ERRORS};
use crate::pin::schema_pin;
use crate::tool::{ToolHandler, ToolSpec};
use crate::ToolsError;

/// The longest tool name, in bytes (MCP's bound).
pub const MAX_TOOL_NAME_BYTES: usize = 128;

pub(crate) struct RegisteredTool {
    pub(crate) spec: ToolSpec,
    pub(crate) pin: String,
    validator: jsonschema::Validator,
    pub(crate) handler: Arc<dyn ToolHandler>,
}

impl RegisteredTool {
    fn compile(spec: ToolSpec, handler: Arc<dyn ToolHandler>) -> Result<Self, ToolsError> {
        validate_tool_name(&spec.name)?;
        if !spec.input_schema.is_object() {
            return Err(ToolsError::InvalidSchema {
                tool: spec.name.clone(),
                message: "inputSchema must be a JSON object".into(),
            });
        }
        let validator = jsonschema::validator_for(&spec.input_schema).map_err(|error| {
            ToolsError::InvalidSchema {
                tool: spec.name.clone(),
                message: error.to_string(),
            }
        })?;
        let pin = schema_pin(&spec.name, &spec.input_schema, spec.semantics);
        Ok(RegisteredTool {
            spec,
            pin,
            validator,
            handler,
        })
    }

    /// The tool's schema violations in `arguments`, at most
    /// [`MAX_ARGUMENT_ERRORS`] of them; empty when the arguments are valid.
    pub(crate) fn check_arguments(&self, arguments: &Value) -> Vec<ArgumentError> {
        self.validator
            .iter_errors(arguments)
            .take(MAX_ARGUMENT_ERRORS)
            .map(|error| ArgumentError {
                path: error.instance_path().to_string(),
                message: error.to_string(),
            })
            .collect()
    }

    fn listing(&self) -> Value {
        let spec = &self.spec;
        let mut entry = spec.extra.clone();
        entry.insert("name".into(), json!(spec.name));
        if let Some(title) = &spec.title {
            entry.insert("title".into(), json!(title));
        }
        if let Some(description) = &spec.description {
            entry.insert("description".into(), json!(description));
        }
        entry.insert("inputSchema".into(), spec.input_schema.clone());
        if let Some(output) = &spec.output_schema {
            entry.insert("outputSchema".into(), output.clone());
        }
        if let Some(annotations) = &spec.annotations {
            entry.insert("annotations".into(), Value::Object(annotations.clone()));
        }
        entry.insert("schemaPin".into(), json!(self.pin));
        Value::Object(entry)
    }
}

/// Whether a tool would be accepted: its name and its input schema. Lets a
/// relay (such as `provide-mcp`) skip one bad tool instead of all of them.
pub fn check_tool_spec(spec: &ToolSpec) -> Result<(), ToolsError> {
    struct Never;
    impl ToolHandler for Never {
        fn call(
            &self,
            _call: crate::tool::ToolCall,
        ) -> crate::tool::BoxFuture<Result<crate::tool::ToolResult, crate::tool::ToolError>>
        {
            Box::pin(async {
                Err(crate::tool::ToolError::NotRun(
                    switchboard_protocol::ErrorObject::new(
                        switchboard_protocol::ErrorCode::InternalError,
                        "never called",
                    ),
                ))
            })
        }
    }
    RegisteredTool::compile(spec.clone(), Arc::new(Never)).map(|_| ())
}

/// Printable ASCII without space (so the name fits in a pin), 1 to 128 bytes.
pub fn validate_tool_name(name: &str) -> Result<(), ToolsError> {
    let invalid = |reason: String| ToolsError::InvalidToolName {
        name: name.to_owned(),
        reason,
    };
    if name.is_empty() {
        return Err(invalid("it is empty".into()));
    }
    if name.len() > MAX_TOOL_NAME_BYTES {
        return Err(invalid(format!(
            "it is {} bytes; at most {MAX_TOOL_NAME_BYTES} are allowed",
            name.len()
        )));
    }
    if let Some(index) = name.bytes().position(|b| !(0x21..=0x7e).contains(&b)) {
        return Err(invalid(format!(
            "byte {index} is not printable ASCII (0x21 to 0x7E)"
        )));
    }
    Ok(())
}

pub(crate) struct ToolSet {
    /// Declaration order, which `tools/list` keeps.
    order: Vec<Arc<RegisteredTool>>,
    by_name: HashMap<String, Arc<RegisteredTool>>,
    /// `{"tools":[...]}`, encoded once.
    listing: Box<RawValue>,
    pub(crate) revision: u64,
}

impl ToolSet {
    pub(crate) fn compile(
        tools: Vec<(ToolSpec, Arc<dyn ToolHandler>)>,
        revision: u64,
    ) -> Result<Self, ToolsError> {
        let mut order = Vec::with_capacity(tools.len());
        let mut by_name = HashMap::with_capacity(tools.len());
        for (spec, handler) in tools {
            let tool = Arc::new(RegisteredTool::compile(spec, handler)?);
            if by_name
                .insert(tool.spec.name.clone(), tool.clone())
                .is_some()
            {
                return Err(ToolsError::DuplicateTool(tool.spec.name.clone()));
            }
            order.push(tool);
        }
        let listing = json!({"tools": order.iter().map(|t| t.listing()).collect::<Vec<_>>()});
        let listing = serde_json::value::to_raw_value(&listing).map_err(|error| {
            ToolsError::InvalidSchema {
                tool: String::new(),
                message: error.to_string(),
            }
        })?;
        Ok(ToolSet {
            order,
            by_name,
            listing,
            revision,
        })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Arc<RegisteredTool>> {
        self.by_name.get(name)
    }

    pub(crate) fn listing(&self) -> &RawValue {
        &self.listing
    }

    pub(crate) fn specs(&self) -> Vec<(ToolSpec, Arc<dyn ToolHandler>)> {
        self.order
            .iter()
            .map(|tool| (tool.spec.clone(), tool.handler.clone()))
            .collect()
    }

    /// Whether `tools/list` would answer the same.
    pub(crate) fn lists_like(&self, other: &ToolSet) -> bool {
        self.listing.get() == other.listing.get()
    }

    pub(crate) fn pins(&self) -> Vec<(String, String)> {
        self.order
            .iter()
            .map(|tool| (tool.spec.name.clone(), tool.pin.clone()))
            .collect()
    }
}
