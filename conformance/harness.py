"""What every check stands on: a real `switchboard serve` in a directory of
its own, clients on its Unix socket and WebSocket, plain HTTP to its port,
and waits that always end.

Nothing here knows a rule of the protocol; the checks in `checks/` do.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import websockets
from websockets.asyncio.client import connect as ws_connect

# How long one expected message may take, and how long "nothing arrives"
# is watched. Every wait in the suite is bounded by one of these.
WAIT = 5.0
QUIET = 0.3
HUB_START = 10.0
HUB_STOP = 5.0

CATALOG = "ahp-client-services://"
ROOT = "ahp-root://"
DIRECT = {"kind": "direct"}


class Failed(AssertionError):
    """A check found the hub not doing what the reference says."""


def expect(condition: Any, message: str) -> None:
    if not condition:
        raise Failed(message)


def short(value: Any, limit: int = 200) -> str:
    """One line of a value, cut, for failure messages."""
    if isinstance(value, (bytes, bytearray)):
        text = bytes(value).decode("utf-8", "replace")
    else:
        try:
            text = json.dumps(value, separators=(",", ":"))
        except (TypeError, ValueError):
            text = repr(value)
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def reserved(name: str) -> dict:
    return {"kind": "reserved", "module_id": name}


# ---------------------------------------------------------------------------
# Config files
# ---------------------------------------------------------------------------


@dataclass
class Config:
    """A config file for `serve --config`: named principals (each gets a
    fresh token), grants, limits, origins."""

    principals: list[str] = field(default_factory=list)
    grants: list[tuple[str, str, list[str]]] = field(default_factory=list)
    limits: dict[str, int] = field(default_factory=dict)
    allowed_origins: list[str] = field(default_factory=list)
    allow_unverified: bool = False
    tokens: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in self.principals:
            self.tokens.setdefault(name, f"{name}-{secrets.token_hex(16)}")

    def text(self) -> str:
        lines = [
            "[hub]",
            f"allowed_origins = {json.dumps(self.allowed_origins)}",
            f"allow_unverified = {'true' if self.allow_unverified else 'false'}",
        ]
        if self.limits:
            lines.append("[limits]")
            lines += [f"{name} = {value}" for name, value in self.limits.items()]
        for name in self.principals:
            lines += [f"[principals.{name}]", f"token = {json.dumps(self.tokens[name])}"]
        for frm, to, allow in self.grants:
            lines += [
                "[[grants]]",
                f"from = {json.dumps(frm)}",
                f"to = {json.dumps(to)}",
                f"allow = {json.dumps(allow)}",
            ]
        return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# Processes: every hub the suite starts is killed when it ends
# ---------------------------------------------------------------------------

_LIVE: set[int] = set()


def kill_all() -> None:
    """Kills every hub still running (the suite's exit path)."""
    for pid in list(_LIVE):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _LIVE.discard(pid)


class Hub:
    """One `switchboard serve --dir <fresh dir> --ws 127.0.0.1:0`."""

    def __init__(self, binary: str, config: Config | None = None, root: Path | None = None):
        self.binary = binary
        self.config = config
        self.root = Path(root or tempfile.mkdtemp(prefix="switchboard-conformance-"))
        self.dir = self.root / "hub"
        self.config_path = self.root / "switchboard.toml"
        self.log_path = self.root / "hub.log"
        self.proc: asyncio.subprocess.Process | None = None
        self.info: dict = {}
        self.clients: list[Client] = []

    @property
    def hub_json(self) -> Path:
        return self.dir / "hub.json"

    @property
    def token(self) -> str:
        return self.info["token"]

    @property
    def socket(self) -> str:
        return self.info["socket"]

    @property
    def ws_url(self) -> str:
        return self.info["ws"]

    @property
    def port(self) -> int:
        match = re.fullmatch(r"ws://127\.0\.0\.1:(\d+)/", self.ws_url or "")
        expect(match, f"hub.json ws is {self.ws_url!r}, not ws://127.0.0.1:PORT/")
        return int(match.group(1))

    def token_of(self, principal: str) -> str:
        return self.config.tokens[principal]

    def args(self) -> list[str]:
        args = [self.binary, "serve", "--dir", str(self.dir), "--ws", "127.0.0.1:0"]
        if self.config is not None:
            args += ["--config", str(self.config_path)]
        return args

    async def spawn(self) -> asyncio.subprocess.Process:
        """Starts a `serve` process on this directory, without waiting."""
        if self.config is not None:
            self.config_path.write_text(self.config.text())
        log = open(self.log_path, "ab")
        env = dict(os.environ, RUST_LOG=os.environ.get("RUST_LOG", "warn"))
        env.pop("SWITCHBOARD_DIR", None)
        proc = await asyncio.create_subprocess_exec(
            *self.args(), stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log, env=env
        )
        log.close()
        _LIVE.add(proc.pid)
        return proc

    async def start(self) -> "Hub":
        self.proc = await self.spawn()
        deadline = asyncio.get_running_loop().time() + HUB_START
        while True:
            if self.proc.returncode is not None:
                raise Failed(f"the hub exited with {self.proc.returncode} at start: {self.log_tail()}")
            try:
                info = json.loads(self.hub_json.read_text())
                if info.get("pid") == self.proc.pid:
                    self.info = info
                    return self
            except (OSError, ValueError):
                pass
            if asyncio.get_running_loop().time() > deadline:
                raise Failed(f"no hub.json within {HUB_START:g} s: {self.log_tail()}")
            await asyncio.sleep(0.02)

    async def stop(self, sig: int = signal.SIGTERM) -> int | None:
        """Signals the hub and waits for it (SIGKILL after HUB_STOP s);
        returns its exit status, or None if it had to be killed."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return proc.returncode if proc else None
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass
        try:
            status = await asyncio.wait_for(proc.wait(), HUB_STOP)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            status = None
        _LIVE.discard(proc.pid)
        return status

    async def reload(self, config: Config) -> None:
        """Writes `config` and sends SIGHUP; returns once the hub counted
        the reload (`switchboard_config_reloads_total`)."""
        before = await self.metric("switchboard_config_reloads_total")
        self.config = config
        self.config_path.write_text(config.text())
        self.proc.send_signal(signal.SIGHUP)
        await until(
            lambda: self.metric("switchboard_config_reloads_total"),
            lambda value: value is not None and value > (before or 0),
            "the hub did not count the reload",
        )

    async def metric(self, name: str) -> float | None:
        status, _, body = await http_get(self.port, "/metrics")
        expect(status == 200, f"GET /metrics answered {status}")
        for line in body.decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[-1])
        return None

    def log_tail(self, lines: int = 8) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(text[-lines:]) or "(empty log)"

    async def unix(self, label: str = "unix") -> "UnixClient":
        client = await UnixClient.open(self.socket, label)
        self.clients.append(client)
        return client

    async def ws(self, path: str = "/", headers: dict | None = None, label: str = "ws") -> "WsClient":
        client = await WsClient.open(f"ws://127.0.0.1:{self.port}{path}", headers or {}, label)
        self.clients.append(client)
        return client

    async def close_clients(self) -> None:
        for client in self.clients:
            await client.close()
        self.clients.clear()

    async def client(self, token: str | None = None, transport: str = "unix", **params) -> "Client":
        """A connection, initialized with `token` (the hub's own by default)."""
        client = await (self.unix() if transport == "unix" else self.ws())
        await client.initialize(self.token if token is None else token, **params)
        return client

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


async def until(read: Callable, ok: Callable[[Any], bool], message: str, timeout: float = WAIT) -> Any:
    """Polls `read()` (a coroutine function) until `ok(value)`, bounded."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = await read()
        if ok(value):
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise Failed(f"{message} (last: {short(value)})")
        await asyncio.sleep(0.05)


# ---------------------------------------------------------------------------
# Clients
# ---------------------------------------------------------------------------


@dataclass
class Message:
    """One message as it came: its bytes and what they parse to."""

    raw: bytes
    obj: Any

    @property
    def id(self) -> Any:
        return self.obj.get("id") if isinstance(self.obj, dict) else None

    @property
    def has_id(self) -> bool:
        return isinstance(self.obj, dict) and "id" in self.obj

    @property
    def method(self) -> Any:
        return self.obj.get("method") if isinstance(self.obj, dict) else None

    @property
    def params(self) -> Any:
        return self.obj.get("params") if isinstance(self.obj, dict) else None

    @property
    def result(self) -> Any:
        return self.obj.get("result")

    @property
    def error(self) -> dict | None:
        return self.obj.get("error") if isinstance(self.obj, dict) else None

    @property
    def is_response(self) -> bool:
        return isinstance(self.obj, dict) and "method" not in self.obj

    def __repr__(self) -> str:
        return short(self.raw)


class Closed(Exception):
    """The hub closed the connection."""


class Client:
    """Messages in order, with a buffer, so a check can wait for one kind
    of message and keep the others for later."""

    def __init__(self, label: str):
        self.label = label
        self.buffer: list[Message] = []
        self.closed = False
        self.next_id = 0
        self.init_result: dict | None = None

    # transport hooks
    async def send_raw(self, data: bytes) -> None:
        raise NotImplementedError

    async def _read(self) -> bytes:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def send(self, obj: Any) -> None:
        await self.send_raw(json.dumps(obj, separators=(",", ":")).encode())

    async def _next(self, timeout: float) -> Message:
        if self.closed:
            raise Closed(self.label)
        try:
            raw = await asyncio.wait_for(self._read(), timeout)
        except (Closed, ConnectionError, websockets.ConnectionClosed, asyncio.IncompleteReadError):
            self.closed = True
            raise Closed(self.label)
        try:
            obj = json.loads(raw)
        except ValueError:
            obj = None
        return Message(raw, obj)

    async def expect(self, match: Callable[[Message], bool], what: str, timeout: float = WAIT) -> Message:
        """The first message (buffered or new) that `match`es; the others
        stay buffered."""
        for index, message in enumerate(self.buffer):
            if match(message):
                return self.buffer.pop(index)
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise Failed(f"{self.label}: no {what} within {timeout:g} s (got {self.buffer[:3]})")
            try:
                message = await self._next(left)
            except asyncio.TimeoutError:
                continue
            except Closed:
                raise Failed(f"{self.label}: closed while waiting for {what} (got {self.buffer[:3]})")
            if match(message):
                return message
            self.buffer.append(message)

    async def response(self, id: Any, timeout: float = WAIT) -> Message:
        return await self.expect(lambda m: m.is_response and m.has_id and m.id == id, f"response to id {short(id)}", timeout)

    async def call(self, method: str, params: Any = None, id: Any = None, timeout: float = WAIT) -> Message:
        """Sends a request and waits for its response."""
        if id is None:
            self.next_id += 1
            id = f"{self.label}-{self.next_id}"
        message = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)
        return await self.response(id, timeout)

    async def result(self, method: str, params: Any = None) -> Any:
        answer = await self.call(method, params)
        expect("result" in answer.obj, f"{self.label}: {method} answered {answer}")
        return answer.result

    async def notify(self, method: str, params: Any = None) -> None:
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self.send(message)

    async def fence(self) -> list[Message]:
        """Pings and returns everything that arrived before the pong: the
        hub answers one connection's messages in order."""
        self.next_id += 1
        id = f"fence-{self.next_id}"
        await self.send({"jsonrpc": "2.0", "id": id, "method": "ping"})
        before: list[Message] = []
        while True:
            message = await self.expect(lambda m: True, "the fence's pong")
            if message.is_response and message.id == id:
                return before
            before.append(message)

    async def quiet(self, match: Callable[[Message], bool] = lambda m: True, duration: float = QUIET) -> None:
        """Fails if a matching message arrives within `duration`."""
        for message in self.buffer:
            expect(not match(message), f"{self.label}: unexpected {message}")
        deadline = asyncio.get_running_loop().time() + duration
        while (left := deadline - asyncio.get_running_loop().time()) > 0:
            try:
                message = await self._next(left)
            except asyncio.TimeoutError:
                return
            except Closed:
                return
            expect(not match(message), f"{self.label}: unexpected {message}")
            self.buffer.append(message)

    async def wait_closed(self, timeout: float = WAIT) -> bool:
        """Whether the hub closes the connection within `timeout` (messages
        before the close are buffered)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while (left := deadline - asyncio.get_running_loop().time()) > 0:
            try:
                self.buffer.append(await self._next(left))
            except asyncio.TimeoutError:
                return False
            except Closed:
                return True
        return False

    async def initialize(self, token: str | None, **params) -> dict:
        if token is not None:
            params.setdefault("authToken", token)
        answer = await self.call("initialize", params)
        expect("result" in answer.obj, f"{self.label}: initialize answered {answer}")
        self.init_result = answer.result
        return answer.result

    @property
    def client_id(self) -> str:
        return self.init_result["clientId"]

    @property
    def principal(self) -> dict:
        return self.init_result["principal"]

    # the hub's methods, for brevity in checks
    async def register(self, metadata: Any) -> str:
        result = await self.result("client/registerService", {"metadata": metadata})
        expect(isinstance(result, dict) and isinstance(result.get("serviceId"), str), f"registerService answered {short(result)}")
        return result["serviceId"]

    async def subscribe(self) -> dict:
        result = await self.result("subscribe", {"channel": CATALOG})
        snapshot = result.get("snapshot") if isinstance(result, dict) else None
        expect(isinstance(snapshot, dict), f"subscribe answered {short(result)}")
        return snapshot

    async def action(self, kind: str, service_id: str | None = None, timeout: float = WAIT) -> dict:
        """The next catalog action of `kind` (about `service_id`)."""

        def match(m: Message) -> bool:
            if m.method != "action" or not isinstance(m.params, dict):
                return False
            action = m.params.get("action") or {}
            about = action.get("serviceId") or (action.get("service") or {}).get("serviceId")
            return action.get("type") == kind and (service_id is None or about == service_id)

        return (await self.expect(match, f"action {kind}", timeout)).params

    async def handle_request(self, timeout: float = WAIT) -> Message:
        return await self.expect(lambda m: m.method == "clientService/handleRequest", "clientService/handleRequest", timeout)

    async def cancel_for(self, y: Any, timeout: float = WAIT) -> Message:
        return await self.expect(
            lambda m: m.method == "$/cancelRequest" and isinstance(m.params, dict) and m.params.get("id") == y,
            f"$/cancelRequest for {short(y)}",
            timeout,
        )


class UnixClient(Client):
    @classmethod
    async def open(cls, path: str, label: str) -> "UnixClient":
        client = cls(label)
        client.reader, client.writer = await asyncio.wait_for(
            asyncio.open_unix_connection(path, limit=64 * 1024 * 1024), WAIT
        )
        return client

    async def send_raw(self, data: bytes) -> None:
        self.writer.write(data + b"\n")
        await asyncio.wait_for(self.writer.drain(), WAIT)

    async def send_bytes(self, data: bytes) -> None:
        """Writes `data` as it is (no newline added)."""
        self.writer.write(data)
        await asyncio.wait_for(self.writer.drain(), WAIT)

    async def _read(self) -> bytes:
        line = await self.reader.readline()
        if not line:
            raise Closed(self.label)
        return line.rstrip(b"\n")

    async def close(self) -> None:
        self.writer.close()
        try:
            await asyncio.wait_for(self.writer.wait_closed(), 1)
        except Exception:
            pass


class WsClient(Client):
    @classmethod
    async def open(cls, url: str, headers: dict, label: str) -> "WsClient":
        client = cls(label)
        client.socket = await ws_connect(
            url,
            additional_headers=headers,
            proxy=None,
            compression=None,
            max_size=None,
            open_timeout=WAIT,
            ping_interval=None,
            close_timeout=1,
        )
        return client

    async def send_raw(self, data: bytes) -> None:
        await asyncio.wait_for(self.socket.send(data.decode()), WAIT)

    async def _read(self) -> bytes:
        data = await self.socket.recv()
        return data.encode() if isinstance(data, str) else data

    async def close(self) -> None:
        try:
            await asyncio.wait_for(self.socket.close(), 2)
        except Exception:
            pass


# ---------------------------------------------------------------------------
# Plain HTTP on the hub's port
# ---------------------------------------------------------------------------


async def http_get(port: int, path: str, headers: dict | None = None, upgrade: bool = False) -> tuple[int, dict, bytes]:
    """One HTTP/1.1 request; returns (status, headers, body). With
    `upgrade`, a WebSocket upgrade request whose answer is read up to its
    head only."""
    head = {"Host": f"127.0.0.1:{port}"}
    if upgrade:
        head.update(
            {
                "Upgrade": "websocket",
                "Connection": "Upgrade",
                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
                "Sec-WebSocket-Version": "13",
            }
        )
    else:
        head["Connection"] = "close"
    head.update(headers or {})
    head = {k: v for k, v in head.items() if v is not None}
    request = f"GET {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items()) + "\r\n"
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), WAIT)
    try:
        writer.write(request.encode())
        await writer.drain()
        raw_head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
        lines = raw_head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        fields = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                fields[name.strip().lower()] = value.strip()
        body = b""
        if status != 101:
            if "content-length" in fields:
                body = await asyncio.wait_for(reader.readexactly(int(fields["content-length"])), WAIT)
            else:
                body = await asyncio.wait_for(reader.read(), WAIT)
                if fields.get("transfer-encoding") == "chunked":
                    body = dechunk(body)
        return status, fields, body
    finally:
        writer.close()


def dechunk(data: bytes) -> bytes:
    """The body of a chunked HTTP/1.1 message."""
    out = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        out, data = out + data[:size], data[size + 2 :]
    return out
