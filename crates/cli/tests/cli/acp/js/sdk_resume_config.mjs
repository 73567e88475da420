// The official ACP TypeScript SDK (@agentclientprotocol/sdk) driving
// `switchboard acp`: session/new, session/set_config_option (the model),
// a prompt, then in a second agent process session/resume (no replay, the
// model kept) and another prompt; and the errors a client gets for a bad
// option and an unknown method. Run by crates/cli/tests/cli/acp/js.rs,
// which scripts the model servers and checks where each prompt went.
//
// Environment: SWITCHBOARD_BIN, HUB_DIR, MODEL_URL, CONFIG, WORKDIR.
// Exits 0 and prints "ok" when every check held; otherwise prints what
// failed and exits 1.

import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const workdir = env("WORKDIR");

function check(condition, what) {
  if (!condition) throw new Error(`check failed: ${what}`);
}

function currentValue(options, id) {
  const option = (options ?? []).find((o) => o.id === id);
  check(option, `config option ${id} is listed in ${JSON.stringify(options)}`);
  return option.currentValue;
}

/** Starts `switchboard acp`, connects the SDK's client to it, runs `op`. */
async function withAgent(op) {
  const child = spawn(
    env("SWITCHBOARD_BIN"),
    [
      "acp",
      "--dir", env("HUB_DIR"),
      "--model-url", env("MODEL_URL"),
      "--model", "test-model",
      "--config", env("CONFIG"),
    ],
    { stdio: ["pipe", "pipe", "inherit"] },
  );
  const exited = new Promise((resolve) => child.on("exit", resolve));
  const updates = [];
  const app = acp
    .client({ name: "ts-sdk-test" })
    .onNotification("session/update", ({ params }) => {
      updates.push(params);
    })
    .onRequest("session/request_permission", () => ({
      outcome: { outcome: "cancelled" },
    }));
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  try {
    return await app.connectWith(stream, async (ctx) => {
      const init = await ctx.request("initialize", {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities: {},
      });
      return await op(ctx, init, updates);
    });
  } finally {
    child.stdin.end();
    const code = await Promise.race([
      exited,
      new Promise((resolve) => setTimeout(() => resolve("timeout"), 20000)),
    ]);
    if (code === "timeout") {
      child.kill("SIGKILL");
      throw new Error("switchboard acp did not exit after its stdin closed");
    }
  }
}

async function expectError(promise, code, message, what) {
  try {
    await promise;
  } catch (error) {
    check(error.code === code, `${what}: code ${error.code} is ${code}`);
    check(error.message === message, `${what}: message ${JSON.stringify(error.message)} is ${JSON.stringify(message)}`);
    return;
  }
  throw new Error(`${what}: the request succeeded`);
}

const sessionId = await withAgent(async (ctx, init) => {
  check(init.protocolVersion === 1, "protocol version 1");
  check(init.agentCapabilities?.sessionCapabilities?.resume, "resume is advertised");
  const created = await ctx.request("session/new", { cwd: workdir, mcpServers: [] });
  check(currentValue(created.configOptions, "model") === "default", "a new session has the default model");
  const set = await ctx.request("session/set_config_option", {
    sessionId: created.sessionId,
    configId: "model",
    value: "second",
  });
  check(currentValue(set.configOptions, "model") === "second", "the model is switched");
  await expectError(
    ctx.request("session/set_config_option", {
      sessionId: created.sessionId,
      configId: "model",
      value: "nope",
    }),
    -32602,
    "unknown model \"nope\"; the models are default, second",
    "an unknown model",
  );
  await expectError(
    ctx.request("session/foo", { sessionId: created.sessionId }),
    -32601,
    "method not found: session/foo",
    "an unknown method",
  );
  const answer = await ctx.request("session/prompt", {
    sessionId: created.sessionId,
    prompt: [{ type: "text", text: "ts first" }],
  });
  check(answer.stopReason === "end_turn", `the first prompt ends its turn (${answer.stopReason})`);
  return created.sessionId;
});

await withAgent(async (ctx, _init, updates) => {
  const resumed = await ctx.request("session/resume", { sessionId, cwd: workdir, mcpServers: [] });
  check(updates.length === 0, `nothing replayed on resume (${JSON.stringify(updates)})`);
  check(currentValue(resumed.configOptions, "model") === "second", "the resumed session kept its model");
  check(resumed.modes?.currentModeId === "ask", "the resumed session kept its mode");
  const answer = await ctx.request("session/prompt", {
    sessionId,
    prompt: [{ type: "text", text: "ts second" }],
  });
  check(answer.stopReason === "end_turn", `the second prompt ends its turn (${answer.stopReason})`);
  const text = updates
    .filter((n) => n.sessionId === sessionId && n.update.sessionUpdate === "agent_message_chunk")
    .map((n) => n.update.content.text)
    .join("");
  check(text === "second again", `the resumed session streamed its answer (${JSON.stringify(text)})`);
});

console.log("ok");
