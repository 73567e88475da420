//! The ledger on a real SQLite file.

use serde_json::value::RawValue;

use super::*;

fn key(call_key: &str) -> FenceKey {
    FenceKey {
        principal: r#"{"kind":"direct"}"#.into(),
        call_key: call_key.into(),
    }
}

fn fingerprint(tool: &str, digest: &str) -> Fingerprint {
    Fingerprint {
        tool: tool.into(),
        arguments_digest: digest.into(),
    }
}

fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.into()).unwrap()
}

async fn settle(ledger: &Ledger, call_key: &str, result: &str) {
    let Begin::Fresh(mut reservation) = ledger
        .begin(key(call_key), fingerprint("t", "d"))
        .await
        .unwrap()
    else {
        panic!("{call_key} should be fresh");
    };
    reservation.start("id", None).await.unwrap();
    reservation.record(Outcome::Result(raw(result))).await;
}

#[tokio::test]
async fn settled_call_replays_byte_identical_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledgers/ns.sqlite");
    let ledger = Ledger::open(&path, Retention::default()).await.unwrap();
    settle(&ledger, "k1", r#"{"content":[] , "x":1.50}"#).await;
    drop(ledger);
    let ledger = open_when_free(&path).await;
    match ledger
        .begin(key("k1"), fingerprint("t", "d"))
        .await
        .unwrap()
    {
        Begin::Replay(Outcome::Result(stored)) => {
            assert_eq!(stored.get(), r#"{"content":[] , "x":1.50}"#)
        }
        _ => panic!("expected a replay"),
    }
}

#[tokio::test]
async fn same_key_with_other_tool_or_arguments_is_reused() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(dir.path().join("l.sqlite"), Retention::default())
        .await
        .unwrap();
    settle(&ledger, "k", "{}").await;
    for other in [fingerprint("other", "d"), fingerprint("t", "other-digest")] {
        match ledger.begin(key("k"), other).await.unwrap() {
            Begin::Reused { stored_tool } => assert_eq!(stored_tool, "t"),
            _ => panic!("expected call_key_reused"),
        }
    }
}

#[tokio::test]
async fn a_call_running_when_the_process_died_is_unknown_for_ever() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite");
    // A provider wrote its `running` row and then died.
    {
        let (store, _) = store::Store::open(&path, &Retention::default(), now_ms()).unwrap();
        store
            .insert_running(&key("k"), &fingerprint("t", "d"), "id", None, now_ms())
            .unwrap();
    }
    let ledger = open_when_free(&path).await;
    for _ in 0..2 {
        assert!(matches!(
            ledger.begin(key("k"), fingerprint("t", "d")).await.unwrap(),
            Begin::Unknown
        ));
    }
    // Pruning never forgets it, whatever its age.
    ledger.prune_at(i64::MAX).await.unwrap();
    assert_eq!(ledger.counts().await.unwrap().unknown, 1);
}

async fn open_when_free(path: &std::path::Path) -> Ledger {
    for _ in 0..200 {
        match Ledger::open(path, Retention::default()).await {
            Ok(ledger) => return ledger,
            Err(LedgerError::InUse { .. }) => tokio::time::sleep(Duration::from_millis(10)).await,
            Err(error) => panic!("{error}"),
        }
    }
    panic!("the ledger stayed locked")
}

#[tokio::test]
async fn a_second_opener_is_refused_while_the_first_holds_the_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite");
    let _first = Ledger::open(&path, Retention::default()).await.unwrap();
    let error = Ledger::open(&path, Retention::default())
        .await
        .err()
        .unwrap();
    assert!(matches!(error, LedgerError::InUse { .. }), "{error}");
    assert!(error.to_string().contains("in use by another process"));
}

#[tokio::test]
async fn a_duplicate_waits_and_gets_the_first_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(dir.path().join("l.sqlite"), Retention::default())
        .await
        .unwrap();
    let Begin::Fresh(mut first) = ledger.begin(key("k"), fingerprint("t", "d")).await.unwrap()
    else {
        panic!()
    };
    first.start("id", None).await.unwrap();
    let Begin::Wait(waiter) = ledger.begin(key("k"), fingerprint("t", "d")).await.unwrap() else {
        panic!("the duplicate should wait")
    };
    first.record(Outcome::Result(raw(r#"{"n":1}"#))).await;
    match waiter.outcome().await {
        Some(Outcome::Result(result)) => assert_eq!(result.get(), r#"{"n":1}"#),
        _ => panic!("expected the first call's result"),
    }
}

#[tokio::test]
async fn not_run_releases_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::open(dir.path().join("l.sqlite"), Retention::default())
        .await
        .unwrap();
    let Begin::Fresh(mut first) = ledger.begin(key("k"), fingerprint("t", "d")).await.unwrap()
    else {
        panic!()
    };
    first.start("id", None).await.unwrap();
    first
        .not_run(ErrorObject::new(ErrorCode::InternalError, "backend down"))
        .await;
    assert!(matches!(
        ledger
            .begin(key("k"), fingerprint("t", "other"))
            .await
            .unwrap(),
        Begin::Fresh(_)
    ));
}

#[tokio::test]
async fn retention_keeps_the_newest_settled_and_every_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.sqlite");
    let retention = Retention {
        max_age: Duration::from_secs(3600),
        max_settled: 2,
    };
    let ledger = Ledger::open(&path, retention.clone()).await.unwrap();
    let Begin::Fresh(mut lost) = ledger
        .begin(key("lost"), fingerprint("t", "d"))
        .await
        .unwrap()
    else {
        panic!()
    };
    lost.start("id", None).await.unwrap();
    lost.record(Outcome::Unknown).await;
    for n in 1..=3 {
        // Settled in the same millisecond, the key breaks the tie (k1 is oldest).
        settle(&ledger, &format!("k{n}"), "{}").await;
    }
    // At the edge: exactly `max_settled` stay, the oldest goes.
    assert_eq!(ledger.prune_at(now_ms()).await.unwrap(), 1);
    let counts = ledger.counts().await.unwrap();
    assert_eq!((counts.settled, counts.unknown), (2, 1));
    assert!(matches!(
        ledger
            .begin(key("k1"), fingerprint("t", "d"))
            .await
            .unwrap(),
        Begin::Fresh(_)
    ));
    assert!(matches!(
        ledger
            .begin(key("k3"), fingerprint("t", "d"))
            .await
            .unwrap(),
        Begin::Replay(_)
    ));
    // By age: one hour later everything settled goes; the unknown stays.
    let later = now_ms() + 3_600_001;
    assert_eq!(ledger.prune_at(later).await.unwrap(), 2);
    let counts = ledger.counts().await.unwrap();
    assert_eq!((counts.settled, counts.unknown), (0, 1));
}

#[tokio::test]
async fn task_creators_are_kept_across_reopen_and_the_newest_task_of_an_id_wins() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tasks.sqlite");
    let ledger = Ledger::open(&path, Retention::default()).await.unwrap();
    let alice = TaskOwner {
        principal: r#"{"kind":"reserved","module_id":"alice"}"#.into(),
        call_key: Some("k-1".into()),
    };
    let bob = TaskOwner {
        principal: r#"{"kind":"direct"}"#.into(),
        call_key: None,
    };
    ledger.record_task("t-1", alice.clone()).await.unwrap();
    ledger.record_task("t-2", alice.clone()).await.unwrap();
    drop(ledger);
    let ledger = open_when_free(&path).await;
    assert_eq!(ledger.task_owner("t-1").await.unwrap(), Some(alice.clone()));
    assert_eq!(ledger.task_owner("t-9").await.unwrap(), None);
    assert_eq!(
        ledger.tasks_of(&alice.principal).await.unwrap(),
        ["t-1", "t-2"]
    );
    // A restarted server handed the id out again, to another caller.
    ledger.record_task("t-1", bob.clone()).await.unwrap();
    assert_eq!(ledger.task_owner("t-1").await.unwrap(), Some(bob));
    assert_eq!(ledger.tasks_of(&alice.principal).await.unwrap(), ["t-2"]);
}
