"""How the test scripts reach the gateway: `switchboard mcp` on stdio, or,
with SWITCHBOARD_MCP_URL (and SWITCHBOARD_MCP_TOKEN) in the environment,
the hub's own /mcp over Streamable HTTP."""

import os

from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


def transport(switchboard, hub_dir):
    """An async context manager giving (read, write, ...) streams."""
    url = os.environ.get("SWITCHBOARD_MCP_URL")
    if url is None:
        server = StdioServerParameters(command=switchboard, args=["mcp", "--dir", hub_dir])
        return stdio_client(server)
    token = os.environ["SWITCHBOARD_MCP_TOKEN"]
    client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return streamable_http_client(url, http_client=client)
