"""Section 6: requests: routing, id remapping, answers exactly once,
timeouts, cancellation, owners going away, in-flight bounds."""

from __future__ import annotations

import asyncio
import json

from checks import Context, check
from harness import CATALOG, Config, expect, short

from checks.notifications import ODD_PARAMS


async def _pair(ctx: Context, config: Config | None = None):
    hub = await ctx.hub(config)
    owner = await hub.client()
    service = await owner.register({"protocol": "calc"})
    caller = await hub.client()
    return hub, owner, service, caller


async def _request(caller, service: str, id, method: str = "m", params=None, timeout_ms=None) -> None:
    body = {"serviceId": service, "method": method}
    if params is not None:
        body["params"] = params
    if timeout_ms is not None:
        body["timeoutMs"] = timeout_ms
    await caller.send({"jsonrpc": "2.0", "id": id, "method": "clientService/request", "params": body})


async def _answer(owner, y, result=None, error=None) -> None:
    message = {"jsonrpc": "2.0", "id": y}
    if error is not None:
        message["error"] = error
    else:
        message["result"] = result
    await owner.send(message)


@check("6", "a request reaches the owner as handleRequest with an integer id; the result comes back under the caller's id")
async def request_routed(ctx: Context) -> None:
    _, owner, service, caller = await _pair(ctx)
    await _request(caller, service, "call-1", "add", {"a": 2, "b": 3})
    handle = await owner.handle_request()
    y = handle.id
    expect(isinstance(y, int) and not isinstance(y, bool) and y > 0, f"the forwarded id is {short(y)}, not a positive integer")
    wanted = {
        "channel": CATALOG,
        "serviceId": service,
        "senderClientId": caller.client_id,
        "senderPrincipal": caller.principal,
        "method": "add",
        "params": {"a": 2, "b": 3},
    }
    wrong = [k for k, v in wanted.items() if handle.params.get(k) != v]
    expect(not wrong, f"wrong {wrong} in {short(handle.params)}")
    await _answer(owner, y, {"sum": 5})
    answer = await caller.response("call-1")
    expect(answer.obj.get("result") == {"sum": 5}, f"the caller got {answer}")
    extra = await caller.fence()
    expect(not extra, f"the caller got more than its answer: {extra}")


@check("6", "params and result are spliced byte for byte")
async def request_bytes(ctx: Context) -> None:
    _, owner, service, caller = await _pair(ctx)
    line = b'{"jsonrpc":"2.0","id":9,"method":"clientService/request","params":{"serviceId":' + json.dumps(service).encode() + b',"method":"m","params":' + ODD_PARAMS + b"}}"
    await caller.send_raw(line)
    handle = await owner.handle_request()
    expect(ODD_PARAMS in handle.raw, f"params were re-encoded: {handle}")
    await owner.send_raw(b'{"jsonrpc":"2.0","id":' + str(handle.id).encode() + b',"result":' + ODD_PARAMS + b"}")
    answer = await caller.response(9)
    expect(ODD_PARAMS in answer.raw, f"the result was re-encoded: {answer}")


@check("6", "an application error keeps its code, message and data")
async def error_preserved(ctx: Context) -> None:
    _, owner, service, caller = await _pair(ctx)
    error = {"code": -31999, "message": "the repository is locked", "data": {"lock": "index.lock", "n": [1, 2]}}
    await _request(caller, service, 1)
    handle = await owner.handle_request()
    await _answer(owner, handle.id, error=error)
    answer = await caller.response(1)
    expect(answer.error == error, f"the caller got {answer}")


@check("6", "error data over maxErrorDataBytes becomes {truncated: true}")
async def error_data_truncated(ctx: Context) -> None:
    _, owner, service, caller = await _pair(ctx, Config(limits={"maxErrorDataBytes": 256}))
    await _request(caller, service, 1)
    handle = await owner.handle_request()
    await _answer(owner, handle.id, error={"code": 1, "message": "big", "data": {"blob": "x" * 1000}})
    answer = await caller.response(1)
    error = answer.error or {}
    expect(error.get("code") == 1 and error.get("message") == "big", f"the caller got {answer}")
    expect(error.get("data") == {"truncated": True}, f"data is {short(error.get('data'))}")
    await _request(caller, service, 2)
    handle = await owner.handle_request()
    await _answer(owner, handle.id, error={"code": 1, "message": "small", "data": "fits"})
    expect((await caller.response(2)).error.get("data") == "fits", "data within the bound was changed")


@check("6", "two callers using the same id at once get their own answers")
async def ids_remapped(ctx: Context) -> None:
    hub, owner, service, first = await _pair(ctx)
    second = await hub.client()
    await _request(first, service, 1, params="first")
    await _request(second, service, 1, params="second")
    handles = [await owner.handle_request(), await owner.handle_request()]
    expect(handles[0].id != handles[1].id, f"both requests reached the owner as id {handles[0].id}")
    for handle in reversed(handles):
        await _answer(owner, handle.id, f"for {handle.params['params']}")
    expect((await first.response(1)).result == "for first", "the first caller got the second's answer")
    expect((await second.response(1)).result == "for second", "the second caller got the first's answer")


@check("6", "the same id twice in flight on one connection: -32600, the first unaffected")
async def duplicate_id(ctx: Context) -> None:
    _, owner, service, caller = await _pair(ctx)
    await _request(caller, service, 5, params="one")
    handle = await owner.handle_request()
    await _request(caller, service, 5, params="two")
    answer = await caller.response(5)
    expect((answer.error or {}).get("code") == -32600, f"the duplicate answered {answer}")
    await _answer(owner, handle.id, "done")
    answer = await caller.response(5)
    expect(answer.obj.get("result") == "done", f"the first request got {answer}")
    # Answered, the id is free again.
    await _request(caller, service, 5, params="three")
    handle = await owner.handle_request()
    expect(handle.params.get("params") == "three", f"the reused id reached the owner as {handle}")


@check("6", "timeout: -32051 with data.timeoutMs, the owner gets $/cancelRequest, a late answer is dropped")
async def timeout(ctx: Context) -> None:
    hub, owner, service, caller = await _pair(ctx)
    await _request(caller, service, "slow", timeout_ms=200)
    handle = await owner.handle_request()
    answer = await caller.response("slow", timeout=3)
    error = answer.error or {}
    expect(error.get("code") == -32051, f"answered {answer}")
    expect((error.get("data") or {}).get("timeoutMs") == 200, f"data is {short(error.get('data'))}")
    await owner.cancel_for(handle.id)
    dropped = await hub.metric("switchboard_responses_dropped_total") or 0
    await _answer(owner, handle.id, "too late")
    await owner.fence()
    extra = await caller.fence()
    expect(not extra, f"the caller got a second answer: {extra}")
    after = await hub.metric("switchboard_responses_dropped_total")
    expect(after == dropped + 1, f"the late answer was not counted as dropped ({dropped} -> {after})")


@check("6", "timeoutMs absent uses defaultRequestTimeoutMs")
async def default_timeout(ctx: Context) -> None:
    _, owner, service, caller = await _pair(ctx, Config(limits={"defaultRequestTimeoutMs": 300}))
    await _request(caller, service, "d")
    await owner.handle_request()
    answer = await caller.response("d", timeout=3)
    expect((answer.error or {}).get("code") == -32051, f"answered {answer}")
    expect(answer.error.get("data", {}).get("timeoutMs") == 300, f"data is {short(answer.error.get('data'))}")


@check("6", "timeoutMs outside 1..maxRequestTimeoutMs: -32602 with field timeoutMs")
async def timeout_checked(ctx: Context) -> None:
    _, _, service, caller = await _pair(ctx)
    for value in [0, -5, 600001, 1.5, "100"]:
        await _request(caller, service, "t", timeout_ms=value)
        answer = await caller.response("t")
        error = answer.error or {}
        expect(error.get("code") == -32602, f"timeoutMs {short(value)} answered {answer}")
        expect((error.get("data") or {}).get("field") == "timeoutMs", f"timeoutMs {short(value)}: data is {short(error.get('data'))}")


@check("6", "$/cancelRequest: -32800 at once, the owner gets $/cancelRequest with its own id")
async def cancel(ctx: Context) -> None:
    _, owner, service, caller = await _pair(ctx)
    await _request(caller, service, "c")
    handle = await owner.handle_request()
    await caller.notify("$/cancelRequest", {"id": "c"})
    answer = await caller.response("c")
    expect((answer.error or {}).get("code") == -32800, f"answered {answer}")
    await owner.cancel_for(handle.id)
    await _answer(owner, handle.id, "after the cancel")
    await owner.fence()
    extra = await caller.fence()
    expect(not extra, f"the caller got a second answer: {extra}")
    await caller.notify("$/cancelRequest", {"id": "c"})
    await caller.notify("$/cancelRequest", {"id": "never-sent"})
    extra = await caller.fence()
    expect(not extra, f"cancelling a finished or unknown id answered: {extra}")


@check("6", "the owner disconnects: -32052 disconnected")
async def owner_disconnects(ctx: Context) -> None:
    _, owner, service, caller = await _pair(ctx)
    await _request(caller, service, "gone")
    await owner.handle_request()
    await owner.close()
    answer = await caller.response("gone")
    error = answer.error or {}
    expect(error.get("code") == -32052, f"answered {answer}")
    expect((error.get("data") or {}).get("reason") == "disconnected", f"data is {short(error.get('data'))}")


@check("6", "the owner unregisters: -32052 unregistered")
async def owner_unregisters(ctx: Context) -> None:
    _, owner, service, caller = await _pair(ctx)
    await _request(caller, service, "gone")
    await owner.handle_request()
    await owner.result("client/unregisterService", {"serviceId": service})
    answer = await caller.response("gone")
    error = answer.error or {}
    expect(error.get("code") == -32052, f"answered {answer}")
    expect((error.get("data") or {}).get("reason") == "unregistered", f"data is {short(error.get('data'))}")


@check("6", "the caller disconnects: the owner gets $/cancelRequest")
async def caller_disconnects(ctx: Context) -> None:
    _, owner, service, caller = await _pair(ctx)
    await _request(caller, service, "bye")
    handle = await owner.handle_request()
    await caller.close()
    await owner.cancel_for(handle.id)


@check("6", "only the owner's connection can answer a forwarded id")
async def only_owner_answers(ctx: Context) -> None:
    hub, owner, service, caller = await _pair(ctx)
    await _request(caller, service, "x")
    handle = await owner.handle_request()
    intruder = await hub.client()
    await _answer(intruder, handle.id, "forged")
    await intruder.fence()
    expect(not [m for m in await caller.fence() if m.id == "x"], "an intruder's answer completed the request")
    await _answer(owner, handle.id, "real")
    expect((await caller.response("x")).obj.get("result") == "real", "the owner's answer did not arrive")


@check("6", "maxInFlightPerClient: past it, -32050 at once naming the limit")
async def in_flight_per_client(ctx: Context) -> None:
    _, owner, service, caller = await _pair(ctx, Config(limits={"maxInFlightPerClient": 2}))
    await _request(caller, service, 1)
    await _request(caller, service, 2)
    await _request(caller, service, 3)
    answer = await caller.response(3)
    error = answer.error or {}
    expect(error.get("code") == -32050, f"the third request answered {answer}")
    data = error.get("data") or {}
    expect(data.get("limit") == "maxInFlightPerClient" and data.get("max") == 2, f"data is {short(data)}")
    handles = [await owner.handle_request(), await owner.handle_request()]
    await owner.quiet(lambda m: m.method == "clientService/handleRequest")
    for handle in handles:
        await _answer(owner, handle.id, "ok")
    await caller.response(1)
    await caller.response(2)
    await _request(caller, service, 4)
    await owner.handle_request()


@check("6", "maxInFlightPerService: past it, -32050 naming the limit")
async def in_flight_per_service(ctx: Context) -> None:
    hub, owner, service, first = await _pair(ctx, Config(limits={"maxInFlightPerService": 2}))
    second = await hub.client()
    await _request(first, service, 1)
    await _request(second, service, 1)
    await owner.handle_request()
    await owner.handle_request()
    third = await hub.client()
    await _request(third, service, 1)
    answer = await third.response(1)
    error = answer.error or {}
    expect(error.get("code") == -32050, f"the third request answered {answer}")
    expect((error.get("data") or {}).get("limit") == "maxInFlightPerService", f"data is {short(error.get('data'))}")


@check("6", "a request to an unknown service gets -32008; a request sent as a notification nothing")
async def unknown_service(ctx: Context) -> None:
    _, owner, service, caller = await _pair(ctx)
    await _request(caller, "svc-" + "f" * 32, "u")
    answer = await caller.response("u")
    expect((answer.error or {}).get("code") == -32008, f"answered {answer}")
    await caller.notify("clientService/request", {"serviceId": service, "method": "m"})
    expect(not await caller.fence(), "a request without an id was answered")
    await owner.fence()
    expect(not [m for m in owner.buffer if m.method == "clientService/handleRequest"], "a request without an id was forwarded")


@check("6", "many concurrent requests are each answered exactly once")
async def many_requests(ctx: Context) -> None:
    _, owner, service, caller = await _pair(ctx)
    count = 200

    async def serve():
        for _ in range(count):
            handle = await owner.handle_request()
            await _answer(owner, handle.id, handle.params["params"] * 2)

    server = asyncio.create_task(serve())
    for i in range(count):
        await _request(caller, service, i, params=i)
    for i in range(count):
        answer = await caller.response(i)
        expect(answer.obj.get("result") == i * 2, f"request {i} got {answer}")
    await server
    expect(not await caller.fence(), "extra answers arrived")
