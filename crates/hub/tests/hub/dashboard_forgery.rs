//! The dashboard against forged requests (SECURITY.md, "The dashboard"):
//! a page of another site can make the user's browser send requests to the
//! hub (CSRF), but the dashboard changes nothing in the hub, serves no
//! method but GET, and what a cross-site request lacks (the `SameSite=Strict`
//! cookie) is what every change of the dashboard's own state needs.

use serde_json::{json, Value};
use switchboard_testkit::http::{self, HttpResponse};

use crate::support::*;

fn header<'a>(response: &'a HttpResponse, name: &str) -> Option<&'a str> {
    response.head.lines().skip(1).find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

async fn login_code(hub: &TestHub) -> String {
    let mut operator = hub.client("operator").await;
    let result = expect_result(&operator.request("hub/dashboardLogin", json!({})).await);
    operator.close().await;
    result["code"].as_str().unwrap().to_owned()
}

/// `METHOD path` with `headers`, as a page's form or `fetch` would send it.
async fn send(hub: &TestHub, method: &str, path: &str, headers: &[(&str, &str)]) -> HttpResponse {
    let address = http::address_of(&hub.ws);
    let mut request =
        format!("{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    raw(&address, request).await
}

/// A whole request, off the runtime's thread (the hub runs on it).
async fn raw(address: &str, request: String) -> HttpResponse {
    let address = address.to_owned();
    tokio::task::spawn_blocking(move || http::exchange(&address, &request))
        .await
        .unwrap()
}

/// The hub's own state, as a forged request could change it.
async fn state(hub: &TestHub) -> Value {
    let mut operator = hub.client("state").await;
    let snapshot = expect_result(
        &operator
            .request("subscribe", json!({"channel": "ahp-client-services://"}))
            .await,
    );
    operator.close().await;
    json!({
        "services": snapshot["snapshot"]["state"]["services"],
        "reloads": hub.metric("switchboard_config_reloads_total"),
    })
}

#[tokio::test]
async fn no_method_but_get_is_served_under_ui_so_no_form_changes_anything() {
    let hub = TestHub::start().await;
    let mut owner = hub.client("owner").await;
    owner.register(json!({"keep": true})).await;
    let before = state(&hub).await;
    let code = login_code(&hub).await;
    let session = {
        let response = send(&hub, "GET", &format!("/ui/login?code={code}"), &[]).await;
        assert_eq!(response.status, 303, "{}", response.head);
        header(&response, "set-cookie")
            .unwrap()
            .split(';')
            .next()
            .unwrap()
            .to_owned()
    };
    let fresh = login_code(&hub).await;
    let login = format!("/ui/login?code={fresh}");
    for method in ["POST", "PUT", "DELETE", "PATCH"] {
        for path in [
            "/ui/",
            "/ui/stream",
            "/ui/logout",
            login.as_str(),
            "/ui/static/app.js",
        ] {
            let response = send(&hub, method, path, &[("Cookie", &session)]).await;
            assert_eq!(response.status, 405, "{method} {path}: {}", response.head);
            assert!(header(&response, "set-cookie").is_none(), "{method} {path}");
        }
    }
    // The session still works, and the fresh code was not used up.
    let page = send(&hub, "GET", "/ui/", &[("Cookie", &session)]).await;
    assert_eq!(page.status, 200);
    let response = send(&hub, "GET", &login, &[]).await;
    assert_eq!(
        response.status, 303,
        "the code survived the forged requests"
    );
    assert_eq!(
        state(&hub).await,
        before,
        "a forged request changed the hub"
    );
}

#[tokio::test]
async fn a_cross_site_request_without_the_strict_cookie_ends_no_session() {
    let hub = TestHub::start().await;
    let code = login_code(&hub).await;
    let response = send(&hub, "GET", &format!("/ui/login?code={code}"), &[]).await;
    let cookie = header(&response, "set-cookie").unwrap();
    assert!(cookie.contains("SameSite=Strict"), "{cookie}");
    let session = cookie.split(';').next().unwrap().to_owned();
    // A top-level navigation from another site carries no cookie (Strict)
    // and no Origin (a GET): the logout it reaches ends nothing.
    let logout = send(&hub, "GET", "/ui/logout", &[]).await;
    assert_eq!(logout.status, 303);
    let page = send(&hub, "GET", "/ui/", &[("Cookie", &session)]).await;
    assert_eq!(page.status, 200, "the session survived a cookieless logout");
    // Nor does another session's cookie end this one.
    let other_code = login_code(&hub).await;
    let other = send(&hub, "GET", &format!("/ui/login?code={other_code}"), &[]).await;
    let other = header(&other, "set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let _ = send(&hub, "GET", "/ui/logout", &[("Cookie", &other)]).await;
    assert_eq!(
        send(&hub, "GET", "/ui/", &[("Cookie", &other)])
            .await
            .status,
        401
    );
    assert_eq!(
        send(&hub, "GET", "/ui/", &[("Cookie", &session)])
            .await
            .status,
        200
    );
    // Its own cookie does.
    let _ = send(&hub, "GET", "/ui/logout", &[("Cookie", &session)]).await;
    assert_eq!(
        send(&hub, "GET", "/ui/", &[("Cookie", &session)])
            .await
            .status,
        401
    );
}

#[tokio::test]
async fn a_login_code_is_useless_to_another_origin_and_once_used_to_anyone() {
    let hub = TestHub::start().await;
    let code = login_code(&hub).await;
    let path = format!("/ui/login?code={code}");
    // A page that learned the code (a `Referer`, the history) and tries it
    // from its own origin or a rebound name: 403, and the code is not spent.
    let address = http::address_of(&hub.ws);
    let port = address.rsplit(':').next().unwrap();
    let rebound = format!("attacker.example:{port}");
    for headers in [
        vec![("Origin", "http://attacker.example")],
        vec![("Origin", "null")],
    ] {
        let response = send(&hub, "GET", &path, &headers).await;
        assert_eq!(response.status, 403, "{headers:?}");
        assert!(header(&response, "set-cookie").is_none());
    }
    let rebound_request = format!("GET {path} HTTP/1.1\r\nHost: {rebound}\r\n\r\n");
    let response = raw(&address, rebound_request).await;
    assert_eq!(response.status, 403);
    // The user's own browser: in. The page never sees a Referer with the
    // code (no-referrer).
    let response = send(&hub, "GET", &path, &[]).await;
    assert_eq!(response.status, 303);
    assert_eq!(header(&response, "referrer-policy"), Some("no-referrer"));
    // Whoever comes next with the same code: 403, no cookie.
    let again = send(&hub, "GET", &path, &[]).await;
    assert_eq!(again.status, 403);
    assert!(header(&again, "set-cookie").is_none());
}
