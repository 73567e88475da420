"""Section 2: before and at `initialize`, identity and tokens."""

from __future__ import annotations

import re

from checks import Context, check
from harness import CATALOG, DIRECT, expect, short

DEFAULT_LIMITS = {
    "maxMessageBytes": 16 * 1024 * 1024,
    "maxMetadataBytes": 64 * 1024,
    "maxMethodBytes": 256,
    "maxServicesPerClient": 256,
    "maxInFlightPerClient": 1024,
    "maxInFlightPerService": 4096,
    "defaultRequestTimeoutMs": 60000,
    "maxRequestTimeoutMs": 600000,
    "maxErrorDataBytes": 64 * 1024,
    "notifyShedBytes": 8 * 1024 * 1024,
    "slowConsumerBytes": 64 * 1024 * 1024,
    "maxConnections": 4096,
}

CLIENT_ID = re.compile(r"c-[0-9a-f]{32}")


@check("2", "ping answers null before and after initialize")
async def ping_any_time(ctx: Context) -> None:
    hub = await ctx.hub()
    client = await hub.unix()
    answer = await client.call("ping")
    expect("result" in answer.obj and answer.result is None, f"ping before initialize answered {answer}")
    await client.initialize(hub.token)
    answer = await client.call("ping")
    expect("result" in answer.obj and answer.result is None, f"ping after initialize answered {answer}")


@check("2", "before initialize: requests get -32600 notInitialized, unknown methods too")
async def not_initialized(ctx: Context) -> None:
    hub = await ctx.hub()
    client = await hub.unix()
    for method, params in [
        ("subscribe", {"channel": CATALOG}),
        ("client/registerService", {"metadata": {}}),
        ("no/such/method", {}),
    ]:
        answer = await client.call(method, params)
        error = answer.error or {}
        expect(error.get("code") == -32600, f"{method} before initialize answered {answer}")
        expect((error.get("data") or {}).get("reason") == "notInitialized", f"{method}: data is {short(error.get('data'))}")


@check("2", "before initialize: notifications are dropped without an answer")
async def early_notification_dropped(ctx: Context) -> None:
    hub = await ctx.hub()
    client = await hub.unix()
    await client.notify("clientService/notify", {"serviceId": "svc-0", "method": "m"})
    await client.notify("unsubscribe", {"channel": CATALOG})
    before = await client.fence()
    expect(not before, f"a notification before initialize was answered: {before}")


@check("2", "initialize answers protocolVersion, clientId, principal, serverSeq, snapshots, serverInfo, limits, _meta")
async def initialize_result(ctx: Context) -> None:
    hub = await ctx.hub()
    client = await hub.unix()
    result = await client.initialize(hub.token)
    expect(result.get("protocolVersion") == "1.0.0", f"protocolVersion is {short(result.get('protocolVersion'))}")
    expect(CLIENT_ID.fullmatch(str(result.get("clientId"))), f"clientId is {short(result.get('clientId'))}")
    expect(result.get("principal") == DIRECT, f"principal is {short(result.get('principal'))}")
    seq = result.get("serverSeq")
    expect(isinstance(seq, int) and not isinstance(seq, bool) and seq >= 0, f"serverSeq is {short(seq)}")
    expect(result.get("snapshots") == [], f"snapshots is {short(result.get('snapshots'))}")
    info = result.get("serverInfo") or {}
    expect(info.get("name") == "switchboard" and isinstance(info.get("version"), str), f"serverInfo is {short(info)}")
    meta = (result.get("_meta") or {}).get("clientServices")
    expect(meta == {"version": 1, "channel": CATALOG}, f"_meta.clientServices is {short(meta)}")


@check("2", "initialize reports every limit of section 8 with its default")
async def initialize_limits(ctx: Context) -> None:
    hub = await ctx.hub()
    result = (await hub.client()).init_result
    limits = result.get("limits") or {}
    wrong = [f"{k}={short(limits.get(k))}" for k, v in DEFAULT_LIMITS.items() if limits.get(k) != v]
    expect(not wrong, "limits differ from the defaults: " + ", ".join(wrong))


@check("2", "configured limits are the ones initialize reports")
async def initialize_configured_limits(ctx: Context) -> None:
    from harness import Config

    hub = await ctx.hub(Config(limits={"maxServicesPerClient": 3, "defaultRequestTimeoutMs": 1234}))
    limits = (await hub.client()).init_result.get("limits") or {}
    expect(limits.get("maxServicesPerClient") == 3, f"maxServicesPerClient is {short(limits.get('maxServicesPerClient'))}")
    expect(limits.get("defaultRequestTimeoutMs") == 1234, f"defaultRequestTimeoutMs is {short(limits.get('defaultRequestTimeoutMs'))}")


@check("2", "clientId is minted per connection; a clientId the client sends is a label only")
async def client_id_minted(ctx: Context) -> None:
    hub = await ctx.hub()
    ids = set()
    for _ in range(3):
        client = await hub.unix()
        result = await client.initialize(hub.token, clientId="c-00000000000000000000000000000000")
        ids.add(result["clientId"])
    expect("c-00000000000000000000000000000000" not in ids, "the hub took the clientId the client sent")
    expect(len(ids) == 3, f"three connections got {len(ids)} distinct clientIds")


@check("2", "no compatible protocol version: -32005 with data.supportedVersions, then the connection closes")
async def unsupported_version(ctx: Context) -> None:
    hub = await ctx.hub()
    for client in [await hub.unix(), await hub.ws()]:
        answer = await client.call("initialize", {"authToken": hub.token, "protocolVersions": ["2.0.0", "0.9.0"]})
        error = answer.error or {}
        expect(error.get("code") == -32005, f"{client.label}: answered {answer}")
        supported = (error.get("data") or {}).get("supportedVersions")
        expect(isinstance(supported, list) and "1.0.0" in supported, f"{client.label}: data is {short(error.get('data'))}")
        expect(await client.wait_closed(), f"{client.label}: the connection is still open after -32005")


@check("2", "a wrong or missing token: -32007 with data.resources [], then the connection closes")
async def bad_token(ctx: Context) -> None:
    hub = await ctx.hub()
    for transport in ["unix", "ws"]:
        for params in [{"authToken": "0" * 64}, {"authToken": ""}, {}]:
            client = await (hub.unix() if transport == "unix" else hub.ws())
            answer = await client.call("initialize", params)
            error = answer.error or {}
            expect(error.get("code") == -32007, f"{transport}, {short(params)}: answered {answer}")
            expect((error.get("data") or {}).get("resources") == [], f"{transport}: data is {short(error.get('data'))}")
            expect(await client.wait_closed(), f"{transport}, {short(params)}: the connection is still open")


@check("2", "a second initialize on a connection gets -32600")
async def initialize_twice(ctx: Context) -> None:
    hub = await ctx.hub()
    client = await hub.client()
    answer = await client.call("initialize", {"authToken": hub.token})
    expect((answer.error or {}).get("code") == -32600, f"the second initialize answered {answer}")
    pong = await client.call("ping")
    expect("result" in pong.obj, "the connection stopped answering after a second initialize")


@check("2", "an unknown method after initialize gets -32601; an unknown notification nothing")
async def unknown_method(ctx: Context) -> None:
    hub = await ctx.hub()
    client = await hub.client()
    answer = await client.call("createSession", {})
    expect((answer.error or {}).get("code") == -32601, f"createSession answered {answer}")
    await client.notify("dispatchAction", {})
    before = await client.fence()
    expect(not before, f"an unknown notification was answered: {before}")


@check("2", "initialSubscriptions: the catalog snapshot comes in initialize, fromSeq = serverSeq")
async def initial_subscriptions(ctx: Context) -> None:
    hub = await ctx.hub()
    owner = await hub.client()
    service = await owner.register({"role": "x"})
    client = await hub.unix()
    result = await client.initialize(hub.token, initialSubscriptions=[CATALOG])
    snapshots = result.get("snapshots")
    expect(isinstance(snapshots, list) and len(snapshots) == 1, f"snapshots is {short(snapshots)}")
    snapshot = snapshots[0]
    expect(snapshot.get("resource") == CATALOG, f"resource is {short(snapshot.get('resource'))}")
    services = (snapshot.get("state") or {}).get("services") or []
    expect([s.get("serviceId") for s in services] == [service], f"services are {short(services)}")
    expect(snapshot.get("fromSeq") == result.get("serverSeq"), f"fromSeq {snapshot.get('fromSeq')} != serverSeq {result.get('serverSeq')}")


@check("2", "an unknown channel in initialSubscriptions: -32008, and the connection may initialize again")
async def initial_subscriptions_unknown(ctx: Context) -> None:
    hub = await ctx.hub()
    client = await hub.unix()
    answer = await client.call("initialize", {"authToken": hub.token, "initialSubscriptions": ["nope://"]})
    expect((answer.error or {}).get("code") == -32008, f"answered {answer}")
    result = await client.initialize(hub.token)
    expect(CLIENT_ID.fullmatch(str(result.get("clientId"))), "the retry did not initialize")


@check("2", "initialize checks its params: channel must be ahp-root://, clientInfo needs a name (-32602 with data.field)")
async def initialize_params_checked(ctx: Context) -> None:
    hub = await ctx.hub()
    for params, field in [
        ({"channel": "elsewhere://"}, "channel"),
        ({"clientInfo": {"version": "1"}}, "clientInfo"),
        ({"protocolVersions": "1.0.0"}, "protocolVersions"),
    ]:
        client = await hub.unix()
        answer = await client.call("initialize", dict(params, authToken=hub.token))
        error = answer.error or {}
        expect(error.get("code") == -32602, f"{short(params)}: answered {answer}")
        expect((error.get("data") or {}).get("field") == field, f"{short(params)}: data is {short(error.get('data'))}")
