"""Two official Python MCP clients (pip package `mcp`), each on its own
`switchboard mcp` process, call the reference server's sampling tool on the
hub under NAMESPACE: each sampling request must reach only the client whose
call it is, whether the clients call one after the other or at once (at
once, the reference server's request names no call, so provide-mcp may
refuse it as ambiguous, as docs/reference/tool-calls.md 9.4 says; never
to the other client). Run by crates/cli/tests/cli/mcp_clients.rs:

    python3 two_clients.py SWITCHBOARD_BIN HUB_DIR NAMESPACE

Over Streamable HTTP (SWITCHBOARD_MCP_URL, `transport.py`) both clients are
sessions of one gateway in the hub, sharing its consumer.

Prints `FAILED: <check>: <why>` and exits 1 on a failure.
"""

import sys
from contextlib import AsyncExitStack

import anyio
import mcp_types as types
from mcp import ClientSession
from transport import transport

SWITCHBOARD, HUB_DIR, NS = sys.argv[1], sys.argv[2], sys.argv[3]
ROUNDS = 3
AMBIGUOUS = "several calls are in flight and the request names none of them"


def sampler(name, asked):
    async def sampling_callback(context, params):
        asked.append(params.messages[0].content.text)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"sampled by {name}"),
            model=f"{name}-model",
        )

    return sampling_callback


def text_of(result):
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def main():
    failures = []
    refused = []
    asked = {"alpha": [], "beta": []}
    async with AsyncExitStack() as stack:
        sessions = {}
        for name in asked:
            streams = await stack.enter_async_context(transport(SWITCHBOARD, HUB_DIR))
            read, write = streams[0], streams[1]
            session = await stack.enter_async_context(
                ClientSession(read, write, sampling_callback=sampler(name, asked[name]))
            )
            with anyio.fail_after(30):
                await session.initialize()
            sessions[name] = session

        results = {}

        async def calls(name, mode):
            for round in range(ROUNDS):
                prompt = f"{mode} prompt {round} of {name}"
                result = await sessions[name].call_tool(
                    f"{NS}__trigger-sampling-request", {"prompt": prompt, "maxTokens": 5}
                )
                results[(mode, name, round)] = (prompt, result)

        # One after the other, alternating clients.
        for round in range(ROUNDS):
            for name in sessions:
                prompt = f"sequential prompt {round} of {name}"
                result = await sessions[name].call_tool(
                    f"{NS}__trigger-sampling-request", {"prompt": prompt, "maxTokens": 5}
                )
                results[("sequential", name, round)] = (prompt, result)
        # Both clients at once.
        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                for name in sessions:
                    group.start_soon(calls, name, "concurrent")

        for (mode, name, round), (prompt, result) in sorted(results.items()):
            text = text_of(result)
            other = "beta" if name == "alpha" else "alpha"
            what = f"{mode} call {round} of {name}"
            if result.is_error and mode == "concurrent" and AMBIGUOUS in text:
                # The documented refusal (docs/reference/tool-calls.md 9.4):
                # the reference server's request names no call, and with
                # both in flight it cannot be told whose it is.
                refused.append(what)
                if any(prompt in seen for seen in asked[other]):
                    failures.append(f"{what}: refused, yet the other client ({other}) was asked {prompt!r}")
                continue
            if result.is_error:
                failures.append(f"{what}: an error result: {text}")
            elif f"sampled by {name}" not in text or f"sampled by {other}" in text:
                failures.append(f"{what}: the result does not carry its own client's sample: {text}")
            if not any(prompt in seen for seen in asked[name]):
                failures.append(f"{what}: its client's sampling callback never saw {prompt!r}")
            if any(prompt in seen for seen in asked[other]):
                failures.append(f"{what}: the other client ({other}) was asked {prompt!r}")

    for failure in failures:
        print(f"FAILED: each sampling request reaches only its own client: {failure}", flush=True)
    if failures:
        sys.exit(1)
    print(
        f"ok: {ROUNDS} sequential and {ROUNDS} concurrent sampling calls per client, each to its own client "
        f"({len(refused)} concurrent ones refused as ambiguous, none to the other client)"
    )
    print("all checks passed", flush=True)


anyio.run(main)
