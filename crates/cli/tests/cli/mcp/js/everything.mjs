// The official MCP TypeScript SDK client (@modelcontextprotocol/sdk) against
// `switchboard mcp`, with the reference server
// (@modelcontextprotocol/server-everything) hosted on the hub under
// NAMESPACE. Run by crates/cli/tests/cli/mcp_clients.rs:
//
//     node everything.mjs SWITCHBOARD_BIN HUB_DIR NAMESPACE
//
// Every check runs; each failure is printed as `FAILED: <check>: <why>`, and
// the script exits 1 if any failed (0 and `all checks passed` otherwise).

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ResourceUpdatedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [SWITCHBOARD, HUB_DIR, NS] = process.argv.slice(2);
const SAMPLED = "sampled by the TypeScript client";

const failures = [];
const elicitations = [];
const updates = [];

function expect(condition, message) {
  if (!condition) throw new Error(message);
}

function textOf(result) {
  return result.content
    .filter((c) => c.type === "text")
    .map((c) => c.text)
    .join("\n");
}

async function check(name, body) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error("did not finish within 60 s")), 60_000);
  });
  try {
    await Promise.race([body(), timeout]);
    console.log(`ok: ${name}`);
  } catch (error) {
    console.log(`FAILED: ${name}: ${error?.stack ?? error}`);
    failures.push(name);
  } finally {
    clearTimeout(timer);
  }
}

async function eventually(what, ready, seconds = 20) {
  const deadline = Date.now() + seconds * 1000;
  while (!ready()) {
    expect(Date.now() < deadline, `${what} did not happen within ${seconds} s`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

async function call(client, tool, args = {}) {
  const result = await client.callTool({ name: `${NS}__${tool}`, arguments: args });
  expect(!result.isError, `${NS}__${tool} answered an error result: ${JSON.stringify(result.content)}`);
  return result;
}

// The server's toggles are per server session, which every caller of the
// hosted server shares: a toggle that answers "Stopped" is toggled again.
async function toggleOn(tool) {
  for (let attempt = 0; attempt < 2; attempt++) {
    const toggled = textOf(await call(client, tool));
    if (toggled.includes("Started")) return;
  }
  throw new Error(`${tool} never answered "Started"`);
}

const client = new Client(
  { name: "switchboard-ts-test", version: "1.0.0" },
  { capabilities: { sampling: {}, elicitation: { form: {} } } },
);
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  elicitations.push(request.params);
  return { action: "accept", content: { name: "Grace Hopper", check: true } };
});
client.setRequestHandler(CreateMessageRequestSchema, async () => ({
  role: "assistant",
  content: { type: "text", text: SAMPLED },
  model: "ts-test-model",
  stopReason: "endTurn",
}));
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => {
  updates.push(notification.params.uri);
});

const transport = new StdioClientTransport({
  command: SWITCHBOARD,
  args: ["mcp", "--dir", HUB_DIR],
  stderr: "inherit",
});
await client.connect(transport);

await check("tools/list: the reference server's tools, as <namespace>__<tool>", async () => {
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name);
  for (const tool of ["echo", "trigger-elicitation-request", "trigger-sampling-request", "get-sum"]) {
    expect(names.includes(`${NS}__${tool}`), `${NS}__${tool} not listed: ${names}`);
  }
  // Not listed: the client declares no tasks; nor get-roots-list or URL
  // elicitation, since it declares neither.
  expect(!names.includes(`${NS}__simulate-research-query`), "the task-required tool is listed");
});

await check("resources/list, resources/read (text and blob), resources/templates/list", async () => {
  const { resources } = await client.listResources();
  const uris = resources.map((r) => r.uri);
  const stat = "demo://resource/static/document/features.md";
  expect(uris.includes(stat), `${stat} not listed: ${uris}`);
  const document = await client.readResource({ uri: stat });
  expect(document.contents[0].text.length > 0, `${stat} is empty`);
  const { resourceTemplates } = await client.listResourceTemplates();
  const templates = resourceTemplates.map((t) => t.uriTemplate);
  expect(templates.includes("demo://resource/dynamic/blob/{resourceId}"), `templates: ${templates}`);
  const text = await client.readResource({ uri: "demo://resource/dynamic/text/5" });
  expect(text.contents[0].text.startsWith("Resource 5:"), `text: ${JSON.stringify(text.contents)}`);
  const blob = await client.readResource({ uri: "demo://resource/dynamic/blob/6" });
  expect(Buffer.from(blob.contents[0].blob, "base64").length > 0, `blob: ${JSON.stringify(blob.contents)}`);
});

await check("resources/subscribe, then notifications/resources/updated arrives", async () => {
  const uri = "demo://resource/dynamic/blob/2";
  await client.subscribeResource({ uri });
  await toggleOn("toggle-subscriber-updates");
  await eventually(`notifications/resources/updated for ${uri}`, () => updates.includes(uri));
  await client.unsubscribeResource({ uri });
});

await check("prompts/list, prompts/get with arguments", async () => {
  const { prompts } = await client.listPrompts();
  const names = prompts.map((p) => p.name);
  expect(names.includes(`${NS}__args-prompt`), `prompts: ${names}`);
  const got = await client.getPrompt({ name: `${NS}__args-prompt`, arguments: { city: "Lyon" } });
  expect(got.messages[0].content.text === "What's weather in Lyon?", `args-prompt: ${JSON.stringify(got.messages)}`);
  const resource = await client.getPrompt({
    name: `${NS}__resource-prompt`,
    arguments: { resourceType: "Text", resourceId: "2" },
  });
  expect(
    resource.messages.some((m) => m.content.type === "resource" && m.content.resource.uri.endsWith("/text/2")),
    `resource-prompt: ${JSON.stringify(resource.messages)}`,
  );
});

await check("completion/complete: a prompt argument", async () => {
  const answer = await client.complete({
    ref: { type: "ref/prompt", name: `${NS}__completable-prompt` },
    argument: { name: "department", value: "S" },
  });
  expect(
    JSON.stringify(answer.completion.values) === JSON.stringify(["Sales", "Support"]),
    `completion: ${JSON.stringify(answer.completion)}`,
  );
});

await check("elicitation/create (form): answered by the client's handler", async () => {
  const result = await call(client, "trigger-elicitation-request");
  expect(textOf(result).includes("Grace Hopper"), `result: ${textOf(result)}`);
  expect(elicitations.length === 1 && elicitations[0].requestedSchema, `elicitations: ${JSON.stringify(elicitations)}`);
});

await check("sampling/createMessage: answered by the client's handler", async () => {
  const result = await call(client, "trigger-sampling-request", { prompt: "hello", maxTokens: 10 });
  expect(textOf(result).includes(SAMPLED), `result: ${textOf(result)}`);
});

await client.close();
if (failures.length > 0) {
  console.log(`${failures.length} check(s) FAILED: ${failures.join("; ")}`);
  process.exit(1);
}
console.log("all checks passed");
