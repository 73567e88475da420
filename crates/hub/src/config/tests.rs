use super::*;
use switchboard_protocol::Principal;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, Path::new("/nonexistent/switchboard.toml"))
}

#[test]
fn principals_grants_and_limits() {
    let config = parse(
        r#"
        [hub]
        allowed_origins = ["http://localhost:3000"]
        [limits]
        maxConnections = 7
        [principals.explorer]
        token = "explorer-token-0123"
        [principals.git]
        token = "git-token-01234567"
        [[grants]]
        from = "explorer"
        to = "git"
        allow = ["discover", "request"]
        "#,
    )
    .unwrap();
    assert_eq!(config.limits.max_connections, 7);
    assert_eq!(config.limits.max_method_bytes, 256);
    let policy = config.policy("d-token");
    let explorer = Principal::reserved("explorer");
    let git = Principal::reserved("git");
    assert!(policy.allows(&explorer, &git, Action::Request));
    assert!(!policy.allows(&explorer, &git, Action::Notify));
    assert!(policy.origin_allowed("http://localhost:3000"));
}

#[test]
fn a_parse_error_names_the_place_but_never_quotes_a_token() {
    let error = parse("[principals.a]\ntoken = \"s3cret-a\" oops\n").unwrap_err();
    let text = error.to_string();
    assert!(text.contains("line 2, column"), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
    let error = parse("[principals]\na = \"s3cret-b\"\n").unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("line 2") && text.contains("invalid type"),
        "{text}"
    );
    assert!(!text.contains("s3cret"), "{text}");
}

#[test]
fn grants_may_name_principals_of_other_hubs() {
    let config = parse(
        r#"
        [principals.git]
        token = "git-token-01234567"
        [[grants]]
        from = "laptop/explorer"
        to = "git"
        allow = ["request"]
        [[grants]]
        from = "git"
        to = "server/*"
        allow = ["discover"]
        "#,
    )
    .unwrap();
    let policy = config.policy("d");
    let git = Principal::reserved("git");
    let explorer = Principal::reserved("explorer").on_hub("laptop");
    assert!(policy.allows(&explorer, &git, Action::Request));
    assert!(policy.allows(&git, &Principal::Direct.on_hub("server"), Action::Discover));
    for bad in ["Laptop/explorer", "laptop/", "/git", "a/b/c"] {
        let text = format!("[[grants]]\nfrom = \"{bad}\"\nto = \"*\"\nallow = [\"notify\"]\n");
        let error = parse(&text).unwrap_err().to_string();
        assert!(error.contains("HUB/NAME"), "{bad}: {error}");
    }
}

#[test]
fn grants_may_name_direct_and_unverified_here_and_on_other_hubs() {
    let config = parse(
        r#"
        [principals.git]
        token = "git-token-01234567"
        [[grants]]
        from = "b/direct"
        to = "direct"
        allow = ["request"]
        [[grants]]
        from = "direct"
        to = "a/direct"
        allow = ["discover", "request"]
        [[grants]]
        from = "unverified"
        to = "git"
        allow = ["notify"]
        [[grants]]
        from = "b/unverified"
        to = "unverified"
        allow = ["discover"]
        "#,
    )
    .unwrap();
    let policy = config.policy("d");
    let direct_on_b = Principal::Direct.on_hub("b");
    assert!(policy.allows(&direct_on_b, &Principal::Direct, Action::Request));
    assert!(!policy.allows(&direct_on_b, &Principal::Direct, Action::Discover));
    assert!(!policy.allows(&direct_on_b, &Principal::reserved("git"), Action::Request));
    assert!(policy.allows(
        &Principal::Unverified,
        &Principal::reserved("git"),
        Action::Notify
    ));
    let unverified_on_b = Principal::Unverified.on_hub("b");
    assert!(policy.allows(&unverified_on_b, &Principal::Unverified, Action::Discover));
    let described = policy.describe();
    assert_eq!(described["grants"][0]["from"], "b/direct");
    assert_eq!(described["grants"][0]["to"], "direct");

    // Names of nothing are still mistakes, each named.
    for (from, to, named) in [
        ("*", "nobody", "\"nobody\" is not a principal"),
        ("Direct", "*", "\"Direct\" is not a principal"),
        ("direct", "b/", "HUB/NAME"),
    ] {
        let text = format!("[[grants]]\nfrom = \"{from}\"\nto = \"{to}\"\nallow = [\"request\"]\n");
        let error = parse(&text).unwrap_err().to_string();
        assert!(error.contains(named), "{from} -> {to}: {error}");
        assert!(error.contains("grant #1"), "{error}");
    }
    // No section may take their names.
    for name in ["direct", "unverified"] {
        let error = parse(&format!("[principals.{name}]\ntoken = \"x\"\n")).unwrap_err();
        let text = error.to_string();
        assert!(text.contains("one of the hub's own principals"), "{text}");
    }
}

#[test]
fn the_federation_section_is_checked() {
    let config = parse(
        "[federation]\nnats = \"nats://127.0.0.1:4222\"\nname = \"laptop\"\ncredentials = \"l.creds\"\nserviceTtlMs = 2000\n",
    )
    .unwrap();
    let federation = config.federation.unwrap();
    assert_eq!(federation.name.as_deref(), Some("laptop"));
    assert_eq!(federation.service_ttl_ms, Some(2000));
    assert_eq!(
        federation.credentials.unwrap(),
        Path::new("/nonexistent/l.creds")
    );
    let error = parse("[federation]\nname = \"Laptop\"\n").unwrap_err();
    assert!(error.to_string().contains("not a hub name"), "{error}");
    let error = parse("[federation]\nnmae = \"x\"\n").unwrap_err();
    assert!(error.to_string().contains("nmae"), "{error}");
}

#[test]
fn token_file_is_relative_to_the_config() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("tokens")).unwrap();
    let file = dir.path().join("tokens/git");
    std::fs::write(&file, "secret-git-0123456789\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let path = dir.path().join("switchboard.toml");
    std::fs::write(&path, "[principals.git]\ntoken_file = \"tokens/git\"\n").unwrap();
    let config = Config::load(&path).unwrap();
    assert_eq!(
        config.principals,
        vec![("git".into(), "secret-git-0123456789".into())]
    );
}

#[test]
fn mistakes_are_named() {
    let error = parse("[principals.a]\ntoken = \"x\"\ntoken_file = \"y\"\n").unwrap_err();
    assert!(error
        .to_string()
        .contains("exactly one of token or token_file"));
    let error =
        parse("[[grants]]\nfrom = \"ghost\"\nto = \"*\"\nallow = [\"notify\"]\n").unwrap_err();
    assert!(error.to_string().contains("\"ghost\" is not a principal"));
    let error = parse(
        "[principals.a]\ntoken = \"a-token-0123456789\"\n[[grants]]\nfrom = \"a\"\nto = \"*\"\nallow = [\"write\"]\n",
    )
    .unwrap_err();
    assert!(error.to_string().contains("unknown action \"write\""));
    let error = parse("[limits]\nmaxConections = 1\n").unwrap_err();
    assert!(error.to_string().contains("maxConections"));
    let error = parse("[dashboard]\nlogin_code_seconds = 0\n").unwrap_err();
    assert!(error.to_string().contains("from 1 to 600"), "{error}");
    let error = parse("[dashboard]\nenable = false\n").unwrap_err();
    assert!(error.to_string().contains("enable"), "{error}");
    let config = parse("[dashboard]\nenabled = false\n").unwrap();
    assert!(!config.dashboard.enabled);
    assert!(parse("").unwrap().dashboard.enabled);
    let error = parse("[hub]\nallow_unverifed = true\n").unwrap_err();
    assert!(error.to_string().contains("allow_unverifed"));
    let error =
        parse("[principals.a]\ntoken = \"shared-token-01234\"\n[principals.b]\ntoken = \"shared-token-01234\"\n").unwrap_err();
    assert!(error.to_string().contains("same as another"));
    let error = parse("[principals.a]\ntoken = \"sb-launch-0123456789\"\n").unwrap_err();
    assert!(error.to_string().contains("launch credential"), "{error}");
}

#[test]
fn modules_are_principals_for_grants_but_not_beside_one_of_their_name() {
    let config = parse(
        "[principals.explorer]\ntoken = \"explorer-token-0123\"\n[modules.git]\ncommand = \"git-sidecar\"\n\
         [[grants]]\nfrom = \"explorer\"\nto = \"git\"\nallow = [\"request\"]\n",
    )
    .unwrap();
    assert_eq!(config.modules.len(), 1);
    let policy = config.policy("d");
    let explorer = Principal::reserved("explorer");
    assert!(policy.allows(&explorer, &Principal::reserved("git"), Action::Request));

    let error =
        parse("[principals.git]\ntoken = \"git-token-01234567\"\n[modules.git]\ncommand = \"x\"\n")
            .unwrap_err();
    assert!(
        error.to_string().contains("a module has this name too"),
        "{error}"
    );
    let error = parse("\n[modules.git]\ncommand = \"\"\n").unwrap_err();
    assert_eq!(
        error.to_string(),
        "config file /nonexistent/switchboard.toml, line 3: module \"git\": command is empty"
    );
}

#[test]
fn a_short_token_or_a_token_file_others_can_read_is_refused_with_the_fix() {
    let error = parse("[principals.a]\ntoken = \"short-15-bytes!\"\n").unwrap_err();
    let text = error.to_string();
    assert!(text.contains("15 bytes; at least 16"), "{text}");
    assert!(text.contains("switchboard token new a"), "{text}");
    assert!(
        !text.contains("short-15"),
        "the token is never quoted: {text}"
    );

    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.token");
    std::fs::write(&file, "a-token-of-32-bytes-0123456789ab\n").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let config = format!(
        "[principals.a]\ntoken_file = {:?}\n",
        file.display().to_string()
    );
    let text = Config::parse(&config, &dir.path().join("c.toml"))
        .unwrap_err()
        .to_string();
    assert!(text.contains("a.token"), "{text}");
    assert!(text.contains("mode 644"), "{text}");
    assert!(text.contains("chmod 600"), "{text}");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let config = Config::parse(&config, &dir.path().join("c.toml")).unwrap();
    let policy = config.policy("d-token-0123456789");
    assert!(policy
        .authenticate(Some("a-token-of-32-bytes-0123456789ab"))
        .is_some());
}

#[test]
fn an_acp_section_is_left_to_switchboard_acp() {
    let config = parse(
        r#"
        [limits]
        maxConnections = 7
        [acp.models.fast]
        url = "http://127.0.0.1:11434/v1"
        model = "small"
        "#,
    )
    .unwrap();
    assert_eq!(config.limits.max_connections, 7);
}

#[test]
fn a_principal_may_be_bound_to_a_profile_of_the_same_file() {
    let config = parse(
        r#"
        [profiles.coding]
        include = ["git__*"]
        [principals.laptop]
        token = "laptop-token-0123"
        profile = "coding"
        [principals.free]
        token = "free-token-012345"
        "#,
    )
    .unwrap();
    let policy = config.policy("d-token");
    assert_eq!(policy.profile_of("laptop"), Some("coding"));
    assert_eq!(policy.profile_of("free"), None);
    let error = parse(
        r#"
        [principals.laptop]
        token = "laptop-token-0123"
        profile = "nowhere"
        "#,
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("laptop") && error.contains("[profiles.nowhere]"),
        "{error}"
    );
}
