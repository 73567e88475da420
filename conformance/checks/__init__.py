"""The checks, one module per section of docs/reference/hub-protocol.md.

A check is an `async def` taking a `Context`, registered with `@check`.
It starts the hubs it needs through the context (each in a fresh
directory, stopped and removed after the check) and raises
`harness.Failed` when the hub does not do what the reference says.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Awaitable, Callable

from harness import Config, Hub


@dataclass
class Check:
    section: str
    name: str
    run: Callable[["Context"], Awaitable[None]]


CHECKS: list[Check] = []


def check(section: str, name: str):
    """Registers the decorated coroutine as check `name` of `section`."""

    def register(run):
        if any(c.name == name for c in CHECKS):
            raise ValueError(f"two checks are named {name}")
        CHECKS.append(Check(section, name, run))
        return run

    return register


@dataclass
class Context:
    binary: str
    hubs: list[Hub] = field(default_factory=list)

    async def hub(self, config: Config | None = None, start: bool = True) -> Hub:
        hub = Hub(self.binary, config)
        self.hubs.append(hub)
        if start:
            await hub.start()
        return hub

    async def close(self) -> None:
        """Closes the clients, stops the hubs and removes their
        directories, whatever fails on the way."""
        for hub in self.hubs:
            try:
                await hub.close_clients()
                await hub.stop()
            finally:
                hub.cleanup()


def load() -> list[Check]:
    """Imports every check module (their order is the report's)."""
    from checks import (  # noqa: F401
        transport,
        lifecycle,
        services,
        catalog,
        notifications,
        requests,
        authorization,
        limits,
        observability,
        ahp,
    )

    return CHECKS
