//! The store against a real SQLite file.

use super::*;
use serde_json::json;

fn settings(mode: &str, model: &str) -> StoredSettings {
    StoredSettings {
        mode: mode.into(),
        model: model.into(),
    }
}

#[tokio::test]
async fn an_unfinished_turn_is_cut_and_its_number_not_reused() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("acp/sessions.sqlite3"))
        .await
        .unwrap();
    store
        .create_session("s1", Path::new("/w"), &[], settings("auto", "default"))
        .await
        .unwrap();
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
            .create_session(
                &format!("s{n:03}"),
                Path::new("/w"),
                &[],
                settings("ask", "default"),
            )
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

#[tokio::test]
async fn settings_and_directories_are_kept_in_the_order_they_change() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("s.sqlite3")).await.unwrap();
    store
        .create_session(
            "s",
            Path::new("/w"),
            &["/docs".into()],
            settings("ask", "default"),
        )
        .await
        .unwrap();
    let first = store.set_settings("s", settings("auto", "fast"));
    let second = store.set_settings("s", settings("read-only", "fast"));
    first.await.unwrap();
    second.await.unwrap();
    store.set_roots("s", Path::new("/w2"), &["/a".into(), "/b".into()]);
    let loaded = store.load("s").await.unwrap().unwrap();
    assert_eq!(loaded.settings, Some(settings("read-only", "fast")));
    assert_eq!(loaded.cwd, Path::new("/w2"));
    let (listed, _) = store.list(None, None).await.unwrap();
    assert_eq!(
        listed[0].additional_directories,
        [PathBuf::from("/a"), PathBuf::from("/b")]
    );
}

#[tokio::test]
async fn a_store_of_schema_1_is_migrated_and_its_sessions_have_no_settings() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.sqlite3");
    {
        // The schema as version 1 wrote it, with one session.
        let connection = rusqlite::Connection::open(&path).unwrap();
        connection
            .execute_batch(
                "CREATE TABLE sessions (session_id TEXT PRIMARY KEY, cwd TEXT NOT NULL,
                     title TEXT, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL);
                 CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT,
                     session_id TEXT NOT NULL REFERENCES sessions(session_id),
                     turn INTEGER NOT NULL, kind TEXT NOT NULL, body TEXT NOT NULL,
                     at INTEGER NOT NULL);
                 INSERT INTO sessions VALUES ('old', '/w', NULL, 1, 1);
                 PRAGMA user_version = 1;",
            )
            .unwrap();
    }
    let store = Store::open(&path).await.unwrap();
    let old = store.load("old").await.unwrap().unwrap();
    assert_eq!(old.settings, None);
    assert_eq!(old.cwd, Path::new("/w"));
    store
        .set_settings("old", settings("ask", "default"))
        .await
        .unwrap();
    assert_eq!(
        store.load("old").await.unwrap().unwrap().settings,
        Some(settings("ask", "default"))
    );
    store.close().await;
    // Opening again finds version 2 and changes nothing.
    let store = Store::open(&path).await.unwrap();
    assert!(store.load("old").await.unwrap().is_some());
}
