"""Section 8: the bounds, their names in -32050, and -32602's data.field."""

from __future__ import annotations

import asyncio
import json
import socket

from checks import Context, check
from harness import WAIT, Config, expect, http_get, short


@check("8", "maxServicesPerClient: the next registration gets -32050 naming the limit")
async def services_per_client(ctx: Context) -> None:
    hub = await ctx.hub(Config(limits={"maxServicesPerClient": 2}))
    owner = await hub.client()
    await owner.register({})
    await owner.register({})
    answer = await owner.call("client/registerService", {"metadata": {}})
    error = answer.error or {}
    expect(error.get("code") == -32050, f"answered {answer}")
    data = error.get("data") or {}
    expect(data.get("limit") == "maxServicesPerClient" and data.get("max") == 2, f"data is {short(data)}")
    other = await hub.client()
    await other.register({})


@check("8", "method names: empty or not printable ASCII is -32602 (field method), too long -32050")
async def method_names(ctx: Context) -> None:
    hub = await ctx.hub(Config(limits={"maxMethodBytes": 16}))
    owner = await hub.client()
    service = await owner.register({})
    caller = await hub.client()
    for method in ["", "tab\there", "caf\u00e9"]:
        answer = await caller.call("clientService/request", {"serviceId": service, "method": method})
        error = answer.error or {}
        expect(error.get("code") == -32602, f"method {method!r} answered {answer}")
        expect((error.get("data") or {}).get("field") == "method", f"method {method!r}: data is {short(error.get('data'))}")
    answer = await caller.call("clientService/request", {"serviceId": service, "method": "m" * 17})
    error = answer.error or {}
    expect(error.get("code") == -32050, f"a 17-byte method answered {answer}")
    expect((error.get("data") or {}).get("limit") == "maxMethodBytes", f"data is {short(error.get('data'))}")


@check("8", "a bad serviceId is -32602 naming the field")
async def service_id_field(ctx: Context) -> None:
    hub = await ctx.hub()
    caller = await hub.client()
    for method, params in [
        ("clientService/request", {"serviceId": 5, "method": "m"}),
        ("client/unregisterService", {"serviceId": ["x"]}),
        ("client/updateService", {"metadata": {}}),
    ]:
        answer = await caller.call(method, params)
        error = answer.error or {}
        expect(error.get("code") == -32602, f"{method} {short(params)} answered {answer}")
        expect((error.get("data") or {}).get("field") == "serviceId", f"{method}: data is {short(error.get('data'))}")


@check("8", "maxConnections: the extra Unix connection gets -32050 naming the limit and is closed")
async def max_connections(ctx: Context) -> None:
    hub = await ctx.hub(Config(limits={"maxConnections": 2}))
    first = await hub.client()
    await hub.client()
    extra = await hub.unix("extra")
    closed = await extra.wait_closed()
    expect(closed, "the extra connection is still open")
    errors = [m for m in extra.buffer if m.error]
    expect(errors and errors[0].error.get("code") == -32050, f"the extra connection got {extra.buffer}")
    expect((errors[0].error.get("data") or {}).get("limit") == "maxConnections", f"data is {short(errors[0].error.get('data'))}")
    expect("result" in (await first.call("ping")).obj, "a connection within the bound stopped answering")
    status, _, _ = await http_get(hub.port, "/", upgrade=True)
    expect(status == 503, f"an upgrade past maxConnections answered {status}")
    status, _, _ = await http_get(hub.port, "/healthz")
    expect(status == 200, f"/healthz of a full hub answered {status}")


@check("8", "nesting: a request's params may nest 125 levels, one more is -32602 (field params)")
async def nesting_bound(ctx: Context) -> None:
    hub = await ctx.hub()
    owner = await hub.client()
    service = await owner.register({})
    caller = await hub.client()
    deep = lambda n: "[" * n + "]" * n  # noqa: E731
    line = '{"jsonrpc":"2.0","id":1,"method":"clientService/request","params":{"serviceId":%s,"method":"m","params":%s}}'
    await caller.send_raw((line % (json.dumps(service), deep(125))).encode())
    handle = await owner.handle_request()
    expect(deep(125).encode() in handle.raw, "the 125-level params did not arrive whole")
    await caller.send_raw((line.replace('"id":1', '"id":2') % (json.dumps(service), deep(126))).encode())
    answer = await caller.response(2)
    error = answer.error or {}
    expect(error.get("code") == -32602, f"126 levels answered {answer}")
    expect((error.get("data") or {}).get("field") == "params", f"data is {short(error.get('data'))}")


@check("8", "a connection that never reads does not stall routing between others")
async def stuck_reader(ctx: Context) -> None:
    hub = await ctx.hub(Config(limits={"notifyShedBytes": 65536, "slowConsumerBytes": 1048576, "maxMessageBytes": 65536}))
    stuck_service = await _stuck_owner(hub)
    sender = await hub.client()
    owner = await hub.client()
    service = await owner.register({})
    blob = "x" * 16000
    for _ in range(200):
        await sender.notify("clientService/notify", {"serviceId": stuck_service, "method": "m", "params": blob})
    await sender.notify("clientService/notify", {"serviceId": service, "method": "after"})
    message = await owner.expect(lambda m: m.method == "clientService/notification", "the notification after the flood")
    expect(message.params.get("method") == "after", f"got {message}")
    shed = await hub.metric('switchboard_notifications_dropped_total{reason="shed"}')
    expect(shed and shed > 0, f"nothing was shed for the stuck reader ({shed})")
    hub.stuck_socket.close()


async def _stuck_owner(hub) -> str:
    """A connection that registers a service, then never reads again; its
    socket is kept open (in the hub object) until the check ends."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(WAIT)
    sock.connect(hub.socket)
    hub.stuck_socket = sock
    sock.sendall(
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"authToken": hub.token}}).encode()
        + b"\n"
        + json.dumps({"jsonrpc": "2.0", "id": 2, "method": "client/registerService", "params": {"metadata": {"stuck": True}}}).encode()
        + b"\n"
    )
    data = b""
    loop = asyncio.get_running_loop()
    while data.count(b"\n") < 2:
        chunk = await loop.run_in_executor(None, sock.recv, 65536)
        expect(chunk, "the hub closed the stuck connection at start")
        data += chunk
    answer = json.loads(data.split(b"\n")[1])
    return answer["result"]["serviceId"]
