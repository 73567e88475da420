//! Telling ref watchers when refs move.
//!
//! Filesystem notifications on each repository's `HEAD`, `packed-refs` and
//! `refs/` mark the repository dirty and wake one task. That task owns the
//! last refs read for each repository (nothing else touches them), reads
//! the refs again, and sends the difference as `refsChanged` to every
//! service the live catalog lists with `protocol: git-ref-watcher`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use serde_json::json;
use switchboard_client::{Catalog, Client, Selector};
use tokio::sync::Notify;

use crate::refs::{self, RefEntry};
use crate::repos::{ServedRepo, ServedRepos};

/// The metadata selector of the services told about ref changes.
pub const WATCHER_SELECTOR: &str = "protocol=git-ref-watcher";
/// The notification's method.
pub const REFS_CHANGED: &str = "refsChanged";
/// A ref update is several filesystem steps (lock file, rename, reflog);
/// waiting this long after the first lets one update be read once.
const SETTLE: Duration = Duration::from_millis(25);

/// Keeps the filesystem watch alive; dropping it stops the notifications.
pub struct RefWatch {
    _watcher: notify::RecommendedWatcher,
    rereads: Arc<AtomicU64>,
}

impl RefWatch {
    /// How many times refs were read again after a change on disk.
    pub fn rereads(&self) -> Arc<AtomicU64> {
        self.rereads.clone()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error("cannot start watching the filesystem: {0}")]
    Start(String),
    #[error("cannot watch {path}: {message}")]
    Watch { path: PathBuf, message: String },
    #[error("cannot read the refs of {repo}: {message}")]
    Refs { repo: String, message: String },
}

/// Where one repository's refs live on disk.
struct RefPaths {
    git_dir: PathBuf,
    common_dir: PathBuf,
    head: PathBuf,
    packed_refs: PathBuf,
    refs_dir: PathBuf,
}

impl RefPaths {
    fn of(repo: &ServedRepo) -> Result<Self, WatchError> {
        let canonical = |path: &Path| {
            std::fs::canonicalize(path).map_err(|error| WatchError::Watch {
                path: path.to_owned(),
                message: error.to_string(),
            })
        };
        let local = repo.repo.to_thread_local();
        // A linked worktree has its own HEAD; refs are shared in the common dir.
        let git_dir = canonical(local.git_dir())?;
        let common_dir = canonical(local.common_dir())?;
        Ok(RefPaths {
            head: git_dir.join("HEAD"),
            packed_refs: common_dir.join("packed-refs"),
            refs_dir: common_dir.join("refs"),
            git_dir,
            common_dir,
        })
    }

    /// What to watch. HEAD and packed-refs are replaced by rename, so their
    /// directories are watched, not recursively (objects and the index churn
    /// below them); `refs/` is watched with everything under it.
    fn watch_targets(&self) -> Vec<(PathBuf, RecursiveMode)> {
        let mut targets = vec![(self.git_dir.clone(), RecursiveMode::NonRecursive)];
        if self.common_dir != self.git_dir {
            targets.push((self.common_dir.clone(), RecursiveMode::NonRecursive));
        }
        targets.push((self.refs_dir.clone(), RecursiveMode::Recursive));
        targets
    }

    /// Whether a change at `path` can change a ref. Lock files are skipped:
    /// git renames them into place, and the rename is what counts.
    fn concerns(&self, path: &Path) -> bool {
        if path.extension().is_some_and(|ext| ext == "lock") {
            return false;
        }
        path == self.head || path == self.packed_refs || path.starts_with(&self.refs_dir)
    }
}

/// Starts watching every served repository and the task that tells watchers.
pub fn start(
    repos: Arc<ServedRepos>,
    client: Client,
    catalog: Catalog,
) -> Result<RefWatch, WatchError> {
    let paths: Vec<RefPaths> = repos
        .iter()
        .map(|repo| RefPaths::of(repo))
        .collect::<Result<_, _>>()?;
    let dirty: Arc<Vec<AtomicBool>> =
        Arc::new(repos.iter().map(|_| AtomicBool::new(false)).collect());
    let wake = Arc::new(Notify::new());

    let targets: Vec<(PathBuf, RecursiveMode)> =
        paths.iter().flat_map(RefPaths::watch_targets).collect();
    let on_event = {
        let (dirty, wake) = (dirty.clone(), wake.clone());
        move |event: notify::Result<notify::Event>| {
            let event = match event {
                Ok(event) => event,
                Err(error) => {
                    tracing::warn!(%error, "filesystem watch error; rereading every repository's refs");
                    mark_all(&dirty, &wake);
                    return;
                }
            };
            if let notify::EventKind::Access(_) = event.kind {
                // Opening a file is reported too (our own reads included):
                // only writes, creations, renames and removals move refs.
                return;
            }
            if event.need_rescan() {
                // The kernel dropped events: any ref may have changed.
                mark_all(&dirty, &wake);
                return;
            }
            for (index, repo_paths) in paths.iter().enumerate() {
                if event.paths.iter().any(|path| repo_paths.concerns(path)) {
                    tracing::debug!(kind = ?event.kind, paths = ?event.paths, "ref files changed");
                    dirty[index].store(true, Ordering::Release);
                    wake.notify_one();
                }
            }
        }
    };
    let mut watcher = notify::recommended_watcher(on_event)
        .map_err(|error| WatchError::Start(error.to_string()))?;
    for (path, mode) in targets {
        watcher
            .watch(&path, mode)
            .map_err(|error| WatchError::Watch {
                path: path.clone(),
                message: error.to_string(),
            })?;
    }

    // Read after the watch is in place, so no change falls between the two.
    let mut known = Vec::with_capacity(repos.len());
    for repo in repos.iter() {
        let listed =
            refs::read_refs(&repo.repo.to_thread_local()).map_err(|error| WatchError::Refs {
                repo: repo.name.clone(),
                message: error.to_string(),
            })?;
        known.push(listed);
    }
    let rereads = Arc::new(AtomicU64::new(0));
    let told = Told {
        client,
        catalog,
        rereads: rereads.clone(),
    };
    tokio::spawn(tell_watchers(repos, dirty, wake, told, known));
    Ok(RefWatch {
        _watcher: watcher,
        rereads,
    })
}

fn mark_all(dirty: &[AtomicBool], wake: &Notify) {
    for flag in dirty {
        flag.store(true, Ordering::Release);
    }
    wake.notify_one();
}

/// Who is told, and the count of rereads.
struct Told {
    client: Client,
    catalog: Catalog,
    rereads: Arc<AtomicU64>,
}

/// The one owner of `known` (the refs last read for each repository).
async fn tell_watchers(
    repos: Arc<ServedRepos>,
    dirty: Arc<Vec<AtomicBool>>,
    wake: Arc<Notify>,
    told: Told,
    mut known: Vec<Vec<RefEntry>>,
) {
    let Told {
        client,
        mut catalog,
        rereads,
    } = told;
    let Some(selector) = Selector::parse(WATCHER_SELECTOR) else {
        return;
    };
    loop {
        tokio::select! {
            _ = wake.notified() => {}
            // Catalog events are only drained here: who is a watcher is read
            // from the live map when there is something to send.
            event = catalog.next_event() => match event {
                Some(_) => continue,
                None => return,
            },
        }
        tokio::time::sleep(SETTLE).await;
        for repo in repos.iter() {
            if !dirty[repo.index].swap(false, Ordering::AcqRel) {
                continue;
            }
            let reading = repo.clone();
            let read = tokio::task::spawn_blocking(move || {
                refs::read_refs(&reading.repo.to_thread_local())
            })
            .await;
            rereads.fetch_add(1, Ordering::Relaxed);
            let current = match read {
                Ok(Ok(current)) => current,
                Ok(Err(error)) => {
                    tracing::warn!(repo = %repo.name, %error, "cannot reread the refs");
                    continue;
                }
                Err(error) => {
                    tracing::warn!(repo = %repo.name, %error, "the refs reader failed");
                    continue;
                }
            };
            let changes = refs::diff(&known[repo.index], &current);
            known[repo.index] = current;
            if changes.is_empty() {
                continue;
            }
            let params = json!({
                "repo": repo.name,
                "path": repo.canonical,
                "refs": changes,
            });
            let watchers = catalog.select(&selector);
            for watcher in &watchers {
                if let Err(error) = client
                    .notify(&watcher.service_id, REFS_CHANGED, &params)
                    .await
                {
                    tracing::warn!(watcher = %watcher.service_id, %error, "cannot send refsChanged");
                }
            }
            tracing::info!(
                repo = %repo.name,
                refs = changes.len(),
                watchers = watchers.len(),
                "refs changed"
            );
        }
    }
}
