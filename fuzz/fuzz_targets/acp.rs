//! Arbitrary bytes as an editor's side of an ACP connection to the front
//! (`switchboard acp`'s request handling, in process). The front must not
//! panic, must end (tear down) once the input ends, and must only ever
//! write JSON-RPC messages. No hub runs (the front keeps reconnecting in the
//! background) and the model endpoint refuses connections, so prompts end in
//! a model error: the fuzzer explores request handling, not the agent loop.
#![no_main]

use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::time::Duration;

use agent_client_protocol::ByteStreams;
use libfuzzer_sys::fuzz_target;
use switchboard_acp::{AcpOptions, FrontLimits, ModelOptions};
use switchboard_client::Endpoint;
use tokio::io::AsyncReadExt;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
});

static HUB_DIR: LazyLock<tempfile::TempDir> = LazyLock::new(|| tempfile::tempdir().expect("a temp dir"));

fn options() -> AcpOptions {
    AcpOptions {
        hub_dir: HUB_DIR.path().to_owned(),
        endpoint: Endpoint::Dir(Some(HUB_DIR.path().to_owned())),
        model: ModelOptions {
            base_url: "http://127.0.0.1:1".into(),
            model: "fuzz".into(),
            api_key: None,
            read_timeout: Duration::from_secs(1),
        },
        models: BTreeMap::new(),
        limits: FrontLimits {
            max_sessions: 4,
            ..FrontLimits::default()
        },
        // The fuzzer never gets a job started (no model answers); a guard
        // that cannot start would only fail that job.
        guard_program: "/nonexistent/switchboard".into(),
    }
}

fuzz_target!(|data: &[u8]| {
    RUNTIME.block_on(async {
        let mut input = data.to_vec();
        input.push(b'\n');
        let (agent_out, mut editor_in) = tokio::io::duplex(1 << 20);
        let incoming = std::io::Cursor::new(input);
        let transport = ByteStreams::new(agent_out.compat_write(), tokio::io::BufReader::new(incoming).compat());
        let front = tokio::spawn(switchboard_acp::run(options(), transport));
        let mut written = Vec::new();
        let read_all = editor_in.read_to_end(&mut written);
        let (front, _) = tokio::time::timeout(Duration::from_secs(20), async { tokio::join!(front, read_all) })
            .await
            .expect("the front ends within 20 s of its input ending");
        front.expect("the front does not panic").ok();
        for line in written.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let value: serde_json::Value = serde_json::from_slice(line)
                .unwrap_or_else(|e| panic!("the front wrote a line that is not JSON ({e}): {}", String::from_utf8_lossy(line)));
            assert_eq!(value["jsonrpc"], "2.0", "not JSON-RPC 2.0: {value}");
        }
    });
});
