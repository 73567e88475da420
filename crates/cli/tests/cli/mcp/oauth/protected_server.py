"""An MCP server behind OAuth, for tests: the official MCP Python SDK (pip
package `mcp`) as an OAuth 2.1 resource server of authorization_server.mjs.

    python3 protected_server.py --issuer http://127.0.0.1:AS_PORT [--port PORT]

Serves Streamable HTTP at http://127.0.0.1:PORT/mcp (a free port when PORT
is 0, the default) and prints one JSON line to stdout once it listens:

    {"url":"http://127.0.0.1:PORT/mcp"}

- /.well-known/oauth-protected-resource/mcp (RFC 9728, the SDK's path):
  resource = the URL above, authorization_servers = [ISSUER],
  scopes_supported = ["mcp"];
- /mcp without a valid token: 401 with
  `WWW-Authenticate: Bearer error="invalid_token", ...,
  resource_metadata="http://127.0.0.1:PORT/.well-known/oauth-protected-resource/mcp"`;
  a valid token without scope `mcp`: 403 insufficient_scope;
- every bearer token is checked at the issuer's introspection endpoint
  (RFC 7662, found in its metadata) on every request, with the client
  OAUTH_RS_CLIENT_ID / OAUTH_RS_CLIENT_SECRET (the same defaults as the
  authorization server's): it must be active, an access token, carry scope
  `mcp` and have this server's URL as audience (RFC 8707);
- tools: `whoami` (JSON text: authenticated, sub, client_id, scopes,
  resource) and `echo(text)` (returns text);
- GET /stats (no token needed): counters of requests and token checks.

Logs each request and each token check to stderr, never a token's value.
"""

import argparse
import json
import logging
import os
import socket
import sys
import time
from collections import Counter

import anyio
import httpx2
import uvicorn
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse

RS_CLIENT_ID = os.environ.get("OAUTH_RS_CLIENT_ID") or "switchboard-test-rs"
RS_CLIENT_SECRET = os.environ.get("OAUTH_RS_CLIENT_SECRET") or "switchboard-test-rs-secret"

STATS = Counter()


def log(*parts):
    print("[protected-server]", *parts, file=sys.stderr, flush=True)


class IntrospectionTokenVerifier:
    """The SDK's TokenVerifier protocol, by RFC 7662 introspection at the issuer."""

    def __init__(self, introspection_endpoint, issuer, resource, scope):
        self.endpoint = introspection_endpoint
        self.issuer = issuer
        self.resource = resource
        self.scope = scope

    def reject(self, reason):
        STATS["tokens_rejected"] += 1
        STATS[f"tokens_rejected.{reason}"] += 1
        log(f"token rejected: {reason}")
        return None

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            async with httpx2.AsyncClient(timeout=10, trust_env=False) as client:
                response = await client.post(
                    self.endpoint,
                    data={"token": token, "token_type_hint": "access_token"},
                    auth=httpx2.BasicAuth(RS_CLIENT_ID, RS_CLIENT_SECRET),
                )
        except httpx2.HTTPError as error:
            return self.reject(f"introspection failed ({type(error).__name__})")
        if response.status_code != 200:
            return self.reject(f"introspection answered {response.status_code}")
        info = response.json()
        if not info.get("active"):
            return self.reject("inactive")
        if info.get("token_type") not in ("Bearer", "DPoP"):
            # A refresh token is active too, but it is not an access token.
            return self.reject("not_an_access_token")
        audiences = info.get("aud")
        audiences = audiences if isinstance(audiences, list) else [audiences] if audiences else []
        if not any(same_resource(aud, self.resource) for aud in audiences):
            return self.reject("wrong_audience")
        scopes = (info.get("scope") or "").split()
        # A missing scope is the SDK's to refuse (403 insufficient_scope);
        # counted here only.
        if self.scope not in scopes:
            STATS["tokens_without_scope"] += 1
            log(f"token lacks scope {self.scope}")
        STATS["tokens_valid"] += 1
        exp = info.get("exp")
        left = f", expires in {int(exp - time.time())} s" if exp else ""
        log(f"token valid: sub={info.get('sub')} client_id={info.get('client_id')} scope={' '.join(scopes)}{left}")
        return AccessToken(
            token=token,
            client_id=info.get("client_id") or "",
            scopes=scopes,
            expires_at=exp,
            resource=self.resource,
            subject=info.get("sub"),
            claims={"iss": info.get("iss") or self.issuer},
        )


def same_resource(a, b):
    return str(a).rstrip("/") == str(b).rstrip("/")


class RequestLog:
    """Outermost ASGI middleware: one stderr line and counters per request."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        bearer = headers.get(b"authorization", b"").lower().startswith(b"bearer ")
        status = {}

        async def send_logged(message):
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                STATS["requests"] += 1
                STATS[f"status.{message['status']}"] += 1
                log(
                    f"{scope['method']} {scope['path']} -> {message['status']}",
                    "(bearer token)" if bearer else "(no token)",
                )
            await send(message)

        await self.app(scope, receive, send_logged)


def build(issuer, url, scope):
    metadata = httpx2.get(f"{issuer}/.well-known/openid-configuration", timeout=10, trust_env=False).json()
    verifier = IntrospectionTokenVerifier(metadata["introspection_endpoint"], issuer, url, scope)
    server = MCPServer(
        name="oauth-protected-test-server",
        instructions="A test MCP server that needs an OAuth bearer token.",
        token_verifier=verifier,
        auth=AuthSettings(
            issuer_url=issuer,
            resource_server_url=url,
            required_scopes=[scope],
            validate_token_resource=True,
        ),
    )

    @server.tool(description="Who the bearer token says is calling.")
    def whoami() -> str:
        STATS["tool.whoami"] += 1
        token = get_access_token()
        return json.dumps(
            {
                "authenticated": token is not None,
                "sub": token.subject if token else None,
                "client_id": token.client_id if token else None,
                "scopes": token.scopes if token else [],
                "resource": token.resource if token else None,
            }
        )

    @server.tool(description="Returns the text it is given.")
    def echo(text: str) -> str:
        STATS["tool.echo"] += 1
        return text

    @server.custom_route("/stats", methods=["GET"])
    async def stats(_request: Request) -> JSONResponse:
        return JSONResponse(dict(STATS))

    return server.streamable_http_app(host="127.0.0.1")


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--issuer", required=True, help="the authorization server, e.g. http://127.0.0.1:4000")
    parser.add_argument("--port", type=int, default=0, help="0 (default): a free port")
    parser.add_argument("--scope", default="mcp", help="scope a token must carry (default mcp)")
    args = parser.parse_args()
    issuer = args.issuer.rstrip("/")

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(128)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"

    app = RequestLog(build(issuer, url, args.scope))
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server.serve, [sock])
        while not server.started:
            if server.should_exit:
                return
            await anyio.sleep(0.02)
        print(json.dumps({"url": url}, separators=(",", ":")), flush=True)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    anyio.run(main)
