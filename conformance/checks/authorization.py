"""Section 7: principals, grants per action, -32008 versus -32009, reload."""

from __future__ import annotations

from checks import Context, check
from harness import Config, expect, short


def _config() -> Config:
    return Config(
        principals=["explorer", "git", "watcher", "other"],
        grants=[
            ("explorer", "git", ["discover", "request", "notify"]),
            ("watcher", "git", ["discover"]),
        ],
    )


async def _setup(ctx: Context):
    hub = await ctx.hub(_config())
    git = await hub.client(hub.token_of("git"))
    service = await git.register({"protocol": "git"})
    return hub, git, service


async def _request(client, service: str):
    return await client.call("clientService/request", {"serviceId": service, "method": "getRefs", "timeoutMs": 2000})


@check("7", "a grant lets a principal discover and request; the owner sees the caller's principal")
async def granted(ctx: Context) -> None:
    hub, git, service = await _setup(ctx)
    explorer = await hub.client(hub.token_of("explorer"))
    listed = [s["serviceId"] for s in (await explorer.subscribe())["state"]["services"]]
    expect(listed == [service], f"explorer sees {short(listed)}")
    await explorer.send({"jsonrpc": "2.0", "id": 1, "method": "clientService/request", "params": {"serviceId": service, "method": "getRefs"}})
    handle = await git.handle_request()
    expect(handle.params.get("senderPrincipal") == {"kind": "reserved", "module_id": "explorer"}, f"senderPrincipal is {short(handle.params.get('senderPrincipal'))}")
    await git.send({"jsonrpc": "2.0", "id": handle.id, "result": "refs"})
    expect((await explorer.response(1)).obj.get("result") == "refs", "explorer did not get the answer")


@check("7", "discover without request: listed, and a request gets -32009")
async def discover_only(ctx: Context) -> None:
    hub, git, service = await _setup(ctx)
    watcher = await hub.client(hub.token_of("watcher"))
    listed = [s["serviceId"] for s in (await watcher.subscribe())["state"]["services"]]
    expect(listed == [service], f"watcher sees {short(listed)}")
    answer = await _request(watcher, service)
    expect((answer.error or {}).get("code") == -32009, f"answered {answer}")
    await git.fence()
    expect(not [m for m in git.buffer if m.method == "clientService/handleRequest"], "a refused request reached the owner")


@check("7", "no grant: not listed, a request gets -32008 as for an unknown id, a notify is dropped")
async def no_grant(ctx: Context) -> None:
    hub, git, service = await _setup(ctx)
    other = await hub.client(hub.token_of("other"))
    listed = (await other.subscribe())["state"]["services"]
    expect(listed == [], f"other sees {short(listed)}")
    answer = await _request(other, service)
    unknown = await _request(other, "svc-" + "0" * 32)
    expect((answer.error or {}).get("code") == -32008, f"answered {answer}")
    expect(answer.error.get("code") == unknown.error.get("code"), "an invisible service is told apart from an unknown id")
    await other.notify("clientService/notify", {"serviceId": service, "method": "m"})
    expect(not await other.fence(), "a refused notify was answered")
    await git.fence()
    expect(not [m for m in git.buffer if m.method == "clientService/notification"], "a refused notify reached the owner")


@check("7", "the hub's own token (direct) may act on every service")
async def direct_everything(ctx: Context) -> None:
    hub, git, service = await _setup(ctx)
    direct = await hub.client()
    listed = [s["serviceId"] for s in (await direct.subscribe())["state"]["services"]]
    expect(listed == [service], f"direct sees {short(listed)}")
    await direct.send({"jsonrpc": "2.0", "id": 1, "method": "clientService/request", "params": {"serviceId": service, "method": "m"}})
    handle = await git.handle_request()
    expect(handle.params.get("senderPrincipal") == {"kind": "direct"}, f"senderPrincipal is {short(handle.params.get('senderPrincipal'))}")


@check("7", "grants are per direction: the owner may not call back without one")
async def per_direction(ctx: Context) -> None:
    hub, _, _ = await _setup(ctx)
    explorer = await hub.client(hub.token_of("explorer"))
    theirs = await explorer.register({"protocol": "explorer"})
    git_caller = await hub.client(hub.token_of("git"))
    answer = await _request(git_caller, theirs)
    expect((answer.error or {}).get("code") == -32008, f"git calling explorer's service answered {answer}")


@check("7", "one principal on two connections sees and calls its own services")
async def same_principal(ctx: Context) -> None:
    hub, git, service = await _setup(ctx)
    sibling = await hub.client(hub.token_of("git"))
    listed = [s["serviceId"] for s in (await sibling.subscribe())["state"]["services"]]
    expect(listed == [service], f"git's second connection sees {short(listed)}")
    await sibling.send({"jsonrpc": "2.0", "id": 1, "method": "clientService/request", "params": {"serviceId": service, "method": "m"}})
    await git.handle_request()


@check("7", "identity is the hub's: principal and clientId members in params change nothing")
async def identity_not_forgeable(ctx: Context) -> None:
    hub, git, service = await _setup(ctx)
    other = await hub.client(hub.token_of("other"))
    answer = await other.call(
        "clientService/request",
        {"serviceId": service, "method": "m", "senderPrincipal": {"kind": "direct"}, "principal": {"kind": "direct"}, "timeoutMs": 1000},
    )
    expect((answer.error or {}).get("code") == -32008, f"a forged principal got {answer}")


@check("7", "a reload that removes a principal closes its connections")
async def reload_closes(ctx: Context) -> None:
    hub, git, service = await _setup(ctx)
    other = await hub.client(hub.token_of("other"))
    watcher = await hub.client()
    await watcher.subscribe()
    smaller = Config(principals=["explorer", "watcher", "other"], tokens=dict(hub.config.tokens))
    await hub.reload(smaller)
    expect(await git.wait_closed(), "git's connection is still open after its principal was removed")
    removed = await watcher.action("clientServices/removed", service)
    expect(removed["action"].get("reason") == "disconnected", f"removed with {short(removed['action'])}")
    expect("result" in (await other.call("ping")).obj, "a principal that stayed was disconnected")


@check("7", "hub/reload of a config that does not load: -32603 reason config, the old config stays")
async def bad_reload(ctx: Context) -> None:
    hub, git, service = await _setup(ctx)
    hub.config_path.write_text('[[grants]]\nfrom = "nobody"\nto = "git"\nallow = ["discover"]\n')
    direct = await hub.client()
    answer = await direct.call("hub/reload", {})
    error = answer.error or {}
    expect(error.get("code") == -32603, f"hub/reload answered {answer}")
    expect((error.get("data") or {}).get("reason") == "config", f"data is {short(error.get('data'))}")
    explorer = await hub.client(hub.token_of("explorer"))
    listed = [s["serviceId"] for s in (await explorer.subscribe())["state"]["services"]]
    expect(listed == [service], f"after a bad reload explorer sees {short(listed)}")
    expect("result" in (await git.call("ping")).obj, "git was disconnected by a bad reload")


@check("7", "hub/reload is for the direct principal only (-32009)")
async def reload_direct_only(ctx: Context) -> None:
    hub, git, _ = await _setup(ctx)
    answer = await git.call("hub/reload", {})
    expect((answer.error or {}).get("code") == -32009, f"hub/reload by git answered {answer}")


@check("7", "a grant naming a principal the file does not define is a config error")
async def unknown_grant_name(ctx: Context) -> None:
    hub, _, _ = await _setup(ctx)
    text = _config().text() + '[[grants]]\nfrom = "explorr"\nto = "git"\nallow = ["request"]\n'
    hub.config_path.write_text(text)
    answer = await (await hub.client()).call("hub/reload", {})
    expect((answer.error or {}).get("code") == -32603, f"a grant from an undefined name was accepted: {answer}")


@check("7", "allow_unverified: no token is principal unverified, and two of them do not see each other")
async def unverified(ctx: Context) -> None:
    hub = await ctx.hub(Config(allow_unverified=True))
    first = await hub.unix()
    result = await first.initialize(None)
    expect(result.get("principal") == {"kind": "unverified"}, f"principal is {short(result.get('principal'))}")
    mine = await first.register({})
    listed = [s["serviceId"] for s in (await first.subscribe())["state"]["services"]]
    expect(listed == [mine], f"an unverified connection does not see its own service: {short(listed)}")
    second = await hub.unix()
    await second.initialize(None)
    listed = (await second.subscribe())["state"]["services"]
    expect(listed == [], f"one unverified connection sees another's services: {short(listed)}")
