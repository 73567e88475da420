//! The repository stands alone: every relative link in the README, the
//! top-level documents and `docs/` (the reference included) names a file
//! of this repository that exists, and a heading of it when it names one;
//! and nothing in them, nor in a doc comment, points at the company's
//! tree beside the checkout (`../shared`), which a clone does not have.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

fn workspace_root() -> PathBuf {
    // crates/testkit → the workspace.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the workspace root")
        .to_owned()
}

/// The documents whose links are checked: the top-level ones, and every
/// `.md` under `docs/` and `conformance/`.
fn documents(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut out: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md", "SECURITY.md"]
        .iter()
        .map(|name| root.join(name))
        .collect();
    walk(&root.join("docs"), &mut out);
    walk(&root.join("conformance"), &mut out);
    out.sort();
    out
}

/// The text outside fenced code blocks, one entry per line (empty inside
/// a fence, so line numbers stay right), with inline code spans blanked.
fn prose_lines(text: &str) -> Vec<String> {
    let mut fenced = false;
    text.lines()
        .map(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return String::new();
            }
            if fenced {
                return String::new();
            }
            let mut out = String::with_capacity(line.len());
            let mut in_code = false;
            for c in line.chars() {
                if c == '`' {
                    in_code = !in_code;
                    out.push(' ');
                } else {
                    out.push(if in_code { ' ' } else { c });
                }
            }
            out
        })
        .collect()
}

/// The targets of inline links `[text](target)` in a line.
fn link_targets(line: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        let target = after[..end].split_whitespace().next().unwrap_or("");
        targets.push(target.trim_matches(|c| c == '<' || c == '>').to_owned());
        rest = &after[end..];
    }
    targets
}

/// GitHub's anchor for a heading: lower case, characters other than
/// letters, digits, `-`, `_` and spaces dropped, spaces made `-`.
fn slug(heading: &str) -> String {
    // Link syntax in a heading contributes its text only.
    let mut text = String::new();
    let mut chars = heading.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ']' && chars.peek() == Some(&'(') {
            for c in chars.by_ref() {
                if c == ')' {
                    break;
                }
            }
        } else {
            text.push(c);
        }
    }
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every anchor a document's headings make (a repeated heading gets `-1`,
/// `-2`, … as on GitHub).
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if fenced || hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim_end_matches('#'));
        let mut anchor = base.clone();
        let mut n = 0;
        while !seen.insert(anchor.clone()) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
    }
    seen
}

/// `base.join(relative)` with `.` and `..` resolved by hand; `None` if it
/// climbs above the file system's root.
fn resolve(base: &Path, relative: &str) -> Option<PathBuf> {
    let mut parts: Vec<Component<'_>> = base.components().collect();
    for part in Path::new(relative).components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => match parts.last() {
                Some(Component::Normal(_)) => {
                    parts.pop();
                }
                _ => return None,
            },
            Component::Normal(_) => parts.push(part),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.iter().collect())
}

#[test]
fn every_relative_link_in_the_docs_names_a_file_and_heading_of_this_repository() {
    let root = workspace_root();
    let documents = documents(&root);
    assert!(
        documents
            .iter()
            .any(|d| d.ends_with("docs/reference/hub-protocol.md")),
        "the reference was not found among {documents:?}"
    );
    let mut broken = Vec::new();
    for document in &documents {
        let text = std::fs::read_to_string(document).expect("a readable document");
        let shown = document.strip_prefix(&root).unwrap().display().to_string();
        for (number, line) in prose_lines(&text).iter().enumerate() {
            for target in link_targets(line) {
                let place = format!("{shown}:{}: ({target})", number + 1);
                if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (path, anchor) = match target.split_once('#') {
                    Some((path, anchor)) => (path, Some(anchor)),
                    None => (target.as_str(), None),
                };
                let file = if path.is_empty() {
                    Some(document.clone())
                } else if path.starts_with('/') {
                    None
                } else {
                    resolve(document.parent().unwrap(), path)
                };
                let Some(file) = file.filter(|f| f.starts_with(&root)) else {
                    broken.push(format!("{place} leaves the repository"));
                    continue;
                };
                if !file.exists() {
                    broken.push(format!("{place}: no such file"));
                    continue;
                }
                let Some(anchor) = anchor else { continue };
                if file.extension().is_some_and(|e| e == "md") {
                    let target_text = std::fs::read_to_string(&file).expect("a readable document");
                    if !anchors(&target_text).contains(anchor) {
                        broken.push(format!("{place}: no heading makes #{anchor}"));
                    }
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links that do not resolve in this repository:\n{}",
        broken.join("\n")
    );
}

/// Where a document or a doc comment could still send a reader to the
/// company's contracts instead of the repository's own reference.
#[test]
fn nothing_points_at_the_shared_tree_outside_the_repository() {
    let root = workspace_root();
    let mut files = documents(&root);
    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("a source folder") {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() && !path.ends_with("target") {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    rust_files(&root.join("crates"), &mut files);
    rust_files(&root.join("examples"), &mut files);
    // Spelled in two pieces so that this file does not find itself.
    let needles = [
        concat!("shared", "/spec"),
        concat!("shared", "/conformance"),
    ];
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a readable file");
        for (number, line) in text.lines().enumerate() {
            if needles.iter().any(|needle| line.contains(needle)) {
                let shown = file.strip_prefix(&root).unwrap().display();
                found.push(format!("{shown}:{}: {}", number + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "these name the shared tree, which a clone does not have (name docs/reference/… instead):\n{}",
        found.join("\n")
    );
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    let text = "# Hub protocol\n## 6. Requests\n## `switchboard provide-mcp`\n### Order of checks in `tools/call`\n## Requests\n## Requests\n```\n# not a heading\n```\n";
    let made = anchors(text);
    for anchor in [
        "hub-protocol",
        "6-requests",
        "switchboard-provide-mcp",
        "order-of-checks-in-toolscall",
        "requests",
        "requests-1",
    ] {
        assert!(made.contains(anchor), "{anchor} is missing from {made:?}");
    }
    assert!(!made.contains("not-a-heading"));
    assert_eq!(
        link_targets("see [a](x.md#b) and [`c`](../d.md)"),
        ["x.md#b", "../d.md"]
    );
    assert_eq!(
        resolve(Path::new("/r/docs"), "../x.md"),
        Some(PathBuf::from("/r/x.md"))
    );
    assert_eq!(
        resolve(Path::new("/r/docs"), "../../x.md"),
        Some(PathBuf::from("/x.md"))
    );
    assert_eq!(resolve(Path::new("/r"), "../../x.md"), None);
}
