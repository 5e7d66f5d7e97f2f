// ApiServer + the OpenAI routes against the real addon and the embedded demo
// model: the official `openai` client, curl, queueing across parallel clients,
// disconnects, bad input and the safety checks.
import { spawn } from "node:child_process";
import { request as httpRequest } from "node:http";
import { connect } from "node:net";
import { networkInterfaces } from "node:os";

import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import type { AppContract } from "../../shared/app-contract.js";
import type { LoadedModel, RuntimeEvent } from "../../shared/runtime-contract.js";
import { embeddedModelPath } from "../paths.js";
import { createWebRoutes } from "../web/web-routes.js";
import { WebSession } from "../web/web-session.js";
import { ApiServer, isLoopbackHost } from "./api-server.js";
import type { RouteModule } from "./http-routes.js";
import { integerRanges, numberRanges } from "./openai-routes.js";
import { RuntimeHost } from "./runtime-host.js";

const modelName = "guild-demo-qwen3moe-Q8_0";
// A text prompt the demo model continues for a long time (a chat reply ends after a few words).
const long = { prompt: "the river ".repeat(150), temperature: 0, max_tokens: 1500 };
const longPath = { path: "/v1/completions" };

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A plain HTTP request with full control of the headers (fetch forbids setting Host). */
function raw(base: string, method: string, path: string, headers: Record<string, string> = {}, body?: string | Buffer): Promise<Raw> {
  const u = new URL(path, base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: u.hostname, port: u.port, path: u.pathname + u.search, method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("error", reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

/** Bytes on a socket, for what node's client cannot send (two Host headers); the answer's status line. */
function rawStatusLine(base: string, request: string): Promise<{ status: string; text: string }> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(u.port), u.hostname);
    let text = "";
    socket.on("data", (d: Buffer) => (text += d.toString("utf8")));
    socket.on("end", () => resolve({ status: text.split("\r\n")[0] ?? "", text }));
    socket.on("error", reject);
    socket.end(request);
  });
}

const json = (r: Raw) => JSON.parse(r.body) as { error: { message: string; type: string; param: string | null; code: string | null } };

interface StreamRead {
  requestId: string;
  events: string[];
  comments: string[];
  text: string;
  firstContentAt: number;
  endAt: number;
  finish: string | null;
}

/** Streams one chat completion with fetch and collects its SSE events. */
async function streamChat(base: string, body: Record<string, unknown>, options: { signal?: AbortSignal; onEvent?: (e: string) => void; path?: string } = {}): Promise<StreamRead> {
  const res = await fetch(`${base}${options.path ?? "/v1/chat/completions"}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...body, stream: true }),
    ...(options.signal ? { signal: options.signal } : {}),
  });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
  const out: StreamRead = { requestId: res.headers.get("x-guild-request-id") ?? "", events: [], comments: [], text: "", firstContentAt: 0, endAt: 0, finish: null };
  const decoder = new TextDecoder();
  let buf = "";
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buf += decoder.decode(chunk, { stream: true });
    let i: number;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (ev.startsWith(":")) { out.comments.push(ev); continue; }
      out.events.push(ev);
      options.onEvent?.(ev);
      const data = ev.replace(/^data: /, "");
      if (data === "[DONE]") { out.endAt = performance.now(); continue; }
      const c = JSON.parse(data) as { choices: { delta?: { content?: string }; text?: string; finish_reason: string | null }[] };
      const choice = c.choices[0];
      const piece = choice?.delta?.content ?? choice?.text;
      if (piece) {
        if (out.firstContentAt === 0) out.firstContentAt = performance.now();
        out.text += piece;
      }
      if (choice?.finish_reason) out.finish = choice.finish_reason;
    }
  }
  return out;
}

function waitFor(host: RuntimeHost, pred: (e: RuntimeEvent) => boolean, timeoutMs = 30_000): Promise<RuntimeEvent> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { off(); reject(new Error("timed out waiting for a runtime event")); }, timeoutMs);
    const off = host.subscribe((e) => {
      if (pred(e)) { clearTimeout(timer); off(); resolve(e); }
    });
  });
}

describe("ApiServer (OpenAI-compatible API)", () => {
  const host = new RuntimeHost({ maxQueued: 3 });
  let model: LoadedModel;
  let server: ApiServer;
  let base: string;
  let client: OpenAI;

  beforeAll(async () => {
    model = await host.loadModel(embeddedModelPath(), { threads: 2, contextSize: 2048 });
    server = new ApiServer(host, { port: 0, maxBodyBytes: 16 * 1024, allowedOrigins: ["http://app.example:3000"] });
    base = (await server.start()).url;
    client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "not-needed", maxRetries: 0 });
  });
  afterAll(async () => {
    await server?.stop();
    await host.dispose();
  });

  it("binds 127.0.0.1 on an ephemeral port and lists the loaded model", async () => {
    expect(base).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual([modelName]);
    const health = await (await fetch(`${base}/health`)).json();
    expect(health).toEqual({ status: "ok", model: modelName, loaded: true, ready: true });
    const profile = await (await fetch(`${base}/guild/v1/profile`)).json() as { schema: string };
    expect(profile.schema).toBe("guild.startup-profile/1");
    const queue = await (await fetch(`${base}/guild/v1/queue`)).json();
    expect(queue).toMatchObject({ object: "guild.queue", models: [{ model: modelName, length: 0, running: null, waiting: [] }] });
  });

  it("answers the openai client without streaming, equal to the runtime's own greedy answer", async () => {
    const direct = await host.generate({ modelId: model.id, input: { kind: "chat", messages: [{ role: "user", content: "Hello! Who are you?" }] }, sampling: { temperature: 0, maxTokens: 24 } });
    const r = await client.chat.completions.create({ model: modelName, messages: [{ role: "user", content: "Hello! Who are you?" }], temperature: 0, max_tokens: 24 });
    expect(r.object).toBe("chat.completion");
    expect(r.choices[0]!.message.role).toBe("assistant");
    expect(r.choices[0]!.message.content).toBe(direct.text);
    expect(r.choices[0]!.finish_reason).toBe(direct.stopReason === "length" ? "length" : "stop");
    expect(r.usage).toEqual({
      prompt_tokens: direct.promptTokens.length, completion_tokens: direct.tokens.length, total_tokens: direct.promptTokens.length + direct.tokens.length,
      // the demo model has no MTP block: nothing drafted, one token per window
      speculative: { drafter: "none", drafted_tokens: 0, accepted_tokens: 0, windows: direct.stats.windows, acceptance_rate: null, tokens_per_window: direct.tokens.length / direct.stats.windows },
    });
    expect(direct.stats.windows).toBeGreaterThanOrEqual(direct.tokens.length);
    // the RuntimeHost id names the model too
    const byId = await client.chat.completions.create({ model: model.id, messages: [{ role: "user", content: "Hello! Who are you?" }], temperature: 0, max_tokens: 24 });
    expect(byId.choices[0]!.message.content).toBe(direct.text);
  });

  it("streams to the openai client: deltas add up, a finish chunk, then usage", async () => {
    const whole = await client.chat.completions.create({ model: modelName, messages: [{ role: "user", content: "What does river mean?" }], temperature: 0, max_tokens: 20 });
    const stream = await client.chat.completions.create({
      model: modelName, messages: [{ role: "user", content: "What does river mean?" }], temperature: 0, max_tokens: 20,
      stream: true, stream_options: { include_usage: true },
    });
    let text = "";
    let deltas = 0;
    let finish: string | null = null;
    let usage: unknown = null;
    for await (const chunk of stream) {
      expect(chunk.object).toBe("chat.completion.chunk");
      if (chunk.usage) usage = chunk.usage;
      const c = chunk.choices[0];
      if (!c) continue;
      if (c.delta.content) { text += c.delta.content; deltas++; }
      if (c.finish_reason) finish = c.finish_reason;
    }
    expect(deltas).toBeGreaterThan(3);
    expect(text).toBe(whole.choices[0]!.message.content);
    expect(finish).toBe(whole.choices[0]!.finish_reason);
    expect(usage).toEqual(whole.usage);
  });

  it("completes a text prompt (/v1/completions), with stop strings and max_tokens", async () => {
    const r = await client.completions.create({ model: modelName, prompt: "The river", temperature: 0, max_tokens: 16 });
    expect(r.object).toBe("text_completion");
    const text = r.choices[0]!.text;
    expect(text.length).toBeGreaterThan(0);
    expect(r.choices[0]!.finish_reason).toMatch(/^(stop|length)$/);
    const cut = text.indexOf(" ", 3);
    expect(cut).toBeGreaterThan(0);
    const stop = text.slice(cut, cut + 3);
    const stopped = await client.completions.create({ model: modelName, prompt: "The river", temperature: 0, max_tokens: 16, stop: [stop] });
    expect(stopped.choices[0]!.text).toBe(text.slice(0, text.indexOf(stop)));
    expect(stopped.choices[0]!.finish_reason).toBe("stop");
    let streamed = "";
    for await (const chunk of await client.completions.create({ model: modelName, prompt: "The river", temperature: 0, max_tokens: 16, stream: true }))
      streamed += chunk.choices[0]?.text ?? "";
    expect(streamed).toBe(text);
  });

  it("streams to curl -sN: SSE chunks, a finish chunk and [DONE]", async () => {
    const body = JSON.stringify({ messages: [{ role: "user", content: "hi" }], stream: true, temperature: 0, max_tokens: 12 });
    const out = await new Promise<string>((resolve, reject) => {
      const p = spawn("curl", ["-sN", `${base}/v1/chat/completions`, "-H", "content-type: application/json", "-d", body]);
      let s = "";
      p.stdout.on("data", (d: Buffer) => (s += d.toString("utf8")));
      p.on("error", reject);
      p.on("close", (code) => (code === 0 ? resolve(s) : reject(new Error(`curl exited ${code}`))));
    });
    const events = out.split("\n\n").filter((e) => e.startsWith("data: ")).map((e) => e.slice(6));
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e) as { object: string; choices: { delta: { content?: string }; finish_reason: string | null }[] });
    expect(chunks.length).toBeGreaterThan(4);
    for (const c of chunks) expect(c.object).toBe("chat.completion.chunk");
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toMatch(/^(stop|length)$/);
    const text = chunks.map((c) => c.choices[0]!.delta.content ?? "").join("");
    const whole = await client.chat.completions.create({ messages: [{ role: "user", content: "hi" }], model: modelName, temperature: 0, max_tokens: 12 });
    expect(text).toBe(whole.choices[0]!.message.content);
  });

  it("serves four parallel clients one at a time, each with the complete sequential answer", async () => {
    // A host whose replies take a while however fast the model is (test-only
    // pacing), so all four requests are queued while the first one runs: the
    // queue positions below do not depend on the machine's speed.
    const pacedHost = new RuntimeHost({ maxQueued: 3, testPacing: { tokensPerStep: 2, delayMs: 25 } });
    await pacedHost.loadModel(embeddedModelPath(), { threads: 2, contextSize: 2048 });
    const pacedServer = new ApiServer(pacedHost, { port: 0, maxBodyBytes: 16 * 1024 });
    const pacedBase = (await pacedServer.start()).url;
    const body = { model: modelName, messages: [{ role: "user" as const, content: "What does river mean?" }], temperature: 0, max_tokens: 24 };
    const sequential = (await client.chat.completions.create(body)).choices[0]!.message.content;
    const order: string[] = [];
    const off = pacedHost.subscribe((e) => {
      if (e.type === "started") order.push(`started:${e.requestId}`);
      if (e.type === "done") order.push(`done:${e.result.requestId}`);
    });
    const results = await Promise.all([0, 1, 2, 3].map(() => streamChat(pacedBase, body))).finally(async () => {
      off();
      await pacedServer.stop();
      await pacedHost.dispose();
    });
    for (const r of results) {
      expect(r.text).toBe(sequential);
      expect(r.events.at(-1)).toBe("data: [DONE]");
      expect(r.finish).toMatch(/^(stop|length)$/);
    }
    // started/done alternate: never two generations at once
    const ids = results.map((r) => r.requestId);
    const mine = order.filter((o) => ids.includes(o.split(":")[1]!));
    expect(mine).toHaveLength(8);
    for (let i = 0; i < 8; i += 2) {
      expect(mine[i]!.startsWith("started:")).toBe(true);
      expect(mine[i + 1]).toBe(`done:${mine[i]!.slice("started:".length)}`);
    }
    // the clients' own timestamps do not overlap either
    const spans = results.map((r) => [r.firstContentAt, r.endAt] as const).sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < spans.length; i++) expect(spans[i]![0]).toBeGreaterThanOrEqual(spans[i - 1]![1]);
    // the waiting ones were told their place in the queue
    const told = results.flatMap((r) => r.comments).filter((c) => /^: queue position \d+$/.test(c));
    expect(told.length).toBeGreaterThanOrEqual(3);
    expect(results.some((r) => r.comments.includes(": queue position 3"))).toBe(true);
  });

  it("a streaming client that disconnects mid-stream frees the model at once", async () => {
    const controller = new AbortController();
    let gotContent!: () => void;
    const firstContent = new Promise<void>((r) => (gotContent = r));
    const a = streamChat(base, long, {
      ...longPath,
      signal: controller.signal,
      onEvent: (e) => { if (/"text":"[^"]/.test(e)) gotContent(); },
    }).catch((err: unknown) => err);
    await firstContent;
    // B waits behind A and is told so
    const bStarted = waitFor(host, (e) => e.type === "started");
    const aDone = waitFor(host, (e) => e.type === "done" && e.result.stopReason === "cancel");
    const bQueued = waitFor(host, (e) => e.type === "queued");
    const b = streamChat(base, { messages: [{ role: "user", content: "hi" }], temperature: 0, max_tokens: 6 });
    await bQueued;
    const t0 = performance.now();
    controller.abort();
    const done = await aDone;
    await bStarted;
    const waited = performance.now() - t0;
    expect(waited).toBeLessThan(1500);
    expect((done as Extract<RuntimeEvent, { type: "done" }>).result.tokens.length).toBeLessThan(1500);
    expect(await a).toBeInstanceOf(Error);
    const br = await b;
    expect(br.comments).toContain(": queue position 1");
    expect(br.text.length).toBeGreaterThan(0);
    expect(host.queueState(model.id)).toMatchObject({ length: 0, running: null });
  });

  it("a waiting client that disconnects leaves the queue at once; a full queue answers 429", async () => {
    const ctl = [0, 1, 2, 3].map(() => new AbortController());
    const started = waitFor(host, (e) => e.type === "started");
    const running = streamChat(base, long, { ...longPath, signal: ctl[0]!.signal }).catch((e: unknown) => e);
    await started;
    const waiting = [1, 2, 3].map((i) => streamChat(base, { messages: [{ role: "user", content: "hi" }], max_tokens: 4 }, { signal: ctl[i]!.signal }).catch((e: unknown) => e));
    const deadline = Date.now() + 10_000;
    while (host.queueState(model.id).waiting.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(host.queueState(model.id).waiting).toHaveLength(3);
    const queue = await (await fetch(`${base}/guild/v1/queue`)).json() as { models: { length: number }[] };
    expect(queue.models[0]!.length).toBe(4);
    // the queue holds 3 waiting requests (maxQueued): the next one is refused
    const full = await raw(base, "POST", "/v1/chat/completions", { "content-type": "application/json" }, JSON.stringify({ messages: [{ role: "user", content: "hi" }] }));
    expect(full.status).toBe(429);
    expect(json(full).error.code).toBe("queue_full");
    // one waiting client goes away: it leaves the queue at once
    ctl[2]!.abort();
    const t0 = Date.now();
    while (host.queueState(model.id).waiting.length > 2 && Date.now() - t0 < 2000) await new Promise((r) => setTimeout(r, 5));
    expect(host.queueState(model.id).waiting).toHaveLength(2);
    expect(Date.now() - t0).toBeLessThan(500);
    for (const c of ctl) c.abort();
    await Promise.all([running, ...waiting]);
    const end = Date.now() + 5000;
    while (host.queueState(model.id).length > 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
    expect(host.queueState(model.id)).toMatchObject({ length: 0, running: null, waiting: [] });
  });

  it("answers bad requests with OpenAI's error JSON and the right status, and keeps serving", async () => {
    const post = (path: string, body: string | Buffer, headers: Record<string, string> = {}) =>
      raw(base, "POST", path, { "content-type": "application/json", ...headers }, body);
    const cases: [Promise<Raw>, number, string | null][] = [
      [post("/v1/chat/completions", "{not json"), 400, null],
      [post("/v1/chat/completions", "[1,2]"), 400, null],
      [post("/v1/chat/completions", ""), 400, null],
      [post("/v1/chat/completions", JSON.stringify({ model: modelName })), 400, "messages"],
      [post("/v1/chat/completions", JSON.stringify({ messages: "hi" })), 400, "messages"],
      [post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "wizard", content: "hi" }] })), 400, "messages[0].role"],
      [post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: 5 }] })), 400, "messages[0].content"],
      [post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: "hi" }], temperature: "hot" })), 400, "temperature"],
      [post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: "hi" }], temperature: 7 })), 400, "temperature"],
      [post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: 1.5 })), 400, "max_tokens"],
      [post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: -3 })), 400, "max_tokens"],
      [post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: "hi" }], stream: "yes" })), 400, "stream"],
      [post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: "hi" }], stop: [1] })), 400, "stop[0]"],
      [post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: "hi" }], seed: "x" })), 400, "seed"],
      [post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: "hi" }], top_k: -1 })), 400, "top_k"],
      [post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: "hi" }], n: 3 })), 400, "n"],
      [post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: "hi" }], tools: [{ type: "function" }] })), 400, "tools"],
      [post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: "hi" }], bogus: 1 })), 400, "bogus"],
      [post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: "hi" }], stream_options: 3 })), 400, "stream_options"],
      [post("/v1/chat/completions", "{}", { "content-type": "text/plain" }), 400, null],
      [post("/v1/completions", JSON.stringify({ prompt: 12 })), 400, "prompt"],
      [post("/v1/completions", JSON.stringify({})), 400, "prompt"],
      [post("/v1/chat/completions", JSON.stringify({ model: "gpt-4", messages: [{ role: "user", content: "hi" }] })), 404, "model"],
      [post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: "x".repeat(20_000) }] })), 413, null],
      [post("/v1/nope", "{}"), 404, null],
      [raw(base, "GET", "/v1/chat/completions"), 405, null],
      [raw(base, "DELETE", "/v1/models"), 405, null],
      [raw(base, "GET", "/v1/models/gpt-4"), 404, "model"],
      [raw(base, "GET", "/"), 404, null],
    ];
    for (const [p, status, param] of cases) {
      const r = await p;
      expect(r.status, r.body).toBe(status);
      expect(r.headers["content-type"]).toMatch(/^application\/json/);
      const e = json(r).error;
      expect(typeof e.message).toBe("string");
      expect(typeof e.type).toBe("string");
      if (param !== null) expect(e.param).toBe(param);
    }
    // a prompt longer than the context (one at a time: a queued stream has already answered 200)
    for (const stream of [false, true]) {
      const r = await post("/v1/completions", JSON.stringify({ prompt: "the river ".repeat(1100), max_tokens: 2, stream }));
      expect(r.status, r.body).toBe(400);
      expect(json(r).error.code).toBe("context_length_exceeded");
    }
    // a body streamed without a length is cut off at the limit too
    const chunked = await new Promise<Raw>((resolve, reject) => {
      const u = new URL(base);
      const req = httpRequest({ host: u.hostname, port: u.port, path: "/v1/chat/completions", method: "POST", headers: { "content-type": "application/json", "transfer-encoding": "chunked" } }, (res) => {
        let s = "";
        res.on("data", (c: Buffer) => (s += c.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: s }));
      });
      req.on("error", reject);
      for (let i = 0; i < 5; i++) req.write("x".repeat(5000));
      req.end();
    });
    expect(chunked.status).toBe(413);
    // still serving
    expect((await client.models.list()).data).toHaveLength(1);
    const ok = await client.chat.completions.create({ messages: [{ role: "user", content: "hi" }], model: modelName, max_tokens: 2, temperature: 0 });
    expect(ok.choices[0]!.message.content?.length).toBeGreaterThan(0);
  });

  it("answers every numeric field out of its range with a 400 naming it (tiny, huge, Infinity, fractional), and serves the edges", async () => {
    const chat = (extra: string) => raw(base, "POST", "/v1/chat/completions", { "content-type": "application/json" },
      `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2,${extra}}`);
    const completion = (extra: string) => raw(base, "POST", "/v1/completions", { "content-type": "application/json" }, `{"max_tokens":2,${extra}}`);
    // Values as JSON text: 1e400 is what JSON.parse makes Infinity of.
    const cases: [(extra: string) => Promise<Raw>, string, string[]][] = [
      [chat, "temperature", ["-1e-300", "2.0000001", "1e300", "-1e300", "1e400", "-1e400", '"0.5"']],
      [chat, "top_p", ["1e-300", "1e-40", "0", "-0.5", "1.0000001", "1e300", "1e400"]],
      [chat, "min_p", ["-1e-300", "1.5", "1e300", "1e400"]],
      [chat, "repeat_penalty", ["1e-300", "1e-40", "0", "-1", "10.5", "1e30", "1e300", "1e400"]],
      [chat, "frequency_penalty", ["2.5", "-1e300", "1e400"]],
      [chat, "presence_penalty", ["-2.5", "1e300", "-1e400"]],
      [chat, "top_k", ["-1", "1.5", "2147483648", "1e300", "1e400", "1e-300"]],
      [chat, "seed", ["-1", "0.5", "9007199254740992", "1e300", "1e400"]],
      [chat, "max_completion_tokens", ["0", "1e-300", "2147483648", "1e300"]],
      [chat, "n", ["0", "129", "1e300", "1e400", "1.5"]],
      [chat, "top_logprobs", ["-1", "21", "1e300"]],
      [chat, "logprobs", ['"yes"', "1e300", "1e-300", "true"]],
      [completion, "max_tokens", ["0", "-3", "1e-300", "2147483648", "1e300", "1e400"]],
      [completion, "best_of", ["0", "21", "1e300"]],
      [completion, "logprobs", ["5", "1e300"]],
    ];
    for (const [send, field, values] of cases) {
      for (const value of values) {
        const body = send === completion ? `"prompt":"hi","${field}":${value}` : `"${field}":${value}`;
        const r = await send(body); // a repeated key: JSON.parse keeps the last
        expect(r.status, `${field}: ${value} -> ${r.body}`).toBe(400);
        const e = json(r).error;
        expect(e.param, `${field}: ${value}`).toBe(field);
        expect(e.type).toBe("invalid_request_error");
        expect(e.message.startsWith(`${field}: `), e.message).toBe(true);
      }
    }
    // The ranges are the documented ones, and each message says it.
    expect(json(await chat('"top_p":1e-300')).error.message).toBe(`top_p: must be between ${numberRanges.top_p.min} and 1 (got 1e-300)`);
    expect(json(await chat('"repeat_penalty":1e400')).error.message).toBe("repeat_penalty: must be between 0.01 and 10 (got Infinity)");
    expect(json(await chat('"seed":1e300')).error.message).toBe(`seed: must be an integer between 0 and ${integerRanges.seed.max} (got 1e+300)`);
    // Token ids of a prompt: integers, and in the model's vocabulary.
    for (const [prompt, param] of [["[1e300]", "prompt[0]"], ["[1,-1]", "prompt[1]"], ["[1,2.5]", "prompt[1]"], [`[1,${model.vocabSize}]`, "prompt[1]"]] as const) {
      const r = await completion(`"prompt":${prompt}`);
      expect(r.status, `${prompt} -> ${r.body}`).toBe(400);
      expect(json(r).error.param).toBe(param);
    }
    // The edges of every range are served (a tiny temperature is greedy: 32-bit floats round it to 0).
    const edges = await chat('"temperature":1e-300,"top_p":1e-6,"min_p":1e-300,"repeat_penalty":10,"top_k":2147483647,"seed":9007199254740991,"frequency_penalty":0,"presence_penalty":0,"n":1');
    expect(edges.status, edges.body).toBe(200);
    const greedy = await chat('"temperature":0');
    expect((JSON.parse(edges.body) as { choices: { message: { content: string } }[] }).choices[0]!.message.content)
      .toBe((JSON.parse(greedy.body) as { choices: { message: { content: string } }[] }).choices[0]!.message.content);
    for (const extra of ['"repeat_penalty":0.01', '"top_p":1,"min_p":1,"temperature":2', '"top_logprobs":0,"logprobs":false,"seed":0,"top_k":0'])
      expect((await chat(extra)).status, extra).toBe(200);
  });

  it("refuses a request with two Host headers, in either order, before any route", async () => {
    const port = new URL(base).port;
    for (const hosts of [[`127.0.0.1:${port}`, "evil.example"], ["evil.example", `127.0.0.1:${port}`], [`127.0.0.1:${port}`, `127.0.0.1:${port}`]]) {
      const r = await rawStatusLine(base, `GET /v1/models HTTP/1.1\r\n${hosts.map((h) => `Host: ${h}\r\n`).join("")}Connection: close\r\n\r\n`);
      expect(r.status, hosts.join(" + ")).toBe("HTTP/1.1 400 Bad Request");
      const body = JSON.parse(r.text.slice(r.text.indexOf("\r\n\r\n") + 4)) as { error: { message: string; code: string } };
      expect(body.error).toMatchObject({ message: "the request has more than one Host header: send exactly one", code: "duplicate_host" });
    }
    const upgrade = await rawStatusLine(base, `GET /ws HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nHost: evil.example\r\nConnection: upgrade\r\nUpgrade: test\r\n\r\n`);
    expect(upgrade.status).toBe("HTTP/1.1 400 duplicate_host");
    // One Host header is still fine.
    expect((await rawStatusLine(base, `GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: close\r\n\r\n`)).status).toBe("HTTP/1.1 200 OK");
  });

  it("with API keys, web mode keeps its own session: the app works without the key, /v1 still needs it, and foreign Host/Origin stay refused", async () => {
    const session = new WebSession();
    const contract = { chat: { listConversations: async () => [{ id: "c1" }] } } as unknown as AppContract;
    const web = createWebRoutes({ contract, subscribe: () => () => undefined }, session, { rendererDir: "/nonexistent" });
    const keyed = new ApiServer(host, { port: 0, apiKeys: ["sk-1"], extraRoutes: [web] });
    const url = (await keyed.start()).url;
    const port = new URL(url).port;
    const appCookie = { cookie: `guild_session_${port}=${session.token}` };
    const rpc = (headers: Record<string, string>) => raw(url, "POST", "/app/rpc/chat/listConversations", { "content-type": "application/json", ...headers }, "{}");
    try {
      // The printed link needs no key: it sets the session cookie.
      const link = new URL(session.appUrl(url));
      const exchange = await raw(url, "GET", link.pathname + link.search);
      expect(exchange.status).toBe(303);
      expect(exchange.headers["set-cookie"]).toEqual([`guild_session_${port}=${session.token}; Path=/app; HttpOnly; SameSite=Strict`]);
      // The app's contract: the session, never the key.
      expect(JSON.parse((await rpc(appCookie)).body)).toEqual({ result: [{ id: "c1" }] });
      expect((await rpc({ "x-guild-token": session.token })).status).toBe(200);
      const keyOnly = await rpc({ authorization: "Bearer sk-1" });
      expect(keyOnly.status).toBe(401);
      expect(JSON.parse(keyOnly.body)).toMatchObject({ error: { code: "session_required" } });
      expect((await raw(url, "GET", "/app/events", { authorization: "Bearer sk-1" })).status).toBe(401);
      // The OpenAI API: the key, never the session.
      expect((await raw(url, "GET", "/v1/models", appCookie)).status).toBe(401);
      expect((await raw(url, "GET", "/v1/models", { "x-guild-token": session.token })).status).toBe(401);
      expect((await raw(url, "GET", "/v1/models", { authorization: "Bearer sk-1" })).status).toBe(200);
      // Host and Origin checks come first, session or not.
      const foreignHost = await rpc({ ...appCookie, host: "evil.example" });
      expect([foreignHost.status, json(foreignHost).error.code]).toEqual([403, "forbidden_host"]);
      const foreignOrigin = await rpc({ ...appCookie, origin: "http://evil.example" });
      expect([foreignOrigin.status, json(foreignOrigin).error.code]).toEqual([403, "forbidden_origin"]);
      expect((await raw(url, "GET", link.pathname + link.search, { host: `evil.example:${port}` })).status).toBe(403);
    } finally {
      await keyed.stop();
    }
  });

  it("refuses foreign Host headers (DNS rebinding) and foreign origins; CORS only for listed origins", async () => {
    const port = new URL(base).port;
    for (const h of ["evil.example", `evil.example:${port}`, "localhost:1", `127.0.0.2:${port}`]) {
      const r = await raw(base, "GET", "/v1/models", { host: h });
      expect(r.status, h).toBe(403);
      expect(json(r).error.code).toBe("forbidden_host");
    }
    for (const h of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`]) expect((await raw(base, "GET", "/v1/models", { host: h })).status, h).toBe(200);

    const foreign = await raw(base, "POST", "/v1/chat/completions", { origin: "http://evil.example", "content-type": "application/json" }, JSON.stringify({ messages: [{ role: "user", content: "hi" }] }));
    expect(foreign.status).toBe(403);
    expect(json(foreign).error.code).toBe("forbidden_origin");
    expect(foreign.headers["access-control-allow-origin"]).toBeUndefined();
    const foreignPreflight = await raw(base, "OPTIONS", "/v1/chat/completions", { origin: "http://evil.example", "access-control-request-method": "POST" });
    expect(foreignPreflight.status).toBe(403);
    expect(foreignPreflight.headers["access-control-allow-origin"]).toBeUndefined();

    const listed = await raw(base, "GET", "/v1/models", { origin: "http://app.example:3000" });
    expect(listed.status).toBe(200);
    expect(listed.headers["access-control-allow-origin"]).toBe("http://app.example:3000");
    const preflight = await raw(base, "OPTIONS", "/v1/chat/completions", { origin: "http://app.example:3000", "access-control-request-method": "POST", "access-control-request-headers": "content-type, authorization" });
    expect(preflight.status).toBe(204);
    expect(preflight.headers["access-control-allow-origin"]).toBe("http://app.example:3000");
    expect(preflight.headers["access-control-allow-methods"]).toContain("POST");
    expect(preflight.headers["access-control-allow-headers"]).toContain("authorization");
    // without an Origin (curl, scripts) there are no CORS headers at all
    const plain = await raw(base, "GET", "/v1/models");
    expect(plain.headers["access-control-allow-origin"]).toBeUndefined();
  });

  it("requires an API key when keys are configured", async () => {
    const keyed = new ApiServer(host, { port: 0, apiKeys: ["sk-local-1", "sk-local-2"] });
    const url = (await keyed.start()).url;
    try {
      const none = await raw(url, "GET", "/v1/models");
      expect(none.status).toBe(401);
      expect(json(none).error).toMatchObject({ type: "authentication_error", code: "invalid_api_key" });
      expect((await raw(url, "GET", "/v1/models", { authorization: "Bearer wrong" })).status).toBe(401);
      expect((await raw(url, "GET", "/health", { authorization: "Bearer wrong" })).status).toBe(401);
      expect((await raw(url, "GET", "/v1/models", { authorization: "Bearer sk-local-2" })).status).toBe(200);
      const bad = new OpenAI({ baseURL: `${url}/v1`, apiKey: "nope", maxRetries: 0 });
      await expect(bad.models.list()).rejects.toMatchObject({ status: 401 });
      const good = new OpenAI({ baseURL: `${url}/v1`, apiKey: "sk-local-1", maxRetries: 0 });
      const r = await good.chat.completions.create({ model: modelName, messages: [{ role: "user", content: "hi" }], max_tokens: 3, temperature: 0 });
      expect(r.choices[0]!.message.content!.length).toBeGreaterThan(0);
    } finally {
      await keyed.stop();
    }
  });

  it("binds a non-loopback address only with an API key, and then accepts that address as Host", async () => {
    expect(isLoopbackHost("127.0.0.1") && isLoopbackHost("localhost") && isLoopbackHost("::1")).toBe(true);
    expect(isLoopbackHost("0.0.0.0") || isLoopbackHost("192.168.1.2")).toBe(false);
    expect(() => new ApiServer(host, { host: "0.0.0.0", port: 0 })).toThrow(/API key/);
    expect(() => new ApiServer(host, { host: "192.168.1.2", port: 0, apiKeys: [] })).toThrow(/API key/);
    const wide = new ApiServer(host, { host: "0.0.0.0", port: 0, apiKeys: ["k"] });
    const url = (await wide.start()).url;
    try {
      const port = new URL(url).port;
      const local = `http://127.0.0.1:${port}`;
      const auth = { authorization: "Bearer k" };
      expect((await raw(local, "GET", "/v1/models", { ...auth, host: `127.0.0.1:${port}` })).status).toBe(200);
      expect((await raw(local, "GET", "/v1/models", { ...auth, host: `evil.example:${port}` })).status).toBe(403);
      const lan = Object.values(networkInterfaces()).flat().find((a) => a && a.family === "IPv4" && !a.internal);
      if (lan) expect((await raw(local, "GET", "/v1/models", { ...auth, host: `${lan.address}:${port}` })).status).toBe(200);
    } finally {
      await wide.stop();
    }
  });

  it("serves extra route modules behind the same checks, upgrades included", async () => {
    const extra: RouteModule = {
      routes: (_req, res, url) => {
        if (url.pathname !== "/web") return false;
        res.writeHead(200, { "content-type": "text/plain" });
        res.end("web mode");
        return true;
      },
      upgrade: (_req, socket, _head, url) => {
        if (url.pathname !== "/ws") return false;
        socket.end("HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: test\r\n\r\n");
        return true;
      },
    };
    const s = new ApiServer(host, { port: 0, apiKeys: ["k"], extraRoutes: [extra] });
    const url = (await s.start()).url;
    const port = new URL(url).port;
    const upgrade = (headers: Record<string, string>) => new Promise<number>((resolve, reject) => {
      const req = httpRequest({ host: "127.0.0.1", port, path: "/ws", headers: { connection: "upgrade", upgrade: "test", ...headers } });
      req.on("upgrade", (res, socket) => { socket.destroy(); resolve(res.statusCode ?? 0); });
      req.on("response", (res) => { res.resume(); resolve(res.statusCode ?? 0); });
      req.on("error", reject);
      req.end();
    });
    try {
      const auth = { authorization: "Bearer k" };
      expect((await raw(url, "GET", "/web", auth)).body).toBe("web mode");
      expect((await raw(url, "GET", "/web")).status).toBe(401);
      expect((await raw(url, "GET", "/web", { ...auth, host: "evil.example" })).status).toBe(403);
      expect((await raw(url, "GET", "/v1/models", auth)).status).toBe(200);
      expect(await upgrade(auth)).toBe(101);
      expect(await upgrade({})).toBe(401);
      expect(await upgrade({ ...auth, host: "evil.example" })).toBe(403);
      expect(await upgrade({ ...auth, origin: "http://evil.example" })).toBe(403);
    } finally {
      await s.stop();
    }
  });

  it("answers 503 while no model is loaded", async () => {
    const empty = new RuntimeHost();
    const s = new ApiServer(empty, { port: 0 });
    const url = (await s.start()).url;
    try {
      const h = await raw(url, "GET", "/health");
      expect(h.status).toBe(503);
      expect(JSON.parse(h.body)).toEqual({ status: "no_model", model: null, loaded: false, ready: false });
      const c = await raw(url, "POST", "/v1/chat/completions", { "content-type": "application/json" }, JSON.stringify({ messages: [{ role: "user", content: "hi" }] }));
      expect(c.status).toBe(503);
      expect(json(c).error.code).toBe("model_not_loaded");
      expect(JSON.parse((await raw(url, "GET", "/v1/models")).body)).toEqual({ object: "list", data: [] });
    } finally {
      await s.stop();
      await empty.dispose();
    }
  });

  it("stop() cancels running generations and closes streams", async () => {
    const s = new ApiServer(host, { port: 0 });
    const url = (await s.start()).url;
    const started = waitFor(host, (e) => e.type === "started");
    const done = waitFor(host, (e) => e.type === "done");
    const a = streamChat(url, long, longPath).catch((e: unknown) => e);
    await started;
    const t0 = performance.now();
    await s.stop();
    expect(performance.now() - t0).toBeLessThan(2500);
    expect(((await done) as Extract<RuntimeEvent, { type: "done" }>).result.stopReason).toBe("cancel");
    const r = await a;
    // the stream ended with an error event (or the connection was dropped)
    if (!(r instanceof Error)) expect((r as StreamRead).events.at(-1)).toMatch(/"code":"cancelled"/);
  });
});
