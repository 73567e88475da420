"""Sections 11 and 12: what an unmodified AHP client relies on (the token in
the URL, caret versions, `_meta`, `ahp-root://`, `reconnect`), and the
remote listener's refusal to start without its files."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

from checks import Context, check
from harness import CATALOG, DIRECT, HUB_START, ROOT, Config, Failed, Hub, expect, http_get, reserved, short


@check("11", "?token= in the upgrade URL authenticates initialize without authToken")
async def token_in_url(ctx: Context) -> None:
    hub = await ctx.hub(Config(principals=["tool"]))
    for token, principal in [(hub.token, DIRECT), (hub.token_of("tool"), reserved("tool"))]:
        client = await hub.ws(f"/?token={quote(token)}")
        result = await client.initialize(None)
        expect(result.get("principal") == principal, f"initialize says principal {short(result.get('principal'))}, expected {short(principal)}")


@check("11", "a wrong, empty, bare or repeated ?token= gets HTTP 401")
async def bad_token_in_url(ctx: Context) -> None:
    hub = await ctx.hub()
    for query in [
        "?token=" + "0" * 64,
        "?token=",
        "?token",
        f"?token={hub.token}&token={hub.token}",
        "?token=%ZZ",
    ]:
        status, fields, _ = await http_get(hub.port, "/" + query, upgrade=True)
        expect(status == 401, f"upgrade with {query[:24]!r} answered {status}")
    status, _, _ = await http_get(hub.port, f"/?other=1&token={hub.token}", upgrade=True)
    expect(status == 101, f"upgrade with another parameter beside a good token answered {status}")


@check("11", "a bearer header and ?token= naming different principals get 401; the same principal 101")
async def header_and_url(ctx: Context) -> None:
    hub = await ctx.hub(Config(principals=["tool"]))
    mixed = {"Authorization": f"Bearer {hub.token_of('tool')}"}
    status, _, _ = await http_get(hub.port, f"/?token={hub.token}", mixed, upgrade=True)
    expect(status == 401, f"different principals answered {status}")
    same = {"Authorization": f"Bearer {hub.token}"}
    status, _, _ = await http_get(hub.port, f"/?token={hub.token}", same, upgrade=True)
    expect(status == 101, f"the same principal twice answered {status}")


@check("11", "Authorization: Bearer authenticates initialize; authToken naming another principal gets -32007")
async def bearer_header(ctx: Context) -> None:
    hub = await ctx.hub(Config(principals=["tool"]))
    client = await hub.ws(headers={"Authorization": f"Bearer {hub.token_of('tool')}"})
    result = await client.initialize(None)
    expect(result.get("principal") == reserved("tool"), f"principal is {short(result.get('principal'))}")
    client = await hub.ws(headers={"Authorization": f"Bearer {hub.token_of('tool')}"})
    answer = await client.call("initialize", {"authToken": hub.token})
    expect((answer.error or {}).get("code") == -32007, f"a header and authToken of different principals answered {answer}")


@check("11", "the token of a URL never appears in /metrics")
async def token_not_in_metrics(ctx: Context) -> None:
    hub = await ctx.hub()
    await (await hub.ws(f"/?token={hub.token}")).initialize(None)
    await http_get(hub.port, "/?token=" + "ab" * 32, upgrade=True)
    _, _, body = await http_get(hub.port, "/metrics")
    expect(hub.token.encode() not in body and b"ab" * 32 not in body, "a token is in /metrics")


@check("11", "versions are matched by caret: the highest compatible entry, exactly as offered")
async def caret_versions(ctx: Context) -> None:
    hub = await ctx.hub()
    for offered, wanted in [
        (["1.0.0", "0.9.0"], "1.0.0"),
        (["0.9.0", "1.2.3"], "1.2.3"),
        (["1.0.0", "1.5.0", "1.4.9"], "1.5.0"),
        (["banana", "1.1.0"], "1.1.0"),
    ]:
        client = await hub.unix()
        result = await client.initialize(hub.token, protocolVersions=offered)
        expect(result.get("protocolVersion") == wanted, f"offered {offered}, got {short(result.get('protocolVersion'))}, expected {wanted}")


@check("11", "AHP 1.0 initialize params (clientId, locale, capabilities, _meta, unknown members) are accepted")
async def ahp_initialize_params(ctx: Context) -> None:
    hub = await ctx.hub()
    client = await hub.ws(f"/?token={hub.token}")
    result = await client.initialize(
        None,
        channel=ROOT,
        clientId="my-tool",
        clientInfo={"name": "my-tool", "version": "0.1"},
        protocolVersions=["1.0.0", "0.9.0"],
        initialSubscriptions=[ROOT],
        locale="fr-FR",
        capabilities={"anything": True},
        _meta={"trace": "x"},
        somethingNew=[1, 2],
    )
    expect(result.get("protocolVersion") == "1.0.0", f"protocolVersion is {short(result.get('protocolVersion'))}")
    expect(result.get("clientId") != "my-tool", "the client's clientId was taken as its identity")
    expect((result.get("_meta") or {}).get("clientServices") == {"version": 1, "channel": CATALOG}, f"_meta is {short(result.get('_meta'))}")
    snapshots = result.get("snapshots") or []
    expect(len(snapshots) == 1 and snapshots[0].get("resource") == ROOT, f"snapshots are {short(snapshots)}")
    expect(snapshots[0].get("state") == {"agents": []}, f"the root state is {short(snapshots[0].get('state'))}")


@check("11", "ahp-root:// can be subscribed: state {agents: []}, a fromSeq, no actions")
async def root_channel(ctx: Context) -> None:
    hub = await ctx.hub()
    client = await hub.client()
    result = await client.result("subscribe", {"channel": ROOT})
    snapshot = result.get("snapshot") or {}
    expect(snapshot.get("resource") == ROOT, f"resource is {short(snapshot.get('resource'))}")
    expect(snapshot.get("state") == {"agents": []}, f"state is {short(snapshot.get('state'))}")
    expect(isinstance(snapshot.get("fromSeq"), int), f"fromSeq is {short(snapshot.get('fromSeq'))}")
    owner = await hub.client()
    await owner.register({})
    await client.quiet(lambda m: m.method == "action")
    await client.notify("unsubscribe", {"channel": ROOT})
    expect(not await client.fence(), "unsubscribe of ahp-root:// was answered")


@check("11", "reconnect as a WebSocket's first message, with an upgrade token, initializes the connection")
async def reconnect_first(ctx: Context) -> None:
    hub = await ctx.hub()
    owner = await hub.client()
    service = await owner.register({"x": 1})
    client = await hub.ws(f"/?token={hub.token}")
    result = await client.result(
        "reconnect",
        {"channel": ROOT, "clientId": "c-old", "lastSeenServerSeq": 3, "subscriptions": [ROOT, CATALOG, "nope://"]},
    )
    expect(result.get("type") == "snapshot", f"type is {short(result.get('type'))}")
    resources = [s.get("resource") for s in result.get("snapshots") or []]
    expect(resources == [ROOT, CATALOG], f"snapshots are of {resources}")
    services = result["snapshots"][1]["state"]["services"]
    expect([s["serviceId"] for s in services] == [service], f"the catalog snapshot lists {short(services)}")
    expect(result.get("principal") == DIRECT and result.get("clientId") not in (None, "c-old"), f"identity is {short(result)}")
    # Initialized and subscribed: a registration is served, and its action arrives.
    mine = await client.register({"mine": True})
    await client.action("clientServices/added", mine)


@check("11", "reconnect without an upgrade token gets -32007 with data.resources and the connection stays open")
async def reconnect_without_token(ctx: Context) -> None:
    hub = await ctx.hub()
    for client in [await hub.ws(), await hub.unix()]:
        answer = await client.call("reconnect", {"subscriptions": [ROOT]})
        error = answer.error or {}
        expect(error.get("code") == -32007, f"{client.label}: answered {answer}")
        expect((error.get("data") or {}).get("resources") == [], f"{client.label}: data is {short(error.get('data'))}")
        result = await client.initialize(hub.token)
        expect(result.get("principal") == DIRECT, f"{client.label}: initialize after the refused reconnect failed")


@check("11", "an AHP host's methods are unknown here: -32601 naming the method")
async def ahp_methods_unknown(ctx: Context) -> None:
    hub = await ctx.hub()
    client = await hub.client()
    for method in ["createSession", "resourceRead", "createTerminal"]:
        answer = await client.call(method, {})
        error = answer.error or {}
        expect(error.get("code") == -32601, f"{method} answered {answer}")
        expect((error.get("data") or {}).get("method") == method, f"{method}: data is {short(error.get('data'))}")


@check("12", "--remote without --tls-cert and --tls-key refuses to start")
async def remote_needs_files(ctx: Context) -> None:
    hub = Hub(ctx.binary)
    ctx.hubs.append(hub)
    hub.args = lambda: [hub.binary, "serve", "--dir", str(hub.dir), "--ws", "127.0.0.1:0", "--remote", "127.0.0.1:0"]
    proc = await hub.spawn()
    hub.proc = proc
    try:
        status = await asyncio.wait_for(proc.wait(), HUB_START)
    except asyncio.TimeoutError:
        raise Failed("the hub is running with --remote and no certificate")
    expect(status != 0, "the hub exited with status 0")
    log = hub.log_path.read_text(errors="replace")
    expect("--tls-cert" in log, f"the error does not name what is missing: {short(log)}")
    expect(not hub.hub_json.exists(), "hub.json was written")
