//! One subscriber's view of the catalog, checked action by action against
//! the spec: a snapshot, then actions with a growing `serverSeq` above its
//! `fromSeq`, each of which fits the view (no duplicate `added`, no
//! `removed` or `updated` of a service the view does not hold).

use std::collections::HashSet;

use serde_json::Value;

#[derive(Debug)]
pub struct CatalogView {
    services: HashSet<String>,
    last_seq: u64,
}

impl CatalogView {
    /// From `subscribe`'s `snapshot`: `{resource, state: {services}, fromSeq}`.
    pub fn from_snapshot(snapshot: &Value) -> Result<CatalogView, String> {
        let services = snapshot["state"]["services"]
            .as_array()
            .ok_or_else(|| format!("snapshot without services: {snapshot}"))?;
        let mut ids = HashSet::with_capacity(services.len());
        for service in services {
            let id = service["serviceId"]
                .as_str()
                .ok_or_else(|| format!("service without an id: {service}"))?;
            if !ids.insert(id.to_owned()) {
                return Err(format!("snapshot lists {id} twice"));
            }
        }
        let last_seq = snapshot["fromSeq"]
            .as_u64()
            .ok_or_else(|| format!("snapshot without fromSeq: {snapshot}"))?;
        Ok(CatalogView {
            services: ids,
            last_seq,
        })
    }

    /// The services the view holds.
    pub fn services(&self) -> &HashSet<String> {
        &self.services
    }

    /// Applies the params of one `action` notification.
    pub fn apply(&mut self, params: &Value) -> Result<(), String> {
        let seq = params["serverSeq"]
            .as_u64()
            .ok_or_else(|| format!("action without serverSeq: {params}"))?;
        if seq <= self.last_seq {
            return Err(format!(
                "serverSeq {seq} after {}: it must grow",
                self.last_seq
            ));
        }
        self.last_seq = seq;
        let action = &params["action"];
        match action["type"].as_str() {
            Some("clientServices/added") => {
                let id = action["service"]["serviceId"].as_str().unwrap_or_default();
                if !self.services.insert(id.to_owned()) {
                    return Err(format!("added {id}, already in the view"));
                }
            }
            Some("clientServices/removed") => {
                let id = action["serviceId"].as_str().unwrap_or_default();
                if !self.services.remove(id) {
                    return Err(format!("removed {id}, not in the view"));
                }
            }
            Some("clientServices/updated") => {
                let id = action["serviceId"].as_str().unwrap_or_default();
                if !self.services.contains(id) {
                    return Err(format!("updated {id}, not in the view"));
                }
            }
            _ => return Err(format!("unknown action {action}")),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn action(seq: u64, action: Value) -> Value {
        json!({"channel": "ahp-client-services://", "serverSeq": seq, "action": action})
    }

    #[test]
    fn actions_that_fit_are_applied_and_misfits_are_named() {
        let snapshot = json!({"resource": "ahp-client-services://", "state": {"services": [{"serviceId": "a"}]}, "fromSeq": 4});
        let mut view = CatalogView::from_snapshot(&snapshot).unwrap();
        let added = json!({"type": "clientServices/added", "service": {"serviceId": "b"}});
        view.apply(&action(5, added.clone())).unwrap();
        view.apply(&action(
            7,
            json!({"type": "clientServices/updated", "serviceId": "a", "metadata": {}}),
        ))
        .unwrap();
        assert!(view
            .apply(&action(8, added))
            .unwrap_err()
            .contains("already"));
        assert!(view.apply(&action(8, json!({"type": "clientServices/removed", "serviceId": "a", "reason": "unregistered"})))
            .unwrap_err()
            .contains("must grow"));
        assert!(view
            .apply(&action(
                9,
                json!({"type": "clientServices/removed", "serviceId": "zz", "reason": "hidden"})
            ))
            .unwrap_err()
            .contains("not in the view"));
    }
}
