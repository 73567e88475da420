//! Profiles: which of the hub's tools and prompts a consumer shows, and
//! under which names, from `[profiles.NAME]` in the config file:
//!
//! ```toml
//! [profiles.coding]
//! include = ["git__*", "everything__echo"]   # globs; absent: everything
//! exclude = ["*__delete*"]                   # globs; applied after include
//! rename = { "everything__echo" = "echo" }   # the hub's name → the name shown
//! tool_search = true                         # list search_tools and call_tool instead
//! pinned = ["git__status"]                   # globs: listed beside them all the same
//! ```
//!
//! Globs (`globset`'s syntax: `*`, `?`, `[...]`, `{a,b}`) match the names
//! the consumer exposes: `<namespace>__<tool>` and `<namespace>__<prompt>`.
//! A profile narrows and renames what the caller may see anyway; it grants
//! nothing (grants do that, in the hub).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;

/// The longest name a rename may give (MCP's tool-name bound).
const MAX_NAME: usize = 128;

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("cannot read the config file {path}: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("config file {path} has no [profiles.{name}] (profiles there: {known})")]
    Unknown {
        path: PathBuf,
        name: String,
        known: String,
    },
    #[error("config file {path}, [profiles.{profile}]: {problem}")]
    Invalid {
        path: PathBuf,
        profile: String,
        problem: String,
    },
}

#[derive(Deserialize)]
struct File {
    /// The rest of the file is the hub's (and `[acp]` the ACP front's).
    #[serde(default)]
    profiles: BTreeMap<String, Section>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Section {
    include: Option<Vec<String>>,
    #[serde(default)]
    exclude: Vec<String>,
    #[serde(default)]
    rename: BTreeMap<String, String>,
    #[serde(default)]
    tool_search: bool,
    #[serde(default)]
    pinned: Vec<String>,
}

/// One profile, checked.
#[derive(Debug, Clone)]
pub struct Profile {
    name: String,
    /// `None`: every name.
    include: Option<GlobSet>,
    exclude: GlobSet,
    /// The hub's name → the name shown.
    shown: HashMap<String, String>,
    /// The name shown → the hub's name.
    hub: HashMap<String, String>,
    /// List `search_tools` and `call_tool` instead of every tool.
    tool_search: bool,
    /// With tool search, the tools listed all the same (hub names).
    pinned: GlobSet,
}

impl Profile {
    /// `[profiles.NAME]` of the config file at `path`.
    pub fn load(path: &Path, name: &str) -> Result<Profile, ProfileError> {
        let text = std::fs::read_to_string(path).map_err(|error| ProfileError::Read {
            path: path.to_owned(),
            error,
        })?;
        Profile::parse(&text, path, name)
    }

    /// `[profiles.NAME]` of `text` (the file at `path`, for messages).
    pub fn parse(text: &str, path: &Path, name: &str) -> Result<Profile, ProfileError> {
        let mut file: File = toml::from_str(text).map_err(|error| ProfileError::Parse {
            path: path.to_owned(),
            message: error.message().to_owned(),
        })?;
        let Some(section) = file.profiles.remove(name) else {
            let known: Vec<&str> = file.profiles.keys().map(String::as_str).collect();
            return Err(ProfileError::Unknown {
                path: path.to_owned(),
                name: name.to_owned(),
                known: if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                },
            });
        };
        let invalid = |problem: String| ProfileError::Invalid {
            path: path.to_owned(),
            profile: name.to_owned(),
            problem,
        };
        let include = section
            .include
            .map(|patterns| globs("include", &patterns))
            .transpose()
            .map_err(invalid)?;
        let exclude = globs("exclude", &section.exclude).map_err(invalid)?;
        let pinned = globs("pinned", &section.pinned).map_err(invalid)?;
        if !section.pinned.is_empty() && !section.tool_search {
            return Err(invalid(
                "pinned names the tools listed beside search_tools; it needs tool_search = true"
                    .into(),
            ));
        }
        let mut hub = HashMap::new();
        for (from, to) in &section.rename {
            if !valid_name(to) {
                return Err(invalid(format!(
                    "rename {from:?} = {to:?}: a name is 1 to {MAX_NAME} of A-Z a-z 0-9 _ - ."
                )));
            }
            if let Some(other) = hub.insert(to.clone(), from.clone()) {
                return Err(invalid(format!(
                    "rename gives {other:?} and {from:?} the same name {to:?}"
                )));
            }
        }
        Ok(Profile {
            name: name.to_owned(),
            include,
            exclude,
            shown: section.rename.into_iter().collect(),
            hub,
            tool_search: section.tool_search,
            pinned,
        })
    }

    /// Every tool and prompt under its own name (`switchboard mcp
    /// --tool-search` without `--profile`).
    pub fn everything() -> Profile {
        Profile {
            name: "everything".to_owned(),
            include: None,
            exclude: GlobSet::empty(),
            shown: HashMap::new(),
            hub: HashMap::new(),
            tool_search: false,
            pinned: GlobSet::empty(),
        }
    }

    /// The same profile with tool search on.
    pub fn with_tool_search(mut self) -> Profile {
        self.tool_search = true;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether clients get `search_tools` and `call_tool` instead of the
    /// whole list.
    pub fn tool_search(&self) -> bool {
        self.tool_search
    }

    /// Whether the hub's tool `name` is listed beside them all the same.
    pub fn pins(&self, name: &str) -> bool {
        self.pinned.is_match(name)
    }

    /// Whether the profile keeps the hub's `name`.
    fn keeps(&self, name: &str) -> bool {
        self.include.as_ref().is_none_or(|set| set.is_match(name)) && !self.exclude.is_match(name)
    }

    /// The name a client sees for the hub's `name`, or `None` if the
    /// profile leaves it out. A name another item is renamed to hides the
    /// item that had it, so that no two share a name.
    pub fn shown<'a>(&'a self, name: &'a str) -> Option<&'a str> {
        if !self.keeps(name) {
            return None;
        }
        match self.shown.get(name) {
            Some(shown) => Some(shown),
            None if self.hub.contains_key(name) => None,
            None => Some(name),
        }
    }

    /// The hub's name for `shown`, the name a client used, if the profile
    /// shows an item under it.
    pub fn hub_name<'a>(&'a self, shown: &'a str) -> Option<&'a str> {
        let name = match self.hub.get(shown) {
            Some(name) => name.as_str(),
            // Renamed away: the old name is not shown any more.
            None if self.shown.contains_key(shown) => return None,
            None => shown,
        };
        self.keeps(name).then_some(name)
    }
}

fn globs(key: &str, patterns: &[String]) -> Result<GlobSet, String> {
    let mut set = GlobSetBuilder::new();
    for pattern in patterns {
        let glob =
            Glob::new(pattern).map_err(|error| format!("{key}: {pattern:?}: {}", error.kind()))?;
        set.add(glob);
    }
    set.build().map_err(|error| format!("{key}: {error}"))
}

fn valid_name(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(text: &str, name: &str) -> Result<Profile, ProfileError> {
        Profile::parse(text, Path::new("/etc/sb.toml"), name)
    }

    #[test]
    fn include_then_exclude_then_rename() {
        let coding = profile(
            r#"
[hub]
allowed_origins = []

[profiles.coding]
include = ["git__*", "everything__echo", "everything__*-prompt"]
exclude = ["git__push*"]
rename = { "everything__echo" = "echo" }
"#,
            "coding",
        )
        .unwrap();
        assert_eq!(coding.shown("git__status"), Some("git__status"));
        assert_eq!(coding.shown("git__push"), None);
        assert_eq!(coding.shown("fs__read"), None);
        assert_eq!(coding.shown("everything__echo"), Some("echo"));
        assert_eq!(
            coding.shown("everything__args-prompt"),
            Some("everything__args-prompt")
        );
        assert_eq!(coding.hub_name("echo"), Some("everything__echo"));
        assert_eq!(coding.hub_name("everything__echo"), None, "renamed away");
        assert_eq!(coding.hub_name("git__push"), None);
        assert_eq!(coding.hub_name("git__log"), Some("git__log"));
    }

    #[test]
    fn no_include_is_everything_and_a_rename_hides_the_name_it_takes() {
        let all = profile("[profiles.all]\nrename = { \"a__x\" = \"b__y\" }\n", "all").unwrap();
        assert_eq!(all.shown("c__z"), Some("c__z"));
        assert_eq!(all.shown("a__x"), Some("b__y"));
        assert_eq!(all.shown("b__y"), None, "its name is a__x's now");
        assert_eq!(all.hub_name("b__y"), Some("a__x"));
    }

    #[test]
    fn mistakes_are_named() {
        let unknown = profile("[profiles.a]\n[profiles.b]\n", "c").unwrap_err();
        assert!(
            unknown
                .to_string()
                .contains("no [profiles.c] (profiles there: a, b)"),
            "{unknown}"
        );
        let glob = profile("[profiles.a]\ninclude = [\"[x\"]\n", "a").unwrap_err();
        assert!(glob.to_string().contains("include: \"[x\""), "{glob}");
        let twice = profile(
            "[profiles.a]\nrename = { \"p__x\" = \"x\", \"q__x\" = \"x\" }\n",
            "a",
        )
        .unwrap_err();
        assert!(twice.to_string().contains("the same name \"x\""), "{twice}");
        let bad = profile("[profiles.a]\nrename = { \"p__x\" = \"a b\" }\n", "a").unwrap_err();
        assert!(bad.to_string().contains("1 to 128"), "{bad}");
        let key = profile("[profiles.a]\nincluded = []\n", "a").unwrap_err();
        assert!(key.to_string().contains("unknown field"), "{key}");
    }

    #[test]
    fn tool_search_and_its_pinned_tools() {
        let searching = profile(
            "[profiles.s]\ntool_search = true\npinned = [\"git__status\", \"fs__read*\"]\n",
            "s",
        )
        .unwrap();
        assert!(searching.tool_search());
        assert!(searching.pins("git__status") && searching.pins("fs__read_file"));
        assert!(!searching.pins("git__log"));
        let plain = profile("[profiles.p]\n", "p").unwrap();
        assert!(!plain.tool_search() && !plain.pins("git__status"));
        assert!(Profile::everything().with_tool_search().tool_search());
        let stray = profile("[profiles.p]\npinned = [\"git__*\"]\n", "p").unwrap_err();
        assert!(
            stray.to_string().contains("needs tool_search = true"),
            "{stray}"
        );
    }
}
