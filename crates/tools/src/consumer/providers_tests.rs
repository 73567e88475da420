use serde_json::{json, Value};
use switchboard_protocol::Principal;

use super::*;
use crate::consumer::tool::ListedTool;

fn service(id: &str, metadata: Value) -> ServiceInfo {
    ServiceInfo {
        service_id: id.into(),
        client_id: format!("client-of-{id}"),
        principal: Principal::Direct,
        metadata,
    }
}

fn provider(id: &str, namespace: &str, revision: u64) -> ServiceInfo {
    service(
        id,
        json!({"protocol": "tool-provider", "version": 1, "namespace": namespace, "toolsRevision": revision}),
    )
}

/// A version-2 provider serving everything, at the given revisions.
fn provider_v2(id: &str, namespace: &str, tools: u64, resources: u64, prompts: u64) -> ServiceInfo {
    service(
        id,
        json!({"protocol": "tool-provider", "version": 2, "namespace": namespace,
               "capabilities": {"tools": {}, "resources": {"subscribe": true}, "prompts": {}, "logging": {}},
               "toolsRevision": tools, "resourcesRevision": resources, "promptsRevision": prompts}),
    )
}

fn listing(names: &[&str]) -> Result<Listing, CallError> {
    Ok(Listing::Tools(
        names
            .iter()
            .map(|name| ListedTool::from_entry(json!({"name": name, "inputSchema": {}})).unwrap())
            .collect(),
    ))
}

fn items(kind: ListKind, keys: &[&str]) -> Result<Listing, CallError> {
    Ok(Listing::Items(
        keys.iter()
            .map(|key| ListedItem::from_entry(kind, json!({kind.key(): key, "name": key})).unwrap())
            .collect(),
    ))
}

fn providers() -> Providers {
    let (caller, _commands) = HubCaller::detached();
    Providers::new(caller)
}

/// The one fetch `fetches` holds.
fn one(fetches: Vec<Fetch>) -> Fetch {
    assert_eq!(fetches.len(), 1, "{fetches:?}");
    fetches.into_iter().next().unwrap()
}

fn of_kind(fetches: &[Fetch], kind: ListKind) -> Fetch {
    fetches
        .iter()
        .find(|fetch| fetch.kind == kind)
        .cloned()
        .unwrap_or_else(|| panic!("no fetch of {kind:?} in {fetches:?}"))
}

/// Applies the answer `names` to `fetch`.
fn answer(providers: &mut Providers, fetch: Fetch, names: &[&str]) -> Applied {
    let listing = match fetch.kind {
        ListKind::Tools => listing(names),
        kind => items(kind, names),
    };
    providers.apply(Fetched { fetch, listing })
}

fn exposed(providers: &Providers) -> Vec<String> {
    providers
        .build()
        .table
        .tools()
        .map(|tool| tool.name.clone())
        .collect()
}

#[test]
fn only_tool_providers_of_version_one_or_two_with_a_namespace_count() {
    assert_eq!(provider_namespace(&provider("s", "git", 1)), Some("git"));
    assert_eq!(
        provider_namespace(&provider_v2("s", "git", 1, 1, 1)),
        Some("git")
    );
    for metadata in [
        json!({"protocol": "tool-provider", "version": 3, "namespace": "git"}),
        json!({"protocol": "tool-provider", "version": 1, "namespace": ""}),
        json!({"protocol": "tool-provider", "version": 1}),
        json!({"protocol": "tool-progress", "version": 1, "namespace": "git"}),
    ] {
        assert_eq!(
            provider_namespace(&service("s", metadata.clone())),
            None,
            "{metadata}"
        );
    }
}

#[test]
fn only_changes_to_providers_ask_for_a_new_table() {
    let mut providers = providers();
    assert!(providers
        .saw(service("other", json!({"protocol": "x"})))
        .is_empty());
    assert!(!providers.take_changed());
    let fetch = one(providers.saw(provider("svc", "ns", 1)));
    assert!(providers.take_changed());
    // A new revision: the table changes when its list arrives.
    let newer = one(providers.saw(provider("svc", "ns", 2)));
    assert!(!providers.take_changed());
    assert_eq!(answer(&mut providers, fetch, &["old"]), Applied::Stale);
    assert!(!providers.take_changed());
    answer(&mut providers, newer, &["a"]);
    assert!(providers.take_changed());
    providers.removed("svc");
    assert!(providers.take_changed());
    providers.removed("svc");
    providers.clear();
    assert!(!providers.take_changed());
}

#[test]
fn a_slow_old_list_never_overwrites_a_newer_one() {
    let mut providers = providers();
    let old = one(providers.saw(provider("svc", "ns", 1)));
    let new = one(providers.saw(provider("svc", "ns", 2)));
    assert!(new.number > old.number);
    assert_eq!(answer(&mut providers, new, &["new"]), Applied::Current);
    assert_eq!(answer(&mut providers, old, &["old"]), Applied::Stale);
    assert_eq!(exposed(&providers), ["ns__new"]);
}

#[test]
fn an_answer_from_before_a_reconnect_is_stale_for_the_same_service_id() {
    let mut providers = providers();
    let before = one(providers.saw(provider("svc", "ns", 1)));
    providers.clear();
    let after = one(providers.saw(provider("svc", "ns", 1)));
    assert_eq!(answer(&mut providers, before, &["old"]), Applied::Stale);
    assert_eq!(answer(&mut providers, after, &["fresh"]), Applied::Current);
    assert_eq!(exposed(&providers), ["ns__fresh"]);
}

#[test]
fn the_same_metadata_is_not_listed_again_but_a_new_revision_is() {
    let mut providers = providers();
    let first = one(providers.saw(provider("svc", "ns", 1)));
    answer(&mut providers, first, &["a"]);
    assert!(providers.saw(provider("svc", "ns", 1)).is_empty());
    assert!(!providers.saw(provider("svc", "ns", 2)).is_empty());
    // The old tools stay offered until the new list arrives.
    assert_eq!(exposed(&providers), ["ns__a"]);
    // A refresh makes the pending fetch stale as well.
    let refresh = providers.refresh("svc", ListKind::Tools).unwrap();
    answer(&mut providers, refresh, &["b"]);
    assert_eq!(exposed(&providers), ["ns__b"]);
    assert_eq!(providers.refresh("unknown", ListKind::Tools), None);
    // A version-1 provider has no prompts to refresh.
    assert_eq!(providers.refresh("svc", ListKind::Prompts), None);
}

#[test]
fn a_renamed_namespace_drops_the_old_names_at_once() {
    let mut providers = providers();
    let first = one(providers.saw(provider("svc", "old", 1)));
    answer(&mut providers, first, &["a"]);
    one(providers.saw(provider("svc", "new", 1)));
    assert!(exposed(&providers).is_empty());
}

#[test]
fn a_service_that_stops_being_a_provider_leaves() {
    let mut providers = providers();
    let first = one(providers.saw(provider("svc", "ns", 1)));
    answer(&mut providers, first.clone(), &["a"]);
    assert!(providers
        .saw(service("svc", json!({"protocol": "other"})))
        .is_empty());
    assert!(exposed(&providers).is_empty());
    assert_eq!(answer(&mut providers, first, &["a"]), Applied::Gone);
}

#[test]
fn a_failed_list_offers_nothing_of_that_provider() {
    let mut providers = providers();
    let first = one(providers.saw(provider("svc", "ns", 1)));
    answer(&mut providers, first, &["a"]);
    let second = one(providers.saw(provider("svc", "ns", 2)));
    let applied = providers.apply(Fetched {
        fetch: second,
        listing: Err(CallError::TimedOut(std::time::Duration::from_secs(10))),
    });
    assert_eq!(applied, Applied::Failed);
    assert!(exposed(&providers).is_empty());
}

#[test]
fn providers_claim_namespaces_in_arrival_order() {
    let mut providers = providers();
    // Arrival order, not service id order, decides.
    let first = one(providers.saw(provider("svc-b", "ns", 1)));
    let second = one(providers.saw(provider("svc-a", "ns", 1)));
    answer(&mut providers, second, &["from_a"]);
    answer(&mut providers, first, &["from_b"]);
    assert_eq!(exposed(&providers), ["ns__from_b"]);
    providers.removed("svc-b");
    assert_eq!(exposed(&providers), ["ns__from_a"]);
}

#[test]
fn a_version_two_provider_lists_what_it_declares_and_relists_each_kind_on_its_revision() {
    let mut providers = providers();
    let fetches = providers.saw(provider_v2("svc", "ev", 1, 1, 1));
    let mut kinds: Vec<ListKind> = fetches.iter().map(|fetch| fetch.kind).collect();
    kinds.sort();
    assert_eq!(kinds, ListKind::ALL);
    for fetch in fetches {
        let key = match fetch.kind {
            ListKind::Resources => "test://a",
            ListKind::Templates => "test://{id}",
            _ => "one",
        };
        assert_eq!(answer(&mut providers, fetch, &[key]), Applied::Current);
    }
    // Only the prompts' revision moved: only the prompts are listed again.
    let again = one(providers.saw(provider_v2("svc", "ev", 1, 1, 2)));
    assert_eq!(again.kind, ListKind::Prompts);
    // The resources' revision lists both resources and templates.
    let fetches = providers.saw(provider_v2("svc", "ev", 1, 2, 2));
    of_kind(&fetches, ListKind::Resources);
    of_kind(&fetches, ListKind::Templates);
    assert_eq!(fetches.len(), 2);
    let built = providers.build();
    assert_eq!(exposed(&providers), ["ev__one"]);
    assert!(built.surface.prompt("ev__one").is_some());
    assert_eq!(built.surface.providers().len(), 1);
    // Still served until the new lists arrive; the template routes URIs.
    let route = built.surface.route_uri("test://7").unwrap();
    assert_eq!(route.namespace, "ev");
    assert!(built.surface.route_uri("other://7").is_none());
}

#[test]
fn a_capability_taken_away_drops_its_lists() {
    let mut providers = providers();
    for fetch in providers.saw(provider_v2("svc", "ev", 1, 1, 1)) {
        let kind = fetch.kind;
        answer(
            &mut providers,
            fetch,
            &[if kind == ListKind::Resources {
                "x://1"
            } else {
                "p"
            }],
        );
    }
    assert!(providers.take_changed());
    let fewer = service(
        "svc",
        json!({"protocol": "tool-provider", "version": 2, "namespace": "ev",
               "capabilities": {"tools": {}}, "toolsRevision": 1}),
    );
    assert!(providers.saw(fewer).is_empty());
    assert!(providers.take_changed());
    let built = providers.build();
    assert!(built.surface.resources().is_empty());
    assert_eq!(built.surface.prompts().count(), 0);
    assert!(!built.surface.providers()[0].declares("logging"));
}

#[test]
fn a_uri_two_providers_list_belongs_to_the_first_by_namespace_order() {
    let mut providers = providers();
    // "zeta" arrives first, but "alpha" comes first by namespace order.
    for (id, namespace) in [("svc-z", "zeta"), ("svc-a", "alpha")] {
        for fetch in providers.saw(provider_v2(id, namespace, 1, 1, 1)) {
            let keys: &[&str] = match fetch.kind {
                ListKind::Resources => &["test://shared", "test://only-one"],
                _ => &[],
            };
            let keys: Vec<&str> = keys
                .iter()
                .copied()
                .filter(|key| namespace == "alpha" || *key == "test://shared")
                .collect();
            answer(&mut providers, fetch, &keys);
        }
    }
    let built = providers.build();
    assert_eq!(
        built.surface.route_uri("test://shared").unwrap().namespace,
        "alpha"
    );
    let uris: Vec<&str> = built
        .surface
        .resources()
        .iter()
        .map(|resource| resource.uri.as_str())
        .collect();
    assert_eq!(uris, ["test://shared", "test://only-one"]);
    assert_eq!(
        built.surface_conflicts,
        [SurfaceConflict::ResourceUri {
            uri: "test://shared".into(),
            holder: "alpha".into(),
            ignored: "zeta".into(),
        }]
    );
}

#[test]
fn prompts_are_namespaced_and_the_earliest_claim_wins() {
    let mut providers = providers();
    for (id, namespace, prompt) in [("svc-1", "a__b", "c"), ("svc-2", "a", "b__c")] {
        for fetch in providers.saw(provider_v2(id, namespace, 1, 1, 1)) {
            let names: &[&str] = if fetch.kind == ListKind::Prompts {
                &[prompt]
            } else {
                &[]
            };
            answer(&mut providers, fetch, names);
        }
    }
    let built = providers.build();
    let prompt = built.surface.prompt("a__b__c").unwrap();
    assert_eq!(prompt.namespace, "a__b");
    assert_eq!(prompt.prompt, "c");
    assert_eq!(prompt.listed_definition()["name"], "a__b__c");
    assert!(matches!(
        &built.surface_conflicts[..],
        [SurfaceConflict::PromptName { name, .. }] if name == "a__b__c"
    ));
}

#[test]
fn a_provider_that_lost_its_namespace_serves_nothing_else_either() {
    let mut providers = providers();
    for id in ["svc-1", "svc-2"] {
        for fetch in providers.saw(provider_v2(id, "ns", 1, 1, 1)) {
            let kind = fetch.kind;
            let key = format!("test://{id}");
            let keys: Vec<&str> = match kind {
                ListKind::Resources => vec![&key],
                _ => vec![],
            };
            answer(&mut providers, fetch, &keys);
        }
    }
    let built = providers.build();
    assert_eq!(built.surface.providers().len(), 1);
    assert!(built.surface.route_uri("test://svc-1").is_some());
    assert!(built.surface.route_uri("test://svc-2").is_none());
}
