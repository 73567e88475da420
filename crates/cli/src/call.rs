//! `switchboard call`: one request to a service, its result on stdout.

use std::time::Duration;

use anyhow::{anyhow, bail};
use switchboard_client::{Error, RequestOptions};

use crate::connect;
use crate::output::emit;
use crate::target::{self, Params};

#[derive(clap::Args, Debug)]
#[command(after_help = "\
SERVICE is a service id (svc-…) or a metadata selector key=value[,key=value…]
that must match exactly one service, e.g. protocol=git-object-reader,version=1
(values are compared as JSON when they parse as JSON, else as strings).

On success the result is printed on stdout as the service sent it, followed
by a newline, and the exit status is 0. On an error answer, the code, the
message and the data are printed on stderr and the exit status is 1.
Usage errors (bad PARAMS_JSON, unknown options) exit with status 2.")]
pub struct CallArgs {
    #[command(flatten)]
    hub: connect::HubArgs,
    /// Wait at most this many milliseconds for the answer (default: the hub's
    /// defaultRequestTimeoutMs).
    #[arg(long, value_name = "MS", value_parser = milliseconds)]
    timeout: Option<u64>,
    /// The service: an id, or a selector such as protocol=git-object-reader.
    #[arg(value_name = "SERVICE")]
    service: String,
    /// The method to call.
    #[arg(value_name = "METHOD")]
    method: String,
    /// The params as JSON (`-`: read them from stdin); omitted: no params.
    #[arg(value_name = "PARAMS_JSON", value_parser = target::parse_params)]
    params: Option<Params>,
}

pub async fn call(args: CallArgs) -> anyhow::Result<()> {
    let params = args.params.map(Params::load).transpose()?;
    let client = connect::connect(&args.hub, "call").await?;
    if let Some(timeout) = args.timeout {
        let max = client.limits().max_request_timeout_ms;
        if timeout > max {
            bail!("--timeout {timeout} is over the hub's maxRequestTimeoutMs ({max})");
        }
    }
    let service = target::resolve(&client, &args.service).await?;
    let options = RequestOptions {
        timeout: args.timeout.map(Duration::from_millis),
    };
    let answer = client
        .request_raw(
            &service.service_id,
            &args.method,
            params.as_deref(),
            options,
        )
        .await;
    client.close();
    match answer {
        Ok(result) => {
            emit(&format!("{}\n", result.get()))?;
            Ok(())
        }
        Err(Error::Rpc(error)) => {
            let mut message = format!(
                "{} on {} failed: error {}: {}",
                args.method, service.service_id, error.code, error.message
            );
            if let Some(data) = &error.data {
                message.push_str(&format!("\ndata: {}", data.get()));
            }
            Err(anyhow!(message))
        }
        Err(other) => Err(anyhow!(
            "{} on {} failed: {other}",
            args.method,
            service.service_id
        )),
    }
}

/// A timeout in milliseconds: a whole number, at least 1.
fn milliseconds(text: &str) -> Result<u64, String> {
    match text.parse::<u64>() {
        Ok(0) => Err("a timeout is at least 1 millisecond".into()),
        Ok(ms) => Ok(ms),
        Err(_) => Err(format!("{text:?} is not a whole number of milliseconds")),
    }
}
