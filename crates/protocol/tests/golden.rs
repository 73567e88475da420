//! Golden vectors: every wire shape of `hub-protocol.md` and `tool-calls.md`,
//! written by hand from the reference in `tests/golden/`, decoded into its type,
//! encoded again and compared with the file.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use switchboard_protocol::error::{
    GoneReason, InvalidParamsData, LimitExceededData, ReasonData, RequestTimeoutData,
    ServiceGoneData, TruncatedData, UnsupportedVersionData,
};
use switchboard_protocol::hub::{
    ActionParams, CancelParams, CatalogAction, Empty, InitializeParams, InitializeResult,
    NotifyParams, RegisterServiceParams, RegisterServiceResult, ReloadResult, RemovalReason,
    RequestParams, RoutedParams, Service, Snapshot, SubscribeParams, SubscribeResult,
    UnregisterServiceParams, UpdateServiceParams,
};
use switchboard_protocol::modules::{ModuleState, ModulesResult, RestartModuleParams};
use switchboard_protocol::tool_call::{
    validate_call_key, validate_origin_call_key, validate_schema_pin,
};
use switchboard_protocol::{CallOrigin, ErrorObject, Limits, Principal, ToolCallRequest};

/// The text of `tests/golden/<name>`.
fn vector(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn value(text: &str) -> Value {
    serde_json::from_str(text).expect("vector is JSON")
}

/// Decodes `text` as `T`, encodes it again, asserts the encoding equals the
/// vector as JSON, and returns the decoded value with its encoding.
fn round_trip<'a, T: Deserialize<'a> + Serialize>(text: &'a str) -> (T, String) {
    let decoded: T = serde_json::from_str(text).expect("vector decodes");
    let encoded = serde_json::to_string(&decoded).expect("value encodes");
    assert_eq!(
        value(&encoded),
        value(text),
        "re-encoding differs from the vector"
    );
    (decoded, encoded)
}

/// A raw member keeps its bytes: the vector holds `expected` verbatim, the
/// decoded raw value is exactly `expected`, and so is what is encoded again.
fn assert_raw(vector: &str, raw: &RawValue, encoded: &str, expected: &str) {
    assert!(vector.contains(expected), "vector lacks {expected}");
    assert_eq!(raw.get(), expected);
    assert!(
        encoded.contains(expected),
        "encoding lost the bytes of {expected}"
    );
}

/// Bytes that a decode-and-re-encode through `serde_json::Value` would change
/// (spacing, `1.50`, an integer beyond 64 bits).
const METADATA: &str = r#"{"protocol": "tool-provider", "version": 1, "namespace": "git",  "toolsRevision": 3, "weight": 1.50}"#;
const NOTIFY_PAYLOAD: &str =
    r#"{"path": "/tmp/a b",  "mtime": 1700000000.50, "big": 123456789012345678901234567890}"#;

// ---- hub-protocol.md -----------------------------------------------------------

#[test]
fn initialize_params_round_trip_and_are_all_optional() {
    let text = vector("initialize_params.json");
    let (params, _) = round_trip::<InitializeParams>(&text);
    assert_eq!(params.client_info.unwrap().name, "explorer");
    let (empty, _) = round_trip::<InitializeParams>("{}");
    assert!(empty.channel.is_none() && empty.auth_token.is_none());
}

#[test]
fn initialize_result_round_trips() {
    let text = vector("initialize_result.json");
    let (result, _) = round_trip::<InitializeResult>(&text);
    assert_eq!(result.principal, Principal::Direct);
    assert_eq!(result.limits, Limits::default());
}

#[test]
fn limits_default_matches_the_spec_table() {
    let text = vector("limits_default.json");
    let (limits, _) = round_trip::<Limits>(&text);
    assert_eq!(limits, Limits::default());
    assert_eq!(
        serde_json::to_value(Limits::default()).unwrap(),
        value(&text)
    );
}

#[test]
fn service_round_trips_with_metadata_bytes_intact() {
    let text = vector("service.json");
    let (service, encoded) = round_trip::<Service>(&text);
    assert_eq!(service.principal, Principal::reserved("git"));
    assert_raw(&text, &service.metadata, &encoded, METADATA);
}

#[test]
fn snapshot_round_trips() {
    let text = vector("snapshot.json");
    let (snapshot, _) = round_trip::<Snapshot>(&text);
    assert_eq!(snapshot.from_seq, 17);
    assert_eq!(snapshot.state.services.len(), 2);
}

#[test]
fn subscribe_params_and_result_round_trip() {
    let text = vector("subscribe_params.json");
    let (params, _) = round_trip::<SubscribeParams>(&text);
    assert_eq!(params.channel, "ahp-client-services://");
    let text = vector("subscribe_result.json");
    let (result, _) = round_trip::<SubscribeResult>(&text);
    assert!(result.snapshot.state.services.is_empty());
}

#[test]
fn action_added_round_trips_with_metadata_bytes_intact() {
    let text = vector("action_added.json");
    let (params, encoded) = round_trip::<ActionParams>(&text);
    let CatalogAction::Added { service } = params.action else {
        panic!("not an added action: {:?}", params.action);
    };
    let metadata = r#"{"protocol": "tool-provider",  "version": 1, "namespace": "git"}"#;
    assert_raw(&text, &service.metadata, &encoded, metadata);
}

#[test]
fn action_removed_round_trips_and_names_each_reason() {
    let text = vector("action_removed.json");
    let (params, _) = round_trip::<ActionParams>(&text);
    assert!(matches!(
        params.action,
        CatalogAction::Removed {
            reason: RemovalReason::Hidden,
            ..
        }
    ));
    for (reason, wire) in [
        (RemovalReason::Unregistered, "unregistered"),
        (RemovalReason::Disconnected, "disconnected"),
        (RemovalReason::Hidden, "hidden"),
    ] {
        assert_eq!(serde_json::to_value(reason).unwrap(), json!(wire));
    }
    let type_last = r#"{"serviceId":"s","reason":"unregistered","type":"clientServices/removed"}"#;
    assert!(serde_json::from_str::<CatalogAction>(type_last).is_ok());
    let unknown = r#"{"type":"clientServices/renamed","serviceId":"s"}"#;
    assert!(serde_json::from_str::<CatalogAction>(unknown).is_err());
}

#[test]
fn action_updated_round_trips_with_metadata_bytes_intact() {
    let text = vector("action_updated.json");
    let (params, encoded) = round_trip::<ActionParams>(&text);
    let CatalogAction::Updated { metadata, .. } = &params.action else {
        panic!("not an updated action: {:?}", params.action);
    };
    let expected =
        r#"{"protocol": "tool-provider", "version": 1, "namespace": "git",  "toolsRevision": 4}"#;
    assert_raw(&text, metadata, &encoded, expected);
}

#[test]
fn register_service_params_keep_metadata_bytes() {
    let text = vector("register_service_params.json");
    let (params, encoded) = round_trip::<RegisterServiceParams>(&text);
    let expected = r#"{"protocol": "tool-provider", "version": 1, "namespace": "git",  "tags": ["vcs", "local"]}"#;
    assert_raw(&text, params.metadata, &encoded, expected);
}

#[test]
fn register_service_result_round_trips() {
    let text = vector("register_service_result.json");
    let (result, _) = round_trip::<RegisterServiceResult>(&text);
    assert_eq!(result.service_id, "svc_4f9c2b7e1a3d5086");
}

#[test]
fn unregister_and_update_service_params_round_trip() {
    let text = vector("unregister_service_params.json");
    round_trip::<UnregisterServiceParams>(&text);
    let text = vector("update_service_params.json");
    let (params, encoded) = round_trip::<UpdateServiceParams>(&text);
    let expected = r#"{"protocol": "tool-provider", "version": 1,  "toolsRevision": 4}"#;
    assert_raw(&text, params.metadata, &encoded, expected);
}

#[test]
fn empty_result_is_an_empty_object() {
    let text = vector("empty_result.json");
    let (_, encoded) = round_trip::<Empty>(&text);
    assert_eq!(encoded, "{}");
}

#[test]
fn notify_params_keep_payload_bytes() {
    let text = vector("notify_params.json");
    let (params, encoded) = round_trip::<NotifyParams>(&text);
    assert_raw(&text, params.params.unwrap(), &encoded, NOTIFY_PAYLOAD);
}

#[test]
fn notify_params_keep_a_null_payload() {
    let text = vector("notify_params_null.json");
    let (params, _) = round_trip::<NotifyParams>(&text);
    assert_eq!(params.params.map(RawValue::get), Some("null"));
}

#[test]
fn request_params_keep_payload_bytes_and_timeout() {
    let text = vector("request_params.json");
    let (params, encoded) = round_trip::<RequestParams>(&text);
    let expected = r#"{"name": "status",  "arguments": {"verbose": true}}"#;
    assert_raw(&text, params.params.unwrap(), &encoded, expected);
    assert_eq!(params.timeout_ms, Some(5000));
}

#[test]
fn request_params_keep_a_null_payload() {
    let text = vector("request_params_null.json");
    let (params, _) = round_trip::<RequestParams>(&text);
    assert_eq!(params.params.map(RawValue::get), Some("null"));
}

#[test]
fn handle_request_params_keep_payload_bytes() {
    let text = vector("handle_request_params.json");
    let (params, encoded) = round_trip::<RoutedParams>(&text);
    assert_eq!(params.sender_principal, Principal::reserved("explorer"));
    let expected = r#"{"name": "status",  "arguments": {"verbose": true}}"#;
    assert_raw(&text, params.params.as_deref().unwrap(), &encoded, expected);
}

#[test]
fn handle_request_params_keep_a_null_payload() {
    let text = vector("handle_request_params_null.json");
    let (params, _) = round_trip::<RoutedParams>(&text);
    assert_eq!(params.params.as_deref().map(RawValue::get), Some("null"));
}

#[test]
fn notification_params_keep_payload_bytes() {
    let text = vector("notification_params.json");
    let (params, encoded) = round_trip::<RoutedParams>(&text);
    assert_eq!(params.sender_principal, Principal::Unverified);
    assert_raw(
        &text,
        params.params.as_deref().unwrap(),
        &encoded,
        NOTIFY_PAYLOAD,
    );
}

#[test]
fn cancel_params_keep_the_id_bytes() {
    let text = vector("cancel_params.json");
    let (params, encoded) = round_trip::<CancelParams>(&text);
    assert_raw(&text, params.id, &encoded, r#""req-17""#);
}

// ---- principals ----------------------------------------------------------------

#[test]
fn principals_are_tagged_by_kind() {
    for (name, principal) in [
        ("principal_reserved.json", Principal::reserved("explorer")),
        ("principal_direct.json", Principal::Direct),
        ("principal_unverified.json", Principal::Unverified),
    ] {
        let text = vector(name);
        let (decoded, _) = round_trip::<Principal>(&text);
        assert_eq!(decoded, principal);
        assert!(serde_json::to_value(&principal).unwrap()["kind"].is_string());
    }
    for bad in [
        r#""direct""#,
        r#"{"kind":"root"}"#,
        r#"{"kind":"reserved"}"#,
    ] {
        assert!(
            serde_json::from_str::<Principal>(bad).is_err(),
            "{bad} decoded"
        );
    }
}

// ---- tool-calls.md ---------------------------------------------------------------

#[test]
fn minimal_tool_call_request_encodes_exactly_name_and_arguments() {
    let text = vector("tool_call_request_minimal.json");
    let (request, encoded) = round_trip::<ToolCallRequest>(&text);
    assert_eq!(encoded, text.trim());
    let built = ToolCallRequest::new("read_file", request.arguments.clone());
    assert_eq!(built, request);
    assert_eq!(serde_json::to_string(&built).unwrap(), text.trim());
}

#[test]
fn full_tool_call_request_round_trips_with_every_carrier_kind() {
    for (name, carrier) in [
        ("tool_call_request_full.json", Principal::reserved("acp")),
        ("tool_call_request_origin_direct.json", Principal::Direct),
        (
            "tool_call_request_origin_unverified.json",
            Principal::Unverified,
        ),
    ] {
        let text = vector(name);
        let (request, encoded) = round_trip::<ToolCallRequest>(&text);
        let origin = request.origin.as_ref().expect("origin");
        assert_eq!(origin.carrier, carrier, "{name}");
        assert_eq!(
            value(&encoded)["origin"]["carrier"]["kind"],
            value(&text)["origin"]["carrier"]["kind"]
        );
        assert_eq!(request.validate(), Ok(()), "{name}");
    }
}

#[test]
fn full_tool_call_request_keeps_arguments_and_progress_token_bytes() {
    let text = vector("tool_call_request_full.json");
    let (request, encoded) = round_trip::<ToolCallRequest>(&text);
    let arguments =
        r#"{"path": "/etc/hosts",  "limit": 1.50, "offset": 123456789012345678901234567890}"#;
    assert_raw(&text, &request.arguments, &encoded, arguments);
    let token = request.progress_token.as_deref().unwrap();
    assert_raw(&text, token, &encoded, r#"{"opaque": [1, "two"]}"#);
    let expected = ToolCallRequest {
        name: "read_file".into(),
        arguments: request.arguments.clone(),
        tool_call_id: Some("toolu_01A09q90qw90lq917835lq9".into()),
        progress_token: request.progress_token.clone(),
        call_key: Some("wal:7f3c9a2e-4b1d-4e8f-9a6c-2d5e8f1b3c7a".into()),
        schema_pin: Some(
            "tp1:read_file:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08:0"
                .into(),
        ),
        origin: Some(CallOrigin::new(
            Principal::reserved("acp"),
            "acp:session-9/turn-3/call-1",
        )),
        client: None,
        task: None,
    };
    assert_eq!(request, expected);
}

#[test]
fn version_2_members_client_and_task_round_trip() {
    let text = vector("tool_call_request_v2.json");
    let (request, encoded) = round_trip::<ToolCallRequest>(&text);
    let client = request.client.as_ref().expect("a client member");
    assert_eq!(client.service, "svc-0123456789abcdef0123456789abcdef");
    assert!(client.declares("sampling") && client.declares("elicitation"));
    assert!(!client.declares("roots"));
    let task = request.task.as_deref().expect("a task member");
    assert_raw(&text, task, &encoded, r#"{"ttl": 60000}"#);
    // Absent, both are left out: the shape version-1 consumers send.
    let bare = ToolCallRequest::new("echo", RawValue::from_string("{}".into()).unwrap());
    let encoded = serde_json::to_string(&bare).unwrap();
    assert_eq!(encoded, r#"{"name":"echo","arguments":{}}"#);
}

#[test]
fn tool_call_request_with_unknown_members_decodes_and_drops_them() {
    let text = vector("tool_call_request_unknown_members.json");
    let request: ToolCallRequest = serde_json::from_str(&text).expect("unknown members tolerated");
    let mut expected = value(&text);
    expected.as_object_mut().unwrap().remove("deadline_ms");
    expected.as_object_mut().unwrap().remove("x_trace");
    expected["origin"].as_object_mut().unwrap().remove("hops");
    assert_eq!(serde_json::to_value(&request).unwrap(), expected);
}

#[test]
fn bare_string_carrier_is_refused() {
    let text = vector("tool_call_request_bare_string_carrier.json");
    assert!(serde_json::from_str::<ToolCallRequest>(&text).is_err());
    assert!(serde_json::from_str::<CallOrigin>(r#"{"carrier":"direct","call_key":"k"}"#).is_err());
}

// ---- errors --------------------------------------------------------------------

#[test]
fn error_object_keeps_data_bytes() {
    let text = vector("error_object.json");
    let (object, encoded) = round_trip::<ErrorObject>(&text);
    assert_eq!(
        (object.code, object.message.as_str()),
        (-32001, "disk full")
    );
    let data = r#"{"path": "/var",  "free": 0, "ratio": 1.50}"#;
    assert_raw(&text, object.data.as_deref().unwrap(), &encoded, data);
    let (bare, encoded) = round_trip::<ErrorObject>(r#"{"code":-32603,"message":"x"}"#);
    assert!(bare.data.is_none() && !encoded.contains("data"));
}

#[test]
fn error_data_shapes_round_trip() {
    let (data, _) = round_trip::<ReasonData>(&vector("error_data_not_initialized.json"));
    assert_eq!(data.reason, "notInitialized");
    let (data, _) = round_trip::<InvalidParamsData>(&vector("error_data_invalid_params.json"));
    assert_eq!(data.field, "timeoutMs");
    let (data, _) =
        round_trip::<UnsupportedVersionData>(&vector("error_data_unsupported_version.json"));
    assert_eq!(data.supported_versions, ["1.0.0"]);
    let (data, _) = round_trip::<LimitExceededData>(&vector("error_data_limit_exceeded.json"));
    assert_eq!(data.limit, "maxInFlightPerClient");
    let (data, _) = round_trip::<RequestTimeoutData>(&vector("error_data_request_timeout.json"));
    assert_eq!(data.timeout_ms, 60000);
    let (data, _) =
        round_trip::<ServiceGoneData>(&vector("error_data_service_gone_disconnected.json"));
    assert_eq!(data.reason, GoneReason::Disconnected);
    let (data, _) =
        round_trip::<ServiceGoneData>(&vector("error_data_service_gone_unregistered.json"));
    assert_eq!(data.reason, GoneReason::Unregistered);
    let (data, _) = round_trip::<TruncatedData>(&vector("error_data_truncated.json"));
    assert!(data.truncated);
}

#[test]
fn token_errors_answer_invalid_params_with_field_and_reason() {
    for (name, error) in [
        ("token_error_empty.json", validate_origin_call_key("")),
        (
            "token_error_too_long.json",
            validate_call_key(&"k".repeat(257)),
        ),
        (
            "token_error_invalid_character.json",
            validate_schema_pin("tp1 x"),
        ),
    ] {
        let error = error.unwrap_err();
        let object = error.to_error_object();
        assert_eq!(object.code, -32602, "{name}");
        assert_eq!(
            object.data_as::<Value>(),
            Some(value(&vector(name))),
            "{name}"
        );
        assert!(object.message.starts_with(error.field().name()), "{name}");
    }
    let too_long = validate_call_key(&"k".repeat(257)).unwrap_err();
    assert_eq!(
        too_long.to_error_object().message,
        "call_key is 257 bytes; at most 256 are allowed"
    );
}

#[test]
fn modules_result_round_trips_and_leaves_out_what_a_state_lacks() {
    let text = vector("modules_result.json");
    let (result, encoded) = round_trip::<ModulesResult>(&text);
    let states: Vec<ModuleState> = result.modules.iter().map(|m| m.state).collect();
    assert_eq!(
        states,
        [
            ModuleState::Running,
            ModuleState::GivenUp,
            ModuleState::Backoff,
            ModuleState::NeedsLogin
        ]
    );
    assert_eq!(result.modules[0].pid, Some(4242));
    // A remote module behind OAuth: its login's members beside the others;
    // a module without OAuth has none of them.
    let oauth = result.modules[3].oauth.as_ref().expect("the login");
    assert_eq!(oauth.url, "https://mcp.example.com/t");
    assert_eq!(oauth.client_id.as_deref(), Some("switchboard-desktop"));
    assert_eq!(oauth.redirect_port, Some(8976));
    assert_eq!(oauth.scopes, ["wiki:read", "wiki:write"]);
    assert!(result.modules[..3].iter().all(|m| m.oauth.is_none()));
    assert_eq!(result.modules[2].retry_in_ms, Some(500));
    // A module that does not run has no pid or uptime members at all.
    let given_up = &value(&encoded)["modules"][1];
    assert!(given_up.get("pid").is_none() && given_up.get("uptimeMs").is_none());
    round_trip::<RestartModuleParams>(&vector("restart_module_params.json"));
}

#[test]
fn reload_result_names_module_changes_only_when_there_are_some() {
    let (result, _) = round_trip::<ReloadResult>(&vector("reload_result_modules.json"));
    assert_eq!(result.modules.added, ["fs"]);
    assert_eq!(result.modules.restarted, ["git"]);
    let (result, encoded) = round_trip::<ReloadResult>(&vector("reload_result.json"));
    assert!(result.modules.is_empty());
    assert!(value(&encoded).get("modules").is_none());
}
