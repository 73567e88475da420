"""The official Python MCP client (pip package `mcp`) against `switchboard mcp`,
with the reference server (@modelcontextprotocol/server-everything) hosted on
the hub under NAMESPACE. Run by crates/cli/tests/cli/mcp_clients.rs:

    python3 everything.py SWITCHBOARD_BIN HUB_DIR NAMESPACE

With SWITCHBOARD_MCP_URL (and SWITCHBOARD_MCP_TOKEN) in its environment it
speaks Streamable HTTP to the hub's own gateway at that URL instead of
starting `switchboard mcp` on stdio.

Every check runs; each failure is printed as `FAILED: <check>: <why>`, and the
script exits 1 if any failed (0 and `all checks passed` otherwise).
"""

import base64
import sys
import traceback
import warnings

import anyio
import mcp_types as types
from mcp import ClientSession
from transport import transport

# The client warns that subscriptions and logging are deprecated as of
# 2026-07-28; this session negotiates 2025-11-25, where they are not.
warnings.filterwarnings("ignore", message=r".*2026-07-28")

SWITCHBOARD, HUB_DIR, NS = sys.argv[1], sys.argv[2], sys.argv[3]
SAMPLED = "sampled by the Python client"
ROOT = types.Root(uri="file:///tmp/switchboard-python-root", name="python-root")

# What server-everything lists to a client that declares sampling,
# elicitation (form and URL) and roots: provide-mcp declares them to its
# child. The *-async tools need the client to declare tasks for sampling or
# elicitation requests, which provide-mcp does not, so the server does not
# register them.
EXPECTED_TOOLS = {
    "echo",
    "get-annotated-message",
    "get-env",
    "get-resource-links",
    "get-resource-reference",
    "get-structured-content",
    "get-sum",
    "get-tiny-image",
    "gzip-file-as-resource",
    "toggle-simulated-logging",
    "toggle-subscriber-updates",
    "trigger-long-running-operation",
    "get-roots-list",
    "trigger-elicitation-request",
    "trigger-url-elicitation",
    "trigger-sampling-request",
}
# Requires a task (execution.taskSupport "required"): the Python client does
# not declare tasks, so the gateway must not list it.
TASK_REQUIRED = "simulate-research-query"

failures = []
elicitations = []
sampling_requests = []
roots_requests = []
logs = []
updates = []


def check(name):
    """Runs the decorated coroutine as the check `name`, recording a failure."""

    def wrap(fn):
        async def run(session):
            try:
                with anyio.fail_after(60):
                    await fn(session)
                print(f"ok: {name}", flush=True)
            except Exception as e:  # noqa: BLE001 - each failure is reported
                detail = "".join(traceback.format_exception_only(type(e), e)).strip()
                print(f"FAILED: {name}: {detail}", flush=True)
                failures.append(name)

        run.check_name = name
        return run

    return wrap


def expect(condition, message):
    if not condition:
        raise AssertionError(message)


def text_of(result):
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def call(session, tool, arguments=None, **kw):
    result = await session.call_tool(f"{NS}__{tool}", arguments or {}, **kw)
    expect(not result.is_error, f"{NS}__{tool} answered an error result: {result.content}")
    return result


async def toggle_on(session, tool):
    """The server's toggles are per server session, which every caller of the
    hosted server shares: a toggle that answers "Stopped" is toggled again."""
    for _ in range(2):
        if "Started" in text_of(await call(session, tool)):
            return
    raise AssertionError(f'{tool} never answered "Started"')


async def sampling_callback(context, params):
    sampling_requests.append(params)
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=SAMPLED),
        model="python-test-model",
        stop_reason="endTurn",
    )


async def elicitation_callback(context, params):
    elicitations.append(params)
    if getattr(params, "mode", None) == "url":
        return types.ElicitResult(action="accept")
    return types.ElicitResult(
        action="accept",
        content={"name": "Ada Lovelace", "check": True, "email": "ada@example.com"},
    )


async def list_roots_callback(context):
    roots_requests.append(context)
    return types.ListRootsResult(roots=[ROOT])


async def logging_callback(params):
    logs.append(params)


async def message_handler(message):
    if isinstance(message, types.ResourceUpdatedNotification):
        updates.append(message.params.uri)


async def eventually(what, ready, seconds=20):
    with anyio.move_on_after(seconds):
        while not ready():
            await anyio.sleep(0.05)
    expect(ready(), f"{what} did not happen within {seconds} s")


@check("tools/list: every server-everything tool, as <namespace>__<tool>")
async def tools_listed(session):
    names = {t.name for t in (await session.list_tools()).tools}
    expected = {f"{NS}__{t}" for t in EXPECTED_TOOLS}
    expect(expected <= names, f"missing {sorted(expected - names)}; listed {sorted(names)}")


@check(f"tools/list: the task-required {TASK_REQUIRED} is not listed to a client without tasks")
async def task_required_hidden(session):
    names = {t.name for t in (await session.list_tools()).tools}
    expect(f"{NS}__{TASK_REQUIRED}" not in names, f"{NS}__{TASK_REQUIRED} is listed")


@check("tools/call: the tools that need nothing of the client")
async def plain_tools(session):
    echo = await call(session, "echo", {"message": "hi from python"})
    expect("hi from python" in text_of(echo), f"echo: {echo.content}")
    annotated = await call(session, "get-annotated-message", {"messageType": "error", "includeImage": True})
    expect(any(isinstance(c, types.ImageContent) for c in annotated.content), f"no image: {annotated.content}")
    expect(annotated.content[0].annotations is not None, "no annotations")
    await call(session, "get-env")
    links = await call(session, "get-resource-links", {"count": 2})
    expect(sum(isinstance(c, types.ResourceLink) for c in links.content) == 2, f"links: {links.content}")
    reference = await call(session, "get-resource-reference", {"resourceType": "Text", "resourceId": 1})
    expect(any(isinstance(c, types.EmbeddedResource) for c in reference.content), f"reference: {reference.content}")
    structured = await call(session, "get-structured-content", {"location": "Chicago"})
    expect(structured.structured_content == {"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82},
           f"structuredContent: {structured.structured_content}")
    total = await call(session, "get-sum", {"a": 2, "b": 40})
    expect("42" in text_of(total), f"sum: {total.content}")
    image = await call(session, "get-tiny-image")
    expect(any(isinstance(c, types.ImageContent) for c in image.content), f"tiny image: {image.content}")
    data = "data:text/plain;base64," + base64.b64encode(b"hello gzip " * 20).decode()
    gz = await call(session, "gzip-file-as-resource", {"name": "hello.gz", "data": data, "outputType": "resource"})
    blob = gz.content[0].resource.blob
    expect(base64.b64decode(blob)[:2] == b"\x1f\x8b", f"not gzip: {gz.content}")


@check("sampling/createMessage: answered by the client's sampling callback")
async def sampling(session):
    result = await call(session, "trigger-sampling-request", {"prompt": "say hi", "maxTokens": 20})
    expect(SAMPLED in text_of(result), f"the result does not carry the callback's text: {text_of(result)}")
    expect(any("say hi" in m.content.text for r in sampling_requests for m in r.messages),
           f"the callback did not see the prompt: {sampling_requests}")


@check("elicitation/create (form): answered by the client's elicitation callback")
async def elicitation(session):
    result = await call(session, "trigger-elicitation-request")
    text = text_of(result)
    expect("Ada Lovelace" in text, f"the result does not carry the accepted content: {text}")
    expect(any(getattr(e, "requested_schema", None) for e in elicitations), f"no form elicitation: {elicitations}")


@check("elicitation/create (URL): answered by the client's elicitation callback")
async def url_elicitation(session):
    url = "https://example.com/switchboard-consent"
    result = await call(session, "trigger-url-elicitation", {"url": url})
    urls = [getattr(e, "url", None) for e in elicitations]
    expect(url in urls, f"the callback saw no URL elicitation for {url}: {urls}")
    expect("accept" in text_of(result), f"result: {text_of(result)}")


@check("roots/list: answered by the client's list_roots_callback")
async def roots(session):
    result = await call(session, "get-roots-list")
    expect(str(ROOT.uri) in text_of(result), f"the root is not in the result: {text_of(result)}")
    expect(roots_requests, "the list_roots_callback was never called")


@check("progress: every notification of a long-running operation arrives")
async def progress(session):
    seen = []

    async def on_progress(value, total, message):
        seen.append((value, total))

    await call(session, "trigger-long-running-operation", {"duration": 2, "steps": 4}, progress_callback=on_progress)
    # Known race (not yet fixed): the server's last report, written just
    # before its result, is sometimes handed on after the result on its way
    # through provide-mcp (rmcp handles each incoming notification on a task
    # of its own), and the client drops progress of a finished call. Every
    # earlier report must arrive, in order.
    expect(seen in ([(1, 4), (2, 4), (3, 4), (4, 4)], [(1, 4), (2, 4), (3, 4)]), f"progress notifications: {seen}")
    if len(seen) == 3:
        print("note: the last progress notification (4/4) came after the result", flush=True)


@check("resources/list, resources/read (text and blob), resources/templates/list")
async def resources(session):
    listed = (await session.list_resources()).resources
    uris = [str(r.uri) for r in listed]
    static = "demo://resource/static/document/architecture.md"
    expect(static in uris, f"{static} not listed: {uris}")
    document = await session.read_resource(static)
    expect(document.contents[0].text, f"{static} is empty: {document}")
    templates = {t.uri_template for t in (await session.list_resource_templates()).resource_templates}
    for template in ("demo://resource/dynamic/text/{resourceId}", "demo://resource/dynamic/blob/{resourceId}"):
        expect(template in templates, f"{template} not listed: {templates}")
    text = await session.read_resource("demo://resource/dynamic/text/3")
    expect(isinstance(text.contents[0], types.TextResourceContents) and "3" in text.contents[0].text,
           f"text resource: {text.contents}")
    blob = await session.read_resource("demo://resource/dynamic/blob/4")
    expect(isinstance(blob.contents[0], types.BlobResourceContents) and base64.b64decode(blob.contents[0].blob),
           f"blob resource: {blob.contents}")


@check("resources/subscribe, then notifications/resources/updated arrives")
async def subscribe(session):
    uri = "demo://resource/dynamic/text/1"
    await session.subscribe_resource(uri)
    await toggle_on(session, "toggle-subscriber-updates")
    await eventually(f"notifications/resources/updated for {uri}", lambda: uri in updates)
    await session.unsubscribe_resource(uri)


@check("prompts/list, prompts/get with arguments")
async def prompts(session):
    names = {p.name for p in (await session.list_prompts()).prompts}
    for prompt in ("simple-prompt", "args-prompt", "completable-prompt", "resource-prompt"):
        expect(f"{NS}__{prompt}" in names, f"{NS}__{prompt} not listed: {names}")
    got = await session.get_prompt(f"{NS}__args-prompt", {"city": "Paris", "state": "Texas"})
    expect(got.messages[0].content.text == "What's weather in Paris, Texas?", f"args-prompt: {got.messages}")
    simple = await session.get_prompt(f"{NS}__simple-prompt")
    expect(simple.messages, "simple-prompt has no messages")


@check("completion/complete: a prompt argument and a resource template variable")
async def completion(session):
    ref = types.PromptReference(type="ref/prompt", name=f"{NS}__completable-prompt")
    departments = await session.complete(ref, {"name": "department", "value": "Ma"})
    expect(departments.completion.values == ["Marketing"], f"department: {departments.completion}")
    names = await session.complete(ref, {"name": "name", "value": ""}, context_arguments={"department": "Sales"})
    expect(names.completion.values == ["David", "Eve", "Frank"], f"name: {names.completion}")
    template = types.ResourceTemplateReference(type="ref/resource", uri="demo://resource/dynamic/text/{resourceId}")
    ids = await session.complete(template, {"name": "resourceId", "value": "7"})
    expect(ids.completion.values == ["7"], f"resourceId: {ids.completion}")


@check("logging/setLevel, then notifications/message arrive")
async def logging(session):
    await session.set_logging_level("debug")
    await toggle_on(session, "toggle-simulated-logging")
    await eventually("a simulated log message", lambda: any("-level message" in str(m.data) or "level-message" in
                                                              str(m.data) for m in logs))


CHECKS = [
    tools_listed,
    task_required_hidden,
    plain_tools,
    sampling,
    elicitation,
    url_elicitation,
    roots,
    progress,
    resources,
    subscribe,
    prompts,
    completion,
    logging,
]


async def main():
    async with transport(SWITCHBOARD, HUB_DIR) as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(
            read,
            write,
            sampling_callback=sampling_callback,
            elicitation_callback=elicitation_callback,
            list_roots_callback=list_roots_callback,
            logging_callback=logging_callback,
            message_handler=message_handler,
        ) as session:
            with anyio.fail_after(30):
                await session.initialize()
            for run in CHECKS:
                await run(session)


anyio.run(main)
if failures:
    print(f"{len(failures)} check(s) FAILED: {'; '.join(failures)}", flush=True)
    sys.exit(1)
print("all checks passed", flush=True)
