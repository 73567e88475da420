//! The models a session can use, and which one each session uses (its
//! `model` config option).
//!
//! The default model is the one `switchboard acp` is started with
//! (`--model-url`, `--model`, key from `SWITCHBOARD_MODEL_API_KEY`), offered
//! as the value `default`. More come from the `[acp.models.NAME]` entries of
//! the config file:
//!
//! ```toml
//! [acp.models.fast]
//! url = "http://127.0.0.1:11434/v1"   # the API base, as --model-url
//! model = "qwen2.5-coder:7b"          # as --model
//! api_key_env = "OLLAMA_API_KEY"      # optional: the variable the key is read from
//! ```
//!
//! An entry whose key variable is not set is still listed (so the user sees
//! it), but choosing it is refused with a message naming the variable.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agent_client_protocol::v1::schema::SessionConfigSelectOption;
use serde::Deserialize;

use crate::model::{ModelClient, ModelError};
use crate::options::{ModelEntry, ModelOptions};

/// The value id of the model given by `--model-url` and `--model`.
pub const DEFAULT_MODEL: &str = "default";

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("config file {path} is not valid TOML: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("config file {path}: [acp.models.{name}]: {problem}")]
    Model {
        path: PathBuf,
        name: String,
        problem: String,
    },
}

/// The file as this front reads it: only its own `[acp]` section (the hub
/// reads and checks the rest, and accepts `[acp]` without reading it).
#[derive(Debug, Default, Deserialize)]
struct File {
    #[serde(default)]
    acp: AcpSection,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AcpSection {
    #[serde(default)]
    models: BTreeMap<String, ModelEntry>,
}

/// Reads the `[acp.models.*]` entries of the config file at `path`.
pub fn read_config(path: &Path) -> Result<BTreeMap<String, ModelEntry>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
        path: path.to_owned(),
        error,
    })?;
    parse_config(&text, path)
}

pub fn parse_config(text: &str, path: &Path) -> Result<BTreeMap<String, ModelEntry>, ConfigError> {
    let file: File = toml::from_str(text).map_err(|error| ConfigError::Parse {
        path: path.to_owned(),
        message: error.message().to_owned(),
    })?;
    for (name, entry) in &file.acp.models {
        check_entry(name, entry).map_err(|problem| ConfigError::Model {
            path: path.to_owned(),
            name: name.clone(),
            problem,
        })?;
    }
    Ok(file.acp.models)
}

fn check_entry(name: &str, entry: &ModelEntry) -> Result<(), String> {
    if name == DEFAULT_MODEL {
        return Err(format!(
            "the name {DEFAULT_MODEL:?} is the model of --model-url and --model; pick another"
        ));
    }
    if name.is_empty() || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err("a model name is non-empty and holds no spaces".into());
    }
    if !(entry.url.starts_with("http://") || entry.url.starts_with("https://")) {
        return Err(format!(
            "url must be an http:// or https:// URL, got {:?}",
            entry.url
        ));
    }
    if entry.model.trim().is_empty() {
        return Err("model must not be empty".into());
    }
    if let Some(var) = &entry.api_key_env {
        if var.is_empty() || var.contains('=') || var.contains('\0') {
            return Err(format!(
                "api_key_env {var:?} is not an environment variable name"
            ));
        }
    }
    Ok(())
}

/// One model a session may choose.
struct Choice {
    id: String,
    /// What the user is shown: the model and where it runs.
    description: String,
    client: ModelClient,
    /// Why it cannot be chosen (its key variable is unset), if so.
    unavailable: Option<String>,
}

/// Every model of this front, the default first. Fixed for the process.
pub struct ModelCatalog {
    choices: Vec<Choice>,
}

impl ModelCatalog {
    /// The default model and the config file's entries, with their keys read
    /// from the environment now.
    pub fn new(
        default: &ModelOptions,
        entries: &BTreeMap<String, ModelEntry>,
    ) -> Result<Self, ModelError> {
        let mut choices = vec![Choice {
            id: DEFAULT_MODEL.into(),
            description: format!(
                "{} at {} (--model, --model-url)",
                default.model, default.base_url
            ),
            client: ModelClient::new(default)?,
            unavailable: None,
        }];
        for (id, entry) in entries {
            let (api_key, unavailable) = match &entry.api_key_env {
                None => (None, None),
                Some(var) => match std::env::var(var) {
                    Ok(key) if !key.is_empty() => (Some(key), None),
                    _ => (
                        None,
                        Some(format!(
                            "model {id:?} takes its API key from the environment variable {var}, which is not set for this agent"
                        )),
                    ),
                },
            };
            if let Some(reason) = &unavailable {
                tracing::warn!("{reason}; it cannot be chosen");
            }
            let options = ModelOptions {
                base_url: entry.url.clone(),
                model: entry.model.clone(),
                api_key,
                read_timeout: default.read_timeout,
            };
            choices.push(Choice {
                id: id.clone(),
                description: format!("{} at {}", entry.model, entry.url),
                client: ModelClient::new(&options)?,
                unavailable,
            });
        }
        Ok(ModelCatalog { choices })
    }

    /// A catalog of the default model alone.
    pub fn single(default: &ModelOptions) -> Result<Self, ModelError> {
        Self::new(default, &BTreeMap::new())
    }

    fn find(&self, id: &str) -> Option<&Choice> {
        self.choices.iter().find(|choice| choice.id == id)
    }

    /// Whether a session may switch to model `id`; `Err` says why not.
    pub fn check(&self, id: &str) -> Result<(), String> {
        match self.find(id) {
            None => Err(format!(
                "unknown model {id:?}; the models are {}",
                self.ids().join(", ")
            )),
            Some(Choice {
                unavailable: Some(reason),
                ..
            }) => Err(reason.clone()),
            Some(_) => Ok(()),
        }
    }

    /// The client of model `id`; the default's if there is no such model.
    pub fn client(&self, id: &str) -> ModelClient {
        self.find(id).unwrap_or(&self.choices[0]).client.clone()
    }

    pub fn ids(&self) -> Vec<&str> {
        self.choices
            .iter()
            .map(|choice| choice.id.as_str())
            .collect()
    }

    /// The values of the `model` config option.
    pub fn select_options(&self) -> Vec<SessionConfigSelectOption> {
        self.choices
            .iter()
            .map(|choice| {
                let description = match &choice.unavailable {
                    None => choice.description.clone(),
                    Some(reason) => format!("{} (unavailable: {reason})", choice.description),
                };
                SessionConfigSelectOption::new(choice.id.clone(), choice.id.clone())
                    .description(description)
            })
            .collect()
    }
}

/// For tests: a default model that is never called.
#[cfg(test)]
pub(crate) fn test_options() -> ModelOptions {
    ModelOptions {
        base_url: "http://127.0.0.1:9/v1".into(),
        model: "m".into(),
        api_key: None,
        read_timeout: std::time::Duration::from_secs(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_read_checked_and_offered() {
        let path = Path::new("/etc/switchboard.toml");
        let text = r#"
            [hub]
            anything = "the hub's business"
            [acp.models.fast]
            url = "http://127.0.0.1:1/v1"
            model = "small"
            [acp.models.keyed]
            url = "https://example.invalid/v1"
            model = "big"
            api_key_env = "SWITCHBOARD_TEST_SURELY_UNSET_VARIABLE"
        "#;
        let entries = parse_config(text, path).unwrap();
        assert_eq!(entries.len(), 2);
        let catalog = ModelCatalog::new(&test_options(), &entries).unwrap();
        assert_eq!(catalog.ids(), ["default", "fast", "keyed"]);
        assert!(catalog.check("fast").is_ok());
        assert_eq!(
            catalog.check("nope").unwrap_err(),
            "unknown model \"nope\"; the models are default, fast, keyed"
        );
        assert!(catalog
            .check("keyed")
            .unwrap_err()
            .contains("SWITCHBOARD_TEST_SURELY_UNSET_VARIABLE, which is not set"));

        for (bad, problem) in [
            (
                "[acp.models.default]\nurl = \"http://a\"\nmodel = \"m\"",
                "is the model of --model-url",
            ),
            (
                "[acp.models.x]\nurl = \"ftp://a\"\nmodel = \"m\"",
                "url must be an http://",
            ),
            (
                "[acp.models.x]\nurl = \"http://a\"\nmodel = \"\"",
                "model must not be empty",
            ),
            (
                "[acp.models.x]\nurl = \"http://a\"\nmodel = \"m\"\nkey = \"k\"",
                "unknown field `key`",
            ),
            ("[acp]\nmodel = \"m\"", "unknown field `model`"),
        ] {
            let error = parse_config(bad, path).unwrap_err().to_string();
            assert!(error.contains(problem), "{bad}: {error}");
        }
    }
}
