"""Section 10: /metrics and /healthz."""

from __future__ import annotations

from checks import Context, check
from harness import expect, http_get


@check("10", "GET /healthz answers 200")
async def healthz(ctx: Context) -> None:
    hub = await ctx.hub()
    status, _, _ = await http_get(hub.port, "/healthz")
    expect(status == 200, f"/healthz answered {status}")


@check("10", "GET /metrics serves Prometheus text with the section's figures")
async def metrics(ctx: Context) -> None:
    hub = await ctx.hub()
    owner = await hub.client()
    service = await owner.register({})
    caller = await hub.client()
    await caller.notify("clientService/notify", {"serviceId": service, "method": "m"})
    await owner.expect(lambda m: m.method == "clientService/notification", "the notification")
    status, fields, body = await http_get(hub.port, "/metrics")
    expect(status == 200, f"/metrics answered {status}")
    expect(fields.get("content-type", "").startswith("text/plain"), f"content type is {fields.get('content-type')!r}")
    text = body.decode()
    for name in [
        "switchboard_connections",
        "switchboard_services",
        "switchboard_catalog_subscribers",
        "switchboard_notifications_forwarded_total",
        "switchboard_notifications_dropped_total",
        "switchboard_requests_started_total",
        "switchboard_requests_completed_total",
        "switchboard_requests_failed_total",
        "switchboard_requests_in_flight",
        "switchboard_queued_bytes",
    ]:
        expect(f"# TYPE {name} " in text, f"/metrics has no {name}")
    expect(await hub.metric("switchboard_connections") == 2, "switchboard_connections is not 2")
    expect(await hub.metric("switchboard_services") == 1, "switchboard_services is not 1")
    expect((await hub.metric("switchboard_notifications_forwarded_total") or 0) >= 1, "the forwarded notification was not counted")
