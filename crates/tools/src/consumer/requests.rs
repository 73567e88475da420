//! The version-2 methods that go to one provider, routed as section 9.6
//! says: a prompt by its exposed name, a resource by its URI (or the
//! template that matches it), a completion by its `ref`, a task by the
//! provider that created it. Params are MCP's, passed on but for the
//! members named here: the exposed prompt name becomes the bare one,
//! `client` is added, and `_meta` carries the request's call id (so the
//! provider's server requests during it reach this session).

use serde_json::value::RawValue;
use serde_json::{Map, Value};
use switchboard_protocol::tool_call::v2;

use super::backend::ProviderIdentity;
use super::call::CallError;
use super::listing::ListKind;
use super::session::{ConsumerSession, RequestContext, SurfaceError};
use super::surface::ServingProvider;

/// `params[member]` as a string, or why not.
fn string_member<'a>(
    params: &'a Map<String, Value>,
    member: &str,
) -> Result<&'a str, SurfaceError> {
    params
        .get(member)
        .and_then(Value::as_str)
        .ok_or_else(|| SurfaceError::InvalidParams(format!("{member} must be a string")))
}

impl ConsumerSession {
    /// Sends `method` with `params` (plus `client` and the call's `_meta`)
    /// to `provider`, registered for callbacks while it runs.
    async fn send_with_callbacks(
        &self,
        provider: &ServingProvider,
        method: &'static str,
        mut params: Map<String, Value>,
        context: &RequestContext,
    ) -> Result<Box<RawValue>, SurfaceError> {
        let guard = self.begin(provider.backend.identity(), context)?;
        if let Some(client) = self.hub.callbacks().client_ref(&context.capabilities) {
            let client = serde_json::to_value(client)
                .map_err(|error| CallError::Failed(format!("cannot encode client: {error}")))?;
            params.insert("client".into(), client);
        }
        params.insert("_meta".into(), guard.meta());
        let params = serde_json::value::to_raw_value(&params)
            .map_err(|error| CallError::Failed(format!("cannot encode {method}: {error}")))?;
        let answer = provider
            .backend
            .request(method, params, context.timeout)
            .await;
        drop(guard);
        answer.map_err(SurfaceError::Call)
    }

    /// `resources/read` of `params.uri`.
    pub async fn read_resource(
        &self,
        params: Map<String, Value>,
        context: &RequestContext,
    ) -> Result<Box<RawValue>, SurfaceError> {
        let uri = string_member(&params, "uri")?;
        let surface = self.hub.surface();
        let provider = surface
            .route_uri(uri)
            .ok_or_else(|| SurfaceError::UnknownResource(uri.to_owned()))?
            .clone();
        self.send_with_callbacks(&provider, v2::RESOURCES_READ, params, context)
            .await
    }

    /// `prompts/get` of the prompt exposed as `params.name` (the provider
    /// gets its bare name).
    pub async fn get_prompt(
        &self,
        mut params: Map<String, Value>,
        context: &RequestContext,
    ) -> Result<Box<RawValue>, SurfaceError> {
        let name = string_member(&params, "name")?;
        let surface = self.hub.surface();
        let prompt = surface
            .prompt(name)
            .ok_or_else(|| SurfaceError::UnknownPrompt(name.to_owned()))?
            .clone();
        params.insert("name".into(), Value::String(prompt.prompt.clone()));
        let answer = self
            .send_with_callbacks(&prompt.provider, v2::PROMPTS_GET, params, context)
            .await;
        if matches!(&answer, Err(SurfaceError::Call(error)) if error.is_stale_listing()) {
            prompt.provider.backend.refresh(ListKind::Prompts);
        }
        answer
    }

    /// `completion/complete`: a `ref/prompt` names the exposed prompt (the
    /// provider gets the bare name), a `ref/resource` a URI (or template)
    /// routed as a read is.
    pub async fn complete(
        &self,
        mut params: Map<String, Value>,
        context: &RequestContext,
    ) -> Result<Box<RawValue>, SurfaceError> {
        let surface = self.hub.surface();
        let reference = params
            .get_mut("ref")
            .and_then(Value::as_object_mut)
            .ok_or_else(|| SurfaceError::InvalidParams("ref must be an object".into()))?;
        let provider = match reference.get("type").and_then(Value::as_str) {
            Some("ref/prompt") => {
                let name = string_member(reference, "name")?;
                let prompt = surface
                    .prompt(name)
                    .ok_or_else(|| SurfaceError::UnknownPrompt(name.to_owned()))?;
                reference.insert("name".into(), Value::String(prompt.prompt.clone()));
                prompt.provider.clone()
            }
            Some("ref/resource") => {
                let uri = string_member(reference, "uri")?;
                surface
                    .route_uri(uri)
                    .or_else(|| {
                        // A completion names the template itself.
                        surface
                            .templates()
                            .iter()
                            .find(|template| template.template.as_str() == uri)
                            .map(|template| &template.provider)
                    })
                    .ok_or_else(|| SurfaceError::UnknownResource(uri.to_owned()))?
                    .clone()
            }
            _ => {
                return Err(SurfaceError::InvalidParams(
                    "ref.type must be \"ref/prompt\" or \"ref/resource\"".into(),
                ))
            }
        };
        params.remove("_meta");
        let params = serde_json::value::to_raw_value(&params)
            .map_err(|error| CallError::Failed(format!("cannot encode the completion: {error}")))?;
        Ok(provider
            .backend
            .request(v2::COMPLETION_COMPLETE, params, context.timeout)
            .await?)
    }

    /// `tasks/get`, `tasks/result` or `tasks/cancel` of `params.taskId`, to
    /// the provider whose call created that task for this session; any
    /// other id is unknown (no provider is asked).
    pub async fn task_request(
        &self,
        method: &'static str,
        params: Map<String, Value>,
        context: &RequestContext,
    ) -> Result<Box<RawValue>, SurfaceError> {
        let task_id = string_member(&params, "taskId")?;
        let identity = self
            .hub
            .tasks()
            .provider_of(self.id, task_id)
            .ok_or_else(|| SurfaceError::UnknownTask(task_id.to_owned()))?;
        let provider = self
            .serving(&identity)
            .ok_or_else(|| SurfaceError::UnknownTask(task_id.to_owned()))?;
        self.send_with_callbacks(&provider, method, params, context)
            .await
    }

    /// `tasks/list`: this session's tasks, from every provider that
    /// created one, in one list (no cursor).
    pub async fn list_tasks(&self, context: &RequestContext) -> Result<Value, SurfaceError> {
        let mine = self.hub.tasks().ids_of(self.id);
        let mut providers: Vec<std::sync::Arc<ServingProvider>> = Vec::new();
        for id in &mine {
            let identity = self.hub.tasks().provider_of(self.id, id);
            if let Some(provider) = identity
                .as_ref()
                .and_then(|identity| self.serving(identity))
            {
                if !providers
                    .iter()
                    .any(|known| std::sync::Arc::ptr_eq(known, &provider))
                {
                    providers.push(provider);
                }
            }
        }
        let mut tasks = Vec::new();
        for provider in providers {
            let answer = self
                .send_with_callbacks(&provider, v2::TASKS_LIST, Map::new(), context)
                .await?;
            let listed: Value = serde_json::from_str(answer.get()).map_err(|error| {
                CallError::Failed(format!("malformed tasks/list answer: {error}"))
            })?;
            let Some(listed) = listed.get("tasks").and_then(Value::as_array) else {
                return Err(CallError::Failed(
                    "malformed tasks/list answer: no tasks array".into(),
                )
                .into());
            };
            tasks.extend(
                listed
                    .iter()
                    .filter(|task| {
                        task.get("taskId")
                            .and_then(Value::as_str)
                            .is_some_and(|id| mine.iter().any(|mine| mine == id))
                    })
                    .cloned(),
            );
        }
        Ok(serde_json::json!({ "tasks": tasks }))
    }

    /// The serving provider `identity` still is, if it is.
    fn serving(&self, identity: &ProviderIdentity) -> Option<std::sync::Arc<ServingProvider>> {
        self.hub
            .surface()
            .provider(&identity.service_id)
            .filter(|provider| provider.backend.identity() == identity)
            .cloned()
    }
}
