// The chat API's reasoning (openai-routes.ts behind ApiServer): a reply's
// `<think>` block or harmony analysis answered as reasoning_content, streamed
// as delta.reasoning_content, its content only the answer; a reply without
// reasoning answered and streamed exactly as before; reasoning_effort checked
// and handed to the chat template. A scripted runtime stands in for
// RuntimeHost: it streams the reply it is given as token events and records
// the requests (what the template is rendered from).
import { afterEach, describe, expect, it } from "vitest";

import type { GenerationRequest, GenerationResult, GenerationStats, LoadedModel, RuntimeEvent } from "../../shared/runtime-contract.js";
import { ApiServer } from "./api-server.js";
import { RuntimeError, type RuntimeHost } from "./runtime-host.js";

const model: LoadedModel = {
  id: "m1", path: "/models/gpt-oss-20b.gguf", name: "gpt-oss-20b", architecture: "gpt-oss", contextSize: 4096, layers: 24,
  experts: 32, expertsPerToken: 4, vocabSize: 201088, weightBytes: 1, threads: 2, kernels: "cpu", ready: true, loadedAt: "2025-01-01T00:00:00.000Z",
  drafter: "none", speculative: {},
};

type Drafts = Pick<GenerationStats, "draftTokens" | "acceptedDraftTokens" | "windows" | "drafter">;
const noDrafts: Drafts = { draftTokens: 0, acceptedDraftTokens: 0, windows: 0, drafter: "none" };

/**
 * Streams `pieces` as the reply to every request, a macrotask apart, as a model would, with `drafts` as
 * its speculative stats; `refuse` (when given) is what generate throws instead, as RuntimeHost would.
 */
function scriptedRuntime(pieces: readonly string[], drafts: Drafts = { ...noDrafts, windows: pieces.length }, refuse?: () => Error) {
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
      if (refuse) throw refuse();
      emit({ type: "started", requestId, modelId: model.id });
      for (const [i, text] of pieces.entries()) {
        await new Promise((resolve) => setTimeout(resolve, 0));
        emit({ type: "token", requestId, id: i, text });
      }
      return {
        requestId, modelId: model.id, text: pieces.join(""), tokens: pieces.map((_, i) => i), promptTokens: [1, 2, 3], stopReason: "eos",
        stats: { promptTokens: 3, reusedPromptTokens: 0, generatedTokens: pieces.length, promptTokensPerSecond: 1, decodeTokensPerSecond: 1, ttftMs: 1, queueMs: 0, ...drafts },
      };
    },
  } as unknown as RuntimeHost;
  return { host, requests };
}

const servers: ApiServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop()));
});

async function serve(pieces: readonly string[], ...script: Parameters<typeof scriptedRuntime> extends [unknown, ...infer R] ? R : never) {
  const { host, requests } = scriptedRuntime(pieces, ...script);
  const server = new ApiServer(host, { port: 0 });
  servers.push(server);
  const { url } = await server.start();
  const post = (body: Record<string, unknown>, route = "/v1/chat/completions") =>
    fetch(`${url}${route}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { post, requests, url };
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

describe("speculative decoding: draft, spec_max, spec_min_p, spec_rule and usage.speculative", () => {
  const prompt = { prompt: "hi" };

  it("hands the fields to the runtime as the request's speculative settings; absent or null leaves the model's own", async () => {
    const { post, requests } = await serve(["ok"]);
    for (const route of ["/v1/chat/completions", "/v1/completions"]) {
      const body = route === "/v1/completions" ? prompt : hi;
      expect((await post({ ...body, draft: "mtp", spec_max: 16, spec_min_p: 0.25, spec_rule: "confidence" }, route)).status).toBe(200);
      expect(requests.at(-1)!.speculative).toStrictEqual({ draft: "mtp", specMax: 16, specMinP: 0.25, specRule: "confidence" });
      expect((await post({ ...body, draft: "none", spec_max: 1, spec_min_p: 0 }, route)).status).toBe(200);
      expect(requests.at(-1)!.speculative).toStrictEqual({ draft: "none", specMax: 1, specMinP: 0 });
      expect((await post({ ...body, draft: "auto", spec_min_p: 1, spec_rule: "cost" }, route)).status).toBe(200);
      expect(requests.at(-1)!.speculative).toStrictEqual({ draft: "auto", specMinP: 1, specRule: "cost" });
      for (const plain of [body, { ...body, draft: null, spec_max: null, spec_min_p: null, spec_rule: null }]) {
        expect((await post(plain, route)).status).toBe(200);
        expect(requests.at(-1)!.speculative).toStrictEqual({});
      }
    }
  });

  it("refuses a bad value with a 400 naming the field and its range, before generating, on both routes", async () => {
    const { post, requests, url } = await serve(["ok"]);
    const cases: [string, unknown, string][] = [
      ["draft", "fast", 'draft: must be "none", "auto" or "mtp" (got "fast")'],
      ["draft", "MTP", 'draft: must be "none", "auto" or "mtp" (got "MTP")'],
      ["draft", "", 'draft: must be "none", "auto" or "mtp" (got "")'],
      ["draft", true, 'draft: must be "none", "auto" or "mtp" (got boolean)'],
      ["draft", ["mtp"], 'draft: must be "none", "auto" or "mtp" (got array)'],
      ["spec_max", 0, "spec_max: must be an integer between 1 and 16 (got 0)"],
      ["spec_max", 17, "spec_max: must be an integer between 1 and 16 (got 17)"],
      ["spec_max", 2.5, "spec_max: must be an integer between 1 and 16 (got 2.5)"],
      ["spec_max", "4", "spec_max: expected an integer, got string"],
      ["spec_min_p", -0.01, "spec_min_p: must be between 0 and 1 (got -0.01)"],
      ["spec_min_p", 1.5, "spec_min_p: must be between 0 and 1 (got 1.5)"],
      ["spec_min_p", "0.2", "spec_min_p: expected a number, got string"],
      ["spec_rule", "fastest", 'spec_rule: must be "cost" or "confidence" (got "fastest")'],
      ["spec_rule", 1, 'spec_rule: must be "cost" or "confidence" (got number)'],
    ];
    for (const route of ["/v1/chat/completions", "/v1/completions"]) {
      for (const [field, value, message] of cases) {
        const body = { ...(route === "/v1/completions" ? prompt : hi), [field]: value, stream: true };
        const res = await post(body, route);
        expect(res.status, `${route} ${field}=${JSON.stringify(value)}`).toBe(400);
        expect(((await res.json()) as { error: unknown }).error).toEqual({ message, type: "invalid_request_error", param: field, code: "invalid_value" });
      }
    }
    // JSON's 1e400 is Infinity: out of the range too.
    const inf = await fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: '{"messages":[{"role":"user","content":"hi"}],"spec_min_p":1e400}' });
    expect(inf.status).toBe(400);
    expect(((await inf.json()) as { error: { param: string } }).error.param).toBe("spec_min_p");
    expect(requests).toEqual([]);
  });

  it("answers the runtime's refusal of draft \"mtp\" (a model without an MTP block) as a 400 naming draft, streaming or not", async () => {
    const why = 'draft "mtp": the model has no MTP (nextn) block to draft with (use draft "auto" or "none")';
    const { post } = await serve(["ok"], undefined, () => new RuntimeError(why, "invalid", "draft"));
    for (const stream of [false, true]) {
      const res = await post({ ...hi, draft: "mtp", stream });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: unknown }).error).toEqual({ message: why, type: "invalid_request_error", param: "draft", code: "invalid_value" });
    }
  });

  it("reports the drafts in usage.speculative: in the answer, and in the last streamed chunk with include_usage", async () => {
    const pieces = ["Hel", "lo", "!", " How", " are", " you", "?", "\n"];
    const { post } = await serve(pieces, { draftTokens: 6, acceptedDraftTokens: 3, windows: 5, drafter: "mtp" });
    const speculative = { drafter: "mtp", drafted_tokens: 6, accepted_tokens: 3, windows: 5, acceptance_rate: 0.5, tokens_per_window: 8 / 5 };
    for (const route of ["/v1/chat/completions", "/v1/completions"]) {
      const body = route === "/v1/completions" ? prompt : hi;
      const whole = (await (await post(body, route)).json()) as { usage: unknown };
      expect(whole.usage).toEqual({ prompt_tokens: 3, completion_tokens: 8, total_tokens: 11, speculative });
      const raw = await (await post({ ...body, stream: true, stream_options: { include_usage: true } }, route)).text();
      const events = raw.split("\n\n").filter((e) => e !== "");
      expect(events.at(-1)).toBe("data: [DONE]");
      const last = JSON.parse(events.at(-2)!.replace(/^data: /, "")) as { choices: unknown[]; usage: unknown };
      expect(last.choices).toEqual([]);
      expect(last.usage).toEqual(whole.usage);
      // Without include_usage no chunk carries usage.
      const plain = await (await post({ ...body, stream: true }, route)).text();
      expect(plain).not.toContain('"usage"');
    }
  });

  it("says nothing was drafted as drafter none with null rates", async () => {
    const { post } = await serve(["a", "b"], { draftTokens: 0, acceptedDraftTokens: 0, windows: 2, drafter: "none" });
    const whole = (await (await post(hi)).json()) as { usage: { speculative: unknown } };
    expect(whole.usage.speculative).toEqual({ drafter: "none", drafted_tokens: 0, accepted_tokens: 0, windows: 2, acceptance_rate: null, tokens_per_window: 1 });
  });
});
