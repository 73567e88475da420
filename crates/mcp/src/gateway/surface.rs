//! Resources, prompts, completion, logging and tasks: each answered from
//! the consumer's current [`Surface`](switchboard_tools::consumer::Surface)
//! or sent, through the consumer session, to the one provider that serves
//! it. Results are the providers' own, passed on as they sent them.

use std::future::Future;

use rmcp::model::ErrorData;
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use switchboard_tools::consumer::{LogLevel, RequestContext as CallContext, SurfaceError};

use super::errors::surface_error;
use super::session::Session;
use super::tools::request_id_text;

/// Waits for `answer` unless the MCP client cancels the request first
/// (dropping it cancels the hub request).
async fn unless_cancelled(
    context: &RequestContext<RoleServer>,
    answer: impl Future<Output = Result<Box<RawValue>, SurfaceError>>,
) -> Result<Value, ErrorData> {
    let answer = tokio::select! {
        answer = answer => answer,
        () = context.ct.cancelled() => {
            return Err(ErrorData::internal_error("cancelled by the client", Some(json!({"code": "cancelled"}))));
        }
    };
    let raw = answer.map_err(surface_error)?;
    serde_json::from_str(raw.get()).map_err(|error| {
        ErrorData::internal_error(
            format!("the provider answered with something that is not JSON: {error}"),
            Some(json!({"code": "malformed_result"})),
        )
    })
}

impl Session {
    fn call_context(&self, context: &RequestContext<RoleServer>) -> CallContext {
        CallContext::new(request_id_text(&context.id), self.declared(context))
    }

    pub(crate) fn list_resources(&self) -> Value {
        let surface = self.gateway.tools.surface();
        let resources: Vec<Value> = surface
            .resources()
            .iter()
            .map(|resource| Value::Object(resource.definition.clone()))
            .collect();
        json!({ "resources": resources })
    }

    pub(crate) fn list_resource_templates(&self) -> Value {
        let surface = self.gateway.tools.surface();
        let templates: Vec<Value> = surface
            .templates()
            .iter()
            .map(|template| Value::Object(template.definition.clone()))
            .collect();
        json!({ "resourceTemplates": templates })
    }

    pub(crate) fn list_prompts(&self) -> Value {
        let surface = self.gateway.tools.surface();
        let prompts: Vec<Value> = surface
            .prompts()
            .filter_map(|prompt| {
                self.gateway
                    .shown_definition(&prompt.name, || prompt.listed_definition())
            })
            .collect();
        json!({ "prompts": prompts })
    }

    pub(crate) async fn read_resource(
        &self,
        params: Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, ErrorData> {
        let call = self.call_context(context);
        unless_cancelled(context, self.consumer.read_resource(params, &call)).await
    }

    pub(crate) async fn get_prompt(
        &self,
        mut params: Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, ErrorData> {
        self.exposed_prompt_name(params.get_mut("name"))?;
        let call = self.call_context(context);
        unless_cancelled(context, self.consumer.get_prompt(params, &call)).await
    }

    pub(crate) async fn complete(
        &self,
        mut params: Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, ErrorData> {
        if let Some(reference) = params.get_mut("ref").and_then(Value::as_object_mut) {
            if reference.get("type").and_then(Value::as_str) == Some("ref/prompt") {
                self.exposed_prompt_name(reference.get_mut("name"))?;
            }
        }
        let call = self.call_context(context);
        unless_cancelled(context, self.consumer.complete(params, &call)).await
    }

    /// A prompt's name as the session sent it, made the exposed name its
    /// profile shows under it; a name the profile does not show is a
    /// prompt the session does not have.
    fn exposed_prompt_name(&self, name: Option<&mut Value>) -> Result<(), ErrorData> {
        let Some(Value::String(name)) = name else {
            return Ok(());
        };
        match self.gateway.exposed(name) {
            Some(exposed) if exposed == name => Ok(()),
            Some(exposed) => {
                *name = exposed.to_owned();
                Ok(())
            }
            None => Err(surface_error(SurfaceError::UnknownPrompt(name.clone()))),
        }
    }

    pub(crate) async fn subscribe(
        &self,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, ErrorData> {
        self.consumer
            .subscribe(uri, &self.declared(context))
            .await
            .map_err(surface_error)?;
        Ok(json!({}))
    }

    pub(crate) async fn unsubscribe(
        &self,
        uri: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, ErrorData> {
        self.consumer
            .unsubscribe(uri, &self.declared(context))
            .await
            .map_err(surface_error)?;
        Ok(json!({}))
    }

    /// `logging/setLevel`: passed on to every version-2 provider that
    /// declared logging (with `client`); this session gets log messages of
    /// no call at or above `level`.
    pub(crate) async fn set_level(
        &self,
        level: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, ErrorData> {
        let level = LogLevel::parse(level).ok_or_else(|| {
            ErrorData::invalid_params(format!("{level:?} is not a logging level"), None)
        })?;
        self.consumer
            .set_level(level, &self.declared(context))
            .await;
        Ok(json!({}))
    }

    /// `tasks/get`, `tasks/result`, `tasks/cancel`.
    pub(crate) async fn task_request(
        &self,
        method: &'static str,
        params: Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, ErrorData> {
        let call = self.call_context(context);
        unless_cancelled(context, self.consumer.task_request(method, params, &call)).await
    }

    pub(crate) async fn list_tasks(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, ErrorData> {
        let call = self.call_context(context);
        self.consumer.list_tasks(&call).await.map_err(surface_error)
    }
}
