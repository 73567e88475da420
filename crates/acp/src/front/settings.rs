//! A session's settings: `session/set_mode` and `session/set_config_option`.
//!
//! The config options are `mode` (the same modes as `session/set_mode`)
//! and `model` (the front's [`crate::models::ModelCatalog`]). A change
//! applies to that session only, at once in dispatch order (the next tool
//! call is gated by the new mode, the next prompt uses the new model), and
//! is answered only once it is stored: a client that reloads the session
//! right after the answer finds it as it left it.

use agent_client_protocol::v1::schema::{
    ConfigOptionUpdate, CurrentModeUpdate, SessionConfigOption, SessionConfigOptionCategory,
    SessionConfigOptionValue, SessionConfigSelectOption, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
    SetSessionModeResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Client, Error, JsonRpcResponse};

use super::open::to_stored;
use super::{answer, internal, invalid_params, send, table_error, Front};
use crate::modes::{self, Mode};
use crate::session::{Session, Settings};

/// The config option that is the session's mode.
pub const MODE_OPTION: &str = "mode";
/// The config option that is the session's model.
pub const MODEL_OPTION: &str = "model";

/// What changed and how, for the updates sent after the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Changed {
    /// By `session/set_mode`: announced as a `current_mode_update` and,
    /// for clients that follow config options, a `config_option_update`.
    ModeBySetMode,
    /// By `session/set_config_option` (whose answer holds the options):
    /// announced as a `current_mode_update` for clients that follow modes.
    ModeByOption,
    Model,
}

impl Front {
    /// The session's config options as they now are.
    pub(super) fn config_options(&self, settings: &Settings) -> Vec<SessionConfigOption> {
        let modes: Vec<SessionConfigSelectOption> = modes::ALL
            .iter()
            .map(|mode| {
                SessionConfigSelectOption::new(mode.id(), mode.name())
                    .description(mode.description().to_owned())
            })
            .collect();
        vec![
            SessionConfigOption::select(MODE_OPTION, "Mode", settings.mode.id(), modes)
                .category(SessionConfigOptionCategory::Mode)
                .description("How much the agent may do without asking.".to_owned()),
            SessionConfigOption::select(
                MODEL_OPTION,
                "Model",
                settings.model.clone(),
                self.models.select_options(),
            )
            .category(SessionConfigOptionCategory::Model)
            .description("The model this session's prompts go to.".to_owned()),
        ]
    }

    /// `session/set_mode`: switches that session only, and says so with a
    /// `current_mode_update` (after the answer).
    pub fn set_mode(
        &self,
        request: SetSessionModeRequest,
        responder: Responder<SetSessionModeResponse>,
        cx: ConnectionTo<Client>,
    ) {
        let id = request.session_id.0.to_string();
        let session = match self.sessions.get(&id) {
            Ok(session) => session,
            Err(error) => return answer(responder, Err(table_error(error))),
        };
        let Some(mode) = Mode::from_id(&request.mode_id.0) else {
            return answer(
                responder,
                Err(invalid_params(modes::unknown(&request.mode_id.0))),
            );
        };
        let settings = session.set_mode(mode);
        self.store_then_answer(
            &session,
            settings,
            Changed::ModeBySetMode,
            responder,
            cx,
            |_| SetSessionModeResponse::new(),
        );
    }

    /// `session/set_config_option`: `mode` or `model`, for that session only.
    pub fn set_config_option(
        &self,
        request: SetSessionConfigOptionRequest,
        responder: Responder<SetSessionConfigOptionResponse>,
        cx: ConnectionTo<Client>,
    ) {
        let id = request.session_id.0.to_string();
        let session = match self.sessions.get(&id) {
            Ok(session) => session,
            Err(error) => return answer(responder, Err(table_error(error))),
        };
        let changed = match self.apply(&session, &request.config_id.0, &request.value) {
            Ok(changed) => changed,
            Err(problem) => return answer(responder, Err(invalid_params(problem))),
        };
        self.store_then_answer(
            &session,
            session.settings(),
            changed,
            responder,
            cx,
            SetSessionConfigOptionResponse::new,
        );
    }

    /// Checks and applies one config option value; `Err` says what is wrong
    /// (and nothing changed).
    fn apply(
        &self,
        session: &Session,
        option: &str,
        value: &SessionConfigOptionValue,
    ) -> Result<Changed, String> {
        let known = [MODE_OPTION, MODEL_OPTION];
        if !known.contains(&option) {
            return Err(format!(
                "unknown config option {option:?}; the options are {}",
                known.join(", ")
            ));
        }
        let Some(value) = value.as_value_id().map(|value| value.0.to_string()) else {
            return Err(format!(
                "config option {option:?} takes one of its values' ids, not a boolean"
            ));
        };
        if option == MODE_OPTION {
            let mode = Mode::from_id(&value).ok_or_else(|| modes::unknown(&value))?;
            session.set_mode(mode);
            Ok(Changed::ModeByOption)
        } else {
            self.models.check(&value)?;
            session.set_model(&value);
            Ok(Changed::Model)
        }
    }

    /// Stores `settings` (queued now, in dispatch order), then answers and
    /// announces the change ([`Changed`]).
    fn store_then_answer<T: JsonRpcResponse>(
        &self,
        session: &Session,
        settings: Settings,
        changed: Changed,
        responder: Responder<T>,
        cx: ConnectionTo<Client>,
        response: impl FnOnce(Vec<SessionConfigOption>) -> T + Send + 'static,
    ) {
        let id = session.id.clone();
        let stored = self.store.set_settings(&id, to_stored(&settings));
        let options = self.config_options(&settings);
        tracing::info!(session = %id, mode = settings.mode.id(), model = %settings.model, "settings changed");
        self.tasks.spawn(async move {
            if let Err(error) = stored.await {
                let error: Error = internal(format!(
                    "the change applies to this session now, but could not be stored: {error}"
                ));
                return answer(responder, Err(error));
            }
            answer(responder, Ok(response(options.clone())));
            if changed != Changed::Model {
                let update = CurrentModeUpdate::new(settings.mode.id());
                send(&cx, &id, SessionUpdate::CurrentModeUpdate(update));
            }
            if changed == Changed::ModeBySetMode {
                let update = ConfigOptionUpdate::new(options);
                send(&cx, &id, SessionUpdate::ConfigOptionUpdate(update));
            }
        });
    }
}
