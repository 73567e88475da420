//! The repositories this sidecar serves, and how a request names one.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One served repository.
pub struct ServedRepo {
    /// Its position in [`ServedRepos`]: part of every cache key, so objects
    /// cached for one repository are never reported as present in another.
    pub index: usize,
    /// The directory name (`proj` for `/src/proj`, `/src/proj/.git` or
    /// `/src/proj.git`), unique among the served repositories.
    pub name: String,
    /// The path as given on the command line.
    pub given: PathBuf,
    /// The same path, canonical.
    pub canonical: PathBuf,
    pub repo: gix::ThreadSafeRepository,
}

/// Every served repository, in command-line order.
pub struct ServedRepos {
    repos: Vec<Arc<ServedRepo>>,
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot open the Git repository {path}: {message}")]
    Open { path: PathBuf, message: String },
    #[error("{first} and {second} are both named {name:?}; a repo is named after its directory, so serve repos with distinct directory names")]
    DuplicateName {
        name: String,
        first: PathBuf,
        second: PathBuf,
    },
    #[error("{0} is given twice")]
    Duplicate(PathBuf),
    #[error("no --repo given: name at least one repository to serve")]
    None,
}

/// Why a request's `repo` names no served repository.
#[derive(Debug, thiserror::Error)]
#[error("repo {requested:?} is not served here (served: {})", served.join(", "))]
pub struct UnknownRepo {
    pub requested: String,
    pub served: Vec<String>,
}

impl ServedRepos {
    pub fn open(paths: &[PathBuf]) -> Result<ServedRepos, OpenError> {
        if paths.is_empty() {
            return Err(OpenError::None);
        }
        let mut repos: Vec<Arc<ServedRepo>> = Vec::with_capacity(paths.len());
        for given in paths {
            let repo = gix::ThreadSafeRepository::open(given.clone()).map_err(|error| {
                OpenError::Open {
                    path: given.clone(),
                    message: error.to_string(),
                }
            })?;
            let canonical = std::fs::canonicalize(given).map_err(|error| OpenError::Open {
                path: given.clone(),
                message: error.to_string(),
            })?;
            let name = repo_name(&canonical);
            if repos.iter().any(|r| r.canonical == canonical) {
                return Err(OpenError::Duplicate(given.clone()));
            }
            if let Some(other) = repos.iter().find(|r| r.name == name) {
                return Err(OpenError::DuplicateName {
                    name,
                    first: other.given.clone(),
                    second: given.clone(),
                });
            }
            repos.push(Arc::new(ServedRepo {
                index: repos.len(),
                name,
                given: given.clone(),
                canonical,
                repo,
            }));
        }
        Ok(ServedRepos { repos })
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<ServedRepo>> {
        self.repos.iter()
    }

    pub fn len(&self) -> usize {
        self.repos.len()
    }

    pub fn names(&self) -> Vec<String> {
        self.repos.iter().map(|r| r.name.clone()).collect()
    }

    /// The repository `requested` names: its directory name, the path given
    /// on the command line, or any path to the same directory.
    pub fn find(&self, requested: &str) -> Result<Arc<ServedRepo>, UnknownRepo> {
        let by_text = self
            .repos
            .iter()
            .find(|r| r.name == requested || r.given.as_os_str() == requested);
        let found = by_text.or_else(|| {
            // Only an absolute or explicitly relative path is looked up on
            // disk, so a bare name never resolves against the working directory.
            let looks_like_path = requested.contains('/');
            let canonical = looks_like_path
                .then(|| std::fs::canonicalize(requested).ok())
                .flatten()?;
            self.repos.iter().find(|r| r.canonical == canonical)
        });
        found.cloned().ok_or_else(|| UnknownRepo {
            requested: requested.to_owned(),
            served: self.names(),
        })
    }
}

/// `proj` for `/src/proj`, `/src/proj/.git` and `/src/proj.git`.
fn repo_name(canonical: &Path) -> String {
    let mut path = canonical;
    if path.file_name().is_some_and(|name| name == ".git") {
        path = path.parent().unwrap_or(path);
    }
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    match name.strip_suffix(".git") {
        Some(stem) if !stem.is_empty() => stem.to_owned(),
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_directory() {
        assert_eq!(repo_name(Path::new("/src/proj")), "proj");
        assert_eq!(repo_name(Path::new("/src/proj/.git")), "proj");
        assert_eq!(repo_name(Path::new("/src/proj.git")), "proj");
        assert_eq!(repo_name(Path::new("/src/.git.git")), ".git");
    }
}
