//! `[modules.NAME]` in the config file: what to run, and how to restart it.
//!
//! ```toml
//! [modules.git]
//! command = "git-sidecar"            # a name on PATH, an absolute path, or relative to this file
//! args = ["--repo", "~/src/proj"]    # a leading ~ is $HOME
//! env = { RUST_LOG = "info" }
//! restart = "on-failure"             # or "always", "never"
//! log_max_bytes = 1048576            # NAME.log rotates to NAME.log.1 past this
//!
//! [modules.fs]                       # short form: provide-mcp --namespace fs -- …
//! mcp = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "~/notes"]
//!
//! [modules.docs]                     # a remote MCP server: provide-mcp --mcp-url …
//! mcp_url = "https://mcp.example.com/mcp"
//! headers = { "X-Team" = "infra" }   # passed in the environment, not the command line
//! bearer_token_file = "~/.config/docs-token"
//!
//! [modules.tracker]                  # a remote MCP server behind OAuth 2.1:
//! mcp_url = "https://mcp.example.com/tracker"
//! oauth = true                       # `switchboard mcp login tracker` signs in
//!
//! [modules.wiki]                     # behind an OAuth server without dynamic
//! mcp_url = "https://mcp.example.com/wiki"  # client registration: a client
//! oauth = true                       # registered there beforehand
//! oauth_client_id = "switchboard-desktop"
//! oauth_client_secret_file = "~/.config/wiki-client-secret"  # a confidential one
//! oauth_redirect_port = 8976         # its redirect URI: http://127.0.0.1:8976/callback
//! oauth_scopes = ["wiki:read"]       # what to ask for, if the metadata does not say
//! ```

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use switchboard_protocol::modules::OAuthLogin;
use toml::Spanned;

/// Where a module's output goes before it rotates, unless the config says.
pub const DEFAULT_LOG_MAX_BYTES: u64 = 1024 * 1024;
/// The smallest `log_max_bytes` accepted (a line or two of a panic).
pub const MIN_LOG_MAX_BYTES: u64 = 4 * 1024;
/// The most bytes a module name may have (the MCP namespace rule).
pub const MAX_NAME_BYTES: usize = 64;

/// When a module that ended is started again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RestartPolicy {
    /// After a non-zero exit, a signal, or a failed start.
    #[default]
    OnFailure,
    /// After every end, a clean exit included.
    Always,
    Never,
}

/// What a module runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    /// A command: a name looked up on `PATH`, or a path.
    Command(PathBuf),
    /// This very `switchboard` binary (`std::env::current_exe`), for the
    /// `mcp = [...]` short form.
    Switchboard,
}

/// One module, checked; `~` expanded, relative paths resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleSpec {
    pub name: String,
    pub program: Program,
    pub args: Vec<OsString>,
    pub env: Vec<(String, String)>,
    pub restart: RestartPolicy,
    pub log_max_bytes: u64,
    /// `oauth = true`: the remote server `switchboard mcp login NAME`
    /// signs in to, and as which client.
    pub oauth: Option<OAuthLogin>,
}

impl ModuleSpec {
    /// The program, for messages (`switchboard` for the `mcp` short form).
    pub fn program_name(&self) -> String {
        match &self.program {
            Program::Command(path) => path.to_string_lossy().into_owned(),
            Program::Switchboard => "switchboard".to_owned(),
        }
    }

    /// The command line for people (`modules`, the log): program and
    /// arguments separated by spaces.
    pub fn command_line(&self) -> String {
        std::iter::once(self.program_name())
            .chain(self.args.iter().map(|a| a.to_string_lossy().into_owned()))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A `[modules.NAME]` table as written. Unknown keys are errors.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModuleSection {
    command: Option<Spanned<String>>,
    #[serde(default)]
    args: Vec<String>,
    mcp: Option<Spanned<Vec<String>>>,
    mcp_url: Option<Spanned<String>>,
    headers: Option<Spanned<BTreeMap<String, String>>>,
    bearer_token_file: Option<Spanned<String>>,
    oauth: Option<Spanned<bool>>,
    oauth_client_id: Option<Spanned<String>>,
    oauth_client_secret_file: Option<Spanned<String>>,
    oauth_redirect_port: Option<Spanned<u16>>,
    oauth_scopes: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    restart: RestartPolicy,
    log_max_bytes: Option<Spanned<u64>>,
}

/// A module that cannot run as written: where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    pub name: String,
    /// 1-based line in the config file.
    pub line: usize,
    pub problem: String,
}

/// Checks every `[modules.NAME]` table. `text` is the config file (for line
/// numbers), `base` its directory (for relative commands), `home` the
/// directory `~` stands for.
pub fn resolve(
    text: &str,
    sections: BTreeMap<String, Spanned<ModuleSection>>,
    base: &Path,
    home: Option<&Path>,
) -> Result<Vec<ModuleSpec>, SpecError> {
    let mut specs = Vec::with_capacity(sections.len());
    for (name, section) in sections {
        let header_line = line_of(text, section.span().start);
        let section = section.into_inner();
        let error = |line: usize, problem: String| SpecError {
            name: name.clone(),
            line,
            problem,
        };
        check_name(&name).map_err(|problem| error(header_line, problem))?;
        let expand = |arg: &str| expand_home(arg, home);
        let mut env: Vec<(String, String)> = section.env.into_iter().collect();
        let remote_only = [
            ("headers", written(&section.headers)),
            ("bearer_token_file", written(&section.bearer_token_file)),
            ("oauth", written(&section.oauth)),
        ];
        let oauth = section.oauth.as_ref().is_some_and(|o| *o.get_ref());
        let mut oauth_spec = None;
        let oauth_only = [
            ("oauth_client_id", written(&section.oauth_client_id)),
            (
                "oauth_client_secret_file",
                written(&section.oauth_client_secret_file),
            ),
            ("oauth_redirect_port", written(&section.oauth_redirect_port)),
            ("oauth_scopes", written(&section.oauth_scopes)),
        ];
        if let (false, Some((key, at))) = (oauth, first_written(&oauth_only)) {
            return Err(error(
                line_of(text, at),
                format!("{key} goes with oauth = true (and mcp_url)"),
            ));
        }
        if section.mcp_url.is_none() {
            if let Some((key, at)) = first_written(&remote_only) {
                return Err(error(
                    line_of(text, at),
                    format!("{key} goes with mcp_url (a remote MCP server)"),
                ));
            }
        }
        let (program, args) = match (section.command, section.mcp, section.mcp_url) {
            (Some(command), None, None) => {
                let line = line_of(text, command.span().start);
                let command = command.into_inner();
                if command.trim().is_empty() {
                    return Err(error(line, "command is empty".into()));
                }
                let program = resolve_command(&expand(&command), base);
                let args = section.args.iter().map(|a| expand(a).into()).collect();
                (Program::Command(program), args)
            }
            (None, Some(mcp), None) => {
                let line = line_of(text, mcp.span().start);
                let mcp = mcp.into_inner();
                if mcp.first().is_none_or(|c| c.trim().is_empty()) {
                    return Err(error(
                        line,
                        "mcp is empty: give the MCP server's command and its arguments".into(),
                    ));
                }
                if !section.args.is_empty() {
                    return Err(error(
                        line,
                        "args goes with command; with mcp, put the arguments in the mcp list"
                            .into(),
                    ));
                }
                let mut args = provide_mcp_args(&name);
                args.push("--".into());
                args.extend(mcp.iter().map(|a| OsString::from(expand(a))));
                (Program::Switchboard, args)
            }
            (None, None, Some(url)) => {
                let line = line_of(text, url.span().start);
                let url = url.into_inner();
                // The whole check (https, or http on loopback) is
                // provide-mcp's, where a URL given by hand is checked too.
                if !(url.starts_with("https://") || url.starts_with("http://")) {
                    return Err(error(
                        line,
                        "mcp_url is the remote MCP server's URL: https://… (or http:// on this machine)"
                            .into(),
                    ));
                }
                if !section.args.is_empty() {
                    return Err(error(
                        line,
                        "args goes with command, not with mcp_url".into(),
                    ));
                }
                let mut args = provide_mcp_args(&name);
                args.extend(["--mcp-url".into(), url.clone().into()]);
                if oauth {
                    if let Some(file) = &section.bearer_token_file {
                        return Err(error(
                            line_of(text, file.span().start),
                            "bearer_token_file and oauth = true are two ways to send a token: give one"
                                .into(),
                        ));
                    }
                    args.push("--oauth".into());
                    let login = oauth_login(
                        OAuthClientKeys {
                            id: &section.oauth_client_id,
                            secret_file: &section.oauth_client_secret_file,
                            redirect_port: &section.oauth_redirect_port,
                            scopes: &section.oauth_scopes,
                        },
                        text,
                        &|file| base.join(expand(file)),
                        url,
                    )
                    .map_err(|(line, problem)| error(line, problem))?;
                    if let Some(id) = &login.client_id {
                        // One argument: an id may start with `-`.
                        args.push(format!("--oauth-client-id={id}").into());
                    }
                    if let Some(file) = &login.client_secret_file {
                        args.extend(["--oauth-client-secret-file".into(), file.into()]);
                    }
                    oauth_spec = Some(login);
                }
                if let Some(file) = section.bearer_token_file {
                    let file = base.join(expand(file.get_ref()));
                    args.extend(["--bearer-token-file".into(), file.into_os_string()]);
                }
                if let Some(headers) = section.headers {
                    // Out of the command line, which other users can read.
                    let headers =
                        serde_json::to_string(headers.get_ref()).expect("a map of strings is JSON");
                    env.push((MCP_HEADERS_ENV.into(), headers));
                }
                (Program::Switchboard, args)
            }
            (None, None, None) => {
                return Err(error(
                    header_line,
                    "no command: give command (with args), mcp or mcp_url".into(),
                ))
            }
            (command, mcp, url) => {
                let at = [
                    command.map(|c| c.span().start),
                    mcp.map(|m| m.span().start),
                    url.map(|u| u.span().start),
                ]
                .into_iter()
                .flatten()
                .max()
                .unwrap_or_default();
                return Err(error(
                    line_of(text, at),
                    "give one of command (with args), mcp or mcp_url".into(),
                ));
            }
        };
        let log_max_bytes = match section.log_max_bytes {
            None => DEFAULT_LOG_MAX_BYTES,
            Some(bytes) if *bytes.get_ref() >= MIN_LOG_MAX_BYTES => bytes.into_inner(),
            Some(bytes) => {
                return Err(error(
                    line_of(text, bytes.span().start),
                    format!(
                        "log_max_bytes is {}; at least {MIN_LOG_MAX_BYTES} is needed",
                        bytes.get_ref()
                    ),
                ))
            }
        };
        specs.push(ModuleSpec {
            name,
            program,
            args,
            env,
            restart: section.restart,
            log_max_bytes,
            oauth: oauth_spec,
        });
    }
    Ok(specs)
}

/// Where in the file `key` was written, if it was.
fn written<T>(key: &Option<Spanned<T>>) -> Option<usize> {
    key.as_ref().map(|k| k.span().start)
}

/// The first of `keys` that was written, with where.
fn first_written(keys: &[(&'static str, Option<usize>)]) -> Option<(&'static str, usize)> {
    keys.iter().find_map(|&(key, at)| at.map(|at| (key, at)))
}

/// A module's `oauth_*` keys beside `oauth = true`, as written.
struct OAuthClientKeys<'a> {
    id: &'a Option<Spanned<String>>,
    secret_file: &'a Option<Spanned<String>>,
    redirect_port: &'a Option<Spanned<u16>>,
    scopes: &'a Option<Spanned<Vec<String>>>,
}

/// The login of a module with `oauth = true` at `url`: its pre-registered
/// client, if the keys name one, checked; `path` resolves a file name as
/// written. An error is its line and what is wrong.
fn oauth_login(
    keys: OAuthClientKeys<'_>,
    text: &str,
    path: &dyn Fn(&str) -> PathBuf,
    url: String,
) -> Result<OAuthLogin, (usize, String)> {
    let client_id =
        match keys.id {
            Some(id) if id.get_ref().trim().is_empty() => return Err((
                line_of(text, id.span().start),
                "oauth_client_id is empty: give the id the authorization server gave the client"
                    .into(),
            )),
            Some(id) => Some(id.get_ref().trim().to_owned()),
            None => None,
        };
    let client_secret_file =
        match keys.secret_file {
            Some(file) if client_id.is_none() => return Err((
                line_of(text, file.span().start),
                "oauth_client_secret_file goes with oauth_client_id (the client the secret is for)"
                    .into(),
            )),
            Some(file) => Some(path(file.get_ref()).to_string_lossy().into_owned()),
            None => None,
        };
    let redirect_port = match keys.redirect_port {
        Some(port) if *port.get_ref() == 0 => {
            return Err((
                line_of(text, port.span().start),
                "oauth_redirect_port is 0: give the port of the redirect URI the client was registered with, or leave it out for any free port"
                    .into(),
            ))
        }
        Some(port) => Some(*port.get_ref()),
        None => None,
    };
    let scopes = match keys.scopes {
        Some(scopes) => {
            // RFC 6749's scope-token: printable ASCII but space, `"`, `\`.
            let is_token = |scope: &String| {
                !scope.is_empty()
                    && scope.bytes().all(|b| {
                        b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b)
                    })
            };
            if let Some(bad) = scopes.get_ref().iter().find(|scope| !is_token(scope)) {
                return Err((
                    line_of(text, scopes.span().start),
                    format!("oauth_scopes: {bad:?} is not one OAuth scope (printable ASCII without spaces, quotes or backslashes)"),
                ));
            }
            scopes.get_ref().clone()
        }
        None => Vec::new(),
    };
    Ok(OAuthLogin {
        url,
        client_id,
        client_secret_file,
        redirect_port,
        scopes,
    })
}

/// The variable a module's `headers` reach `provide-mcp` by, as a JSON
/// object (its own `--header` would put them on the command line).
pub const MCP_HEADERS_ENV: &str = "SWITCHBOARD_MCP_HEADERS";

/// `switchboard provide-mcp --namespace NAME`, the start of both MCP short
/// forms.
fn provide_mcp_args(name: &str) -> Vec<OsString> {
    ["provide-mcp", "--namespace", name]
        .into_iter()
        .map(OsString::from)
        .collect()
}

/// A module name becomes a principal (`reserved{module_id}`), a file name
/// (`modules/NAME.log`) and, for `mcp`, a tool namespace: so the namespace
/// rule, `[A-Za-z0-9_.-]`, 1 to 64 bytes, and it may not start with `.` or `-`.
fn check_name(name: &str) -> Result<(), String> {
    let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-');
    if name.is_empty()
        || name.len() > MAX_NAME_BYTES
        || !name.bytes().all(allowed)
        || name.starts_with(['.', '-'])
    {
        return Err(format!(
            "a module name is 1 to {MAX_NAME_BYTES} of A-Z a-z 0-9 _ . - and does not start with . or -"
        ));
    }
    if matches!(name, "direct" | "unverified") {
        return Err(format!(
            "{name:?} is the name of one of the hub's own principals (grants name it); choose another"
        ));
    }
    Ok(())
}

/// `~` or `~/…` at the start of `arg` is `home`; anything else is kept.
fn expand_home(arg: &str, home: Option<&Path>) -> String {
    match (home, arg.strip_prefix('~')) {
        (Some(home), Some("")) => home.to_string_lossy().into_owned(),
        (Some(home), Some(rest)) if rest.starts_with('/') => {
            format!("{}{rest}", home.to_string_lossy())
        }
        _ => arg.to_owned(),
    }
}

/// A bare name is looked up on `PATH` when the module starts; a relative
/// path is relative to the config file's directory, like `token_file`.
fn resolve_command(command: &str, base: &Path) -> PathBuf {
    let path = Path::new(command);
    if path.is_absolute() || !command.contains('/') {
        path.to_owned()
    } else {
        base.join(path)
    }
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset)
        .map_or(0, |before| before.matches('\n').count())
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct File {
        modules: BTreeMap<String, Spanned<ModuleSection>>,
    }

    fn parse(text: &str) -> Result<Vec<ModuleSpec>, SpecError> {
        let file: File = toml::from_str(text).expect("valid TOML");
        resolve(
            text,
            file.modules,
            Path::new("/etc/sb"),
            Some(Path::new("/home/u")),
        )
    }

    #[test]
    fn the_long_form_and_the_mcp_short_form() {
        let specs = parse(
            r#"
[modules.git]
command = "git-sidecar"
args = ["--repo", "~/src/proj", "a~b", "~"]
env = { RUST_LOG = "info" }
restart = "always"

[modules.fs]
mcp = ["npx", "-y", "server", "~/notes"]
"#,
        )
        .unwrap();
        let fs = &specs[0];
        assert_eq!(fs.name, "fs");
        assert_eq!(fs.program, Program::Switchboard);
        assert_eq!(
            fs.command_line(),
            "switchboard provide-mcp --namespace fs -- npx -y server /home/u/notes"
        );
        assert_eq!(fs.restart, RestartPolicy::OnFailure);
        let git = &specs[1];
        assert_eq!(git.program, Program::Command("git-sidecar".into()));
        assert_eq!(
            git.args,
            ["--repo", "/home/u/src/proj", "a~b", "/home/u"].map(OsString::from)
        );
        assert_eq!(git.env, vec![("RUST_LOG".into(), "info".into())]);
        assert_eq!(git.restart, RestartPolicy::Always);
        assert_eq!(git.log_max_bytes, DEFAULT_LOG_MAX_BYTES);
    }

    #[test]
    fn the_remote_short_form_keeps_headers_out_of_the_command_line() {
        let specs = parse(
            r#"
[modules.docs]
mcp_url = "https://mcp.example.com/mcp"
headers = { "X-Api-Key" = "secret" }
bearer_token_file = "tokens/docs"
"#,
        )
        .unwrap();
        let docs = &specs[0];
        assert_eq!(docs.program, Program::Switchboard);
        assert_eq!(
            docs.command_line(),
            "switchboard provide-mcp --namespace docs --mcp-url https://mcp.example.com/mcp \
             --bearer-token-file /etc/sb/tokens/docs"
        );
        assert_eq!(
            docs.env,
            vec![(MCP_HEADERS_ENV.into(), r#"{"X-Api-Key":"secret"}"#.into())]
        );
    }

    #[test]
    fn oauth_passes_the_flag_and_names_the_server_to_log_in_to() {
        let specs = parse(
            "[modules.tracker]\nmcp_url = \"https://mcp.example.com/t\"\noauth = true\n\n[modules.plain]\nmcp_url = \"https://mcp.example.com/p\"\noauth = false\n",
        )
        .unwrap();
        let plain = &specs[0];
        assert_eq!(plain.oauth, None);
        assert!(!plain.command_line().contains("--oauth"));
        let tracker = &specs[1];
        assert_eq!(
            tracker.command_line(),
            "switchboard provide-mcp --namespace tracker --mcp-url https://mcp.example.com/t --oauth"
        );
        assert_eq!(
            tracker.oauth,
            Some(OAuthLogin {
                url: "https://mcp.example.com/t".into(),
                client_id: None,
                client_secret_file: None,
                redirect_port: None,
                scopes: Vec::new(),
            })
        );

        let error = parse("[modules.x]\nmcp = [\"a\"]\noauth = true\n").unwrap_err();
        assert_eq!(error.line, 3);
        assert!(
            error.problem.contains("oauth goes with mcp_url"),
            "{error:?}"
        );

        let error = parse(
            "[modules.x]\nmcp_url = \"https://h/\"\noauth = true\nbearer_token_file = \"t\"\n",
        )
        .unwrap_err();
        assert_eq!(error.line, 4);
        assert!(error.problem.contains("give one"), "{error:?}");
    }

    #[test]
    fn a_pre_registered_oauth_client_reaches_the_module_and_the_login() {
        let specs = parse(
            "[modules.wiki]\nmcp_url = \"https://mcp.example.com/w\"\noauth = true\noauth_client_id = \" switchboard-desktop \"\noauth_client_secret_file = \"~/wiki-secret\"\noauth_redirect_port = 8976\noauth_scopes = [\"wiki:read\", \"offline_access\"]\n",
        )
        .unwrap();
        let wiki = &specs[0];
        // The id is no secret; the secret stays in its file.
        assert_eq!(
            wiki.command_line(),
            "switchboard provide-mcp --namespace wiki --mcp-url https://mcp.example.com/w --oauth --oauth-client-id=switchboard-desktop --oauth-client-secret-file /home/u/wiki-secret"
        );
        assert_eq!(
            wiki.oauth,
            Some(OAuthLogin {
                url: "https://mcp.example.com/w".into(),
                client_id: Some("switchboard-desktop".into()),
                client_secret_file: Some("/home/u/wiki-secret".into()),
                redirect_port: Some(8976),
                scopes: vec!["wiki:read".into(), "offline_access".into()],
            })
        );
        // A relative file is the config's neighbour.
        let specs = parse(
            "[modules.wiki]\nmcp_url = \"https://h/\"\noauth = true\noauth_client_id = \"c\"\noauth_client_secret_file = \"secrets/wiki\"\n",
        )
        .unwrap();
        let login = specs[0].oauth.as_ref().unwrap();
        assert_eq!(
            login.client_secret_file.as_deref(),
            Some("/etc/sb/secrets/wiki")
        );
        assert_eq!(login.redirect_port, None);

        for (config, line, problem) in [
            (
                "[modules.x]\nmcp_url = \"https://h/\"\noauth_client_id = \"c\"\n",
                3,
                "oauth_client_id goes with oauth = true",
            ),
            (
                "[modules.x]\nmcp_url = \"https://h/\"\noauth = false\noauth_redirect_port = 80\n",
                4,
                "oauth_redirect_port goes with oauth = true",
            ),
            (
                "[modules.x]\nmcp_url = \"https://h/\"\noauth = true\noauth_client_id = \" \"\n",
                4,
                "oauth_client_id is empty",
            ),
            (
                "[modules.x]\nmcp_url = \"https://h/\"\noauth = true\noauth_client_secret_file = \"s\"\n",
                4,
                "oauth_client_secret_file goes with oauth_client_id",
            ),
            (
                "[modules.x]\nmcp_url = \"https://h/\"\noauth = true\noauth_client_id = \"c\"\noauth_redirect_port = 0\n",
                5,
                "oauth_redirect_port is 0",
            ),
            (
                "[modules.x]\nmcp_url = \"https://h/\"\noauth = true\noauth_scopes = [\"read write\"]\n",
                4,
                "\"read write\" is not one OAuth scope",
            ),
            (
                "[modules.x]\nmcp_url = \"https://h/\"\noauth_scopes = [\"read\"]\n",
                3,
                "oauth_scopes goes with oauth = true",
            ),
        ] {
            let error = parse(config).unwrap_err();
            assert_eq!(error.line, line, "{config}: {error:?}");
            assert!(error.problem.contains(problem), "{config}: {error:?}");
        }
    }

    #[test]
    fn relative_commands_are_relative_to_the_config() {
        let specs = parse(
            "[modules.a]\ncommand = \"bin/tool\"\n[modules.b]\ncommand = \"/usr/bin/tool\"\n",
        )
        .unwrap();
        assert_eq!(
            specs[0].program,
            Program::Command("/etc/sb/bin/tool".into())
        );
        assert_eq!(specs[1].program, Program::Command("/usr/bin/tool".into()));
    }

    #[test]
    fn mistakes_name_their_line() {
        let error = parse("[hub]\n\n[modules.git]\ncommand = \"  \"\n").unwrap_err();
        assert_eq!((error.name.as_str(), error.line), ("git", 4));
        assert!(error.problem.contains("command is empty"), "{error:?}");

        let error = parse("\n[modules.fs]\nmcp = []\n").unwrap_err();
        assert_eq!(error.line, 3);
        assert!(error.problem.contains("mcp is empty"), "{error:?}");

        let error = parse("[modules.x]\nenv = {}\n").unwrap_err();
        assert_eq!(error.line, 1);
        assert!(error.problem.contains("no command"), "{error:?}");

        let error = parse("[modules.x]\nmcp = [\"a\"]\ncommand = \"b\"\n").unwrap_err();
        assert_eq!(error.line, 3);
        assert!(error.problem.contains("one of command"), "{error:?}");

        let error = parse("[modules.x]\nmcp_url = \"ftp://h/\"\n").unwrap_err();
        assert_eq!(error.line, 2);
        assert!(error.problem.contains("https://"), "{error:?}");

        let error = parse("[modules.x]\nmcp = [\"a\"]\nheaders = {}\n").unwrap_err();
        assert_eq!(error.line, 3);
        assert!(
            error.problem.contains("headers goes with mcp_url"),
            "{error:?}"
        );

        let error = parse("[modules.\"../x\"]\ncommand = \"b\"\n").unwrap_err();
        assert_eq!(error.line, 1);
        assert!(error.problem.contains("module name"), "{error:?}");

        let error = parse("[modules.direct]\ncommand = \"b\"\n").unwrap_err();
        assert!(error.problem.contains("hub's own principals"), "{error:?}");

        let error = parse("[modules.x]\ncommand = \"b\"\nlog_max_bytes = 10\n").unwrap_err();
        assert_eq!(error.line, 3);
        assert!(error.problem.contains("at least 4096"), "{error:?}");
    }
}
