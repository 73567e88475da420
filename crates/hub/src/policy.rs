//! Who may do what: principals bound to tokens, and grants between them.
//!
//! A [`Policy`] is immutable; a reload builds a new one and swaps it in (see
//! `registry.rs`, which swaps it under the catalog lock so visibility changes
//! and catalog actions stay in one order).

use std::sync::Arc;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use switchboard_protocol::Principal;

/// A principal as the hub holds it: its value and its JSON, encoded once.
#[derive(Debug)]
pub struct PrincipalRef {
    pub principal: Principal,
    /// `{"kind":…}` exactly as stamped into routed messages.
    pub json: Box<str>,
}

impl PrincipalRef {
    pub fn new(principal: Principal) -> Arc<Self> {
        let json = serde_json::to_string(&principal)
            .expect("a principal always serializes")
            .into_boxed_str();
        Arc::new(PrincipalRef { principal, json })
    }
}

/// The three actions authorized separately.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Discover,
    Notify,
    Request,
}

impl Action {
    fn bit(self) -> u8 {
        match self {
            Action::Discover => 1,
            Action::Notify => 2,
            Action::Request => 4,
        }
    }

    /// The name grants and errors use.
    pub fn name(self) -> &'static str {
        match self {
            Action::Discover => "discover",
            Action::Notify => "notify",
            Action::Request => "request",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        [Action::Discover, Action::Notify, Action::Request]
            .into_iter()
            .find(|action| action.name() == name)
    }
}

/// Which principals a grant's `from` or `to` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// `"*"`: every principal, `direct`, `unverified` and the principals of
    /// other hubs of a federation included.
    Any,
    /// One principal of this hub: a named (reserved) one, `direct` (the
    /// hub's own token) or `unverified` (connections without a token).
    /// Never a principal of another hub.
    Local(Principal),
    /// `"HUB/NAME"` (one principal of another hub: `NAME` is a reserved
    /// principal's name, or `direct` or `unverified`) or `"HUB/*"`
    /// (`principal: None`: every principal of that hub).
    OnHub {
        hub: String,
        principal: Option<Principal>,
    },
}

impl Selector {
    /// The named (reserved) principal `name` of this hub.
    pub fn named(name: impl Into<String>) -> Selector {
        Selector::Local(Principal::reserved(name))
    }

    /// `HUB/NAME` or `HUB/*`, if `text` has that form.
    pub fn on_hub(text: &str) -> Option<Selector> {
        let (hub, name) = text.split_once('/')?;
        let principal = match name {
            "*" => None,
            "direct" => Some(Principal::Direct),
            "unverified" => Some(Principal::Unverified),
            name => Some(Principal::reserved(name)),
        };
        Some(Selector::OnHub {
            hub: hub.to_owned(),
            principal,
        })
    }

    fn matches(&self, principal: &Principal) -> bool {
        match (self, principal) {
            (Selector::Any, _) => true,
            // A remote principal is `Principal::Remote`: never equal.
            (Selector::Local(local), principal) => local == principal,
            (Selector::OnHub { hub, principal: on }, principal) => {
                principal.hub() == Some(hub.as_str())
                    && on.as_ref().is_none_or(|on| on == principal.local())
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct Grant {
    pub from: Selector,
    pub to: Selector,
    allow: u8,
}

impl Grant {
    pub fn new(from: Selector, to: Selector, actions: &[Action]) -> Self {
        let allow = actions.iter().fold(0, |bits, action| bits | action.bit());
        Grant { from, to, allow }
    }
}

/// A named principal and the digest of its token.
#[derive(Debug)]
struct Named {
    token_digest: [u8; 32],
    principal: Arc<PrincipalRef>,
}

/// What a token authenticates as.
#[derive(Debug, Clone)]
pub struct Authenticated {
    pub principal: Arc<PrincipalRef>,
    /// Kept so a reload can tell whether the token still maps to this principal.
    pub token_digest: Option<[u8; 32]>,
}

#[derive(Debug)]
pub struct Policy {
    direct_token_digest: [u8; 32],
    direct: Arc<PrincipalRef>,
    unverified: Option<Arc<PrincipalRef>>,
    named: Vec<Named>,
    grants: Vec<Grant>,
    allowed_origins: Vec<String>,
    /// Principal name → the `[profiles.NAME]` its MCP sessions over HTTP
    /// are held to.
    profiles: std::collections::HashMap<String, String>,
}

pub fn token_digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Policy {
    /// `named` holds `(module_id, token)` pairs.
    pub fn new(
        direct_token: &str,
        named: Vec<(String, String)>,
        grants: Vec<Grant>,
        allow_unverified: bool,
        allowed_origins: Vec<String>,
    ) -> Self {
        Policy {
            direct_token_digest: token_digest(direct_token),
            direct: PrincipalRef::new(Principal::Direct),
            unverified: allow_unverified.then(|| PrincipalRef::new(Principal::Unverified)),
            named: named
                .into_iter()
                .map(|(name, token)| Named {
                    token_digest: token_digest(&token),
                    principal: PrincipalRef::new(Principal::reserved(name)),
                })
                .collect(),
            grants,
            allowed_origins,
            profiles: Default::default(),
        }
    }

    /// Binds principals (by name) to MCP gateway profiles.
    pub fn with_profiles(mut self, profiles: std::collections::HashMap<String, String>) -> Self {
        self.profiles = profiles;
        self
    }

    /// The profile a principal is bound to, if any.
    pub fn profile_of(&self, principal: &str) -> Option<&str> {
        self.profiles.get(principal).map(String::as_str)
    }

    /// Maps a presented token (or none) to a principal.
    ///
    /// Every stored digest is compared, in constant time, whatever matches
    /// first, so timing says nothing about which token was close.
    pub fn authenticate(&self, token: Option<&str>) -> Option<Authenticated> {
        let Some(token) = token else {
            return self.unverified.clone().map(|principal| Authenticated {
                principal,
                token_digest: None,
            });
        };
        let digest = token_digest(token);
        self.principal_for_digest(&digest)
            .map(|principal| Authenticated {
                principal,
                token_digest: Some(digest),
            })
    }

    /// The principal a token digest maps to under this policy, if any.
    pub fn principal_for_digest(&self, digest: &[u8; 32]) -> Option<Arc<PrincipalRef>> {
        let mut found = None;
        if bool::from(self.direct_token_digest.ct_eq(digest)) {
            found = Some(&self.direct);
        }
        for named in &self.named {
            if bool::from(named.token_digest.ct_eq(digest)) {
                found = Some(&named.principal);
            }
        }
        found.cloned()
    }

    /// What this policy allows, for the dashboard: principal names (never
    /// a token or digest), grants, origins.
    pub fn describe(&self) -> serde_json::Value {
        let selector = |s: &Selector| match s {
            Selector::Any => "*".to_owned(),
            Selector::Local(principal) => principal.label().to_owned(),
            Selector::OnHub { hub, principal } => {
                let name = principal.as_ref().map_or("*", Principal::label);
                format!("{hub}/{name}")
            }
        };
        let grants: Vec<serde_json::Value> = self
            .grants
            .iter()
            .map(|grant| {
                let allow: Vec<&str> = [Action::Discover, Action::Notify, Action::Request]
                    .into_iter()
                    .filter(|action| grant.allow & action.bit() != 0)
                    .map(Action::name)
                    .collect();
                serde_json::json!({"from": selector(&grant.from), "to": selector(&grant.to), "allow": allow})
            })
            .collect();
        let principals: Vec<&str> = self
            .named
            .iter()
            .map(|named| named.principal.principal.label())
            .collect();
        serde_json::json!({
            "principals": principals,
            "grants": grants,
            "allowedOrigins": self.allowed_origins,
            "allowUnverified": self.allows_unverified(),
        })
    }

    /// Whether connections without a token are served (as `unverified`).
    pub fn allows_unverified(&self) -> bool {
        self.unverified.is_some()
    }

    /// Whether `caller` may perform `action` on a service owned by `owner`.
    ///
    /// `direct` may act on everything; a reserved principal on its own
    /// principal's services; anything else needs a grant. (A connection acting
    /// on its own services is decided by the caller of this function, which
    /// knows connections.) Only local principals match the first two rules:
    /// `direct` of another hub is `HUB/direct` here, and needs a grant, for
    /// instance `from = "HUB/direct"`, `to = "direct"` for this hub's
    /// `direct` services.
    pub fn allows(&self, caller: &Principal, owner: &Principal, action: Action) -> bool {
        match (caller, owner) {
            (Principal::Direct, _) => true,
            (Principal::Reserved { module_id: a }, Principal::Reserved { module_id: b })
                if a == b =>
            {
                true
            }
            _ => self.granted(caller, owner, action),
        }
    }

    /// Whether a grant of this policy lets `caller` perform `action` on the
    /// services of `owner` (the grants alone, without the implicit rules).
    fn granted(&self, caller: &Principal, owner: &Principal, action: Action) -> bool {
        self.grants.iter().any(|grant| {
            grant.allow & action.bit() != 0 && grant.from.matches(caller) && grant.to.matches(owner)
        })
    }

    /// Whether `caller` may discover, notify and request a **callback
    /// service** (hub protocol section 13: metadata `"callback": true`) of
    /// `owner` through the callback rule: exactly when `owner` may `request`
    /// services of `caller` under this policy (the reverse of the owner's
    /// request grants, `direct`'s and a principal's own rule included).
    ///
    /// A principal of another hub is let in only by a grant naming it
    /// (`HUB/NAME`, `HUB/*` or `*`): `direct`'s rule says what this hub's
    /// user may do here, it is no grant to the whole fabric, so a callback
    /// service of `direct` is not open to every hub's principals.
    ///
    /// Only ever asked after [`Policy::allows`] refused (`registry`), so a
    /// message to an ordinary service never pays for it. Being a function of
    /// the policy alone, it is re-decided by every reload like any grant.
    pub fn allows_callback(&self, caller: &Principal, owner: &Principal) -> bool {
        if caller.hub().is_some() {
            self.granted(owner, caller, Action::Request)
        } else {
            self.allows(owner, caller, Action::Request)
        }
    }

    /// Whether a WebSocket upgrade carrying this `Origin` is accepted.
    pub fn origin_allowed(&self, origin: &str) -> bool {
        self.allowed_origins.iter().any(|allowed| allowed == origin)
    }

    pub fn principal_count(&self) -> usize {
        self.named.len()
    }

    pub fn grant_count(&self) -> usize {
        self.grants.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy::new(
            "direct-token",
            vec![
                ("explorer".into(), "explorer-token".into()),
                ("git".into(), "git-token".into()),
                ("other".into(), "other-token".into()),
            ],
            vec![Grant::new(
                Selector::named("explorer"),
                Selector::named("git"),
                &[Action::Discover, Action::Request],
            )],
            false,
            vec!["http://localhost:3000".into()],
        )
    }

    #[test]
    fn tokens_map_to_principals() {
        let policy = policy();
        let direct = policy.authenticate(Some("direct-token")).unwrap();
        assert_eq!(direct.principal.principal, Principal::Direct);
        let git = policy.authenticate(Some("git-token")).unwrap();
        assert_eq!(git.principal.principal, Principal::reserved("git"));
        assert_eq!(
            git.principal.json.as_ref(),
            r#"{"kind":"reserved","module_id":"git"}"#
        );
        assert!(policy.authenticate(Some("nope")).is_none());
        assert!(policy.authenticate(None).is_none());
    }

    #[test]
    fn grants_are_per_action_and_direction() {
        let policy = policy();
        let explorer = Principal::reserved("explorer");
        let git = Principal::reserved("git");
        assert!(policy.allows(&explorer, &git, Action::Discover));
        assert!(policy.allows(&explorer, &git, Action::Request));
        assert!(!policy.allows(&explorer, &git, Action::Notify));
        assert!(!policy.allows(&git, &explorer, Action::Discover));
        assert!(policy.allows(&git, &git, Action::Notify));
        assert!(policy.allows(&Principal::Direct, &git, Action::Notify));
        assert!(!policy.allows(&git, &Principal::Direct, Action::Discover));
    }

    #[test]
    fn star_matches_every_principal() {
        let policy = Policy::new(
            "t",
            vec![],
            vec![Grant::new(Selector::Any, Selector::Any, &[Action::Notify])],
            true,
            vec![],
        );
        assert!(policy.allows(&Principal::Unverified, &Principal::Direct, Action::Notify));
        assert!(!policy.allows(&Principal::Unverified, &Principal::Direct, Action::Request));
        let anonymous = policy.authenticate(None).unwrap();
        assert_eq!(anonymous.principal.principal, Principal::Unverified);
    }

    #[test]
    fn principals_of_other_hubs_need_grants_that_name_their_hub() {
        let selector = |text: &str| Selector::on_hub(text).unwrap();
        let policy = Policy::new(
            "t",
            vec![("git".into(), "g".into())],
            vec![
                Grant::new(
                    selector("laptop/explorer"),
                    Selector::named("git"),
                    &[Action::Request],
                ),
                Grant::new(selector("server/*"), Selector::Any, &[Action::Notify]),
                Grant::new(
                    Selector::Any,
                    selector("laptop/direct"),
                    &[Action::Discover],
                ),
            ],
            false,
            vec![],
        );
        let git = Principal::reserved("git");
        let explorer_on_laptop = Principal::reserved("explorer").on_hub("laptop");
        let explorer_on_server = Principal::reserved("explorer").on_hub("server");
        assert!(policy.allows(&explorer_on_laptop, &git, Action::Request));
        assert!(!policy.allows(&explorer_on_laptop, &git, Action::Notify));
        assert!(!policy.allows(&explorer_on_server, &git, Action::Request));
        assert!(policy.allows(&explorer_on_server, &git, Action::Notify));
        assert!(!policy.allows(&Principal::reserved("explorer"), &git, Action::Request));
        // `direct` of another hub is not `direct` here; nor is `git` there `git` here.
        let direct_on_laptop = Principal::Direct.on_hub("laptop");
        assert!(!policy.allows(&direct_on_laptop, &git, Action::Request));
        assert!(!policy.allows(&git.clone().on_hub("laptop"), &git, Action::Request));
        assert!(policy.allows(&git, &direct_on_laptop, Action::Discover));
        assert!(!policy.allows(&git, &Principal::Direct, Action::Discover));
        assert!(policy.allows(&Principal::Direct, &direct_on_laptop, Action::Request));
    }

    #[test]
    fn grants_may_name_this_hubs_direct_and_unverified() {
        let direct_on_b = Principal::Direct.on_hub("b");
        let policy = Policy::new(
            "t",
            vec![("git".into(), "g".into())],
            vec![
                Grant::new(
                    Selector::on_hub("b/direct").unwrap(),
                    Selector::Local(Principal::Direct),
                    &[Action::Request],
                ),
                Grant::new(
                    Selector::Local(Principal::Unverified),
                    Selector::named("git"),
                    &[Action::Notify],
                ),
            ],
            true,
            vec![],
        );
        assert!(policy.allows(&direct_on_b, &Principal::Direct, Action::Request));
        assert!(!policy.allows(&direct_on_b, &Principal::Direct, Action::Notify));
        // `direct` here names this hub's `direct` only, never another hub's.
        assert!(!policy.allows(&direct_on_b, &direct_on_b, Action::Request));
        let git = Principal::reserved("git");
        assert!(!policy.allows(&git, &Principal::Direct, Action::Request));
        assert!(policy.allows(&Principal::Unverified, &git, Action::Notify));
        let unverified_on_b = Principal::Unverified.on_hub("b");
        assert!(!policy.allows(&unverified_on_b, &git, Action::Notify));
        let described = policy.describe();
        assert_eq!(described["grants"][0]["from"], "b/direct");
        assert_eq!(described["grants"][0]["to"], "direct");
        assert_eq!(described["grants"][1]["from"], "unverified");
    }

    #[test]
    fn the_callback_rule_is_the_reverse_of_the_owners_request_grants() {
        let policy = Policy::new(
            "t",
            vec![],
            vec![
                Grant::new(
                    Selector::named("consumer"),
                    Selector::named("module"),
                    &[Action::Request],
                ),
                Grant::new(
                    Selector::named("consumer"),
                    Selector::named("viewer"),
                    &[Action::Discover, Action::Notify],
                ),
                Grant::new(
                    Selector::on_hub("b/consumer").unwrap(),
                    Selector::named("module"),
                    &[Action::Request],
                ),
            ],
            false,
            vec![],
        );
        let consumer = Principal::reserved("consumer");
        let module = Principal::reserved("module");
        // module may use consumer's callback services: consumer may request module.
        assert!(policy.allows_callback(&module, &consumer));
        assert!(!policy.allows_callback(&consumer, &module));
        // Only `request` grants count.
        assert!(!policy.allows_callback(&Principal::reserved("viewer"), &consumer));
        // Across hubs: grants naming HUB/PRINCIPAL, as usual.
        assert!(policy.allows_callback(&module, &consumer.clone().on_hub("b")));
        assert!(!policy.allows_callback(&module, &consumer.clone().on_hub("c")));
        // `direct` may request everything, so every principal of this hub
        // may use its callback services; another hub's only with a grant.
        assert!(policy.allows_callback(&module, &Principal::Direct));
        assert!(policy.allows_callback(&Principal::Unverified, &Principal::Direct));
        assert!(!policy.allows_callback(&module, &Principal::Direct.on_hub("b")));
        assert!(!policy.allows_callback(&module.clone().on_hub("b"), &Principal::Direct));
        let granted = Policy::new(
            "t",
            vec![],
            vec![Grant::new(
                Selector::Local(Principal::Direct),
                Selector::on_hub("b/module").unwrap(),
                &[Action::Request],
            )],
            false,
            vec![],
        );
        assert!(granted.allows_callback(&module.clone().on_hub("b"), &Principal::Direct));
        assert!(!granted.allows_callback(&consumer.on_hub("b"), &Principal::Direct));
    }

    #[test]
    fn origins_are_matched_exactly() {
        let policy = policy();
        assert!(policy.origin_allowed("http://localhost:3000"));
        assert!(!policy.origin_allowed("null"));
        assert!(!policy.origin_allowed("http://localhost:3000/"));
    }
}
