//! `getObjects`: many objects in one answer, each found or with its own
//! error, the whole answer kept under the size the hub accepts.

use std::sync::Arc;

use base64::Engine as _;
use gix::ObjectId;
use serde::Serialize;
use serde_json::value::RawValue;

use crate::cache::{CachedObject, ObjectCache};
use crate::repos::ServedRepo;

/// The most ids one `getObjects` call may ask for.
pub const MAX_OIDS_PER_CALL: usize = 4096;
/// The most bytes one per-id error entry takes (the id is echoed truncated),
/// reserved for every id still to come so an answer always has room for them.
const ERROR_ENTRY_MAX: usize = 320;
/// How much of an over-long id is echoed back.
const ECHOED_ID_CHARS: usize = 64;
/// How many bytes of an error message (as JSON) an entry carries.
const MESSAGE_BYTES: usize = 140;

/// Why a call is refused as a whole (every other problem is per id).
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    #[error("oids holds {got} ids; at most {max} fit in one call")]
    TooManyIds { got: usize, max: usize },
    #[error("the request was cancelled")]
    Cancelled,
    #[error("cannot encode the answer: {0}")]
    Encode(String),
}

/// The most ids one answer of `budget` bytes can hold for `repo`, even if
/// every one of them is an error.
pub fn max_ids(repo: &ServedRepo, budget: usize) -> usize {
    let room = budget.saturating_sub(frame_len(repo));
    MAX_OIDS_PER_CALL.min(room / (ERROR_ENTRY_MAX + 1))
}

fn frame_prefix(repo: &ServedRepo) -> String {
    let name = serde_json::to_string(&repo.name).unwrap_or_else(|_| "\"\"".into());
    format!("{{\"repo\":{name},\"objects\":[")
}

const FRAME_SUFFIX: &str = "]}";

fn frame_len(repo: &ServedRepo) -> usize {
    frame_prefix(repo).len() + FRAME_SUFFIX.len()
}

/// The answer to `getObjects`: `{"repo", "objects": [entry per id, in order]}`.
///
/// `budget` bounds the answer's encoded size; an object that does not fit
/// in what is left gets an `overBudget` entry, and one that could never fit
/// a `tooLarge` entry, so the caller knows to ask again or elsewhere.
pub fn answer(
    repo: &ServedRepo,
    cache: &ObjectCache,
    oids: &[String],
    budget: usize,
    is_cancelled: &dyn Fn() -> bool,
) -> Result<Box<RawValue>, BatchError> {
    let max = max_ids(repo, budget);
    if oids.len() > max {
        return Err(BatchError::TooManyIds {
            got: oids.len(),
            max,
        });
    }
    // Largest object whose entry could fit in an otherwise empty answer.
    let room = budget.saturating_sub(frame_len(repo) + ERROR_ENTRY_MAX);
    let max_object_size = (room / 4 * 3) as u64;
    let local = repo.repo.to_thread_local();
    let mut out = frame_prefix(repo);
    for (position, requested) in oids.iter().enumerate() {
        if is_cancelled() {
            return Err(BatchError::Cancelled);
        }
        let echoed = echo(requested);
        let mut entry = match ObjectId::from_hex(requested.as_bytes()) {
            Err(_) => error_entry(
                &echoed,
                "invalidOid",
                "not a full object id (40 hexadecimal digits)".into(),
                None,
            ),
            Ok(id) => match lookup(&local, repo.index, cache, id, max_object_size) {
                Lookup::Found(object) => found_entry(&echoed, &object),
                Lookup::Missing => error_entry(
                    &echoed,
                    "missing",
                    "no such object in this repository".into(),
                    None,
                ),
                Lookup::TooLarge(size) => error_entry(
                    &echoed,
                    "tooLarge",
                    format!(
                        "the object is {size} bytes; at most {max_object_size} fit in one answer"
                    ),
                    Some(size),
                ),
                Lookup::Failed(message) => error_entry(&echoed, "readFailed", message, None),
            },
        };
        let separator = usize::from(position > 0);
        let still_to_come = oids.len() - position - 1;
        let needed = out.len()
            + separator
            + entry.len()
            + FRAME_SUFFIX.len()
            + still_to_come * (ERROR_ENTRY_MAX + 1);
        if needed > budget {
            entry = error_entry(
                &echoed,
                "overBudget",
                format!(
                    "not sent: the answer would pass {budget} bytes; ask for it in another call"
                ),
                None,
            );
        }
        if separator == 1 {
            out.push(',');
        }
        out.push_str(&entry);
    }
    out.push_str(FRAME_SUFFIX);
    // Every piece above is serde_json output, so this always parses.
    RawValue::from_string(out).map_err(|error| BatchError::Encode(error.to_string()))
}

enum Lookup {
    Found(Arc<CachedObject>),
    Missing,
    TooLarge(u64),
    Failed(String),
}

/// The cached answer, else the object read from the repository (and cached).
fn lookup(
    repo: &gix::Repository,
    repo_index: usize,
    cache: &ObjectCache,
    id: ObjectId,
    max_size: u64,
) -> Lookup {
    if let Some(object) = cache.get(repo_index, id) {
        return Lookup::Found(object);
    }
    // The header tells the size without inflating the whole object.
    let header = match repo.try_find_header(id) {
        Ok(Some(header)) => header,
        Ok(None) => return Lookup::Missing,
        Err(error) => return Lookup::Failed(error.to_string()),
    };
    if header.size() > max_size {
        return Lookup::TooLarge(header.size());
    }
    let object = match repo.try_find_object(id) {
        Ok(Some(object)) => object,
        Ok(None) => return Lookup::Missing,
        Err(error) => return Lookup::Failed(error.to_string()),
    };
    let cached = Arc::new(CachedObject {
        kind: kind_name(object.kind),
        size: object.data.len() as u64,
        content_base64: base64::engine::general_purpose::STANDARD.encode(&object.data),
    });
    cache.insert(repo_index, id, cached.clone());
    Lookup::Found(cached)
}

fn kind_name(kind: gix::object::Kind) -> &'static str {
    match kind {
        gix::object::Kind::Blob => "blob",
        gix::object::Kind::Tree => "tree",
        gix::object::Kind::Commit => "commit",
        gix::object::Kind::Tag => "tag",
    }
}

/// The id as the caller wrote it when it is short printable ASCII that JSON
/// needs no escape for; otherwise a bounded stand-in (its first characters,
/// the others as `?`), so an entry never grows with what the caller sent.
/// Entries are in request order, so the position identifies them anyway.
fn echo(requested: &str) -> String {
    let plain = |c: char| c.is_ascii_graphic() && c != '"' && c != '\\';
    if requested.len() <= ECHOED_ID_CHARS && requested.chars().all(plain) {
        return requested.to_owned();
    }
    let mut echoed: String = requested
        .chars()
        .take(ECHOED_ID_CHARS)
        .map(|c| if plain(c) { c } else { '?' })
        .collect();
    if requested.chars().nth(ECHOED_ID_CHARS).is_some() {
        echoed.push_str("...");
    }
    echoed
}

fn found_entry(oid: &str, object: &CachedObject) -> String {
    #[derive(Serialize)]
    struct Found<'a> {
        oid: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
        size: u64,
        content: &'a str,
    }
    let found = Found {
        oid,
        kind: object.kind,
        size: object.size,
        content: &object.content_base64,
    };
    serde_json::to_string(&found).unwrap_or_default()
}

fn error_entry(oid: &str, code: &'static str, message: String, size: Option<u64>) -> String {
    #[derive(Serialize)]
    struct Failure {
        code: &'static str,
        message: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        size: Option<u64>,
    }
    #[derive(Serialize)]
    struct Entry<'a> {
        oid: &'a str,
        error: Failure,
    }
    let message = bounded_message(&message);
    let entry = Entry {
        oid,
        error: Failure {
            code,
            message,
            size,
        },
    };
    serde_json::to_string(&entry).unwrap_or_default()
}

/// `message` on one line, cut so that its JSON form stays within
/// `MESSAGE_BYTES` (library messages can be long; entries must stay small).
fn bounded_message(message: &str) -> String {
    let mut bounded = String::new();
    let mut encoded_len = 0;
    for c in message.chars() {
        let c = if c.is_control() { ' ' } else { c };
        encoded_len += if c == '"' || c == '\\' {
            2
        } else {
            c.len_utf8()
        };
        if encoded_len > MESSAGE_BYTES {
            bounded.push_str("...");
            break;
        }
        bounded.push(c);
    }
    bounded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_ids_are_echoed_truncated_and_error_entries_stay_small() {
        let long = "\"\u{1}".repeat(10_000);
        let echoed = echo(&long);
        assert_eq!(echoed, format!("{}...", "?".repeat(ECHOED_ID_CHARS)));
        let entry = error_entry(&echoed, "readFailed", "é\n".repeat(1000), None);
        assert!(entry.len() <= ERROR_ENTRY_MAX, "{} bytes", entry.len());
        let entry = error_entry(
            &echoed,
            "overBudget",
            format!(
                "not sent: the answer would pass {} bytes; ask for it in another call",
                usize::MAX
            ),
            None,
        );
        assert!(entry.len() <= ERROR_ENTRY_MAX, "{} bytes", entry.len());
        let entry = error_entry(
            &echoed,
            "tooLarge",
            format!(
                "the object is {} bytes; at most {} fit in one answer",
                u64::MAX,
                u64::MAX
            ),
            Some(u64::MAX),
        );
        assert!(entry.len() <= ERROR_ENTRY_MAX, "{} bytes", entry.len());
        assert_eq!(echo("abc"), "abc");
    }
}
