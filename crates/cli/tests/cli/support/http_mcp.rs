//! A streamable-HTTP MCP server on loopback, on the official `rmcp` server
//! (`StreamableHttpService`) behind hyper: one tool, `shout {text}`, and a
//! record of the headers every request carried. The ACP front's session
//! servers and `[modules.NAME] mcp_url` modules reach it.

use std::sync::{Arc, Mutex};

use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData,
    Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler};
use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

#[derive(Clone, Default)]
struct Shouter;

impl ServerHandler for Shouter {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("http-test-server", "0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tool: Tool = serde_json::from_value(json!({
            "name": "shout",
            "description": "Upper-cases the text",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        }))
        .expect("a valid tool");
        Ok(ListToolsResult::with_all_items(vec![tool]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let text = request
            .arguments
            .and_then(|arguments| arguments.get("text")?.as_str().map(str::to_uppercase))
            .ok_or_else(|| ErrorData::invalid_params("text is missing", None))?;
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]).into())
    }
}

pub struct HttpMcpServer {
    pub url: String,
    /// The headers of every request, in arrival order.
    seen: Arc<Mutex<Vec<hyper::HeaderMap>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for HttpMcpServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl HttpMcpServer {
    /// Serves on 127.0.0.1:0.
    pub async fn start() -> HttpMcpServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let service = StreamableHttpService::new(
            || Ok(Shouter),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default(),
        );
        let seen: Arc<Mutex<Vec<hyper::HeaderMap>>> = Arc::default();
        let recorded = seen.clone();
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let service = service.clone();
                let recorded = recorded.clone();
                let handler = hyper::service::service_fn(
                    move |request: hyper::Request<hyper::body::Incoming>| {
                        recorded.lock().unwrap().push(request.headers().clone());
                        let service = TowerToHyperService::new(service.clone());
                        hyper::service::Service::call(&service, request)
                    },
                );
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), handler)
                        .await;
                });
            }
        });
        HttpMcpServer { url, seen, accept }
    }

    /// The value of `header` on every request so far, in arrival order.
    pub fn seen(&self, header: &str) -> Vec<Option<String>> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|headers| {
                let value = headers.get(header)?.to_str().ok()?;
                Some(value.to_owned())
            })
            .collect()
    }
}

/// A "server" that answers every request with a web page.
pub async fn html_server() -> (String, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = crate::support::http_request::read_request(&mut stream).await;
                let page = "<html><body>Sign in</body></html>";
                let _ = stream
                    .write_all(
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                            page.len()
                        )
                        .as_bytes(),
                    )
                    .await;
            });
        }
    });
    (url, task)
}
