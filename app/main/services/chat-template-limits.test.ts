// A model whose chat template runs away (issue #20), behind RuntimeHost and the
// API server: its render runs in a worker, so /health and every other route
// keep answering; the request fails 400 with the limit's one-line error; a
// cancel reaches it mid-render; the next request on a good model is served.
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import type { LoadedModel } from "../../shared/runtime-contract.js";
import { modelWithChatTemplate, nestedRangeTemplate } from "../../test/chat-template-model.js";
import { embeddedModelPath } from "../paths.js";
import { chatTemplateLimitEnv } from "../runtime/chat-template-limits.js";
import { ApiServer } from "./api-server.js";
import { RuntimeError, RuntimeHost } from "./runtime-host.js";

// This file's renderer (created at its first render) takes its limits from the
// environment: the step limit lifted so that the hostile render lasts until the
// time limit, long enough to show the server answering meanwhile.
const timeLimitMs = 1_500;
const env = { [chatTemplateLimitEnv.timeMs]: String(timeLimitMs), [chatTemplateLimitEnv.maxSteps]: String(1e15) };
const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));

const chat = (content: string) => ({ kind: "chat" as const, messages: [{ role: "user" as const, content }] });

async function post(base: string, body: unknown): Promise<{ status: number; json: { error?: { message: string; code: string } } }> {
  const res = await fetch(`${base}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as { error?: { message: string; code: string } } };
}

describe("a hostile chat template behind RuntimeHost and the API", () => {
  const host = new RuntimeHost();
  let hostile: LoadedModel;
  let demo: LoadedModel;
  let server: ApiServer;
  let base: string;

  beforeAll(async () => {
    Object.assign(process.env, env);
    hostile = await host.loadModel(modelWithChatTemplate(nestedRangeTemplate, "hostile"), { threads: 1, contextSize: 256 });
    demo = await host.loadModel(embeddedModelPath(), { threads: 1, contextSize: 512 });
    server = new ApiServer(host, { port: 0 });
    base = (await server.start()).url;
  });
  afterAll(async () => {
    await server?.stop();
    await host.dispose();
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  it("keeps /health and the other routes answering during the render, then fails the request with 400 and the limit", async () => {
    const start = performance.now();
    const request = post(base, { model: "hostile", messages: [{ role: "user", content: "hi" }] });
    let settledAt = 0;
    void request.then(() => (settledAt = performance.now()));
    await new Promise((resolve) => setTimeout(resolve, 300));
    for (const route of ["/health", "/v1/models", "/guild/v1/queue"]) {
      const t = performance.now();
      const res = await fetch(`${base}${route}`);
      expect(res.status, route).toBe(200);
      expect(performance.now() - t, route).toBeLessThan(500);
    }
    expect(settledAt, "the hostile request ended before the other routes were asked").toBe(0);
    const r = await request;
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ code: "invalid_value", message: `the chat template of hostile.gguf exceeded the render time limit (${timeLimitMs / 1000} s)` });
    expect(performance.now() - start).toBeGreaterThanOrEqual(timeLimitMs);
    // the worker was replaced: a good model's chat is served
    const ok = await post(base, { model: "guild-demo-qwen3moe-Q8_0", messages: [{ role: "user", content: "hi" }], max_tokens: 2, temperature: 0 });
    expect(ok.status).toBe(200);
  });

  it("RuntimeHost refuses the request as invalid input, without an error event", async () => {
    const errors: unknown[] = [];
    const off = host.subscribe((e) => { if (e.type === "error") errors.push(e); });
    const err = await host.generate({ modelId: hostile.id, input: chat("hi"), sampling: { maxTokens: 2 } }).catch((e: unknown) => e);
    off();
    expect(err).toBeInstanceOf(RuntimeError);
    expect(err).toMatchObject({ code: "invalid", message: "the chat template of hostile.gguf exceeded the render time limit (1.5 s)" });
    expect(errors).toEqual([]);
  });

  it("a cancel reaches a request whose template is still rendering; the model then serves others", async () => {
    const generation = host.generate({ modelId: hostile.id, input: chat("hi"), sampling: { maxTokens: 2 } }, "render-cancel");
    await new Promise((resolve) => setTimeout(resolve, 300));
    const t = performance.now();
    expect(host.cancel("render-cancel")).toBe(true);
    const r = await generation;
    expect(r.stopReason).toBe("cancel");
    expect(performance.now() - t).toBeLessThan(500);
    const ok = await host.generate({ modelId: demo.id, input: chat("hi"), sampling: { temperature: 0, maxTokens: 2 } });
    expect(ok.tokens.length).toBeGreaterThan(0);
  });
});
