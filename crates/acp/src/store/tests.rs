//! The store against a real SQLite file.

use super::*;
use serde_json::json;

#[tokio::test]
async fn an_unfinished_turn_is_cut_and_its_number_not_reused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("acp/sessions.sqlite3"))
        .await
        .unwrap();
    store.create_session("s1", Path::new("/w")).await.unwrap();
    store.append_turn_start(
        "s1",
        0,
        &json!([{"type": "text", "text": "hi"}]),
        "hi".into(),
    );
    store.append("s1", 0, EventKind::Update, &json!({"n": 1}));
    store.append("s1", 0, EventKind::Message, &json!({"role": "user"}));
    store.append(
        "s1",
        0,
        EventKind::TurnEnd,
        &json!({"stopReason": "end_turn"}),
    );
    store.append_turn_start("s1", 1, &json!([]), "x".into());
    store.append("s1", 1, EventKind::Update, &json!({"n": 2}));
    store.sync().await.unwrap();

    let loaded = store.load("s1").await.unwrap().unwrap();
    assert_eq!(loaded.turns.len(), 1);
    assert_eq!(loaded.turns[0].updates, vec![json!({"n": 1})]);
    assert_eq!(loaded.turns[0].messages, vec![json!({"role": "user"})]);
    assert_eq!(loaded.next_turn, 2);
    assert!(store.load("nope").await.unwrap().is_none());

    let (sessions, next) = store.list(None, None).await.unwrap();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].title.as_deref(), Some("hi"));
    assert!(next.is_none());
    store.close().await;
    assert!(matches!(store.sync().await, Err(StoreError::Closed)));
}

#[tokio::test]
async fn list_pages_through_every_session_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.sqlite3")).await.unwrap();
    for n in 0..(LIST_PAGE + 7) {
        store
            .create_session(&format!("s{n:03}"), Path::new("/w"))
            .await
            .unwrap();
    }
    let (first, cursor) = store.list(None, None).await.unwrap();
    assert_eq!(first.len(), LIST_PAGE);
    let (second, end) = store.list(None, cursor).await.unwrap();
    assert_eq!(second.len(), 7);
    assert!(end.is_none());
    let mut all: Vec<_> = first
        .iter()
        .chain(&second)
        .map(|s| s.session_id.clone())
        .collect();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), LIST_PAGE + 7);
    assert!(matches!(
        store.list(None, Some("garbage".into())).await,
        Err(StoreError::BadCursor(_))
    ));
    let (other_dir, _) = store.list(Some("/elsewhere".into()), None).await.unwrap();
    assert!(other_dir.is_empty());
}
