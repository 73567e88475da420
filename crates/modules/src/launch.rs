//! Launch credentials: the secret each module run gets from the hub, and
//! the check that whoever presents one is that run's process.
//!
//! A credential is live from just before its run's process can read it
//! until that run ends. It authenticates a connection only if all of this
//! holds: it is a live one (compared by SHA-256 digest, in constant time,
//! against every live one), it came over the Unix socket, and the peer's
//! pid (`SO_PEERCRED`, read when the socket was accepted) is the run's
//! process or one of its descendants (a walk up `/proc/PID/stat`, bounded).
//! Everything else is refused, and the caller answers `-32007`.

use std::sync::Arc;

use parking_lot::RwLock;
use subtle::ConstantTimeEq;
use switchboard_protocol::modules::LAUNCH_CREDENTIAL_PREFIX;
use switchboard_protocol::Principal;

use switchboard_hub::policy::{token_digest, Authenticated, PrincipalRef};
use switchboard_hub::supervise::{mint_token, PeerProcess};

/// How many parents the descendant check climbs at most. Process trees of
/// real tools are a few levels deep; a deeper peer is refused.
const MAX_ANCESTRY: usize = 64;

/// One run's credential, minted by the supervisor.
pub struct Credential {
    /// What the module reads from its descriptor and presents.
    pub secret: String,
    pub digest: [u8; 32],
}

impl Credential {
    pub fn mint() -> Self {
        let secret = format!("{LAUNCH_CREDENTIAL_PREFIX}{}", mint_token());
        let digest = token_digest(&secret);
        Credential { secret, digest }
    }
}

/// Why a launch credential was refused (for the log; the peer only ever
/// gets `-32007`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("it is not the credential of a running module (a stale run's, or never issued)")]
    NotLive,
    #[error("module {module:?}'s credential was presented over a WebSocket, where the hub cannot tell which process sent it")]
    NotUnixSocket { module: String },
    #[error("module {module:?}'s credential was presented by pid {peer}, which is neither its process (pid {pid}) nor a descendant")]
    OtherProcess {
        module: String,
        pid: u32,
        peer: String,
    },
}

struct Live {
    digest: [u8; 32],
    pid: u32,
    principal: Arc<PrincipalRef>,
}

/// The credentials of the runs alive now. Written only by the supervisor
/// task (`supervisor.rs`); read by `initialize` and by reloads.
#[derive(Default)]
pub struct LaunchTable {
    live: RwLock<Vec<Live>>,
}

impl LaunchTable {
    /// Makes `digest` authenticate as module `name`, for process `pid` and
    /// its descendants.
    pub fn insert(&self, name: &str, pid: u32, digest: [u8; 32]) {
        let principal = PrincipalRef::new(Principal::reserved(name));
        self.live.write().push(Live {
            digest,
            pid,
            principal,
        });
    }

    /// Ends a credential: from now on it is refused.
    pub fn revoke(&self, digest: &[u8; 32]) {
        self.live.write().retain(|live| live.digest != *digest);
    }

    /// Checks a presented launch credential.
    pub fn authenticate(&self, secret: &str, peer: PeerProcess) -> Result<Authenticated, Refusal> {
        let digest = token_digest(secret);
        let (pid, principal) = {
            let live = self.live.read();
            // Every entry is compared, whatever matches, as in `Policy`.
            let mut found = None;
            for entry in live.iter() {
                if bool::from(entry.digest.ct_eq(&digest)) {
                    found = Some((entry.pid, entry.principal.clone()));
                }
            }
            found.ok_or(Refusal::NotLive)?
        };
        let module = principal.principal.label().to_owned();
        match peer {
            PeerProcess::WebSocket => return Err(Refusal::NotUnixSocket { module }),
            PeerProcess::Unix(Some(peer)) if is_same_or_descendant(peer, pid) => {}
            PeerProcess::Unix(peer) => {
                let peer = peer.map_or_else(|| "unknown".to_owned(), |p| p.to_string());
                return Err(Refusal::OtherProcess { module, pid, peer });
            }
        }
        Ok(Authenticated {
            principal,
            token_digest: Some(digest),
        })
    }

    /// The principal a live credential's digest stands for (reloads keep
    /// such connections).
    pub fn principal_for_digest(&self, digest: &[u8; 32]) -> Option<Arc<PrincipalRef>> {
        self.live
            .read()
            .iter()
            .find(|live| bool::from(live.digest.ct_eq(digest)))
            .map(|live| live.principal.clone())
    }
}

/// Whether `pid` is `ancestor` or one of its descendants: climbs the
/// parent links in `/proc/PID/stat`, at most [`MAX_ANCESTRY`] steps.
///
/// `ancestor` is a child the hub has not reaped, so its pid cannot be
/// reused meanwhile. A descendant whose parent exited was adopted by init
/// (or a subreaper) and no longer counts.
pub fn is_same_or_descendant(pid: u32, ancestor: u32) -> bool {
    let mut current = pid;
    for _ in 0..MAX_ANCESTRY {
        if current == ancestor {
            return true;
        }
        match parent_of(current) {
            Some(parent) if parent > 1 => current = parent,
            _ => return false,
        }
    }
    false
}

/// The parent pid from `/proc/PID/stat`: the field after the state, after
/// the last `)` (the command name in parentheses may hold anything).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_ascii_whitespace();
    let _state = fields.next()?;
    fields.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_descends_from_its_parent_not_from_its_child() {
        let me = std::process::id();
        let parent = parent_of(me).expect("a parent");
        assert!(is_same_or_descendant(me, me));
        if parent > 1 {
            assert!(is_same_or_descendant(me, parent));
        }
        let mut child = std::process::Command::new("sleep")
            .arg("10")
            .spawn()
            .expect("spawn sleep");
        assert!(is_same_or_descendant(child.id(), me));
        assert!(!is_same_or_descendant(me, child.id()));
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn a_credential_needs_the_unix_socket_and_the_right_process() {
        let table = LaunchTable::default();
        let credential = Credential::mint();
        assert!(credential.secret.starts_with(LAUNCH_CREDENTIAL_PREFIX));
        let me = std::process::id();
        table.insert("git", me, credential.digest);

        let ok = table
            .authenticate(&credential.secret, PeerProcess::Unix(Some(me)))
            .unwrap();
        assert_eq!(ok.principal.principal, Principal::reserved("git"));
        assert_eq!(
            table
                .authenticate(&credential.secret, PeerProcess::WebSocket)
                .err(),
            Some(Refusal::NotUnixSocket {
                module: "git".into()
            })
        );
        let parent = parent_of(me).unwrap();
        assert!(matches!(
            table.authenticate(&credential.secret, PeerProcess::Unix(Some(parent))),
            Err(Refusal::OtherProcess { .. })
        ));
        assert!(matches!(
            table.authenticate(&credential.secret, PeerProcess::Unix(None)),
            Err(Refusal::OtherProcess { .. })
        ));
        assert_eq!(
            table
                .authenticate("sb-launch-00", PeerProcess::Unix(Some(me)))
                .err(),
            Some(Refusal::NotLive)
        );
        table.revoke(&credential.digest);
        assert_eq!(
            table
                .authenticate(&credential.secret, PeerProcess::Unix(Some(me)))
                .err(),
            Some(Refusal::NotLive)
        );
    }
}
