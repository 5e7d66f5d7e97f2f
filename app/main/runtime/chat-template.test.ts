// The chat-template renderer: untrusted Jinja rendered in a worker thread under
// step, time, output and memory limits, with the text exactly what
// @huggingface/jinja renders in-process.
import path from "node:path";

import { Template } from "@huggingface/jinja";
import { afterAll, describe, expect, it } from "vitest";

import { modelWithChatTemplate, nestedRangeTemplate, readChatTemplate } from "../../test/chat-template-model.js";
import { fixturesDir, haveFixtures, modelPath } from "../../test/fixtures.js";
import { embeddedModelPath } from "../paths.js";
import {
  ChatTemplateError,
  ChatTemplateRenderer,
  chatPromptTokens,
  defaultChatTemplateLimits,
  fallbackChatTemplate,
  renderChatTemplate,
  type ChatMessage,
  type ChatTemplateLimits,
} from "./chat-template.js";
import { GuildModel } from "./model.js";

const renderers: ChatTemplateRenderer[] = [];
function renderer(limits: Partial<ChatTemplateLimits> = {}): ChatTemplateRenderer {
  const r = new ChatTemplateRenderer({ ...defaultChatTemplateLimits, ...limits });
  renderers.push(r);
  return r;
}
afterAll(async () => {
  await Promise.all(renderers.map((r) => r.close()));
});

const user = (content: string): ChatMessage => ({ role: "user", content });
const plain = { bosToken: "<s>", eosToken: "</s>", addGenerationPrompt: true };

function render(r: ChatTemplateRenderer, source: string, messages: readonly ChatMessage[] = [user("hi")], name = "the chat template of test.gguf") {
  return renderChatTemplate(source, messages, { ...plain, renderer: r, templateName: name });
}

/** Settles a render into its text or its error, with how long it took. */
async function timed(p: Promise<string>): Promise<{ text?: string; error?: ChatTemplateError; ms: number }> {
  const start = performance.now();
  try {
    const text = await p;
    return { text, ms: performance.now() - start };
  } catch (err) {
    if (!(err instanceof ChatTemplateError)) throw err;
    return { error: err, ms: performance.now() - start };
  }
}

/** The longest time the main thread's event loop went without running a timer, while `p` is pending. */
async function longestStall<T>(p: Promise<T>): Promise<number> {
  let last = performance.now();
  let longest = 0;
  const tick = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, 10);
  try {
    await p.catch(() => undefined);
  } finally {
    clearInterval(tick);
  }
  return Math.max(longest, performance.now() - last);
}

describe("chat templates render exactly as @huggingface/jinja renders them", () => {
  const conversations: ChatMessage[][] = [
    [user("What is the capital of France?")],
    [{ role: "system", content: "Be brief." }, user("Hello"), { role: "assistant", content: "<think>\nhm\n</think>\n\nHi!" }, user("Thanks ✓ — 𝄞")],
    [user(""), { role: "assistant", content: "{{ not a template }} {% if %}" }],
  ];
  const templates: [string, string | null][] = [
    ["the fallback (ChatML)", fallbackChatTemplate],
    ["the demo model's", readChatTemplate(embeddedModelPath())],
    ...(haveFixtures ? ([
      ["Qwen3's (qwen3moe-a)", readChatTemplate(modelPath("qwen3moe-a-Q8_0.gguf"))],
      ["Phi-3's", readChatTemplate(path.join(fixturesDir, "vocab", "ggml-vocab-phi-3.gguf"))],
    ] as [string, string | null][]) : []),
  ];
  it.each(templates)("%s template", async (_, source) => {
    expect(source).not.toBeNull();
    const r = renderer();
    for (const messages of conversations) {
      for (const addGenerationPrompt of [true, false]) {
        const expected = new Template(source!).render({ messages, add_generation_prompt: addGenerationPrompt, bos_token: "<s>", eos_token: "</s>" });
        await expect(renderChatTemplate(source!, messages, { ...plain, addGenerationPrompt, renderer: r })).resolves.toBe(expected);
      }
    }
  });

  it("the demo model's prompt tokens are the ChatML turn, tokenized with special tokens", async () => {
    const model = await GuildModel.load(embeddedModelPath(), { threads: 1, contextSize: 256 });
    try {
      const tokens = await chatPromptTokens(model, [user("hi")], { renderer: renderer() });
      expect(tokens).toEqual(model.tokenize("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", { addSpecial: true, parseSpecial: true }));
    } finally {
      model.dispose();
    }
  });
});

describe("chat template limits", () => {
  it("stops nested range(100000) loops at the step limit, before the time limit, without stalling the event loop or the next render", async () => {
    const r = renderer();
    await render(r, "warm {{ 1 }}"); // the worker is started
    const hostile = timed(render(r, nestedRangeTemplate, [user("hi")], "the chat template of hostile.gguf"));
    const next = timed(render(r, "{{ messages[0].content }}!", [user("next")]));
    const stall = await longestStall(Promise.all([hostile, next]));
    const h = await hostile;
    expect(h.error?.kind).toBe("steps");
    expect(h.error?.message).toBe("the chat template of hostile.gguf exceeded the render step limit (500,000 steps)");
    expect(h.ms).toBeLessThan(defaultChatTemplateLimits.timeMs);
    expect((await next).text).toBe("next!");
    expect(stall).toBeLessThan(250);
  });

  it("stops a render at the time limit (worker terminated and replaced)", async () => {
    const r = renderer({ maxSteps: 1e15, timeMs: 300 });
    await render(r, "warm");
    const h = await timed(render(r, nestedRangeTemplate));
    expect(h.error?.kind).toBe("time");
    expect(h.error?.message).toBe("the chat template of test.gguf exceeded the render time limit (0.3 s)");
    expect(h.ms).toBeGreaterThanOrEqual(290);
    expect(h.ms).toBeLessThan(2_000);
    await expect(render(r, "{{ 6 * 7 }}")).resolves.toBe("42");
  });

  it("limits the output to 1 MiB of text, or 4x the input when that is more, intermediate strings included", async () => {
    const r = renderer();
    const kib = [user("x".repeat(1024))];
    const big = await timed(render(r, "{% for i in range(3000) %}{{ messages[0].content }}{% endfor %}", kib));
    expect(big.error?.kind).toBe("output");
    expect(big.error?.message).toBe("the chat template of test.gguf exceeded the output size limit (1,048,576 characters)");
    await expect(render(r, "{% for i in range(1024) %}{{ messages[0].content }}{% endfor %}", kib).then((t) => t.length)).resolves.toBe(1 << 20);
    // a string the template builds counts too, even when what it prints is short
    const doubling = "{% set ns = namespace(s=messages[0].content) %}{% for i in range(5) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}";
    const intermediate = await timed(render(r, doubling, [user("y".repeat(100_000))]));
    expect(intermediate.error?.kind).toBe("output");
    // 1,000,000 characters of input, plus 7 of BOS/EOS text: 4,000,028 may come out
    const long = [user("y".repeat(1_000_000))];
    const copies = (n: number) => `{{ messages[0].content${" ~ messages[0].content".repeat(n - 1)} }}`;
    await expect(render(r, copies(3), long).then((t) => t.length)).resolves.toBe(3_000_000);
    const over = await timed(render(r, copies(5), long));
    expect(over.error?.message).toBe("the chat template of test.gguf exceeded the output size limit (4,000,028 characters)");
  });

  it("stops a render at the memory limit (Worker resourceLimits; the step limit lifted so that memory trips first)", async () => {
    const r = renderer({ memoryMiB: 32, maxSteps: 1e15, timeMs: 60_000 });
    const hoarding = "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ns.l + [(messages[0].content ~ i) | upper] %}{% endfor %}{{ ns.l | length }}";
    const h = await timed(render(r, hoarding, [user("m".repeat(4096))]));
    expect(h.error?.kind).toBe("memory");
    expect(h.error?.message).toBe("the chat template of test.gguf exceeded the render memory limit (32 MiB)");
    await expect(render(r, "{{ 'still' }} {{ 'here' }}")).resolves.toBe("still here");
  });

  it("the step limit bounds what a template can build: a list doubling stops there, long before memory runs out", async () => {
    const r = renderer();
    const doubling = "{% set ns = namespace(a=[0]) %}{% for i in range(64) %}{% set ns.a = ns.a + ns.a %}{% endfor %}{{ ns.a | length }}";
    expect((await timed(render(r, doubling))).error?.kind).toBe("steps");
  });

  it("a template that throws fails with one line quoting only the start of its message", async () => {
    const r = renderer();
    const raised = await timed(render(r, "{{ raise_exception('no system role\nallowed ' ~ messages[0].content) }}", [user("z".repeat(5000))]));
    expect(raised.error?.kind).toBe("template");
    expect(raised.error?.message).toMatch(/^the chat template of test\.gguf failed: no system role allowed z+…$/);
    expect(raised.error!.message.length).toBeLessThan(200);
    for (const broken of ["{% for x in %}", "{{ 'unterminated", "{{ 1 | no_such_filter }}", "{% endfor %}", "{{ x.y.z() }}"]) {
      const e = await timed(render(r, broken));
      expect(e.error?.kind, broken).toBe("template");
      expect(e.error!.message).toMatch(/^the chat template of test\.gguf failed: [^\n]+$/);
    }
    // a failing template does not cost the worker: it still renders
    await expect(render(r, "ok")).resolves.toBe("ok");
  });

  it("an abort stops a running render at once and drops a waiting one", async () => {
    const r = renderer({ maxSteps: 1e15, timeMs: 60_000 });
    await render(r, "warm");
    const running = new AbortController();
    const waiting = new AbortController();
    const hostile = renderChatTemplate(nestedRangeTemplate, [], { ...plain, renderer: r, signal: running.signal });
    const queued = renderChatTemplate("never", [], { ...plain, renderer: r, signal: waiting.signal });
    waiting.abort(new Error("not needed"));
    await expect(queued).rejects.toThrow("not needed");
    await new Promise((resolve) => setTimeout(resolve, 200));
    const start = performance.now();
    running.abort();
    await expect(hostile).rejects.toMatchObject({ name: "AbortError" });
    expect(performance.now() - start).toBeLessThan(100);
    await expect(render(r, "{{ 'after' }}")).resolves.toBe("after");
  });

  it("a model whose template is hostile fails with an error naming the model", async () => {
    const file = modelWithChatTemplate(nestedRangeTemplate, "hostile");
    const model = await GuildModel.load(file, { threads: 1, contextSize: 256 });
    try {
      await expect(chatPromptTokens(model, [user("hi")], { renderer: renderer() }))
        .rejects.toThrow("the chat template of hostile.gguf exceeded the render step limit (500,000 steps)");
    } finally {
      model.dispose();
    }
  });
});
