"""The official Python MCP client (pip package `mcp`) as a 2026-07-28 client
of the hub's own gateway over Streamable HTTP: `server/discover` instead of
`initialize`, then tools, resources and prompts of the reference server
hosted under NAMESPACE, every request on its own (no session). Run by
crates/cli/tests/cli/mcp_clients.rs with SWITCHBOARD_MCP_URL set:

    python3 stateless.py SWITCHBOARD_BIN HUB_DIR NAMESPACE

Prints `FAILED: <check>: <why>` and exits 1 on a failure.
"""

import sys

import anyio
import mcp_types as types
from mcp import ClientSession

from transport import transport

SWITCHBOARD, HUB_DIR, NS = sys.argv[1], sys.argv[2], sys.argv[3]


async def main():
    failures = []

    def check(what, ok, why=""):
        if ok:
            print(f"ok: {what}")
        else:
            failures.append(what)
            print(f"FAILED: {what}: {why}")

    async with transport(SWITCHBOARD, HUB_DIR) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            with anyio.fail_after(30):
                discovered = await session.discover()
            check(
                "server/discover offers 2026-07-28",
                "2026-07-28" in discovered.supported_versions,
                discovered.supported_versions,
            )
            with anyio.fail_after(30):
                tools = await session.list_tools()
                names = {tool.name for tool in tools.tools}
                check("tools/list", f"{NS}__echo" in names, sorted(names))
                # A client that declares no tasks is not offered a tool that needs them.
                check(
                    "tools/list hides the task-required tool",
                    f"{NS}__simulate-research-query" not in names,
                    sorted(names),
                )
                echoed = await session.call_tool(f"{NS}__echo", {"message": "stateless"})
                text = [c.text for c in echoed.content if isinstance(c, types.TextContent)]
                check("tools/call", text == ["Echo: stateless"], text)
                resources = await session.list_resources()
                check("resources/list", len(resources.resources) > 0, resources)
                first = resources.resources[0]
                read = await session.read_resource(first.uri)
                check("resources/read", len(read.contents) == 1, read)
                prompt = await session.get_prompt(f"{NS}__args-prompt", {"city": "Lisbon"})
                said = prompt.messages[0].content.text
                check("prompts/get with arguments", "Lisbon" in said, said)
    if failures:
        print(f"{len(failures)} check(s) FAILED")
        sys.exit(1)
    print("all checks passed")


anyio.run(main)
