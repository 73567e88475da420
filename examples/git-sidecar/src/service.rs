//! The `git-object-reader` service: `getRefs`, `getObjects`, `getStats`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;
use switchboard_client::protocol::jsonrpc::ErrorObject;
use switchboard_client::protocol::ErrorCode;
use switchboard_client::{method_not_found, reply, BoxFuture, Handler, Reply, Request};
use tokio::sync::Semaphore;

use crate::cache::ObjectCache;
use crate::objects::{self, BatchError};
use crate::refs::{self, RefEntry};
use crate::repos::{ServedRepo, ServedRepos};

/// Repository reads running at once; more requests wait for a turn (each
/// wait ends when the request is cancelled or times out at the hub).
const CONCURRENT_READS: usize = 4;

/// Application error: the answer would not fit in one hub message.
pub const ANSWER_TOO_LARGE: i64 = 1001;
/// Application error: the repository could not be read.
pub const READ_FAILED: i64 = 1002;

/// Shared by every request the service serves.
#[derive(Clone)]
pub struct GitService {
    repos: Arc<ServedRepos>,
    cache: Arc<ObjectCache>,
    /// The most bytes one answer may take; updated after a reconnect, since
    /// a restarted hub may accept a different message size.
    answer_budget: Arc<AtomicUsize>,
    reads: Arc<Semaphore>,
    /// Rereads of refs after changes on disk (shown by `getStats`).
    ref_rereads: Arc<AtomicU64>,
}

#[derive(Deserialize)]
struct RefsParams {
    repo: String,
    /// Only refs whose name starts with this (`refs/heads/`); `HEAD` is
    /// listed only when it matches too.
    #[serde(default)]
    prefix: Option<String>,
}

#[derive(Deserialize)]
struct ObjectsParams {
    repo: String,
    oids: Vec<String>,
}

impl GitService {
    pub fn new(
        repos: Arc<ServedRepos>,
        cache: Arc<ObjectCache>,
        answer_budget: Arc<AtomicUsize>,
        ref_rereads: Arc<AtomicU64>,
    ) -> Self {
        GitService {
            repos,
            cache,
            answer_budget,
            reads: Arc::new(Semaphore::new(CONCURRENT_READS)),
            ref_rereads,
        }
    }

    fn repo(&self, requested: &str) -> Result<Arc<ServedRepo>, ErrorObject> {
        self.repos.find(requested).map_err(|unknown| {
            ErrorObject::new(ErrorCode::InvalidParams, unknown.to_string())
                .with_data(&json!({"field": "repo", "served": unknown.served}))
        })
    }

    /// Runs `work` on the blocking pool once a read slot is free.
    async fn read<T: Send + 'static>(
        &self,
        request: &Request,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, ErrorObject> {
        let cancelled = request.cancelled.clone();
        let permit = tokio::select! {
            permit = self.reads.clone().acquire_owned() => permit.map_err(|_| internal("the service is stopping"))?,
            _ = cancelled.cancelled() => return Err(cancelled_error()),
        };
        let outcome = tokio::task::spawn_blocking(move || {
            let _turn = permit;
            work()
        })
        .await;
        outcome.map_err(|error| internal(&format!("the read failed: {error}")))
    }

    async fn get_refs(&self, request: Request) -> Reply {
        let params: RefsParams = request.params()?;
        let repo = self.repo(&params.repo)?;
        let name = repo.name.clone();
        let listed = self
            .read(&request, move || {
                refs::read_refs(&repo.repo.to_thread_local())
            })
            .await?
            .map_err(|error| ErrorObject {
                code: READ_FAILED,
                message: error.to_string(),
                data: None,
            })?;
        let listed: Vec<_> = match &params.prefix {
            Some(prefix) => listed
                .into_iter()
                .filter(|entry| entry.name.starts_with(prefix.as_str()))
                .collect(),
            None => listed,
        };
        #[derive(Serialize)]
        struct Answer {
            repo: String,
            refs: Vec<RefEntry>,
        }
        let answer = reply(&Answer {
            repo: name,
            refs: listed,
        })?;
        let budget = self.answer_budget.load(Ordering::Relaxed);
        if answer.get().len() > budget {
            return Err(ErrorObject {
                code: ANSWER_TOO_LARGE,
                message: format!(
                    "the refs take {} bytes; at most {budget} fit in one answer (narrow them with \"prefix\")",
                    answer.get().len()
                ),
                data: None,
            }
            .with_data(&json!({"bytes": answer.get().len(), "max": budget})));
        }
        Ok(answer)
    }

    async fn get_objects(&self, request: Request) -> Reply {
        let params: ObjectsParams = request.params()?;
        let repo = self.repo(&params.repo)?;
        let budget = self.answer_budget.load(Ordering::Relaxed);
        let max = objects::max_ids(&repo, budget);
        if params.oids.len() > max {
            return Err(ErrorObject::new(
                ErrorCode::InvalidParams,
                BatchError::TooManyIds {
                    got: params.oids.len(),
                    max,
                }
                .to_string(),
            )
            .with_data(&json!({"field": "oids", "max": max})));
        }
        let cache = self.cache.clone();
        let cancelled = request.cancelled.clone();
        let answer = self
            .read(&request, move || {
                objects::answer(&repo, &cache, &params.oids, budget, &|| {
                    cancelled.is_cancelled()
                })
            })
            .await?;
        answer.map_err(|error| match error {
            BatchError::Cancelled => cancelled_error(),
            other => internal(&other.to_string()),
        })
    }

    fn get_stats(&self) -> Reply {
        let repos: Vec<_> = self
            .repos
            .iter()
            .map(|r| json!({"name": r.name, "path": r.canonical}))
            .collect();
        let budget = self.answer_budget.load(Ordering::Relaxed);
        reply(&json!({
            "repos": repos,
            "cache": self.cache.stats(),
            "answerBytes": budget,
            "maxOidsPerCall": objects::MAX_OIDS_PER_CALL,
            "refRereads": self.ref_rereads.load(Ordering::Relaxed),
        }))
    }
}

impl Handler for GitService {
    fn request(&self, request: Request) -> BoxFuture<Reply> {
        let service = self.clone();
        Box::pin(async move {
            match request.method.as_str() {
                "getRefs" => service.get_refs(request).await,
                "getObjects" => service.get_objects(request).await,
                "getStats" => service.get_stats(),
                other => Err(method_not_found(other)),
            }
        })
    }
}

fn internal(message: &str) -> ErrorObject {
    ErrorObject::new(ErrorCode::InternalError, message)
}

/// The hub has already answered the caller; this only ends the handler.
fn cancelled_error() -> ErrorObject {
    ErrorObject::new(ErrorCode::RequestCancelled, "cancelled")
}
