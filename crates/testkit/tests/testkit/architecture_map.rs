//! `ARCHITECTURE.md` is the map of the code; this test keeps it whole, as
//! rust-analyzer's tidy tests do: every workspace crate has an entry that
//! states its invariant, and every module of `crates/hub` is named.

use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    // crates/testkit → the workspace.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the workspace root")
        .to_owned()
}

fn map() -> String {
    std::fs::read_to_string(workspace_root().join("ARCHITECTURE.md")).expect("ARCHITECTURE.md")
}

/// The workspace's members, as `crates/NAME` or `examples/NAME`: every
/// folder under those two that holds a `Cargo.toml`.
fn workspace_members() -> Vec<String> {
    let root = workspace_root();
    let mut members = Vec::new();
    for parent in ["crates", "examples"] {
        let entries = std::fs::read_dir(root.join(parent)).expect("a member folder");
        for entry in entries {
            let path = entry.expect("a folder entry").path();
            if path.join("Cargo.toml").is_file() {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                members.push(format!("{parent}/{name}"));
            }
        }
    }
    members.sort();
    members
}

/// Every `.rs` file under `crates/hub/src`, relative to it (`router.rs`,
/// `transport/ws.rs`).
fn hub_modules() -> Vec<String> {
    fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("a source folder") {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                walk(&path, base, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(base).unwrap();
                out.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let base = workspace_root().join("crates/hub/src");
    let mut modules = Vec::new();
    walk(&base, &base, &mut modules);
    modules.sort();
    modules
}

/// The text of the `### `crates/NAME`` section, up to the next heading.
fn section<'a>(map: &'a str, member: &str) -> Option<&'a str> {
    let heading = format!("### `{member}`");
    let start = map.find(&heading)? + heading.len();
    let rest = &map[start..];
    let end = rest.find("\n#").unwrap_or(rest.len());
    Some(&rest[..end])
}

#[test]
fn every_workspace_crate_has_an_entry_with_its_invariant() {
    let map = map();
    let members = workspace_members();
    assert!(
        members.iter().any(|m| m == "crates/hub"),
        "the members were not found: {members:?}"
    );
    let mut missing = Vec::new();
    for member in &members {
        match section(&map, member) {
            None => missing.push(format!("{member}: no `### `{member}`` section")),
            Some(text) if !text.contains("**Invariant:**") => {
                missing.push(format!("{member}: its section states no **Invariant:**"))
            }
            Some(_) => {}
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md is missing:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_module_of_the_hub_is_on_the_map() {
    let map = map();
    let hub = section(&map, "crates/hub").expect("a crates/hub section");
    let modules = hub_modules();
    assert!(modules.iter().any(|m| m == "router.rs"), "{modules:?}");
    let missing: Vec<&String> = modules
        .iter()
        .filter(|module| !hub.contains(&format!("`{module}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "crates/hub modules missing from ARCHITECTURE.md's hub table: {missing:?}"
    );
}
