use super::*;
use crate::admission::{Admission, Slot};
use crate::conn::Transport;
use crate::policy::{Grant, Selector};
use switchboard_protocol::Limits;

/// explorer may notify git's services, or may not.
fn policy(explorer_notifies_git: bool) -> Arc<Policy> {
    let grants = if explorer_notifies_git {
        vec![Grant::new(
            Selector::named("explorer"),
            Selector::named("git"),
            &[Action::Notify],
        )]
    } else {
        Vec::new()
    };
    Arc::new(Policy::new(
        "direct-token",
        vec![
            ("explorer".into(), "explorer-token".into()),
            ("git".into(), "git-token".into()),
        ],
        grants,
        false,
        Vec::new(),
    ))
}

fn connection(admission: &Admission, token: &str) -> (Arc<Conn>, Identity) {
    let Some(Slot::Connection(slot)) = admission.at_accept() else {
        panic!("a connection slot is free");
    };
    let conn = admission
        .admit(slot, Transport::Unix, &Limits::default())
        .expect("admitted");
    let principal = policy(false)
        .authenticate(Some(token))
        .expect("a known token")
        .principal;
    (conn, Identity::new(format!("c-{token}"), principal, None))
}

/// `LastRoute` is the notify path's shortcut past the catalog and the
/// policy; each way it could go stale is checked here, including a
/// route something else still holds (a request being routed) when its
/// service leaves, which no black-box test can arrange.
#[test]
fn the_last_route_holds_only_while_its_service_is_listed_and_the_policy_unchanged() {
    let registry = Registry::new(policy(true), "svc-");
    let admission = Admission::new(4);
    let (git, git_identity) = connection(&admission, "git-token");
    let (explorer, explorer_identity) = connection(&admission, "explorer-token");
    let metadata = RawValue::from_string("{}".into()).expect("JSON");
    let register = || {
        registry
            .register(&git, &git_identity, &metadata, 10)
            .expect("registered")
    };
    let mut last = LastRoute::default();
    let mut notify_route = |id: &str| {
        registry
            .notify_route(&mut last, &explorer, &explorer_identity, id)
            .map(|(route, allowed)| (route.id.to_string(), allowed))
    };

    let first = register();
    assert_eq!(notify_route(&first), Some((first.to_string(), true)));
    let held = registry.route(&first).expect("listed");
    registry.unregister(&git, &first).expect("unregistered");
    assert_eq!(notify_route(&first), None);
    drop(held);

    let second = register();
    assert_eq!(notify_route(&second), Some((second.to_string(), true)));
    assert_eq!(notify_route(&second), Some((second.to_string(), true)));
    // A sender moving between two services (a fan-out) gets each
    // service's own route, on a miss and on the hit after it.
    let third = register();
    for id in [&third, &third, &second, &third, &second, &second] {
        assert_eq!(notify_route(id), Some((id.to_string(), true)));
    }
    registry.unregister(&git, &third).expect("unregistered");
    assert_eq!(notify_route(&third), None);
    registry.replace_policy(policy(false));
    assert_eq!(notify_route(&second), Some((second.to_string(), false)));
    registry.replace_policy(policy(true));
    assert_eq!(notify_route(&second), Some((second.to_string(), true)));

    // Its owner gone (the catalog drops every route of a connection).
    let held = registry.route(&second).expect("listed");
    registry.remove_connection(&git);
    assert_eq!(notify_route(&second), None);
    drop(held);
    assert_eq!(notify_route(&first), None);
}

#[test]
fn only_callback_true_or_no_callback_member_is_accepted() {
    let flag = |text: &str| callback_flag(&RawValue::from_string(text.into()).expect("JSON"));
    assert_eq!(flag("{}"), Ok(false));
    assert_eq!(
        flag(r#"{"protocol":"mcp-client","nested":{"callback":1}}"#),
        Ok(false)
    );
    assert_eq!(flag(r#"{"a":[1,{"b":"}"}],"callback":true}"#), Ok(true));
    assert_eq!(flag(r#"{ "callback" : true }"#), Ok(true));
    // An escaped key is the same key.
    assert_eq!(flag(r#"{"call\u0062ack":true}"#), Ok(true));
    for refused in [
        r#"{"callback":false}"#,
        r#"{"callback":"yes"}"#,
        r#"{"callback":"true"}"#,
        r#"{"callback":null}"#,
        r#"{"callback":1}"#,
        r#"{"callback":{}}"#,
    ] {
        assert_eq!(flag(refused), Err(CallbackFlagError::NotTrue), "{refused}");
    }
    assert_eq!(
        flag(r#"{"callback":true,"callback":true}"#),
        Err(CallbackFlagError::Repeated)
    );
}
