//! `ARCHITECTURE.md` is the map of the code; this test keeps it whole, as
//! rust-analyzer's tidy tests do: every workspace crate has an entry that
//! states its invariant, the arrows between crates it draws are the
//! crates' own dependencies, and every module of `crates/hub` is named.

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

/// The `switchboard-*` crates a member depends on (`[dependencies]` only:
/// tests and features aside), by their folder name (`hub`, `client`).
fn dependencies_of(member: &str) -> Vec<String> {
    let manifest = std::fs::read_to_string(workspace_root().join(member).join("Cargo.toml"))
        .expect("the member's Cargo.toml");
    let mut in_dependencies = false;
    let mut found = Vec::new();
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
            continue;
        }
        if !in_dependencies {
            continue;
        }
        let name = line.split(['=', '.', ' ']).next().unwrap_or("");
        if let Some(crate_name) = name.strip_prefix("switchboard-") {
            found.push(crate_name.to_owned());
        }
    }
    found.sort();
    found
}

/// The arrows the map draws: its table `| crate | uses |`, one row per
/// member, `` `name` `` cells (`—` for none).
fn drawn_arrows(map: &str) -> Vec<(String, Vec<String>)> {
    let start = map
        .find("| crate | uses |")
        .expect("a `| crate | uses |` table in ARCHITECTURE.md's code map");
    let names = |cell: &str| -> Vec<String> {
        let mut names: Vec<String> = cell
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect();
        names.sort();
        names
    };
    map[start..]
        .lines()
        .skip(2)
        .take_while(|line| line.starts_with('|'))
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let member = names(cells.get(1)?).into_iter().next()?;
            Some((member, names(cells.get(2)?)))
        })
        .collect()
}

#[test]
fn the_map_draws_every_crates_dependencies() {
    let map = map();
    let drawn = drawn_arrows(&map);
    let mut wrong = Vec::new();
    for member in workspace_members() {
        let short = member.rsplit('/').next().unwrap().to_owned();
        let actual = dependencies_of(&member);
        match drawn.iter().find(|(name, _)| *name == short) {
            None => wrong.push(format!("{member}: no row in the `| crate | uses |` table")),
            Some((_, arrows)) if *arrows != actual => wrong.push(format!(
                "{member}: the map draws {arrows:?}, its Cargo.toml uses {actual:?}"
            )),
            Some(_) => {}
        }
    }
    for (name, _) in &drawn {
        if !workspace_members()
            .iter()
            .any(|m| m.ends_with(&format!("/{name}")))
        {
            wrong.push(format!(
                "the table has a row for `{name}`, which is no workspace member"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "ARCHITECTURE.md's arrows differ from the crates:\n{}",
        wrong.join("\n")
    );
}
