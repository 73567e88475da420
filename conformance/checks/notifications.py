"""Section 5: notifications are forwarded at most once, in order, never
answered."""

from __future__ import annotations

import json

from checks import Context, check
from harness import CATALOG, Config, Failed, expect, short

# Params written the way no JSON encoder would write them: a re-encoding
# hub would change some byte of it.
ODD_PARAMS = b'{ "z" : 1.50E+2,"a":[ true ,null ], "\\u00e9t\\u00e9":"\\ud83d\\ude00" , "n":-0.0 }'


async def _pair(ctx: Context, config: Config | None = None):
    hub = await ctx.hub(config)
    owner = await hub.client()
    service = await owner.register({"protocol": "sink"})
    sender = await hub.client()
    return hub, owner, service, sender


def _is_notification(message) -> bool:
    return message.method == "clientService/notification"


@check("5", "notify is forwarded with serviceId, sender, method and params; the sender gets nothing")
async def notify_forwarded(ctx: Context) -> None:
    _, owner, service, sender = await _pair(ctx)
    await sender.notify("clientService/notify", {"serviceId": service, "method": "refresh", "params": {"why": "test"}})
    before = await sender.fence()
    expect(not before, f"the sender got an answer to a notification: {before}")
    message = await owner.expect(_is_notification, "clientService/notification")
    expect(not message.has_id, f"the forwarded notification has an id: {message}")
    params = message.params
    wanted = {
        "channel": CATALOG,
        "serviceId": service,
        "senderClientId": sender.client_id,
        "senderPrincipal": sender.principal,
        "method": "refresh",
        "params": {"why": "test"},
    }
    wrong = [k for k, v in wanted.items() if params.get(k) != v]
    expect(not wrong, f"wrong {wrong} in {short(params)}")
    more = [m for m in await owner.fence() if _is_notification(m)]
    expect(not more, f"the owner got the notification twice: {more}")


@check("5", "notify params arrive byte for byte")
async def notify_bytes(ctx: Context) -> None:
    _, owner, service, sender = await _pair(ctx)
    line = b'{"jsonrpc":"2.0","method":"clientService/notify","params":{"serviceId":' + json.dumps(service).encode() + b',"method":"m","params":' + ODD_PARAMS + b"}}"
    await sender.send_raw(line)
    message = await owner.expect(_is_notification, "clientService/notification")
    expect(ODD_PARAMS in message.raw, f"params were re-encoded: {message}")


@check("5", "absent params are forwarded absent, null as null")
async def notify_absent_params(ctx: Context) -> None:
    _, owner, service, sender = await _pair(ctx)
    await sender.notify("clientService/notify", {"serviceId": service, "method": "bare"})
    await sender.notify("clientService/notify", {"serviceId": service, "method": "null", "params": None})
    bare = await owner.expect(lambda m: _is_notification(m) and m.params.get("method") == "bare", "the bare notification")
    expect("params" not in bare.params, f"absent params arrived as {short(bare.params)}")
    null = await owner.expect(lambda m: _is_notification(m) and m.params.get("method") == "null", "the null notification")
    expect("params" in null.params and null.params["params"] is None, f"null params arrived as {short(null.params)}")


@check("5", "clientService/notify sent with an id gets -32600 and is not forwarded")
async def notify_with_id(ctx: Context) -> None:
    _, owner, service, sender = await _pair(ctx)
    answer = await sender.call("clientService/notify", {"serviceId": service, "method": "m"})
    expect((answer.error or {}).get("code") == -32600, f"answered {answer}")
    for method, params in [("$/cancelRequest", {"id": 1}), ("unsubscribe", {"channel": CATALOG})]:
        answer = await sender.call(method, params)
        expect((answer.error or {}).get("code") == -32600, f"{method} with an id answered {answer}")
    await sender.fence()
    forwarded = [m for m in await owner.fence() if _is_notification(m)]
    expect(not forwarded, f"a notify with an id was forwarded: {forwarded}")


@check("5", "notifications from one sender to one service arrive in order")
async def notify_order(ctx: Context) -> None:
    _, owner, service, sender = await _pair(ctx)
    count = 500
    for i in range(count):
        await sender.notify("clientService/notify", {"serviceId": service, "method": "n", "params": i})
    got = []
    while len(got) < count:
        message = await owner.expect(_is_notification, f"notification {len(got)}")
        got.append(message.params["params"])
    if got != list(range(count)):
        first = next(i for i, v in enumerate(got) if v != i)
        raise Failed(f"out of order from notification {first}: {got[first:first + 5]}")


@check("5", "unknown, removed or not-permitted services: dropped silently, counted")
async def notify_dropped(ctx: Context) -> None:
    config = Config(principals=["stranger"])
    hub, owner, service, _ = await _pair(ctx, config)
    stranger = await hub.client(hub.token_of("stranger"))
    await stranger.notify("clientService/notify", {"serviceId": service, "method": "m"})
    await stranger.notify("clientService/notify", {"serviceId": "svc-" + "0" * 32, "method": "m"})
    await stranger.notify("clientService/notify", {"serviceId": 17, "method": "m"})
    before = await stranger.fence()
    expect(not before, f"a dropped notification was answered: {before}")
    forwarded = [m for m in await owner.fence() if _is_notification(m)]
    expect(not forwarded, f"a not-permitted notification was forwarded: {forwarded}")
    for reason in ["not_permitted", "unknown_service", "malformed"]:
        value = await hub.metric(f'switchboard_notifications_dropped_total{{reason="{reason}"}}')
        expect(value and value >= 1, f"drops for {reason} were not counted ({value})")
