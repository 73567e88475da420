"""Section 3: services: register, update, unregister, owners, ids."""

from __future__ import annotations

import re

from checks import Context, check
from harness import Config, expect, reserved, short

SERVICE_ID = re.compile(r"svc-[0-9a-f]{32}")


@check("3", "register, update, unregister: {serviceId}, {}, {} and the service as the catalog lists it")
async def service_lifecycle(ctx: Context) -> None:
    hub = await ctx.hub()
    owner = await hub.client()
    service = await owner.register({"protocol": "echo", "n": 1})
    expect(SERVICE_ID.fullmatch(service), f"serviceId is {service!r}")
    watcher = await hub.client()
    listed = (await watcher.subscribe())["state"]["services"]
    expect(
        listed == [{"serviceId": service, "clientId": owner.client_id, "principal": owner.principal, "metadata": {"protocol": "echo", "n": 1}}],
        f"the catalog lists {short(listed)}",
    )
    expect(await owner.result("client/updateService", {"serviceId": service, "metadata": {"n": 2}}) == {}, "updateService did not answer {}")
    expect(await owner.result("client/unregisterService", {"serviceId": service}) == {}, "unregisterService did not answer {}")
    listed = (await watcher.subscribe())["state"]["services"]
    expect(listed == [], f"after unregistering, the catalog lists {short(listed)}")


@check("3", "only the owner may unregister or update: -32009 if visible, -32008 if not")
async def owner_only(ctx: Context) -> None:
    config = Config(principals=["a", "b"])
    hub = await ctx.hub(config)
    owner = await hub.client(hub.token_of("a"))
    service = await owner.register({})
    # The hub's own user sees every service, but does not own this one.
    direct = await hub.client()
    for method, params in [
        ("client/unregisterService", {"serviceId": service}),
        ("client/updateService", {"serviceId": service, "metadata": {}}),
    ]:
        answer = await direct.call(method, params)
        expect((answer.error or {}).get("code") == -32009, f"direct: {method} answered {answer}")
    # Principal b cannot see a's service at all.
    stranger = await hub.client(hub.token_of("b"))
    for method, params in [
        ("client/unregisterService", {"serviceId": service}),
        ("client/updateService", {"serviceId": service, "metadata": {}}),
    ]:
        answer = await stranger.call(method, params)
        expect((answer.error or {}).get("code") == -32008, f"b: {method} answered {answer}")
    # The same principal on another connection is not the owner either.
    sibling = await hub.client(hub.token_of("a"))
    answer = await sibling.call("client/unregisterService", {"serviceId": service})
    expect((answer.error or {}).get("code") == -32009, f"a's other connection: unregister answered {answer}")
    listed = [s["serviceId"] for s in (await direct.subscribe())["state"]["services"]]
    expect(listed == [service], f"the service is gone after refused calls: {short(listed)}")


@check("3", "service ids are never reused, across unregistering and reconnecting")
async def ids_never_reused(ctx: Context) -> None:
    hub = await ctx.hub()
    seen: set[str] = set()
    for _ in range(3):
        owner = await hub.client()
        for _ in range(20):
            service = await owner.register({"same": "metadata"})
            expect(service not in seen, f"service id {service} was minted twice")
            seen.add(service)
            await owner.result("client/unregisterService", {"serviceId": service})
        await owner.close()
    caller = await hub.client()
    stale = next(iter(seen))
    fresh_owner = await hub.client()
    await fresh_owner.register({"same": "metadata"})
    answer = await caller.call("clientService/request", {"serviceId": stale, "method": "m", "timeoutMs": 1000})
    expect((answer.error or {}).get("code") == -32008, f"a request to an old id answered {answer}")


@check("3", "closing a connection removes its services (removed, disconnected)")
async def disconnect_removes(ctx: Context) -> None:
    hub = await ctx.hub()
    watcher = await hub.client()
    await watcher.subscribe()
    owner = await hub.client()
    services = [await owner.register({"i": i}) for i in range(3)]
    await owner.close()
    gone = set()
    for _ in services:
        params = await watcher.action("clientServices/removed")
        expect(params["action"].get("reason") == "disconnected", f"removed with {short(params['action'])}")
        gone.add(params["action"]["serviceId"])
    expect(gone == set(services), f"removed {short(sorted(gone))}, expected {short(sorted(services))}")


@check("3", "metadata must be an object (-32602, field metadata) within maxMetadataBytes (-32050)")
async def metadata_checked(ctx: Context) -> None:
    hub = await ctx.hub(Config(limits={"maxMetadataBytes": 100}))
    owner = await hub.client()
    for metadata in [[1, 2], "text", None]:
        answer = await owner.call("client/registerService", {"metadata": metadata})
        error = answer.error or {}
        expect(error.get("code") == -32602, f"metadata {short(metadata)} answered {answer}")
        expect((error.get("data") or {}).get("field") == "metadata", f"data is {short(error.get('data'))}")
    answer = await owner.call("client/registerService", {"metadata": {"x": "y" * 200}})
    error = answer.error or {}
    expect(error.get("code") == -32050, f"201-byte metadata answered {answer}")
    expect((error.get("data") or {}).get("limit") == "maxMetadataBytes", f"data is {short(error.get('data'))}")


@check("3", "a named principal's services are stamped with its principal")
async def principal_stamped(ctx: Context) -> None:
    hub = await ctx.hub(Config(principals=["git"]))
    owner = await hub.client(hub.token_of("git"))
    expect(owner.principal == reserved("git"), f"initialize says principal {short(owner.principal)}")
    service = await owner.register({"principal": "forged"})
    listed = (await (await hub.client()).subscribe())["state"]["services"]
    expect(listed[0]["principal"] == reserved("git"), f"the service's principal is {short(listed[0]['principal'])}")
    expect(listed[0]["serviceId"] == service, "the listed service is not the registered one")
