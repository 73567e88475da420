"""Section 4: the catalog channel: snapshot, actions, serverSeq, visibility."""

from __future__ import annotations

import asyncio

from checks import Context, check
from harness import CATALOG, Config, expect, short


@check("4", "subscribe: a snapshot, then added/updated/removed actions with serverSeq > fromSeq, growing")
async def snapshot_then_actions(ctx: Context) -> None:
    hub = await ctx.hub()
    owner = await hub.client()
    early = await owner.register({"early": True})
    watcher = await hub.client()
    snapshot = await watcher.subscribe()
    expect(snapshot.get("resource") == CATALOG, f"resource is {short(snapshot.get('resource'))}")
    from_seq = snapshot.get("fromSeq")
    expect(isinstance(from_seq, int), f"fromSeq is {short(from_seq)}")
    expect([s["serviceId"] for s in snapshot["state"]["services"]] == [early], "the snapshot misses the early service")
    service = await owner.register({"v": 1})
    await owner.result("client/updateService", {"serviceId": service, "metadata": {"v": 2}})
    await owner.result("client/unregisterService", {"serviceId": service})
    seqs = []
    added = await watcher.action("clientServices/added", service)
    expect(added["action"]["service"]["metadata"] == {"v": 1}, f"added carries {short(added['action'])}")
    updated = await watcher.action("clientServices/updated", service)
    expect(updated["action"].get("metadata") == {"v": 2}, f"updated carries {short(updated['action'])}")
    removed = await watcher.action("clientServices/removed", service)
    expect(removed["action"].get("reason") == "unregistered", f"removed carries {short(removed['action'])}")
    for params in [added, updated, removed]:
        expect(params.get("channel") == CATALOG, f"an action's channel is {short(params.get('channel'))}")
        seqs.append(params.get("serverSeq"))
    expect(all(isinstance(s, int) and s > from_seq for s in seqs), f"serverSeqs {seqs} are not all > fromSeq {from_seq}")
    expect(seqs == sorted(set(seqs)), f"serverSeqs {seqs} do not grow")


@check("4", "no race: snapshot plus actions equal the catalog, while services come and go")
async def no_race(ctx: Context) -> None:
    hub = await ctx.hub()
    owners = [await hub.client() for _ in range(3)]

    async def churn(owner):
        live = []
        for i in range(40):
            live.append(await owner.register({"i": i}))
            if i % 3 == 0:
                await owner.result("client/unregisterService", {"serviceId": live.pop(0)})
        return live

    tasks = [asyncio.create_task(churn(owner)) for owner in owners]
    await asyncio.sleep(0.01)
    watcher = await hub.client()
    snapshot = await watcher.subscribe()
    from_seq = snapshot["fromSeq"]
    known = {s["serviceId"] for s in snapshot["state"]["services"]}
    live = set()
    for task in tasks:
        live.update(await task)
    # Everything after the snapshot, fenced by a marker service.
    marker = await owners[0].register({"marker": True})
    while True:
        params = (await watcher.expect(lambda m: m.method == "action", "a catalog action")).params
        expect(params["serverSeq"] > from_seq, f"an action with serverSeq {params['serverSeq']} <= fromSeq {from_seq}")
        action = params["action"]
        if action["type"] == "clientServices/added":
            known.add(action["service"]["serviceId"])
            if action["service"]["serviceId"] == marker:
                break
        elif action["type"] == "clientServices/removed":
            expect(action["serviceId"] in known, f"removed {action['serviceId']}, which the watcher never saw")
            known.discard(action["serviceId"])
    known.discard(marker)
    expect(known == live, f"snapshot + actions give {len(known)} services, the hub has {len(live)}")


@check("4", "unsubscribe stops the actions; subscribing again returns a fresh snapshot")
async def unsubscribe(ctx: Context) -> None:
    hub = await ctx.hub()
    watcher = await hub.client()
    await watcher.subscribe()
    await watcher.notify("unsubscribe", {"channel": CATALOG})
    await watcher.fence()
    owner = await hub.client()
    service = await owner.register({})
    await watcher.quiet(lambda m: m.method == "action")
    snapshot = await watcher.subscribe()
    expect([s["serviceId"] for s in snapshot["state"]["services"]] == [service], "the fresh snapshot misses the service")
    other = await owner.register({})
    await watcher.action("clientServices/added", other)


@check("4", "subscribing again while subscribed: a fresh snapshot, and no duplicate actions")
async def resubscribe(ctx: Context) -> None:
    hub = await ctx.hub()
    watcher = await hub.client()
    await watcher.subscribe()
    owner = await hub.client()
    first = await owner.register({})
    await watcher.action("clientServices/added", first)
    snapshot = await watcher.subscribe()
    expect([s["serviceId"] for s in snapshot["state"]["services"]] == [first], "the second snapshot misses the service")
    second = await owner.register({})
    await watcher.action("clientServices/added", second)
    extra = [m for m in await watcher.fence() if m.method == "action"]
    expect(not extra, f"duplicate actions after subscribing twice: {extra}")


@check("4", "subscribe to an unknown channel gets -32008")
async def unknown_channel(ctx: Context) -> None:
    hub = await ctx.hub()
    client = await hub.client()
    answer = await client.call("subscribe", {"channel": "ahp-nothing://"})
    expect((answer.error or {}).get("code") == -32008, f"answered {answer}")


@check("4", "a reload that hides a service sends removed/hidden; one that shows it, added")
async def hidden_on_reload(ctx: Context) -> None:
    granted = Config(principals=["explorer", "git"], grants=[("explorer", "git", ["discover"])])
    hub = await ctx.hub(granted)
    owner = await hub.client(hub.token_of("git"))
    service = await owner.register({"protocol": "git"})
    explorer = await hub.client(hub.token_of("explorer"))
    snapshot = await explorer.subscribe()
    expect([s["serviceId"] for s in snapshot["state"]["services"]] == [service], "explorer does not see git's service")
    revoked = Config(principals=["explorer", "git"], tokens=dict(granted.tokens))
    await hub.reload(revoked)
    removed = await explorer.action("clientServices/removed", service)
    expect(removed["action"].get("reason") == "hidden", f"removed with {short(removed['action'])}")
    await hub.reload(granted)
    added = await explorer.action("clientServices/added", service)
    expect(added["action"]["service"]["metadata"] == {"protocol": "git"}, f"added carries {short(added['action'])}")
    # The owner was never disconnected by either reload.
    expect((await owner.call("ping")).obj.get("result", 0) is None, "the owner's connection was closed by the reload")


@check("4", "a subscriber sees only what it may discover")
async def visibility_filtered(ctx: Context) -> None:
    hub = await ctx.hub(Config(principals=["a", "b"]))
    a = await hub.client(hub.token_of("a"))
    b = await hub.client(hub.token_of("b"))
    await b.subscribe()
    mine = await b.register({"mine": True})
    await a.register({"theirs": True})
    added = await b.action("clientServices/added")
    expect(added["action"]["service"]["serviceId"] == mine, f"b was shown {short(added['action'])}")
    await b.quiet(lambda m: m.method == "action")
