// MCP tasks (2025-11-25) end to end with the official TypeScript SDK client,
// which declares tasks: server-everything's task-required tool
// `simulate-research-query`, hosted on the hub under NAMESPACE, run as a task
// through `switchboard mcp` to completion. Run by
// crates/cli/tests/cli/mcp_clients.rs:
//
//     node tasks.mjs SWITCHBOARD_BIN HUB_DIR NAMESPACE
//
// Prints `FAILED: <check>: <why>` for each failed check and exits 1 if any
// did (0 and `all checks passed` otherwise).

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { CreateTaskResultSchema } from "@modelcontextprotocol/sdk/types.js";

const [SWITCHBOARD, HUB_DIR, NS] = process.argv.slice(2);
const TOOL = `${NS}__simulate-research-query`;
const failures = [];

function expect(condition, message) {
  if (!condition) throw new Error(message);
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

const client = new Client(
  { name: "switchboard-ts-tasks", version: "1.0.0" },
  { capabilities: { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } } },
);
await client.connect(
  new StdioClientTransport({
    command: SWITCHBOARD,
    args: ["mcp", "--dir", HUB_DIR],
    stderr: "inherit",
  }),
);

await check("tools/list: the task-required tool is listed to a client that declared tasks", async () => {
  // The gateway may still be fetching the provider's list at first.
  const deadline = Date.now() + 20_000;
  for (;;) {
    const { tools } = await client.listTools();
    const tool = tools.find((t) => t.name === TOOL);
    if (tool) {
      expect(tool.execution?.taskSupport === "required", `execution: ${JSON.stringify(tool.execution)}`);
      return;
    }
    expect(Date.now() < deadline, `${TOOL} not listed: ${tools.map((t) => t.name)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
});

let taskId;
await check("tools/call as a task: created, working, completed, its result fetched", async () => {
  const seen = [];
  let result;
  const stream = client.experimental.tasks.callToolStream(
    { name: TOOL, arguments: { topic: "switchboards" } },
    undefined,
    { task: { ttl: 60_000 } },
  );
  for await (const message of stream) {
    seen.push(message.type);
    if (message.type === "taskCreated") taskId = message.task.taskId;
    if (message.type === "result") result = message.result;
    if (message.type === "error") throw message.error;
  }
  expect(taskId, `no task was created: ${seen}`);
  expect(seen.includes("taskStatus"), `no status was polled: ${seen}`);
  const text = (result?.content ?? []).map((c) => c.text ?? "").join("\n");
  expect(text.includes("Research Report: switchboards"), `result: ${text.slice(0, 200)}`);
});

await check("tasks/get of the finished task: completed", async () => {
  const task = await client.experimental.tasks.getTask(taskId);
  expect(task.status === "completed", `status: ${JSON.stringify(task)}`);
});

await check("the same switchboard/callKey twice: the same task, never a second run", async () => {
  const params = {
    name: TOOL,
    arguments: { topic: "fences" },
    task: { ttl: 60_000 },
    _meta: { "switchboard/callKey": `tasks-mjs-${process.pid}` },
  };
  const first = await client.request({ method: "tools/call", params }, CreateTaskResultSchema);
  const again = await client.request({ method: "tools/call", params }, CreateTaskResultSchema);
  expect(first.task.taskId === again.task.taskId, `two tasks: ${first.task.taskId}, ${again.task.taskId}`);
  const { tasks } = await client.experimental.tasks.listTasks();
  const fences = tasks.filter((t) => t.taskId === first.task.taskId);
  expect(fences.length === 1, `tasks/list: ${JSON.stringify(tasks.map((t) => t.taskId))}`);
});

await check("tasks/get of a task id no one created: an error, not another task", async () => {
  let refused = false;
  try {
    await client.experimental.tasks.getTask("no-such-task");
  } catch (error) {
    refused = true;
  }
  expect(refused, "an unknown task id was answered");
});

await client.close();
if (failures.length > 0) {
  console.log(`${failures.length} check(s) FAILED: ${failures.join("; ")}`);
  process.exit(1);
}
console.log("all checks passed");
