//! Where a session's updates go: to the editor as `session/update` with this
//! session's id, and to the session's stored log. One `SessionOutput` per
//! turn; nothing else sends updates for a session.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    ContentBlock, ContentChunk, SessionNotification, SessionUpdate, ToolCall, ToolCallUpdate,
};
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::Client;
use serde_json::Value;

use crate::store::{EventKind, Store};

#[derive(Clone)]
pub struct SessionOutput {
    cx: ConnectionTo<Client>,
    store: Arc<Store>,
    session_id: String,
    turn: u64,
}

impl SessionOutput {
    pub fn new(cx: ConnectionTo<Client>, store: Arc<Store>, session_id: &str, turn: u64) -> Self {
        SessionOutput {
            cx,
            store,
            session_id: session_id.to_owned(),
            turn,
        }
    }

    pub fn connection(&self) -> &ConnectionTo<Client> {
        &self.cx
    }

    /// Records and sends one update. Sending only queues it: updates of one
    /// session reach the editor in the order they were produced, and before
    /// the answer to the prompt they belong to.
    pub fn update(&self, update: SessionUpdate) {
        match serde_json::to_value(&update) {
            Ok(json) => self
                .store
                .append(&self.session_id, self.turn, EventKind::Update, &json),
            Err(error) => tracing::warn!(%error, "cannot encode an update for the store"),
        }
        let notification = SessionNotification::new(self.session_id.clone(), update);
        if let Err(error) = self.cx.send_notification(notification) {
            tracing::debug!(session = %self.session_id, %error, "cannot send an update");
        }
    }

    pub fn message_chunk(&self, text: String) {
        self.update(SessionUpdate::AgentMessageChunk(ContentChunk::new(
            ContentBlock::from(text),
        )));
    }

    pub fn thought_chunk(&self, text: String) {
        self.update(SessionUpdate::AgentThoughtChunk(ContentChunk::new(
            ContentBlock::from(text),
        )));
    }

    pub fn tool_call(&self, call: ToolCall) {
        self.update(SessionUpdate::ToolCall(call));
    }

    pub fn tool_call_update(&self, update: ToolCallUpdate) {
        self.update(SessionUpdate::ToolCallUpdate(update));
    }

    /// Records chat messages the turn added to the model's history.
    pub fn record_messages(&self, messages: &[Value]) {
        for message in messages {
            self.store
                .append(&self.session_id, self.turn, EventKind::Message, message);
        }
    }
}
