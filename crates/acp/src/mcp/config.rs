//! The `mcpServers` of `session/new` and `session/load`, read and checked
//! by hand so that a malformed entry is refused with `-32602` naming the
//! entry (its index and name) and what is wrong with it, before anything
//! starts.

use std::collections::HashMap;
use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

use serde_json::Value;
use switchboard_tools::consumer::naming::model_safe_chars;

/// One MCP server of one session.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerSpec {
    /// The name the editor gave it.
    pub name: String,
    /// The namespace its tools are offered under ([`namespace_of`]).
    pub namespace: String,
    pub transport: Transport,
}

#[derive(Clone, PartialEq, Eq)]
pub enum Transport {
    Stdio {
        command: PathBuf,
        args: Vec<OsString>,
        env: Vec<(String, String)>,
    },
    Http {
        url: String,
        headers: Vec<(String, String)>,
    },
}

impl fmt::Debug for ServerSpec {
    /// Environment values and headers stay out of logs (they are where
    /// tokens go).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = f.debug_struct("ServerSpec");
        out.field("name", &self.name);
        match &self.transport {
            Transport::Stdio { command, args, env } => out
                .field("command", command)
                .field("args", args)
                .field("env", &env.iter().map(|(name, _)| name).collect::<Vec<_>>()),
            Transport::Http { url, headers } => out.field("url", url).field(
                "headers",
                &headers.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            ),
        };
        out.finish()
    }
}

impl ServerSpec {
    /// What the server is, for messages: its command or URL.
    pub fn describe(&self) -> String {
        match &self.transport {
            Transport::Stdio { command, .. } => command.display().to_string(),
            Transport::Http { url, .. } => url.clone(),
        }
    }
}

/// The namespace of a session MCP server named `name`: `mcp_` and the name
/// with every character a model function name cannot hold made `_`. Its
/// tools are `mcp_<name>__<tool>`. (Hub providers are added to a session's
/// table first, so even a hub namespace of that form keeps its names.)
pub fn namespace_of(name: &str) -> String {
    format!("mcp_{}", model_safe_chars(name))
}

/// Reads `mcpServers` (absent or `null`: none). `http` says whether `http`
/// servers are taken (this agent advertises `mcpCapabilities.http`).
pub fn parse_servers(value: Option<&Value>, http: bool) -> Result<Vec<ServerSpec>, String> {
    let entries = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(entries)) => entries,
        Some(_) => return Err("mcpServers must be an array".into()),
    };
    let mut servers: Vec<ServerSpec> = Vec::with_capacity(entries.len());
    let mut namespaces: HashMap<String, (usize, String)> = HashMap::new();
    for (index, entry) in entries.iter().enumerate() {
        let server = parse_entry(entry, http).map_err(|problem| {
            match entry.get("name").and_then(Value::as_str) {
                Some(name) => format!("mcpServers[{index}] ({name:?}): {problem}"),
                None => format!("mcpServers[{index}]: {problem}"),
            }
        })?;
        if let Some((first, first_name)) = namespaces.get(&server.namespace) {
            return Err(format!(
                "mcpServers[{index}] ({:?}): its tools would be named like those of mcpServers[{first}] ({first_name:?}) (both under {:?}); give the servers distinct names",
                server.name, server.namespace
            ));
        }
        namespaces.insert(server.namespace.clone(), (index, server.name.clone()));
        servers.push(server);
    }
    Ok(servers)
}

fn parse_entry(entry: &Value, http: bool) -> Result<ServerSpec, String> {
    let Value::Object(entry) = entry else {
        return Err("an entry must be an object".into());
    };
    let name = match entry.get("name") {
        Some(Value::String(name)) if !name.trim().is_empty() => name.clone(),
        Some(Value::String(_)) => return Err("name is empty".into()),
        Some(_) => return Err("name must be a string".into()),
        None => return Err("name is missing".into()),
    };
    let transport = match entry.get("type") {
        None | Some(Value::Null) => stdio(entry)?,
        Some(Value::String(kind)) => match kind.as_str() {
            "stdio" => stdio(entry)?,
            "http" if http => http_server(entry)?,
            "sse" => {
                return Err(
                    "type \"sse\" is not supported (this agent takes stdio and http servers)"
                        .into(),
                )
            }
            other => {
                return Err(format!(
                    "unknown type {other:?} (this agent takes stdio and http servers)"
                ))
            }
        },
        Some(_) => return Err("type must be a string".into()),
    };
    Ok(ServerSpec {
        namespace: namespace_of(&name),
        name,
        transport,
    })
}

fn stdio(entry: &serde_json::Map<String, Value>) -> Result<Transport, String> {
    let command = match entry.get("command") {
        Some(Value::String(command)) if !command.is_empty() => command,
        Some(Value::String(_)) => return Err("command is empty".into()),
        Some(_) => return Err("command must be a string".into()),
        None => return Err("command is missing".into()),
    };
    no_nul("command", command)?;
    let args = match entry.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(args)) => args
            .iter()
            .enumerate()
            .map(|(i, arg)| match arg {
                Value::String(arg) => no_nul(&format!("args[{i}]"), arg).map(|()| arg.into()),
                _ => Err(format!("args[{i}] must be a string")),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("args must be an array of strings".into()),
    };
    let env = pairs(entry.get("env"), "env")?;
    for (i, (name, _)) in env.iter().enumerate() {
        if name.is_empty() || name.contains('=') {
            return Err(format!(
                "env[{i}] has the name {name:?}; a variable name is non-empty and holds no '='"
            ));
        }
    }
    Ok(Transport::Stdio {
        command: PathBuf::from(command),
        args,
        env,
    })
}

fn http_server(entry: &serde_json::Map<String, Value>) -> Result<Transport, String> {
    let url = match entry.get("url") {
        Some(Value::String(url)) if url.starts_with("http://") || url.starts_with("https://") => {
            url.clone()
        }
        Some(Value::String(url)) => {
            return Err(format!("url {url:?} is not an http:// or https:// URL"))
        }
        Some(_) => return Err("url must be a string".into()),
        None => return Err("url is missing".into()),
    };
    let headers = pairs(entry.get("headers"), "headers")?;
    for (i, (name, value)) in headers.iter().enumerate() {
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err()
            || reqwest::header::HeaderValue::from_str(value).is_err()
        {
            return Err(format!(
                "headers[{i}] ({name:?}) is not a valid HTTP header"
            ));
        }
    }
    Ok(Transport::Http { url, headers })
}

/// An array of `{name, value}` string pairs.
fn pairs(value: Option<&Value>, what: &str) -> Result<Vec<(String, String)>, String> {
    let entries = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(entries)) => entries,
        Some(_) => {
            return Err(format!(
                "{what} must be an array of {{name, value}} objects"
            ))
        }
    };
    entries
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            let name = entry.get("name").and_then(Value::as_str);
            let value = entry.get("value").and_then(Value::as_str);
            match (name, value) {
                (Some(name), Some(value)) => {
                    no_nul(&format!("{what}[{i}]"), name)?;
                    no_nul(&format!("{what}[{i}]"), value)?;
                    Ok((name.to_owned(), value.to_owned()))
                }
                _ => Err(format!(
                    "{what}[{i}] must be an object with a string name and a string value"
                )),
            }
        })
        .collect()
}

fn no_nul(what: &str, text: &str) -> Result<(), String> {
    if text.contains('\0') {
        return Err(format!("{what} holds a NUL character"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refused(servers: Value) -> String {
        parse_servers(Some(&servers), true).unwrap_err()
    }

    #[test]
    fn good_entries_are_read() {
        let servers = parse_servers(
            Some(&json!([
                {"name": "files", "command": "/bin/srv", "args": ["-v"], "env": [{"name": "K", "value": "v"}]},
                {"type": "http", "name": "web.search", "url": "http://127.0.0.1:1/mcp", "headers": [{"name": "Authorization", "value": "Bearer x"}]},
            ])),
            true,
        )
        .unwrap();
        assert_eq!(servers[0].namespace, "mcp_files");
        assert_eq!(servers[1].namespace, "mcp_web_search");
        assert!(
            matches!(&servers[0].transport, Transport::Stdio { env, .. } if env == &[("K".to_owned(), "v".to_owned())])
        );
        // Secrets stay out of Debug.
        assert!(!format!("{:?}", servers[1]).contains("Bearer"));
        assert!(parse_servers(None, true).unwrap().is_empty());
    }

    #[test]
    fn a_malformed_entry_is_named_with_what_is_wrong() {
        for (servers, expected) in [
            (json!([{"name": "a", "args": []}]), "mcpServers[0] (\"a\"): command is missing"),
            (
                json!([{"name": "ok", "command": "/x"}, {"name": "b", "type": "ws", "url": "x"}]),
                "mcpServers[1] (\"b\"): unknown type \"ws\"",
            ),
            (
                json!([{"name": "c", "command": "/x", "env": [{"name": "K"}]}]),
                "mcpServers[0] (\"c\"): env[0] must be an object with a string name and a string value",
            ),
            (
                json!([{"name": "d", "command": "/x", "env": [{"name": "A=B", "value": "v"}]}]),
                "mcpServers[0] (\"d\"): env[0] has the name \"A=B\"",
            ),
            (json!([{"command": "/x"}]), "mcpServers[0]: name is missing"),
            (json!(["x"]), "mcpServers[0]: an entry must be an object"),
            (json!([{"name": "e", "type": "sse", "url": "http://x"}]), "type \"sse\" is not supported"),
            (json!([{"name": "f", "type": "http", "url": "ftp://x"}]), "is not an http:// or https:// URL"),
            (
                json!([{"name": "g.h", "command": "/x"}, {"name": "g_h", "command": "/y"}]),
                "mcpServers[1] (\"g_h\"): its tools would be named like those of mcpServers[0] (\"g.h\")",
            ),
        ] {
            let error = refused(servers.clone());
            assert!(error.starts_with(expected) || error.contains(expected), "{servers}: {error}");
        }
        assert!(parse_servers(
            Some(&json!([{"name": "h", "type": "http", "url": "http://x"}])),
            false
        )
        .unwrap_err()
        .contains("unknown type \"http\""));
    }
}
