//! What `call` and `notify` address: `SERVICE` (an id or a metadata
//! selector) and `PARAMS_JSON`.

use std::io::Read;

use anyhow::{bail, Context};
use serde_json::value::RawValue;
use switchboard_client::{Client, Selector, ServiceInfo};

use crate::describe;

/// `PARAMS_JSON`, checked to be JSON when the arguments are parsed (so a
/// typo is reported before anything is sent), or `-` to read it from stdin.
#[derive(Debug, Clone)]
pub enum Params {
    Inline(String),
    Stdin,
}

/// The clap value parser of `PARAMS_JSON`.
pub fn parse_params(text: &str) -> Result<Params, String> {
    if text == "-" {
        return Ok(Params::Stdin);
    }
    check_json(text)?;
    Ok(Params::Inline(text.to_owned()))
}

fn check_json(text: &str) -> Result<(), String> {
    serde_json::from_str::<&RawValue>(text)
        .map(|_| ())
        .map_err(|error| format!("not valid JSON: {error}"))
}

impl Params {
    /// The params as raw JSON, read from stdin for `-`.
    pub fn load(self) -> anyhow::Result<Box<RawValue>> {
        let text = match self {
            Params::Inline(text) => text,
            Params::Stdin => {
                let mut text = String::new();
                std::io::stdin()
                    .read_to_string(&mut text)
                    .context("cannot read PARAMS_JSON from stdin")?;
                check_json(&text)
                    .map_err(|error| anyhow::anyhow!("PARAMS_JSON from stdin is {error}"))?;
                text
            }
        };
        RawValue::from_string(text).context("PARAMS_JSON")
    }
}

/// The one service `target` names: a service id, or a `key=value[,…]`
/// selector over metadata that must match exactly one service.
pub async fn resolve(client: &Client, target: &str) -> anyhow::Result<ServiceInfo> {
    let catalog = client.catalog().await.context("cannot read the catalog")?;
    if !target.contains('=') {
        return match catalog.get(target) {
            Some(service) => Ok(service),
            None => bail!("no service {target} in the catalog (`switchboard services` lists them)"),
        };
    }
    let Some(selector) = Selector::parse(target) else {
        bail!("SERVICE {target:?} is neither a service id nor a selector key=value[,key=value…]");
    };
    let mut matches = catalog.select(&selector);
    match matches.len() {
        0 => bail!(
            "no service matches {target} ({} in the catalog; `switchboard services` lists them)",
            catalog.services().len()
        ),
        1 => Ok(matches.remove(0)),
        n => {
            let listed: Vec<String> = matches
                .iter()
                .map(|s| format!("  {}", describe::one_line(s)))
                .collect();
            bail!(
                "{target} matches {n} services; name one by id or narrow the selector:\n{}",
                listed.join("\n")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_must_be_json() {
        assert!(matches!(
            parse_params(r#"{"a": [1, 2]}"#),
            Ok(Params::Inline(_))
        ));
        assert!(matches!(parse_params("-"), Ok(Params::Stdin)));
        let error = parse_params("{a: 1}").unwrap_err();
        assert!(
            error.starts_with("not valid JSON: key must be a string at line 1 column 2"),
            "{error}"
        );
        assert!(parse_params("[1, 2").is_err());
        assert!(parse_params("").is_err());
    }
}
