// The chat API's reasoning (openai-routes.ts behind ApiServer): a reply's
// `<think>` block or harmony analysis answered as reasoning_content, streamed
// as delta.reasoning_content, its content only the answer; a reply without
// reasoning answered and streamed exactly as before; reasoning_effort checked
// and handed to the chat template. A scripted runtime stands in for
// RuntimeHost: it streams the reply it is given as token events and records
// the requests (what the template is rendered from).
import { afterEach, describe, expect, it } from "vitest";

import type { GenerationRequest, GenerationResult, LoadedModel, RuntimeEvent } from "../../shared/runtime-contract.js";
import { ApiServer } from "./api-server.js";
import type { RuntimeHost } from "./runtime-host.js";

const model: LoadedModel = {
  id: "m1", path: "/models/gpt-oss-20b.gguf", name: "gpt-oss-20b", architecture: "gpt-oss", contextSize: 4096, layers: 24,
  experts: 32, expertsPerToken: 4, vocabSize: 201088, weightBytes: 1, threads: 2, kernels: "cpu", ready: true, loadedAt: "2025-01-01T00:00:00.000Z",
};

/** Streams `pieces` as the reply to every request, a macrotask apart, as a model would. */
function scriptedRuntime(pieces: readonly string[]) {
  const listeners = new Set<(e: RuntimeEvent) => void>();
  const requests: GenerationRequest[] = [];
  const emit = (e: RuntimeEvent) => { for (const l of listeners) l(e); };
  const host = {
    listModels: () => [model],
    queueState: (modelId: string) => ({ modelId, length: 0, running: null, waiting: [] }),
    subscribe: (l: (e: RuntimeEvent) => void) => { listeners.add(l); return () => listeners.delete(l); },
    cancel: () => false,
    generate: async (request: GenerationRequest, requestId: string): Promise<GenerationResult> => {
      requests.push(request);
      emit({ type: "started", requestId, modelId: model.id });
      for (const [i, text] of pieces.entries()) {
        await new Promise((resolve) => setTimeout(resolve, 0));
        emit({ type: "token", requestId, id: i, text });
      }
      return {
        requestId, modelId: model.id, text: pieces.join(""), tokens: pieces.map((_, i) => i), promptTokens: [1, 2, 3], stopReason: "eos",
        stats: { promptTokens: 3, reusedPromptTokens: 0, generatedTokens: pieces.length, promptTokensPerSecond: 1, decodeTokensPerSecond: 1, ttftMs: 1, queueMs: 0, draftTokens: 0, acceptedDraftTokens: 0 },
      };
    },
  } as unknown as RuntimeHost;
  return { host, requests };
}

const servers: ApiServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

async function serve(pieces: readonly string[]) {
  const { host, requests } = scriptedRuntime(pieces);
  const server = new ApiServer(host, { port: 0 });
  servers.push(server);
  const { url } = await server.start();
  const post = (body: Record<string, unknown>) =>
    fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { post, requests };
}

const hi = { messages: [{ role: "user", content: "hi" }] };

interface Chunk {
  id: string;
  created: number;
  choices: { delta: { role?: string; content?: string; reasoning_content?: string }; finish_reason: string | null }[];
}

/** The SSE body's data lines, parsed (the closing [DONE] checked and left out). */
function chunks(body: string): Chunk[] {
  const events = body.split("\n\n").filter((e) => e !== "");
  expect(events.at(-1)).toBe("data: [DONE]");
  return events.slice(0, -1).map((e) => JSON.parse(e.replace(/^data: /, "")) as Chunk);
}

/** Cuts text into pieces of `size` characters: tokens cut control tokens and headers anywhere. */
const cut = (text: string, size: number) => Array.from({ length: Math.ceil(text.length / size) }, (_, i) => text.slice(i * size, (i + 1) * size));

const harmony = "<|channel|>analysis<|message|>The user greets; answer in kind.<|end|>" +
  "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?<|return|>";
const think = "<think>\nThe user greets; answer in kind.\n</think>\n\nHello! How can I help?";

describe("/v1/chat/completions: reasoning", () => {
  it.each([["harmony", harmony], ["<think>", think]])("answers a %s reply's reasoning as reasoning_content, the answer alone as content", async (_, text) => {
    const { post } = await serve(cut(text, 5));
    const res = await post(hi);
    expect(res.status).toBe(200);
    const body = (await res.json()) as { choices: { message: Record<string, unknown>; finish_reason: string }[] };
    expect(body.choices[0]!.message).toEqual({
      role: "assistant", content: "Hello! How can I help?", reasoning_content: "The user greets; answer in kind.", refusal: null,
    });
    expect(body.choices[0]!.finish_reason).toBe("stop");
  });

  it("answers a reply without reasoning exactly as it was written, with no reasoning_content", async () => {
    const text = "  Plain <b>answer</b> with a <|literal|> and </ tags";
    const { post } = await serve(cut(text, 3));
    const body = (await (await post(hi)).json()) as { choices: { message: Record<string, unknown> }[] };
    expect(body.choices[0]!.message).toStrictEqual({ role: "assistant", content: text, refusal: null });
  });

  it.each([["harmony", harmony], ["<think>", think]])("streams a %s reply as reasoning_content then content deltas that add up to the non-streamed answer", async (_, text) => {
    for (const size of [1, 4, 9]) {
      const { post } = await serve(cut(text, size));
      const whole = (await (await post(hi)).json()) as { choices: { message: { content: string; reasoning_content: string } }[] };
      const res = await post({ ...hi, stream: true });
      expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
      const raw = await res.text();
      expect(raw, "no control token, nor a piece of one, is ever sent").not.toMatch(/<\||\|>|<think>|<\/think>/);
      const cs = chunks(raw);
      expect(cs[0]!.choices[0]!.delta).toEqual({ role: "assistant", content: "" });
      const deltas = cs.slice(1, -1).map((c) => c.choices[0]!.delta);
      // one field a chunk; every reasoning delta comes before the first content delta
      for (const d of deltas) expect(Object.keys(d).length).toBe(1);
      const firstContent = deltas.findIndex((d) => d.content !== undefined);
      expect(deltas.slice(firstContent).every((d) => d.content !== undefined)).toBe(true);
      expect(deltas.map((d) => d.reasoning_content ?? "").join("")).toBe(whole.choices[0]!.message.reasoning_content);
      expect(deltas.map((d) => d.content ?? "").join("")).toBe(whole.choices[0]!.message.content);
      expect(deltas.filter((d) => d.reasoning_content !== undefined).length, "reasoning streams in many deltas").toBeGreaterThan(1);
      expect(cs.at(-1)!.choices[0]).toMatchObject({ delta: {}, finish_reason: "stop" });
    }
  });

  it("streams a reply without reasoning byte for byte as before: the role chunk, one content chunk per token, the finish chunk", async () => {
    const pieces = ["\n", "<", "b>Hi", "</b> <", "|x|>", " there"];
    const { post } = await serve(pieces);
    const raw = await (await post({ ...hi, stream: true })).text();
    const first = chunks(raw)[0]!;
    const chunk = (delta: Record<string, unknown>, finish: string | null) =>
      `data: ${JSON.stringify({ id: first.id, object: "chat.completion.chunk", created: first.created, model: "gpt-oss-20b", system_fingerprint: "guild",
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
    const expected = chunk({ role: "assistant", content: "" }, null) + pieces.map((p) => chunk({ content: p }, null)).join("") + chunk({}, "stop") + "data: [DONE]\n\n";
    expect(raw).toBe(expected);
  });

  it("accepts an assistant message sent back as it was answered (reasoning_content, refusal: left out of the prompt), but not on other roles", async () => {
    const { post, requests } = await serve(["ok"]);
    const history = [...hi.messages, { role: "assistant", content: "Hello!", reasoning_content: "The user greets.", refusal: null }, { role: "user", content: "and?" }];
    const res = await post({ messages: history });
    expect(res.status).toBe(200);
    expect(requests.at(-1)!.input).toEqual({ kind: "chat", messages: [{ role: "user", content: "hi" }, { role: "assistant", content: "Hello!" }, { role: "user", content: "and?" }] });
    const bad = await post({ messages: [{ role: "user", content: "hi", reasoning_content: "x" }] });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { param: string } }).error.param).toBe("messages[0].reasoning_content");
  });
});

describe("/v1/chat/completions: reasoning_effort", () => {
  it("hands low, medium or high to the chat template; absent or null leaves the template's default", async () => {
    const { post, requests } = await serve(["ok"]);
    for (const effort of ["low", "medium", "high"]) {
      expect((await post({ ...hi, reasoning_effort: effort })).status).toBe(200);
      expect(requests.at(-1)!.input).toEqual({ kind: "chat", messages: hi.messages, reasoningEffort: effort });
    }
    for (const body of [hi, { ...hi, reasoning_effort: null }]) {
      expect((await post(body)).status).toBe(200);
      expect(requests.at(-1)!.input).toStrictEqual({ kind: "chat", messages: hi.messages });
    }
  });

  it("refuses anything else with a 400 naming the field, before generating", async () => {
    const { post, requests } = await serve(["ok"]);
    const cases: [unknown, string][] = [
      ["extreme", '"extreme"'], ["LOW", '"LOW"'], ["", '""'], ["minimal", '"minimal"'], [2, "number"], [true, "boolean"], [["low"], "array"], [{}, "object"],
    ];
    for (const [value, got] of cases) {
      const res = await post({ ...hi, reasoning_effort: value, stream: true });
      expect(res.status, JSON.stringify(value)).toBe(400);
      expect(((await res.json()) as { error: unknown }).error).toEqual({
        message: `reasoning_effort: must be "low", "medium" or "high" (got ${got})`, type: "invalid_request_error", param: "reasoning_effort", code: "invalid_value",
      });
    }
    expect(requests).toEqual([]);
  });
});
