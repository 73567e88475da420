//! Confinement to the session's directory: every path a file tool or a job
//! is given must name something inside the session's `cwd`.
//!
//! A path is resolved against `cwd` (if relative), `.` and `..` are folded
//! lexically (a `..` that climbs out of `cwd` is refused), and then the
//! longest part of it that exists on disk is canonicalized: if a symlink
//! leads it out of `cwd`'s canonical form, it is refused too. What remains
//! (components that do not exist yet: a file about to be written) cannot be
//! a symlink.

use std::path::{Component, Path, PathBuf};

/// A path inside the session's directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confined {
    /// Absolute, `..`-free, as the user wrote it (what the editor is shown
    /// and asked for).
    pub shown: PathBuf,
    /// The same file with every existing symlink resolved (what the disk
    /// is asked for).
    pub real: PathBuf,
}

/// Resolves `path` (absolute, or relative to `cwd`) inside `cwd`.
pub fn confine(cwd: &Path, path: &str) -> Result<Confined, String> {
    if path.is_empty() {
        return Err("the path is empty".into());
    }
    let joined = cwd.join(path);
    let shown = normalize(&joined).ok_or_else(|| outside(path))?;
    let cwd_shown = normalize(cwd).unwrap_or_else(|| cwd.to_path_buf());
    if !shown.starts_with(&cwd_shown) {
        return Err(outside(path));
    }
    let cwd_real = cwd.canonicalize().map_err(|error| {
        format!(
            "the session's directory {} cannot be used: {error}",
            cwd.display()
        )
    })?;
    // The longest existing prefix, canonicalized, then the rest as written.
    let mut existing = shown.clone();
    let mut rest = Vec::new();
    let real_prefix = loop {
        match existing.canonicalize() {
            Ok(real) => break real,
            Err(_) => {
                let Some(name) = existing.file_name().map(|name| name.to_owned()) else {
                    return Err(outside(path));
                };
                rest.push(name);
                if !existing.pop() {
                    return Err(outside(path));
                }
            }
        }
    };
    if !real_prefix.starts_with(&cwd_real) {
        return Err(format!(
            "{path:?} leads outside the session's directory {} (through a symbolic link); the file tools only reach files inside it",
            cwd.display()
        ));
    }
    let mut real = real_prefix;
    for name in rest.into_iter().rev() {
        real.push(name);
    }
    Ok(Confined { shown, real })
}

/// Whether directory `dir` (absolute, or relative to `cwd`) is inside `cwd`.
pub fn inside(cwd: &Path, dir: &str) -> bool {
    confine(cwd, dir).is_ok()
}

fn outside(path: &str) -> String {
    format!(
        "{path:?} is outside the session's directory; the file tools only reach files inside it"
    )
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

        let inner = confine(&cwd, "src/./main.rs").unwrap();
        assert_eq!(inner.shown, cwd.join("src/main.rs"));
        assert_eq!(
            confine(&cwd, cwd.join("new/file.txt").to_str().unwrap())
                .unwrap()
                .shown,
            cwd.join("new/file.txt")
        );
        assert_eq!(
            confine(&cwd, "src/../src/main.rs").unwrap().shown,
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
            let error = confine(&cwd, escaping).unwrap_err();
            assert!(
                error.contains("outside the session's directory"),
                "{escaping}: {error}"
            );
        }
        assert!(inside(&cwd, "src"));
        assert!(!inside(&cwd, ".."));
    }
}
