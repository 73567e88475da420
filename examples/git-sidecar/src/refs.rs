//! Reading every ref of a repository, and what changed between two reads.

use std::collections::BTreeMap;

use gix::refs::TargetRef;
use serde::Serialize;

/// One ref as `getRefs` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefEntry {
    /// `HEAD`, `refs/heads/main`, `refs/tags/v1`, …
    pub name: String,
    /// The ref a symbolic ref points to (`HEAD` → `refs/heads/main`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbolic: Option<String>,
    /// The object the ref resolves to, symbolic refs followed (an annotated
    /// tag's own id for a tag ref). `null` for an unborn branch or a
    /// symbolic ref to nothing.
    pub target: Option<String>,
    /// For a ref to an annotated tag: the object the tag chain ends at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peeled: Option<String>,
}

/// One ref that moved, appeared, or went away.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefChange {
    pub name: String,
    /// `null`: the ref is new (or was unborn).
    pub old: Option<String>,
    /// `null`: the ref was deleted (or is unborn).
    pub new: Option<String>,
    /// Where the ref points now, for a symbolic ref.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbolic: Option<String>,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot read the refs: {0}")]
pub struct RefsError(String);

/// `HEAD` first, then every ref (loose and packed) by name. A ref that
/// cannot be read is left out and logged rather than failing the listing.
pub fn read_refs(repo: &gix::Repository) -> Result<Vec<RefEntry>, RefsError> {
    let mut entries = Vec::new();
    match repo.try_find_reference("HEAD") {
        Ok(Some(head)) => entries.push(entry(head)),
        Ok(None) => {}
        Err(error) => return Err(RefsError(format!("HEAD: {error}"))),
    }
    let platform = repo
        .references()
        .map_err(|error| RefsError(error.to_string()))?;
    let all = platform
        .all()
        .map_err(|error| RefsError(error.to_string()))?;
    let mut refs: Vec<RefEntry> = Vec::new();
    for reference in all {
        match reference {
            Ok(reference) => refs.push(entry(reference)),
            Err(error) => tracing::warn!(%error, "skipped a ref that cannot be read"),
        }
    }
    refs.sort_by(|a, b| a.name.cmp(&b.name));
    entries.extend(refs);
    Ok(entries)
}

fn entry(mut reference: gix::Reference<'_>) -> RefEntry {
    let name = reference.name().as_bstr().to_string();
    let symbolic = match reference.target() {
        TargetRef::Symbolic(to) => Some(to.as_bstr().to_string()),
        TargetRef::Object(_) => None,
    };
    let target = reference.follow_to_object().ok().map(|id| id.detach());
    let peeled = target
        .and_then(|_| reference.peel_to_id().ok())
        .map(|id| id.detach())
        .filter(|peeled| Some(*peeled) != target);
    RefEntry {
        name,
        symbolic,
        target: target.map(|id| id.to_string()),
        peeled: peeled.map(|id| id.to_string()),
    }
}

/// The refs whose target or symbolic target differ between `old` and `new`,
/// by name (`HEAD` sorts first).
pub fn diff(old: &[RefEntry], new: &[RefEntry]) -> Vec<RefChange> {
    let before: BTreeMap<&str, &RefEntry> = old.iter().map(|e| (e.name.as_str(), e)).collect();
    let after: BTreeMap<&str, &RefEntry> = new.iter().map(|e| (e.name.as_str(), e)).collect();
    let mut names: Vec<&str> = before.keys().chain(after.keys()).copied().collect();
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .filter_map(|name| {
            let was = before.get(name);
            let is = after.get(name);
            let same = match (was, is) {
                (Some(a), Some(b)) => a.target == b.target && a.symbolic == b.symbolic,
                _ => false,
            };
            (!same).then(|| RefChange {
                name: name.to_owned(),
                old: was.and_then(|e| e.target.clone()),
                new: is.and_then(|e| e.target.clone()),
                symbolic: is.and_then(|e| e.symbolic.clone()),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn direct(name: &str, target: &str) -> RefEntry {
        RefEntry {
            name: name.into(),
            symbolic: None,
            target: Some(target.into()),
            peeled: None,
        }
    }

    #[test]
    fn diff_reports_moved_new_deleted_and_retargeted_refs() {
        let head_main = RefEntry {
            symbolic: Some("refs/heads/main".into()),
            ..direct("HEAD", "a")
        };
        let old = vec![
            head_main.clone(),
            direct("refs/heads/gone", "g"),
            direct("refs/heads/main", "a"),
            direct("refs/tags/same", "s"),
        ];
        let head_topic = RefEntry {
            symbolic: Some("refs/heads/topic".into()),
            ..head_main
        };
        let new = vec![
            head_topic,
            direct("refs/heads/main", "b"),
            direct("refs/heads/topic", "a"),
            direct("refs/tags/same", "s"),
        ];
        let changes = diff(&old, &new);
        let summary: Vec<(&str, Option<&str>, Option<&str>)> = changes
            .iter()
            .map(|c| (c.name.as_str(), c.old.as_deref(), c.new.as_deref()))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("HEAD", Some("a"), Some("a")),
                ("refs/heads/gone", Some("g"), None),
                ("refs/heads/main", Some("a"), Some("b")),
                ("refs/heads/topic", None, Some("a")),
            ]
        );
        assert_eq!(changes[0].symbolic.as_deref(), Some("refs/heads/topic"));
        assert!(diff(&new, &new).is_empty());
    }
}
