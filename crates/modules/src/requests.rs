//! What the hub asks of its modules besides their lifecycle: the methods
//! `hub/modules` and `hub/restartModule` (the `direct` principal's alone),
//! and the modules' samples for `/metrics`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Instant;

use serde::Deserialize;
use serde_json::value::RawValue;
use switchboard_hub::supervise::{invalid_params, not_found, Caller};
use switchboard_protocol::hub::method;
use switchboard_protocol::jsonrpc::ErrorObject;
use switchboard_protocol::modules::{ModuleState, ModuleStatus, ModulesResult};

use crate::Modules;

/// Answers one of the modules' methods; `None` for any other method.
pub(crate) fn answer(
    modules: &Modules,
    name: &str,
    caller: &Caller<'_>,
    params: Option<&RawValue>,
) -> Option<Result<String, ErrorObject>> {
    let outcome = match name {
        method::MODULES => caller
            .require_direct("list its modules")
            .map(|()| list(modules)),
        method::RESTART_MODULE => caller
            .require_direct("restart its modules")
            .and_then(|()| restart(modules, params)),
        _ => return None,
    };
    Some(outcome)
}

/// `hub/modules`: every module's state and the services its connections
/// registered.
fn list(modules: &Modules) -> String {
    let modules = statuses(modules);
    serde_json::to_string(&ModulesResult { modules }).expect("serializes")
}

/// Every module's state now, with the services its connections registered.
pub(crate) fn statuses(modules: &Modules) -> Vec<ModuleStatus> {
    let services = services_by_module(modules);
    let now = Instant::now();
    modules
        .views()
        .iter()
        .map(|view| ModuleStatus {
            name: view.name.clone(),
            state: view.state,
            pid: view.pid,
            restarts: view.restarts,
            uptime_ms: view
                .started_at
                .map(|at| now.saturating_duration_since(at).as_millis() as u64),
            last_exit: view.last_exit.clone(),
            retry_in_ms: view
                .retry_at
                .map(|at| at.saturating_duration_since(now).as_millis() as u64),
            services: services.get(&view.name).copied().unwrap_or(0),
            command: view.command.clone(),
            oauth: view.oauth.clone(),
            log: view.log.display().to_string(),
        })
        .collect()
}

#[derive(Deserialize)]
struct RestartParams<'a> {
    #[serde(borrow)]
    name: Option<&'a RawValue>,
}

/// `hub/restartModule {name}`: answered once the restart is under way
/// (`hub/modules` shows it through).
fn restart(modules: &Modules, params: Option<&RawValue>) -> Result<String, ErrorObject> {
    let name_error = || invalid_params("name", "name must be a string");
    let params: RestartParams<'_> = match params {
        Some(raw) if raw.get().starts_with('{') => serde_json::from_str(raw.get())
            .map_err(|error| invalid_params("params", format!("invalid params: {error}")))?,
        Some(_) => return Err(invalid_params("params", "params must be a JSON object")),
        None => return Err(name_error()),
    };
    let name: String = params
        .name
        .and_then(|raw| serde_json::from_str(raw.get()).ok())
        .ok_or_else(name_error)?;
    if !modules.restart(&name) {
        return Err(not_found(format!("no module {name:?} in the hub's config")));
    }
    Ok("{}".into())
}

fn services_by_module(modules: &Modules) -> HashMap<String, u64> {
    modules.hub.services_by_module()
}

/// The modules' samples for `/metrics`: state (one sample per state, 1 for
/// the current one), restarts, and services registered.
pub(crate) fn render_metrics(modules: &Modules, out: &mut String) {
    let views = modules.views();
    if views.is_empty() {
        return;
    }
    let services = services_by_module(modules);
    const STATES: [ModuleState; 6] = [
        ModuleState::Running,
        ModuleState::Backoff,
        ModuleState::Stopping,
        ModuleState::Exited,
        ModuleState::GivenUp,
        ModuleState::NeedsLogin,
    ];
    let _ = writeln!(out, "# HELP switchboard_module_state The state each supervised module is in (1) and is not in (0).");
    let _ = writeln!(out, "# TYPE switchboard_module_state gauge");
    for view in views.iter() {
        for state in STATES {
            let value = u8::from(view.state == state);
            let _ = writeln!(
                out,
                "switchboard_module_state{{module=\"{}\",state=\"{}\"}} {value}",
                view.name,
                state.name()
            );
        }
    }
    let _ = writeln!(
        out,
        "# HELP switchboard_module_restarts_total Starts of each module after its first."
    );
    let _ = writeln!(out, "# TYPE switchboard_module_restarts_total counter");
    for view in views.iter() {
        let _ = writeln!(
            out,
            "switchboard_module_restarts_total{{module=\"{}\"}} {}",
            view.name, view.restarts
        );
    }
    let _ = writeln!(
        out,
        "# HELP switchboard_module_services Services registered by each module's connections."
    );
    let _ = writeln!(out, "# TYPE switchboard_module_services gauge");
    for view in views.iter() {
        let count = services.get(&view.name).copied().unwrap_or(0);
        let _ = writeln!(
            out,
            "switchboard_module_services{{module=\"{}\"}} {count}",
            view.name
        );
    }
}
