//! Session modes: how much the agent may do without asking.
//!
//! A mode belongs to one session (`session/set_mode` changes that session
//! only) and decides the permission gate ([`Mode::gate`]) for every tool
//! call that could change something: file writes and edits, commands, and
//! tools not annotated read-only. Reads never ask.

use agent_client_protocol::v1::schema::{SessionMode, SessionModeState};

/// The modes a session can be in. `Ask` is where every session starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mode {
    /// Asks before every write, edit, command and tool that may change
    /// something.
    #[default]
    Ask,
    /// File writes and edits (always inside the session's directory) and
    /// commands whose working directory is inside it run without asking;
    /// other tools that may change something still ask.
    Auto,
    /// Nothing that may change something runs: writes, edits, commands and
    /// tools not annotated read-only are refused without asking.
    ReadOnly,
}

/// What the gate says about one tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    Allow,
    Ask,
    /// Refused without asking; the text says why, for the model.
    Refuse(String),
}

/// What a tool call would do, as far as the gate cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Reads only (a file read, a job's output, a read-only tool).
    Read,
    /// Writes or edits a file inside the session's directories (`cwd` and
    /// its additional directories).
    EditInCwd,
    /// Runs a command; `inside_cwd` is whether its working directory is
    /// inside the session's directories.
    Command { inside_cwd: bool },
    /// Another tool that may change something.
    Other,
}

pub const ALL: [Mode; 3] = [Mode::Ask, Mode::Auto, Mode::ReadOnly];

impl Mode {
    pub fn id(self) -> &'static str {
        match self {
            Mode::Ask => "ask",
            Mode::Auto => "auto",
            Mode::ReadOnly => "read-only",
        }
    }

    pub fn from_id(id: &str) -> Option<Mode> {
        ALL.into_iter().find(|mode| mode.id() == id)
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Ask => "Ask",
            Mode::Auto => "Auto in project",
            Mode::ReadOnly => "Read-only",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Mode::Ask => "Asks before every file write or edit, every command, and every tool that may change something.",
            Mode::Auto => "Writes and edits files and runs commands inside the session's directory without asking; other tools that may change something still ask.",
            Mode::ReadOnly => "Reads only: file writes, edits, commands and tools that may change something are refused.",
        }
    }

    pub fn gate(self, effect: Effect) -> Gate {
        match (self, effect) {
            (_, Effect::Read) => Gate::Allow,
            (Mode::ReadOnly, _) => Gate::Refuse(
                "the session is in read-only mode; the user can switch modes to allow changes"
                    .into(),
            ),
            (Mode::Auto, Effect::EditInCwd | Effect::Command { inside_cwd: true }) => Gate::Allow,
            _ => Gate::Ask,
        }
    }

    /// What `session/new` and `session/load` answer with.
    pub fn state(self) -> SessionModeState {
        SessionModeState::new(
            self.id(),
            ALL.iter()
                .map(|mode| {
                    SessionMode::new(mode.id(), mode.name())
                        .description(mode.description().to_owned())
                })
                .collect(),
        )
    }
}

/// The `session/set_mode` error text for an id that is not a mode.
pub fn unknown(id: &str) -> String {
    let known: Vec<&str> = ALL.iter().map(|mode| mode.id()).collect();
    format!("unknown mode {id:?}; the modes are {}", known.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_gates_as_documented() {
        let command_in = Effect::Command { inside_cwd: true };
        let command_out = Effect::Command { inside_cwd: false };
        for mode in ALL {
            assert_eq!(mode.gate(Effect::Read), Gate::Allow);
            assert_eq!(Mode::from_id(mode.id()), Some(mode));
        }
        for effect in [Effect::EditInCwd, command_in, command_out, Effect::Other] {
            assert_eq!(Mode::Ask.gate(effect), Gate::Ask);
            assert!(matches!(Mode::ReadOnly.gate(effect), Gate::Refuse(_)));
        }
        assert_eq!(Mode::Auto.gate(Effect::EditInCwd), Gate::Allow);
        assert_eq!(Mode::Auto.gate(command_in), Gate::Allow);
        assert_eq!(Mode::Auto.gate(command_out), Gate::Ask);
        assert_eq!(Mode::Auto.gate(Effect::Other), Gate::Ask);
        assert_eq!(Mode::default().state().available_modes.len(), 3);
        assert!(unknown("yolo").contains("ask, auto, read-only"));
    }
}
