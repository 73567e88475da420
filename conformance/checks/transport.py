"""Section 1: the hub directory, hub.json, one hub per directory, framing."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import stat

from checks import Context, check
from harness import HUB_START, WAIT, Config, Failed, Hub, expect, http_get, short

# maxMetadataBytes may not exceed maxMessageBytes, so both shrink.
SMALL = {"maxMessageBytes": 4096, "maxMetadataBytes": 1024}


@check("1", "hub.json names the hub: version 1, its pid, socket, ws, a 64-hex token")
async def hub_json_shape(ctx: Context) -> None:
    hub = await ctx.hub()
    info = json.loads(hub.hub_json.read_text())
    expect(info.get("version") == 1, f"version is {short(info.get('version'))}")
    expect(info.get("pid") == hub.proc.pid, f"pid is {info.get('pid')}, the process is {hub.proc.pid}")
    socket = info.get("socket")
    expect(isinstance(socket, str) and os.path.isabs(socket), f"socket is {short(socket)}")
    expect(stat.S_ISSOCK(os.stat(socket).st_mode), f"{socket} is not a Unix socket")
    expect(re.fullmatch(r"ws://127\.0\.0\.1:\d+/", info.get("ws") or ""), f"ws is {short(info.get('ws'))}")
    expect(re.fullmatch(r"[0-9a-f]{64}", info.get("token") or ""), "token is not 64 hex digits")


@check("1", "hub.json is mode 0600 and the hub directory 0700")
async def hub_json_mode(ctx: Context) -> None:
    hub = await ctx.hub()
    mode = stat.S_IMODE(os.stat(hub.hub_json).st_mode)
    expect(mode == 0o600, f"hub.json has mode {mode:o}")
    mode = stat.S_IMODE(os.stat(hub.dir).st_mode)
    expect(mode == 0o700, f"the hub directory has mode {mode:o}")


@check("1", "a second hub on the same directory refuses to start, naming the first")
async def second_hub_refused(ctx: Context) -> None:
    hub = await ctx.hub()
    second = Hub(hub.binary, root=hub.root)
    second.log_path = hub.root / "second.log"
    proc = await second.spawn()
    try:
        status = await asyncio.wait_for(proc.wait(), HUB_START)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise Failed("the second hub is still running")
    expect(status != 0, "the second hub exited with status 0")
    log = second.log_path.read_text(errors="replace")
    expect("already running" in log, f"its error does not say a hub is running: {short(log)}")
    expect(str(hub.proc.pid) in log, f"its error does not name the first hub's pid {hub.proc.pid}: {short(log)}")
    expect(json.loads(hub.hub_json.read_text())["pid"] == hub.proc.pid, "hub.json no longer names the first hub")
    client = await hub.client()
    expect((await client.call("ping")).obj.get("result", 0) is None, "the first hub stopped answering")


@check("1", "a hub replaces the stale socket and hub.json of a killed one")
async def stale_socket_replaced(ctx: Context) -> None:
    first = await ctx.hub()
    await first.stop(signal.SIGKILL)
    expect(os.path.exists(first.socket), "SIGKILL removed the socket; nothing stale to replace")
    second = Hub(first.binary, root=first.root)
    ctx.hubs.append(second)
    await second.start()
    client = await second.client()
    expect((await client.call("ping")).obj.get("result", 0) is None, "the new hub does not answer on its socket")


@check("1", "SIGTERM: exit status 0, hub.json and the socket removed")
async def sigterm_clean(ctx: Context) -> None:
    hub = await ctx.hub()
    await hub.client()
    status = await hub.stop(signal.SIGTERM)
    expect(status == 0, f"exit status {status} after SIGTERM" + ("" if status is not None else " (killed)"))
    expect(not hub.hub_json.exists(), "hub.json is still there")
    expect(not os.path.exists(hub.socket), "hub.sock is still there")


async def _transports(hub: Hub):
    return [await hub.unix(), await hub.ws()]


@check("1", "not JSON: -32700 with id null, and the connection stays open (both transports)")
async def parse_error(ctx: Context) -> None:
    hub = await ctx.hub()
    for client in await _transports(hub):
        await client.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"ping"')
        answer = await client.expect(lambda m: True, "an answer to a line that is not JSON")
        expect(answer.error and answer.error.get("code") == -32700, f"{client.label}: answered {answer}")
        expect(answer.has_id and answer.id is None, f"{client.label}: the id is not null: {answer}")
        pong = await client.call("ping")
        expect("result" in pong.obj, f"{client.label}: ping after -32700 answered {pong}")


@check("1", "a batch gets one -32600 with id null, and nothing else")
async def batch_refused(ctx: Context) -> None:
    hub = await ctx.hub()
    for client in await _transports(hub):
        await client.initialize(hub.token)
        await client.send([{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2, "method": "ping"}])
        before = await client.fence()
        expect(len(before) == 1, f"{client.label}: a batch got {len(before)} answers: {before}")
        answer = before[0]
        expect(answer.error and answer.error.get("code") == -32600, f"{client.label}: batch answered {answer}")
        expect(answer.has_id and answer.id is None, f"{client.label}: batch error id is not null: {answer}")


@check("1", "a message over maxMessageBytes: -32600 id null naming the limit, then the connection closes")
async def too_large_closes(ctx: Context) -> None:
    hub = await ctx.hub(Config(limits=SMALL))
    for client in await _transports(hub):
        await client.initialize(hub.token)
        filler = "x" * 5000
        await client.send({"jsonrpc": "2.0", "id": 7, "method": "ping", "params": {"filler": filler}})
        closed = await client.wait_closed()
        expect(closed, f"{client.label}: the connection is still open")
        errors = [m for m in client.buffer if m.error]
        expect(errors, f"{client.label}: closed without an error")
        error = errors[0]
        expect(error.error["code"] == -32600 and error.id is None, f"{client.label}: answered {error}")
        expect((error.error.get("data") or {}).get("limit") == "maxMessageBytes", f"{client.label}: data is {short(error.error.get('data'))}")


@check("1", "a message just within maxMessageBytes is served")
async def within_limit_served(ctx: Context) -> None:
    hub = await ctx.hub(Config(limits=SMALL))
    client = await hub.client()
    head = '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"f":"'
    line = head + "x" * (4096 - len(head) - 3) + '"}}'
    expect(len(line) == 4096, "the probe built the message wrong")
    await client.send_raw(line.encode())
    answer = await client.response(1)
    expect("result" in answer.obj, f"a 4096-byte ping answered {answer}")


@check("1", "Unix socket: a trailing CR and blank lines are tolerated")
async def unix_line_tolerance(ctx: Context) -> None:
    hub = await ctx.hub()
    client = await hub.unix()
    await client.send_bytes(b'\n  \n{"jsonrpc":"2.0","id":"cr","method":"ping"}\r\n')
    answer = await client.response("cr")
    expect("result" in answer.obj, f"answered {answer}")
    before = await client.fence()
    expect(not before, f"blank lines were answered: {before}")


@check("1", "WebSocket Origin: a foreign origin and `null` get 403, none and an allowed one 101")
async def origin_checked(ctx: Context) -> None:
    hub = await ctx.hub(Config(allowed_origins=["https://allowed.example"]))
    for origin, wanted in [
        ("https://evil.example", 403),
        ("null", 403),
        (None, 101),
        ("https://allowed.example", 101),
    ]:
        status, _, _ = await http_get(hub.port, "/", {"Origin": origin}, upgrade=True)
        expect(status == wanted, f"upgrade with Origin {origin!r} answered {status}, expected {wanted}")
    status, _, _ = await http_get(hub.port, "/metrics", {"Origin": "https://evil.example"})
    expect(status == 403, f"/metrics with a foreign Origin answered {status}")


@check("1", "a Host that is not a loopback name gets 403; other paths 404")
async def host_and_paths(ctx: Context) -> None:
    hub = await ctx.hub()
    status, _, _ = await http_get(hub.port, "/", {"Host": f"attacker.example:{hub.port}"}, upgrade=True)
    expect(status == 403, f"upgrade with Host attacker.example answered {status}")
    status, _, _ = await http_get(hub.port, "/elsewhere", upgrade=True)
    expect(status == 404, f"upgrade on /elsewhere answered {status}")


@check("1", "WebSocket: binary frames are read like text frames")
async def binary_frames(ctx: Context) -> None:
    hub = await ctx.hub()
    client = await hub.ws()
    await asyncio.wait_for(client.socket.send(b'{"jsonrpc":"2.0","id":"bin","method":"ping"}'), WAIT)
    answer = await client.response("bin")
    expect("result" in answer.obj, f"answered {answer}")


@check("1", "--no-ws: hub.json names no WebSocket, the socket still serves")
async def no_ws(ctx: Context) -> None:
    hub = Hub(ctx.binary)
    ctx.hubs.append(hub)
    hub.args = lambda: [hub.binary, "serve", "--dir", str(hub.dir), "--no-ws"]
    await hub.start()
    expect(hub.info.get("ws", "absent") is None, f"ws is {short(hub.info.get('ws', 'absent'))}, not null")
    client = await hub.client()
    expect("result" in (await client.call("ping")).obj, "the socket does not serve")
