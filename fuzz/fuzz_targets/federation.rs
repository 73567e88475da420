//! The federation's receiving side: NATS messages as hub `a` reads them on
//! `switchboard.hub.a.*` (the subject's last token, headers, lines; credits
//! too), handed to the relay's own reader code (`relay::take`, through the
//! federation crate's `fuzzing` entry) on a hub with links to `b` and `c`, a
//! local owner and a local caller with two requests pending on a service
//! of `b` (forwarded ids 1 and 2).
//!
//! The input is text: each message starts with a line `@FROM NAME:VALUE…`
//! (FROM is the subject's last token; each NAME:VALUE a header), and the
//! lines after it, up to the next such line, are its payload. `$A`, `$B`,
//! `$C` are the instances of `a`, `b`, `c`; `svc-fuzz` is the owner's
//! service id.
//!
//! Checks: nothing panics; the local connections are sent JSON-RPC objects
//! only; nothing is delivered for a message whose sender is not a live
//! instance of `b` or `c` addressed to this instance; whatever reaches the
//! owner names as its sender a client and a principal of the hub the
//! subject names (never one the payload claims of another hub); the
//! caller's two requests are answered at most once each, and only by `b`;
//! a credit is owed only to the sender; no bookkeeping is left once the
//! links and connections close.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use switchboard_federation::fuzzing::{Harness, Message, INSTANCES, PEERS};

struct Parsed {
    from: String,
    headers: Vec<(String, String)>,
    payload: Vec<u8>,
}

fn substitute(text: &str, service: &str) -> String {
    text.replace("$A", INSTANCES[0])
        .replace("$B", INSTANCES[1])
        .replace("$C", INSTANCES[2])
        .replace("svc-fuzz", service)
}

fn parse(input: &str, service: &str) -> Vec<Parsed> {
    let mut messages: Vec<Parsed> = Vec::new();
    for line in input.split('\n') {
        if let Some(head) = line.strip_prefix('@') {
            let mut parts = head.split(' ');
            let from = parts.next().unwrap_or_default().to_owned();
            let headers = parts
                .filter_map(|part| part.split_once(':'))
                .map(|(name, value)| (name.to_owned(), substitute(value, service)))
                .collect();
            messages.push(Parsed {
                from,
                headers,
                payload: Vec::new(),
            });
        } else if let Some(message) = messages.last_mut() {
            message
                .payload
                .extend_from_slice(substitute(line, service).as_bytes());
            message.payload.push(b'\n');
        }
    }
    messages
}

/// The JSON objects of `bytes` (one a line); panics on anything else.
fn lines(bytes: &[u8], who: &str) -> Vec<Value> {
    bytes
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| {
            let value: Value = serde_json::from_slice(line).unwrap_or_else(|error| {
                panic!(
                    "the hub sent the {who} a line that is not JSON ({error}): {}",
                    String::from_utf8_lossy(line)
                )
            });
            assert_eq!(value["jsonrpc"], "2.0", "not JSON-RPC 2.0: {value}");
            value
        })
        .collect()
}

fn first_header<'a>(message: &'a Parsed, name: &str) -> Option<&'a str> {
    message
        .headers
        .iter()
        .find(|(n, v)| n == name && !v.contains('\r'))
        .map(|(_, v)| v.as_str())
}

fuzz_target!(|data: &[u8]| {
    let Ok(input) = std::str::from_utf8(data) else {
        return;
    };
    let mut harness = Harness::new();
    let service = harness.service_id().to_owned();
    let mut answered = [0u32; 3];
    for parsed in parse(input, &service).iter().take(64) {
        let message = Message {
            from: &parsed.from,
            headers: parsed
                .headers
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect(),
            payload: &parsed.payload,
        };
        let received = harness.receive(&message);
        let owner = lines(&received.owner, "owner");
        let caller = lines(&received.caller, "caller");
        // Who may speak: a peer's live instance, to this one. (Headers
        // that do not survive a NATS header block are left out by the
        // harness, so look at the first well-formed value.)
        let peer = PEERS
            .iter()
            .position(|p| *p == parsed.from)
            .map(|index| (PEERS[index], INSTANCES[index + 1]));
        let live = peer.is_some_and(|(_, instance)| {
            first_header(parsed, "Switchboard-From") == Some(instance)
                && first_header(parsed, "Switchboard-To") == Some(INSTANCES[0])
        });
        if !live {
            assert!(
                owner.is_empty() && caller.is_empty() && received.credit.is_none(),
                "a message from {:?} that is not a live peer reached the hub",
                parsed.from
            );
            continue;
        }
        let (from, _) = peer.expect("live");
        for value in &owner {
            let method = value["method"].as_str().unwrap_or_default();
            if method == "clientService/handleRequest" || method == "clientService/notification" {
                let params = &value["params"];
                let client = params["senderClientId"].as_str().unwrap_or_default();
                assert!(
                    client.starts_with(&format!("c-{from}-")),
                    "a message from {from} names client {client}"
                );
                assert_eq!(
                    params["senderPrincipal"]["hub"], from,
                    "a message from {from} names principal {}",
                    params["senderPrincipal"]
                );
            }
        }
        for value in &caller {
            if value.get("method").is_some() {
                continue;
            }
            let id = value["id"]
                .as_u64()
                .unwrap_or_else(|| panic!("an answer to {value}"));
            assert!(
                id == 1 || id == 2,
                "an answer to a request never made: {value}"
            );
            assert_eq!(from, "b", "{from} answered a request pending on b");
            answered[id as usize] += 1;
            assert_eq!(answered[id as usize], 1, "request {id} answered twice");
        }
        if let Some((to, taken)) = &received.credit {
            assert_eq!(to, from, "a credit owed to {to} for lines of {from}");
            assert_eq!(
                first_header(parsed, "Switchboard-Sent").and_then(|v| v.parse::<u64>().ok()),
                Some(*taken)
            );
            assert_eq!(harness.credited(from), *taken);
        }
    }
    harness.finish();
});
