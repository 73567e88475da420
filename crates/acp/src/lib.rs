//! The ACP front: an Agent Client Protocol (v1) agent on stdio whose
//! sessions each run their own agent loop, with the hub's tool providers as
//! tools.
//!
//! One editor connection carries any number of concurrent sessions, and
//! nothing of one session reaches another:
//!
//! - [`sessions::SessionTable`] maps `sessionId → session record`
//!   ([`session::Session`]: the agent's conversation and "always" answers,
//!   the in-flight prompt, pending permission requests, cancellation);
//!   [`sessions::Routes`] maps internal handles (tool calls, permission
//!   requests) back to their session, and the [`jobs::JobExecutor`] records
//!   each job's owning session. Everything is found by id; there is no
//!   broadcast listener.
//! - [`turn`] is the agent loop of one prompt, against any OpenAI-compatible
//!   Chat Completions endpoint ([`model`]).
//! - [`store`] is the append-only SQLite log sessions are loaded from.
//! - [`front`] wires the ACP requests to all of it and tears everything down
//!   once when the connection closes.

pub mod editor;
pub mod front;
pub mod guard;
pub mod ids;
pub mod jobs;
pub mod mcp;
pub mod model;
pub mod models;
pub mod modes;
pub mod options;
pub mod output;
pub mod permission;
pub mod prompt;
pub mod requests;
pub mod session;
pub mod sessions;
pub mod store;
pub mod tools;
pub mod turn;

use agent_client_protocol::v1::schema::{
    CancelNotification, CloseSessionRequest, InitializeRequest, ListSessionsRequest, PromptRequest,
    SetSessionConfigOptionRequest, SetSessionModeRequest,
};
use agent_client_protocol::{Agent, ConnectTo, UntypedMessage};
use requests::Checked;
use tokio::signal::unix::{signal, SignalKind};

pub use front::{Front, FrontError};
pub use options::{AcpOptions, FrontLimits, ModelOptions};

/// Serves ACP on this process's stdin and stdout until the editor closes the
/// connection (or SIGTERM / SIGINT), then tears everything down.
pub async fn run_stdio(options: AcpOptions) -> Result<(), FrontError> {
    run(options, agent_client_protocol::Stdio::new()).await
}

/// Serves ACP over `transport`.
pub async fn run(
    options: AcpOptions,
    transport: impl ConnectTo<Agent> + 'static,
) -> Result<(), FrontError> {
    let front = Front::start(&options).await?;
    let connection = Agent
        .v1()
        .name("switchboard-acp")
        .on_receive_request(
            {
                let front = front.clone();
                async move |Checked(request): Checked<InitializeRequest>, responder, _cx| {
                    responder.respond(front.initialize(request))
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let front = front.clone();
                async move |request: requests::NewSession, responder, cx| {
                    front.new_session(request, responder, cx);
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let front = front.clone();
                async move |request: requests::LoadSession, responder, cx| {
                    front.load_session(request, responder, cx);
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let front = front.clone();
                async move |request: requests::ResumeSession, responder, cx| {
                    front.resume_session(request, responder, cx);
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let front = front.clone();
                async move |Checked(request): Checked<ListSessionsRequest>, responder, _cx| {
                    front.list_sessions(request, responder);
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let front = front.clone();
                async move |Checked(request): Checked<CloseSessionRequest>, responder, _cx| {
                    front.close_session(request, responder);
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let front = front.clone();
                async move |Checked(request): Checked<PromptRequest>, responder, cx| {
                    front.prompt(request, responder, cx);
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let front = front.clone();
                async move |Checked(request): Checked<SetSessionModeRequest>, responder, cx| {
                    front.set_mode(request, responder, cx);
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            {
                let front = front.clone();
                async move |Checked(request): Checked<SetSessionConfigOptionRequest>,
                            responder,
                            cx| {
                    front.set_config_option(request, responder, cx);
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        // Last: every request no handler above took, answered with a
        // sentence that names the method.
        .on_receive_request(
            async move |request: UntypedMessage, responder, _cx| {
                tracing::info!(method = %request.method, "a request for a method this agent does not serve");
                responder.respond_with_error(requests::method_not_found(&request.method))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            {
                let front = front.clone();
                async move |notification: CancelNotification, _cx| {
                    front.cancel(notification);
                    Ok(())
                }
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_with(transport, {
            let front = front.clone();
            async move |cx| {
                wait_for_end(&cx).await;
                // Still inside the connection: the cancelled prompts' answers
                // are queued before the SDK drains and closes stdout.
                front.teardown().await;
                Ok(())
            }
        })
        .await;
    // After a transport error the connection ends without reaching the
    // teardown above; this runs it (once) in every case.
    front.teardown().await;
    connection.map_err(|error| FrontError::Connection(error.to_string()))
}

async fn wait_for_end(cx: &agent_client_protocol::v1::ConnectionTo<agent_client_protocol::Client>) {
    let (Ok(mut terminate), Ok(mut interrupt)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        cx.incoming_closed().await;
        return;
    };
    tokio::select! {
        _ = cx.incoming_closed() => {}
        _ = terminate.recv() => tracing::info!("SIGTERM"),
        _ = interrupt.recv() => tracing::info!("SIGINT"),
    }
}
