//! `git-sidecar` as a process on a real hub process, reading repositories
//! made with the git CLI; calls go through the SDK (and once the CLI).

mod support;

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{json, Value};
use support::{switchboard_binary, GitRepo, HubProcess, Sidecar, WAIT};
use switchboard_client::{handler_fn, reply, Client, ErrorKind};
use tokio::sync::mpsc;

async fn get_objects(client: &Client, service: &str, repo: &str, oids: &[&str]) -> Value {
    client
        .request(service, "getObjects", &json!({"repo": repo, "oids": oids}))
        .await
        .expect("getObjects")
}

fn decoded(entry: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(entry["content"].as_str().expect("content"))
        .expect("base64")
}

/// A repository with two commits on main, a branch, a lightweight and an
/// annotated tag, a symbolic ref, and some refs packed.
fn fixture() -> GitRepo {
    let repo = GitRepo::init("proj");
    repo.commit_file("a.txt", b"first\n", "one");
    repo.git(&["tag", "v1"]);
    repo.git(&["branch", "topic"]);
    repo.git(&["pack-refs", "--all"]);
    repo.commit_file("a.txt", b"second\n", "two");
    repo.git(&["tag", "-a", "-m", "annotated", "v2"]);
    repo.git(&["symbolic-ref", "refs/heads/alias", "refs/heads/main"]);
    repo
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_refs_lists_every_ref_as_git_sees_it() {
    let repo = fixture();
    let hub = HubProcess::start();
    let client = hub.client("test").await;
    let sidecar = Sidecar::start(&hub, &client, "refs", &["--repo", repo.path_str()]).await;

    let answer: Value = client
        .request(&sidecar.service_id, "getRefs", &json!({"repo": "proj"}))
        .await
        .unwrap();
    assert_eq!(answer["repo"], "proj");
    let listed: BTreeMap<String, Value> = answer["refs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["name"].as_str().unwrap().to_owned(), r.clone()))
        .collect();

    // What git says: every ref with its target, peeled target and symref.
    let git_refs = repo.git(&[
        "for-each-ref",
        "--format=%(refname) %(objectname) %(*objectname) %(symref)",
    ]);
    let mut expected = BTreeMap::new();
    let head = repo.git(&["rev-parse", "HEAD"]);
    expected.insert(
        "HEAD".to_owned(),
        json!({"name": "HEAD", "symbolic": "refs/heads/main", "target": head}),
    );
    for line in git_refs.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let mut entry = json!({"name": fields[0], "target": fields[1]});
        if !fields[2].is_empty() {
            entry["peeled"] = json!(fields[2]);
        }
        if !fields[3].is_empty() {
            entry["symbolic"] = json!(fields[3]);
        }
        expected.insert(fields[0].to_owned(), entry);
    }
    assert_eq!(listed, expected);
    assert!(
        listed["refs/tags/v2"].get("peeled").is_some(),
        "annotated tags are peeled"
    );
    assert_eq!(
        listed["refs/heads/topic"]["target"],
        repo.git(&["rev-parse", "topic"]),
        "packed refs are read"
    );
    assert_eq!(answer["refs"][0]["name"], "HEAD", "HEAD comes first");

    // A repository is named by its directory name or by its path.
    let by_path: Value = client
        .request(
            &sidecar.service_id,
            "getRefs",
            &json!({"repo": repo.path_str()}),
        )
        .await
        .unwrap();
    assert_eq!(by_path, answer);

    let tags: Value = client
        .request(
            &sidecar.service_id,
            "getRefs",
            &json!({"repo": "proj", "prefix": "refs/tags/"}),
        )
        .await
        .unwrap();
    let names: Vec<&str> = tags["refs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["refs/tags/v1", "refs/tags/v2"]);

    // The operator CLI reaches the same service by selector.
    let output = tokio::process::Command::new(switchboard_binary())
        .args([
            "call",
            "--dir",
            hub.dir_arg(),
            "protocol=git-object-reader",
            "getRefs",
            r#"{"repo":"proj"}"#,
        ])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let via_cli: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(via_cli, answer);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_objects_returns_every_object_byte_exact_with_per_id_errors() {
    let repo = fixture();
    let every_byte: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    let binary = repo.write_blob(&every_byte);
    let empty = repo.write_blob(b"");
    let head = repo.git(&["rev-parse", "HEAD"]);
    let tree = repo.git(&["rev-parse", "HEAD^{tree}"]);
    let tag = repo.git(&["rev-parse", "v2"]);
    let text = repo.git(&["rev-parse", "HEAD:a.txt"]);
    let hub = HubProcess::start();
    let client = hub.client("test").await;
    let sidecar = Sidecar::start(&hub, &client, "objects", &["--repo", repo.path_str()]).await;

    let missing = "0123456789abcdef0123456789abcdef01234567";
    let asked = [
        &binary,
        &empty,
        &head,
        &tree,
        &tag,
        &text,
        missing,
        "not-an-id",
        &head[..10],
    ];
    let answer = get_objects(&client, &sidecar.service_id, "proj", &asked).await;
    assert_eq!(answer["repo"], "proj");
    let entries = answer["objects"].as_array().unwrap();
    assert_eq!(entries.len(), asked.len(), "one entry per id, in order");
    for (entry, oid) in entries.iter().zip(&asked).take(6) {
        assert_eq!(entry["oid"], **oid);
        let kind = repo.git(&["cat-file", "-t", oid]);
        assert_eq!(entry["type"], kind);
        let content = repo.git_bytes(&["cat-file", &kind, oid]);
        assert_eq!(decoded(entry), content, "{kind} {oid} byte for byte");
        assert_eq!(entry["size"], content.len());
        assert!(entry.get("error").is_none());
    }
    assert_eq!(decoded(&entries[0]), every_byte);
    assert_eq!(entries[1]["size"], 0);
    assert_eq!(
        entries[6],
        json!({"oid": missing, "error": {"code": "missing", "message": "no such object in this repository"}})
    );
    assert_eq!(entries[7]["error"]["code"], "invalidOid");
    assert_eq!(
        entries[8]["error"]["code"], "invalidOid",
        "abbreviated ids are not looked up"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repo_that_is_not_served_is_refused_by_name() {
    let repo = fixture();
    let other = GitRepo::init("other");
    let hub = HubProcess::start();
    let client = hub.client("test").await;
    let sidecar = Sidecar::start(&hub, &client, "refuse", &["--repo", repo.path_str()]).await;

    for requested in ["other", other.path_str()] {
        let error = client
            .request::<Value>(&sidecar.service_id, "getRefs", &json!({"repo": requested}))
            .await
            .unwrap_err();
        assert_eq!(
            error.kind(),
            Some(ErrorKind::InvalidParams {
                field: Some("repo".into())
            })
        );
        let switchboard_client::Error::Rpc(error) = error else {
            unreachable!()
        };
        assert_eq!(
            error.message,
            format!("repo {requested:?} is not served here (served: proj)")
        );
        assert_eq!(error.data().unwrap()["served"], json!(["proj"]));
    }
    let error = client
        .request::<Value>(&sidecar.service_id, "getObjects", &json!({"repo": "proj"}))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), Some(ErrorKind::InvalidParams { field: None }));
    assert!(
        error.to_string().contains("missing field `oids`"),
        "{error}"
    );
    let error = client
        .request::<Value>(&sidecar.service_id, "pushRefs", &json!({}))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), Some(ErrorKind::MethodNotFound));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_cached_by_object_id() {
    let repo = fixture();
    let cached = repo.write_blob(b"read once, then deleted\n");
    let uncached = repo.write_blob(b"deleted before anyone asked\n");
    let hub = HubProcess::start();
    let client = hub.client("test").await;
    let sidecar = Sidecar::start(&hub, &client, "cache", &["--repo", repo.path_str()]).await;

    let first = get_objects(&client, &sidecar.service_id, "proj", &[&cached]).await;
    assert_eq!(decoded(&first["objects"][0]), b"read once, then deleted\n");

    // Once the object is gone from the repository, only the cache can answer.
    std::fs::remove_file(repo.loose_object(&cached)).unwrap();
    std::fs::remove_file(repo.loose_object(&uncached)).unwrap();
    let again = get_objects(&client, &sidecar.service_id, "proj", &[&cached, &uncached]).await;
    assert_eq!(
        again["objects"][0], first["objects"][0],
        "served from the cache"
    );
    assert_eq!(
        again["objects"][1]["error"]["code"], "missing",
        "the deletion is real"
    );

    let stats: Value = client
        .request(&sidecar.service_id, "getStats", &json!({}))
        .await
        .unwrap();
    assert_eq!(stats["cache"]["hits"], 1);
    assert_eq!(stats["cache"]["misses"], 2);
    assert_eq!(stats["cache"]["entries"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_evicts_the_least_recently_used_to_stay_within_its_bytes() {
    let repo = fixture();
    // Each answer costs 4000 base64 bytes plus bookkeeping: two do not fit in 6000.
    let a = repo.write_blob(&[b'a'; 3000]);
    let b = repo.write_blob(&[b'b'; 3000]);
    let hub = HubProcess::start();
    let client = hub.client("test").await;
    let sidecar = Sidecar::start(
        &hub,
        &client,
        "lru",
        &["--repo", repo.path_str(), "--cache-bytes", "6000"],
    )
    .await;

    get_objects(&client, &sidecar.service_id, "proj", &[&a]).await;
    get_objects(&client, &sidecar.service_id, "proj", &[&b]).await;
    std::fs::remove_file(repo.loose_object(&a)).unwrap();
    std::fs::remove_file(repo.loose_object(&b)).unwrap();
    let answer = get_objects(&client, &sidecar.service_id, "proj", &[&a, &b]).await;
    assert_eq!(
        answer["objects"][0]["error"]["code"], "missing",
        "a was evicted for b"
    );
    assert_eq!(decoded(&answer["objects"][1]), vec![b'b'; 3000]);

    let stats: Value = client
        .request(&sidecar.service_id, "getStats", &json!({}))
        .await
        .unwrap();
    assert_eq!(stats["cache"]["evictions"], 1);
    assert_eq!(stats["cache"]["entries"], 1);
    assert!(stats["cache"]["bytes"].as_u64().unwrap() <= 6000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_call_takes_at_most_4096_ids() {
    let repo = fixture();
    let hub = HubProcess::start();
    let client = hub.client("test").await;
    let sidecar = Sidecar::start(&hub, &client, "batch", &["--repo", repo.path_str()]).await;

    let ids: Vec<String> = (0..4097u32).map(|n| format!("{n:040x}")).collect();
    let at_bound: Vec<&str> = ids[..4096].iter().map(String::as_str).collect();
    let answer = get_objects(&client, &sidecar.service_id, "proj", &at_bound).await;
    let entries = answer["objects"].as_array().unwrap();
    assert_eq!(entries.len(), 4096);
    assert!(entries.iter().all(|e| e["error"]["code"] == "missing"));

    let over: Vec<&str> = ids.iter().map(String::as_str).collect();
    let error = client
        .request::<Value>(
            &sidecar.service_id,
            "getObjects",
            &json!({"repo": "proj", "oids": over}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        error.kind(),
        Some(ErrorKind::InvalidParams {
            field: Some("oids".into())
        })
    );
    assert!(
        error
            .to_string()
            .contains("oids holds 4097 ids; at most 4096 fit in one call"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_and_refs_past_the_answer_size_are_reported_clearly() {
    let repo = fixture();
    // base64 of 7000 bytes is 9336: one fits in 16384 bytes, two do not.
    let first = repo.write_blob(&[b'1'; 7000]);
    let second = repo.write_blob(&[b'2'; 7000]);
    // Larger than any answer of 16384 bytes can hold.
    let huge = repo.write_blob(&[b'h'; 13000]);
    let hub = HubProcess::start();
    let client = hub.client("test").await;
    let sidecar = Sidecar::start(
        &hub,
        &client,
        "budget",
        &["--repo", repo.path_str(), "--max-answer-bytes", "16384"],
    )
    .await;

    let request = json!({"repo": "proj", "oids": [first, second, huge]});
    let raw: Box<serde_json::value::RawValue> = client
        .request(&sidecar.service_id, "getObjects", &request)
        .await
        .unwrap();
    assert!(raw.get().len() <= 16384, "{} bytes", raw.get().len());
    let answer: Value = serde_json::from_str(raw.get()).unwrap();
    assert_eq!(decoded(&answer["objects"][0]), vec![b'1'; 7000]);
    assert_eq!(answer["objects"][1]["error"]["code"], "overBudget");
    assert_eq!(answer["objects"][2]["error"]["code"], "tooLarge");
    assert_eq!(answer["objects"][2]["error"]["size"], 13000);

    let answer = get_objects(&client, &sidecar.service_id, "proj", &[&second]).await;
    assert_eq!(
        decoded(&answer["objects"][0]),
        vec![b'2'; 7000],
        "asked alone, it fits"
    );

    // 300 tags list in more than 16384 bytes: refused as a whole, with a
    // way out (a prefix that lists fewer).
    let head = repo.git(&["rev-parse", "HEAD"]);
    let batch: String = (0..300)
        .map(|n| format!("create refs/tags/many-{n:03} {head}\n"))
        .collect();
    repo.git_with_input(&["update-ref", "--stdin"], batch.as_bytes());
    let error = client
        .request::<Value>(&sidecar.service_id, "getRefs", &json!({"repo": "proj"}))
        .await
        .unwrap_err();
    assert_eq!(error.kind(), Some(ErrorKind::Application { code: 1001 }));
    assert!(
        error.to_string().contains("narrow them with \"prefix\""),
        "{error}"
    );
    let heads: Value = client
        .request(
            &sidecar.service_id,
            "getRefs",
            &json!({"repo": "proj", "prefix": "refs/heads/"}),
        )
        .await
        .unwrap();
    assert_eq!(
        heads["refs"].as_array().unwrap().len(),
        3,
        "alias, main, topic"
    );
}

/// A `git-ref-watcher` service whose notifications arrive on the receiver.
async fn register_watcher(client: &Client) -> mpsc::UnboundedReceiver<(String, Value)> {
    let (seen, notifications) = mpsc::unbounded_channel();
    let handler = handler_fn(|_| async { reply(&()) }).with_notifications(move |notification| {
        let seen = seen.clone();
        async move {
            let params = notification.params::<Value>().unwrap_or(Value::Null);
            let _ = seen.send((notification.method.clone(), params));
        }
    });
    client
        .register(&json!({"protocol": "git-ref-watcher"}), handler)
        .await
        .expect("register the watcher");
    notifications
}

/// The next change of ref `name` in `proj` the watcher is told about.
async fn change_of(
    notifications: &mut mpsc::UnboundedReceiver<(String, Value)>,
    name: &str,
) -> (Value, Value) {
    change_of_repo(notifications, "proj", name).await
}

/// The next change of ref `name` in `repo` the watcher is told about.
async fn change_of_repo(
    notifications: &mut mpsc::UnboundedReceiver<(String, Value)>,
    repo: &str,
    name: &str,
) -> (Value, Value) {
    tokio::time::timeout(WAIT, async {
        loop {
            let (method, params) = notifications.recv().await.expect("watcher alive");
            assert_eq!(method, "refsChanged");
            assert_eq!(params["repo"], repo);
            let changes = params["refs"].as_array().expect("refs");
            if let Some(change) = changes.iter().find(|c| c["name"] == name) {
                return (params.clone(), change.clone());
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no refsChanged for {name} within {WAIT:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ref_watchers_are_told_when_refs_change() {
    let repo = fixture();
    let hub = HubProcess::start();
    let client = hub.client("test").await;
    let sidecar = Sidecar::start(&hub, &client, "watch", &["--repo", repo.path_str()]).await;
    let mut notifications = register_watcher(&client).await;
    // The hub sent the sidecar the watcher's `added` before this request,
    // and the sidecar applies catalog changes before serving what follows.
    let _: Value = client
        .request(&sidecar.service_id, "getStats", &json!({}))
        .await
        .unwrap();

    // Reading refs (git itself, or this service) changes nothing.
    repo.git(&["status"]);
    repo.git(&["log", "--oneline", "--all"]);
    let _: Value = client
        .request(&sidecar.service_id, "getRefs", &json!({"repo": "proj"}))
        .await
        .unwrap();
    // A quiet spell in which a reread set off by reads (the sidecar's own
    // included) would show.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let stats: Value = client
        .request(&sidecar.service_id, "getStats", &json!({}))
        .await
        .unwrap();
    assert_eq!(stats["refRereads"], 0, "nothing changed yet");

    let before = repo.git(&["rev-parse", "HEAD"]);
    let after = repo.commit_file("b.txt", b"new file\n", "three");
    let (params, main) = change_of(&mut notifications, "refs/heads/main").await;
    assert_eq!(
        main,
        json!({"name": "refs/heads/main", "old": before, "new": after})
    );
    assert_eq!(
        params["path"],
        std::fs::canonicalize(&repo.path).unwrap().to_str().unwrap()
    );
    let head = params["refs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "HEAD");
    assert_eq!(
        head,
        Some(&json!({"name": "HEAD", "old": before, "new": after, "symbolic": "refs/heads/main"})),
        "HEAD follows main"
    );
    let stats: Value = client
        .request(&sidecar.service_id, "getStats", &json!({}))
        .await
        .unwrap();
    let rereads = stats["refRereads"].as_u64().unwrap();
    assert!(
        (1..=3).contains(&rereads),
        "only the commit's rename(s) made the sidecar reread the refs: {rereads}"
    );

    repo.git(&["update-ref", "refs/heads/feature", &before]);
    let (_, created) = change_of(&mut notifications, "refs/heads/feature").await;
    assert_eq!(
        created,
        json!({"name": "refs/heads/feature", "old": null, "new": before})
    );

    repo.git(&["update-ref", "-d", "refs/heads/feature"]);
    let (_, deleted) = change_of(&mut notifications, "refs/heads/feature").await;
    assert_eq!(
        deleted,
        json!({"name": "refs/heads/feature", "old": before, "new": null})
    );

    // A packed ref that moves (packed-refs is rewritten) is seen too.
    repo.git(&["pack-refs", "--all"]);
    repo.git(&["update-ref", "refs/tags/v1", &after]);
    let (_, moved) = change_of(&mut notifications, "refs/tags/v1").await;
    assert_eq!(moved["new"], after);
    assert!(!sidecar.log().contains("ERROR"), "{}", sidecar.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sidecar_registers_again_when_the_hub_restarts() {
    let repo = fixture();
    let mut hub = HubProcess::start();
    let client = hub.client("test").await;
    let sidecar = Sidecar::start(&hub, &client, "restart", &["--repo", repo.path_str()]).await;

    hub.restart();
    let client = hub.client("after").await;
    let service_id = support::wait_for_service(&client, "restart")
        .await
        .unwrap_or_else(|| panic!("not registered again:\n{}", sidecar.log()));
    assert_ne!(service_id, sidecar.service_id, "a new hub mints a new id");
    let answer: Value = client
        .request(&service_id, "getRefs", &json!({"repo": "proj"}))
        .await
        .unwrap();
    assert_eq!(answer["refs"][0]["name"], "HEAD");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_repositories_stop_the_sidecar_with_a_clear_error() {
    let not_a_repo = tempfile::tempdir().unwrap();
    let first = GitRepo::init("same");
    let second = GitRepo::init("same");
    let cases = [
        (
            vec!["--repo", not_a_repo.path().to_str().unwrap()],
            "cannot open the Git repository",
        ),
        (
            vec!["--repo", first.path_str(), "--repo", second.path_str()],
            "are both named \"same\"",
        ),
        (
            vec!["--repo", first.path_str(), "--repo", first.path_str()],
            "is given twice",
        ),
    ];
    for (args, expected) in cases {
        let output = tokio::time::timeout(
            WAIT,
            tokio::process::Command::new(support::sidecar_binary())
                .args(&args)
                .args(["--dir", "/nonexistent/hub"])
                .output(),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(output.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_linked_worktree_is_served_with_its_own_head_and_shared_refs() {
    let repo = fixture();
    let worktree = repo.path.with_file_name("wt");
    let worktree_str = worktree.to_str().unwrap();
    repo.git(&["worktree", "add", "-q", "-b", "side", worktree_str]);
    let hub = HubProcess::start();
    let client = hub.client("test").await;
    let sidecar = Sidecar::start(&hub, &client, "worktree", &["--repo", worktree_str]).await;
    let mut notifications = register_watcher(&client).await;
    let _: Value = client
        .request(&sidecar.service_id, "getStats", &json!({}))
        .await
        .unwrap();

    let answer: Value = client
        .request(&sidecar.service_id, "getRefs", &json!({"repo": "wt"}))
        .await
        .unwrap();
    assert_eq!(
        answer["refs"][0]["symbolic"], "refs/heads/side",
        "the worktree's own HEAD"
    );

    // A commit in the worktree moves a ref stored in the main repository.
    GitRepo::at(worktree.clone()).commit_file("side.txt", b"side\n", "on the side");
    let side = repo.git(&["rev-parse", "side"]);
    let (params, change) = change_of_repo(&mut notifications, "wt", "refs/heads/side").await;
    assert_eq!(change["new"], side);
    let head = params["refs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "HEAD")
        .cloned();
    assert_eq!(head.map(|h| h["new"].clone()), Some(json!(side)));

    let objects = get_objects(&client, &sidecar.service_id, "wt", &[&side]).await;
    assert_eq!(objects["objects"][0]["type"], "commit");
}

/// Hosts capture the sidecar's stderr to a file (here, its log): no
/// terminal colour codes there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_carries_no_colour_codes_when_stderr_is_not_a_terminal() {
    let repo = fixture();
    let hub = HubProcess::start();
    let client = hub.client("test").await;
    let sidecar = Sidecar::start(&hub, &client, "plain", &["--repo", repo.path_str()]).await;
    switchboard_testkit::eventually("the sidecar to log that it serves", || {
        sidecar.log().contains("serving")
    })
    .await;
    let log = sidecar.log();
    assert!(!log.contains('\x1b'), "colour codes in the log:\n{log:?}");
}
