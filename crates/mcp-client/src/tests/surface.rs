//! The whole server as it wrote it: the capabilities and tool members
//! rmcp's model does not know, a list of several pages, requests by name,
//! tasks, and the server's own requests told apart by the call they name.

use super::*;
use crate::{CallTag, RequestError, ServerRequest};

/// A handler that declares sampling and answers each sample with the call
/// it was told the request belongs to.
struct Sampler;

impl Handler for Sampler {
    fn capabilities(&self) -> Value {
        json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": true}})
    }

    fn create_message(
        &self,
        request: ServerRequest,
    ) -> HandlerFuture<'_, Result<Value, switchboard_protocol::ErrorObject>> {
        let call = request
            .call
            .map_or("none".to_owned(), |tag: CallTag| tag.to_string());
        Box::pin(async move {
            Ok(json!({
                "role": "assistant",
                "content": {"type": "text", "text": format!("call {call}")},
                "model": "test",
            }))
        })
    }
}

async fn started_with(handler: Arc<dyn Handler>) -> Connection {
    within(
        "the start",
        start(test_server(&[]), &options(WAIT), handler),
    )
    .await
    .expect("the test server starts")
    .connection
}

fn value(raw: &RawValue) -> Value {
    serde_json::from_str(raw.get()).expect("JSON")
}

#[tokio::test]
async fn what_rmcp_does_not_know_is_kept() {
    let connection = started_with(Arc::new(())).await;
    let capabilities = connection.server_capabilities();
    assert_eq!(
        capabilities["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
    );
    let tools = connection.list_tools(WAIT).await.unwrap();
    let research = tools.iter().find(|t| t["name"] == "research").unwrap();
    assert_eq!(research["execution"], json!({"taskSupport": "required"}));
    connection.stop().await;
}

#[tokio::test]
async fn a_list_of_several_pages_is_read_whole_and_requests_go_by_name() {
    let connection = started_with(Arc::new(())).await;
    let resources = connection
        .list_all("resources/list", "resources", WAIT)
        .await
        .unwrap();
    let uris: Vec<&str> = resources.iter().filter_map(|r| r["uri"].as_str()).collect();
    assert_eq!(uris, ["test://text", "test://blob"]);
    let read = connection
        .request("resources/read", json!({"uri": "test://blob"}), WAIT)
        .await
        .unwrap();
    assert_eq!(value(&read)["contents"][0]["blob"], "AAECAw==");
    match connection
        .request("resources/read", json!({"uri": "test://nothing"}), WAIT)
        .await
    {
        Err(RequestError::Answered { error, .. }) => {
            assert_eq!(error.code, -32002);
            assert_eq!(
                error.data_as::<Value>(),
                Some(json!({"uri": "test://nothing"}))
            );
        }
        other => panic!("expected an error answer, got {other:?}"),
    }
    connection.stop().await;
}

#[tokio::test]
async fn a_call_with_a_task_answers_the_task_as_the_server_wrote_it() {
    let connection = started_with(Arc::new(())).await;
    let mut call = ToolCall::new("research", json!({"topic": "x", "seconds": 0}));
    call.task = Some(json!({"ttl": 60000}));
    let created = value(
        &within("the task", connection.call_tool(call))
            .await
            .unwrap(),
    );
    let task_id = created["task"]["taskId"].as_str().unwrap().to_owned();
    assert_eq!(created["task"]["ttl"], 60000);
    assert_eq!(created["task"]["pollInterval"], 100);
    let result = connection
        .request("tasks/result", json!({"taskId": task_id}), WAIT)
        .await
        .unwrap();
    let result = value(&result);
    assert_eq!(result["content"][0]["text"], "research on x: done");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id.as_str()
    );
    let got = value(
        &connection
            .request("tasks/get", json!({"taskId": task_id}), WAIT)
            .await
            .unwrap(),
    );
    assert_eq!(got["status"], "completed");
    assert_eq!(got["pollInterval"], 100);
    connection.stop().await;
}

#[tokio::test]
async fn the_servers_requests_name_the_call_whose_progress_token_they_carry() {
    let connection = started_with(Arc::new(Sampler)).await;
    let client = value(
        &within(
            "client",
            connection.call_tool(ToolCall::new("client", json!({}))),
        )
        .await
        .unwrap(),
    );
    assert_eq!(
        client["structuredContent"]["capabilities"],
        json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {"listChanged": true}})
    );
    let mut linked = ToolCall::new("sample", json!({"link": "token"}));
    linked.tag = Some(7);
    let mut unlinked = ToolCall::new("sample", json!({}));
    unlinked.tag = Some(8);
    let (linked, unlinked) = within("two samples", async {
        tokio::join!(connection.call_tool(linked), connection.call_tool(unlinked))
    })
    .await;
    assert_eq!(
        value(&linked.unwrap())["structuredContent"]["content"]["text"],
        "call 7"
    );
    assert_eq!(
        value(&unlinked.unwrap())["structuredContent"]["content"]["text"],
        "call none"
    );
    connection.stop().await;
}
