//! The rest of the MCP server surface a consumer offers at one moment
//! ([`Surface`], immutable, published beside the [`ToolTable`](super::ToolTable)):
//! the prompts, resources and resource templates of the version-2
//! providers, and those providers themselves (for the methods every one of
//! them gets, such as `logging/setLevel`).
//!
//! Naming across providers (`docs/reference/tool-calls.md` section 9.6):
//! prompts are exposed as `<namespace>__<prompt>`, claimed in arrival order
//! like tools (the earliest claim wins); resource URIs are global and not
//! rewritten: when two providers list one URI the first by namespace order
//! keeps it, and a URI no provider lists belongs to the first provider (by
//! namespace order) one of whose templates matches it.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::backend::HubProvider;
use super::listing::ListedItem;
use super::naming::exposed_name;
use super::template::UriTemplate;
use super::tool::ToolBackend;

/// A version-2 provider that holds its namespace, as the target of the
/// methods that are not about one prompt or resource.
pub struct ServingProvider {
    pub namespace: String,
    /// The MCP `ServerCapabilities` its metadata declares.
    pub capabilities: Value,
    pub backend: Arc<HubProvider>,
}

impl ServingProvider {
    /// Whether it declared the server capability `name` (`"logging"`, ...).
    pub fn declares(&self, name: &str) -> bool {
        self.capabilities
            .get(name)
            .is_some_and(|declared| !declared.is_null())
    }
}

/// A prompt under its exposed name.
pub struct ExposedPrompt {
    /// `<namespace>__<prompt>`.
    pub name: String,
    pub namespace: String,
    /// The provider's bare name: what `prompts/get` carries.
    pub prompt: String,
    /// The entry as the provider listed it (bare `name`).
    pub definition: Map<String, Value>,
    pub provider: Arc<ServingProvider>,
}

impl ExposedPrompt {
    /// The listed entry under the exposed name: what an MCP client gets.
    pub fn listed_definition(&self) -> Map<String, Value> {
        let mut definition = self.definition.clone();
        definition.insert("name".into(), Value::String(self.name.clone()));
        definition
    }
}

/// A resource (its URI as listed) and the provider that serves it.
pub struct ExposedResource {
    pub uri: String,
    pub definition: Map<String, Value>,
    pub provider: Arc<ServingProvider>,
}

/// A resource template and the provider that serves the URIs it matches.
pub struct ExposedTemplate {
    pub template: UriTemplate,
    pub definition: Map<String, Value>,
    pub provider: Arc<ServingProvider>,
}

/// Prompts, resources and templates at one moment.
#[derive(Default)]
pub struct Surface {
    prompts: BTreeMap<String, Arc<ExposedPrompt>>,
    /// In namespace order, each provider's in its listed order.
    resources: Vec<Arc<ExposedResource>>,
    /// URI → index in `resources`.
    by_uri: HashMap<String, usize>,
    templates: Vec<Arc<ExposedTemplate>>,
    /// Version-2 providers holding their namespace, in namespace order.
    providers: Vec<Arc<ServingProvider>>,
}

impl Surface {
    /// Every prompt, by exposed name.
    pub fn prompts(&self) -> impl Iterator<Item = &Arc<ExposedPrompt>> {
        self.prompts.values()
    }

    /// The prompt exposed as `name`.
    pub fn prompt(&self, name: &str) -> Option<&Arc<ExposedPrompt>> {
        self.prompts.get(name)
    }

    pub fn resources(&self) -> &[Arc<ExposedResource>] {
        &self.resources
    }

    pub fn templates(&self) -> &[Arc<ExposedTemplate>] {
        &self.templates
    }

    /// Every version-2 provider serving now, in namespace order.
    pub fn providers(&self) -> &[Arc<ServingProvider>] {
        &self.providers
    }

    /// The serving provider of `service_id`.
    pub fn provider(&self, service_id: &str) -> Option<&Arc<ServingProvider>> {
        self.providers
            .iter()
            .find(|provider| provider.backend.id() == service_id)
    }

    /// Who serves `uri`: the provider that lists it, else the first (by
    /// namespace order) with a template that matches it.
    pub fn route_uri(&self, uri: &str) -> Option<&Arc<ServingProvider>> {
        if let Some(&index) = self.by_uri.get(uri) {
            return Some(&self.resources[index].provider);
        }
        self.templates
            .iter()
            .find(|template| template.template.matches(uri))
            .map(|template| &template.provider)
    }

    /// Whether the resources or templates differ from `other`'s.
    pub fn resources_differ(&self, other: &Surface) -> bool {
        !same(&self.resources, &other.resources, |a, b| {
            a.uri == b.uri
                && a.definition == b.definition
                && same_provider(&a.provider, &b.provider)
        }) || !same(&self.templates, &other.templates, |a, b| {
            a.template == b.template
                && a.definition == b.definition
                && same_provider(&a.provider, &b.provider)
        })
    }

    /// Whether the prompts differ from `other`'s.
    pub fn prompts_differ(&self, other: &Surface) -> bool {
        self.prompts.len() != other.prompts.len()
            || self
                .prompts
                .iter()
                .zip(&other.prompts)
                .any(|((a, pa), (b, pb))| {
                    a != b
                        || pa.prompt != pb.prompt
                        || pa.definition != pb.definition
                        || !same_provider(&pa.provider, &pb.provider)
                })
    }

    /// Whether the serving providers (or their capabilities) differ.
    pub fn providers_differ(&self, other: &Surface) -> bool {
        !same(&self.providers, &other.providers, |a, b| {
            same_provider(a, b)
        })
    }
}

fn same<T>(a: &[T], b: &[T], equal: impl Fn(&T, &T) -> bool) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| equal(a, b))
}

fn same_provider(a: &ServingProvider, b: &ServingProvider) -> bool {
    a.namespace == b.namespace
        && a.capabilities == b.capabilities
        && a.backend.identity() == b.backend.identity()
}

/// A name or URI two providers wanted; the first keeps it. Logged once each.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SurfaceConflict {
    /// Two prompts of different namespaces make one exposed name.
    PromptName {
        name: String,
        holder: String,
        ignored: String,
    },
    /// Two providers list one resource URI: the first by namespace order
    /// serves it.
    ResourceUri {
        uri: String,
        holder: String,
        ignored: String,
    },
}

impl fmt::Display for SurfaceConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SurfaceConflict::PromptName {
                name,
                holder,
                ignored,
            } => write!(
                f,
                "two prompts are named {name:?}: serving the one of {holder} (the first), ignoring the one of {ignored}"
            ),
            SurfaceConflict::ResourceUri {
                uri,
                holder,
                ignored,
            } => write!(
                f,
                "namespaces {holder:?} and {ignored:?} both list the resource {uri:?}: {holder:?} (first by namespace order) serves it"
            ),
        }
    }
}

/// Builds a [`Surface`]: prompts claimed in arrival order first, then
/// resources and templates in namespace order.
#[derive(Default)]
pub(super) struct SurfaceBuilder {
    surface: Surface,
    conflicts: Vec<SurfaceConflict>,
}

impl SurfaceBuilder {
    /// Adds `provider`'s prompts; call for every provider in arrival order.
    pub(super) fn add_prompts(&mut self, provider: &Arc<ServingProvider>, prompts: &[ListedItem]) {
        for item in prompts {
            let name = exposed_name(&provider.namespace, &item.key);
            if let Some(holder) = self.surface.prompts.get(&name) {
                self.conflicts.push(SurfaceConflict::PromptName {
                    name,
                    holder: holder.provider.backend.id().to_owned(),
                    ignored: provider.backend.id().to_owned(),
                });
                continue;
            }
            let prompt = ExposedPrompt {
                name: name.clone(),
                namespace: provider.namespace.clone(),
                prompt: item.key.clone(),
                definition: item.definition.clone(),
                provider: provider.clone(),
            };
            self.surface.prompts.insert(name, Arc::new(prompt));
        }
    }

    /// Adds `provider` with its resources and templates; call in namespace
    /// order.
    pub(super) fn add_resources(
        &mut self,
        provider: &Arc<ServingProvider>,
        resources: &[ListedItem],
        templates: &[ListedItem],
    ) {
        self.surface.providers.push(provider.clone());
        for item in resources {
            if let Some(&index) = self.surface.by_uri.get(&item.key) {
                let holder = &self.surface.resources[index].provider;
                if !Arc::ptr_eq(holder, provider) {
                    self.conflicts.push(SurfaceConflict::ResourceUri {
                        uri: item.key.clone(),
                        holder: holder.namespace.clone(),
                        ignored: provider.namespace.clone(),
                    });
                }
                continue;
            }
            self.surface
                .by_uri
                .insert(item.key.clone(), self.surface.resources.len());
            self.surface.resources.push(Arc::new(ExposedResource {
                uri: item.key.clone(),
                definition: item.definition.clone(),
                provider: provider.clone(),
            }));
        }
        for item in templates {
            let Some(template) = UriTemplate::parse(&item.key) else {
                tracing::warn!(namespace = %provider.namespace, template = %item.key, "skipping a resource template that does not parse");
                continue;
            };
            self.surface.templates.push(Arc::new(ExposedTemplate {
                template,
                definition: item.definition.clone(),
                provider: provider.clone(),
            }));
        }
    }

    pub(super) fn finish(self) -> (Surface, Vec<SurfaceConflict>) {
        (self.surface, self.conflicts)
    }
}
