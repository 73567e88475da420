//! Confinement to the session's directories: every path a file tool is
//! given must name something inside the session's `cwd` or one of its
//! `additionalDirectories` (its roots).
//!
//! A path is resolved against `cwd` (if relative), `.` and `..` are folded
//! lexically (a `..` that climbs out of every root is refused), and then the
//! longest part of it that exists on disk is canonicalized: if a symlink
//! leads it out of every root's canonical form, it is refused too. What
//! remains (components that do not exist yet: a file about to be written)
//! cannot be a symlink.

use std::path::{Component, Path, PathBuf};

/// The directories a session's file tools may reach: `cwd` (the base of
/// relative paths) and the session's `additionalDirectories`, all absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roots {
    pub cwd: PathBuf,
    pub additional: Vec<PathBuf>,
}

impl Roots {
    pub fn new(cwd: PathBuf, additional: Vec<PathBuf>) -> Self {
        Roots { cwd, additional }
    }

    /// Just `cwd`.
    pub fn cwd_only(cwd: impl Into<PathBuf>) -> Self {
        Roots::new(cwd.into(), Vec::new())
    }

    fn all(&self) -> impl Iterator<Item = &PathBuf> {
        std::iter::once(&self.cwd).chain(&self.additional)
    }

    /// Why `path` is refused; `how` is "is" or "leads", `note` follows
    /// the directories.
    fn outside(&self, path: &str, how: &str, note: &str) -> String {
        if self.additional.is_empty() {
            format!(
                "{path:?} {how} outside the session's directory {}{note}; the file tools only reach files inside it",
                self.cwd.display()
            )
        } else {
            let dirs: Vec<String> = self.all().map(|d| d.display().to_string()).collect();
            format!(
                "{path:?} {how} outside the session's directory and its additional directories ({}){note}; the file tools only reach files inside them",
                dirs.join(", ")
            )
        }
    }
}

/// A path inside the session's directories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confined {
    /// Absolute, `..`-free, as the user wrote it (what the editor is shown
    /// and asked for).
    pub shown: PathBuf,
    /// The same file with every existing symlink resolved (what the disk
    /// is asked for).
    pub real: PathBuf,
}

/// Resolves `path` (absolute, or relative to `cwd`) inside the roots.
pub fn confine(roots: &Roots, path: &str) -> Result<Confined, String> {
    if path.is_empty() {
        return Err("the path is empty".into());
    }
    let outside = || roots.outside(path, "is", "");
    let shown = normalize(&roots.cwd.join(path)).ok_or_else(outside)?;
    let lexically_inside = roots.all().any(|root| {
        let root = normalize(root).unwrap_or_else(|| root.clone());
        shown.starts_with(root)
    });
    if !lexically_inside {
        return Err(outside());
    }
    let cwd_real = roots.cwd.canonicalize().map_err(|error| {
        format!(
            "the session's directory {} cannot be used: {error}",
            roots.cwd.display()
        )
    })?;
    // An additional directory that went away since the session started
    // reaches nothing.
    let real_roots: Vec<PathBuf> = std::iter::once(cwd_real)
        .chain(
            roots
                .additional
                .iter()
                .filter_map(|d| d.canonicalize().ok()),
        )
        .collect();
    // The longest existing prefix, canonicalized, then the rest as written.
    let mut existing = shown.clone();
    let mut rest = Vec::new();
    let real_prefix = loop {
        match existing.canonicalize() {
            Ok(real) => break real,
            Err(_) => {
                let Some(name) = existing.file_name().map(|name| name.to_owned()) else {
                    return Err(outside());
                };
                rest.push(name);
                if !existing.pop() {
                    return Err(outside());
                }
            }
        }
    };
    if !real_roots.iter().any(|root| real_prefix.starts_with(root)) {
        return Err(roots.outside(path, "leads", " (through a symbolic link)"));
    }
    let mut real = real_prefix;
    for name in rest.into_iter().rev() {
        real.push(name);
    }
    Ok(Confined { shown, real })
}

/// Whether directory `dir` (absolute, or relative to `cwd`) is inside the
/// roots.
pub fn inside(roots: &Roots, dir: &str) -> bool {
    confine(roots, dir).is_ok()
}

/// Folds `.` and `..` without touching the disk; `None` if `..` climbs
/// above the root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => out.push(component.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() || out.as_os_str().is_empty() {
                    return None;
                }
            }
            Component::Normal(name) => out.push(name),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("project");
        std::fs::create_dir_all(cwd.join("src")).unwrap();
        std::fs::write(cwd.join("src/main.rs"), "fn main() {}").unwrap();
        std::fs::write(dir.path().join("secret"), "x").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), cwd.join("link")).unwrap();
        std::os::unix::fs::symlink(dir.path(), cwd.join("up")).unwrap();

        let roots = Roots::cwd_only(&cwd);
        let inner = confine(&roots, "src/./main.rs").unwrap();
        assert_eq!(inner.shown, cwd.join("src/main.rs"));
        assert_eq!(
            confine(&roots, cwd.join("new/file.txt").to_str().unwrap())
                .unwrap()
                .shown,
            cwd.join("new/file.txt")
        );
        assert_eq!(
            confine(&roots, "src/../src/main.rs").unwrap().shown,
            cwd.join("src/main.rs")
        );
        for escaping in [
            "../secret",
            "/etc/passwd",
            "src/../../secret",
            "link",
            "up/secret",
            "up/new",
        ] {
            let error = confine(&roots, escaping).unwrap_err();
            assert!(
                error.contains("outside the session's directory"),
                "{escaping}: {error}"
            );
        }
        assert!(inside(&roots, "src"));
        assert!(!inside(&roots, ".."));
    }

    #[test]
    fn additional_directories_are_reachable_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("project");
        let docs = dir.path().join("docs");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::create_dir_all(&docs).unwrap();
        std::fs::write(docs.join("a.md"), "a").unwrap();
        std::fs::write(dir.path().join("secret"), "x").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), docs.join("link")).unwrap();
        let roots = Roots::new(cwd.clone(), vec![docs.clone()]);
        assert_eq!(
            confine(&roots, docs.join("a.md").to_str().unwrap())
                .unwrap()
                .shown,
            docs.join("a.md")
        );
        assert_eq!(
            confine(&roots, "../docs/new.md").unwrap().shown,
            docs.join("new.md")
        );
        for escaping in [
            "../secret",
            docs.join("link").to_str().unwrap(),
            "/etc/passwd",
        ] {
            let error = confine(&roots, escaping).unwrap_err();
            assert!(
                error.contains("outside the session's directory and its additional directories"),
                "{escaping}: {error}"
            );
        }
        assert!(inside(&roots, docs.to_str().unwrap()));
        assert!(!inside(&Roots::cwd_only(&cwd), docs.to_str().unwrap()));
    }
}
