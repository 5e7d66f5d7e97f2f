// Property-based test of the chat-template renderer (issue #20 asks for the
// TS side's fuzzing to be property-based): random templates built from Jinja
// fragments, junk, random Unicode, deep nesting and huge ranges, with random
// messages. Whatever the template, a render ends within its limits with a
// string or a clean one-line ChatTemplateError, the process survives, and
// metering never changes the text @huggingface/jinja renders.
import { Template } from "@huggingface/jinja";
import fc from "fast-check";
import { afterAll, expect, it } from "vitest";

import {
  ChatTemplateError,
  ChatTemplateRenderer,
  defaultChatTemplateLimits,
  renderChatTemplate,
  type ChatMessage,
  type ChatTemplateLimits,
} from "./chat-template.js";

// Small limits keep each hostile case short; the properties do not depend on them.
const limits: ChatTemplateLimits = { ...defaultChatTemplateLimits, timeMs: 400, maxSteps: 50_000, memoryMiB: 64 };
const renderer = new ChatTemplateRenderer(limits);
afterAll(() => renderer.close());

const templateName = "the chat template of fuzz.gguf";
/** A render may also wait for a fresh worker to start (after a limit), which a loaded machine makes slow. */
const slackMs = 3_000;

/** One character: any grapheme, any code point (lone surrogates and controls included). */
const anyChar = fc.oneof(fc.string({ unit: "grapheme", minLength: 1, maxLength: 1 }), fc.string({ unit: "binary", minLength: 1, maxLength: 1 }));
/** Random Unicode with Jinja's own delimiters mixed in. */
const unicode = fc.string({ unit: fc.oneof(anyChar, fc.constantFrom("{", "}", "%", "#", "-", "'", '"', "\\", "\n", "\u0000", "\u2028", "𝄞", "é")), maxLength: 12 });
/** Template text: random Unicode that opens no tag (junk tags have their own fragments). */
const text = fc.string({ unit: anyChar, maxLength: 12 }).map((t) => t.replace(/[{}%#]/g, "·"));
const quoted = unicode.map((s) => `'${s.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`);
const number = fc.oneof(fc.integer({ min: -3, max: 40 }), fc.constantFrom(1000, 100_000, 1_000_000_000, 1e12, -1e9, 0.5, 1e308));
const name = fc.constantFrom("x", "i", "ns", "ns.v", "messages", "message", "loop", "loop.index", "bos_token", "eos_token", "add_generation_prompt", "nope", "range", "raise_exception", "namespace", "m");
const filterName = fc.constantFrom("length", "upper", "lower", "title", "trim", "first", "last", "reverse", "sort", "unique", "list", "string", "int", "float", "abs", "tojson", "join", "items", "capitalize", "safe", "nonexistent");

const { template } = fc.letrec((tie) => ({
  expr: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    { arbitrary: number.map(String), weight: 3 },
    { arbitrary: quoted, weight: 3 },
    { arbitrary: name, weight: 2 },
    { arbitrary: fc.constantFrom("true", "false", "none", "messages[0].content", "messages[-1]['role']", "message.content", "[]", "{}"), weight: 3 },
    fc.tuple(tie("expr"), fc.constantFrom("+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">", "and", "or", "in", "not in", "is defined", "is none"), tie("expr"))
      .map(([a, op, b]) => (op.startsWith("is") ? `(${a} ${op})` : `(${a} ${op} ${b})`)),
    fc.tuple(tie("expr"), filterName).map(([e, f]) => `(${e} | ${f})`),
    fc.tuple(tie("expr"), fc.constantFrom("indent", "join", "replace", "default", "tojson", "map", "selectattr"), tie("expr"), tie("expr"))
      .map(([e, f, a, b]) => (f === "tojson" ? `(${e} | tojson(indent=${a}))` : f === "map" || f === "selectattr" ? `(${e} | ${f}(${a}))` : `(${e} | ${f}(${a}, ${b}))`)),
    fc.tuple(tie("expr"), tie("expr")).map(([e, i]) => `${e}[${i}]`),
    fc.tuple(tie("expr"), tie("expr"), tie("expr")).map(([e, a, b]) => `${e}[${a}:${b}]`),
    fc.tuple(tie("expr"), fc.constantFrom("content", "role", "items()", "keys()", "split(',')", "startswith('a')", "strip()", "upper()")).map(([e, m]) => `${e}.${m}`),
    tie("expr").map((e) => `range(${e})`),
    fc.tuple(tie("expr"), tie("expr")).map(([a, b]) => `[${a}, ${b}]`),
    fc.tuple(quoted, tie("expr")).map(([k, v]) => `{${k}: ${v}}`),
    fc.tuple(tie("expr"), tie("expr"), tie("expr")).map(([a, c, b]) => `(${a} if ${c} else ${b})`),
    tie("expr").map((e) => `not ${e}`),
    tie("expr").map((e) => `raise_exception(${e})`),
  ) as fc.Arbitrary<string>,
  block: fc.array(tie("statement"), { maxLength: 4 }).map((s) => (s as string[]).join("")),
  statement: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    { arbitrary: text, weight: 4 },
    { arbitrary: tie("expr").map((e) => `{{ ${e} }}`), weight: 4 },
    // the shape of a real chat template
    { arbitrary: tie("block").map((b) => `{% for message in messages %}{{ '<|' + message['role'] + '|>' + message.content }}${b}{% endfor %}{% if add_generation_prompt %}>{% endif %}`), weight: 3 },
    fc.tuple(fc.constantFrom("x", "i", "x, i"), tie("expr"), tie("block"), fc.boolean())
      .map(([v, e, b, more]) => `{% for ${v} in ${e} %}${b}${more ? "{% if loop.index > 3 %}{% break %}{% endif %}" : ""}{% else %}-{% endfor %}`),
    fc.tuple(tie("expr"), tie("block"), tie("block")).map(([c, a, b]) => `{% if ${c} %}${a}{% elif ${c} %}!{% else %}${b}{% endif %}`),
    tie("expr").map((e) => `{% set ns = namespace(v=${e}) %}`),
    tie("expr").map((e) => `{% set ns.v = ${e} %}`),
    tie("expr").map((e) => `{% set x = ${e} %}`),
    fc.tuple(tie("block"), tie("expr")).map(([b, e]) => `{% macro m(a, b=1) %}${b}{% endmacro %}{{ m(${e}) }}`),
    tie("block").map((b) => `{% filter upper %}${b}{% endfilter %}`),
    fc.constantFrom("{%", "%}", "{{", "}}", "{#", "#}", "{%- ", " -%}", "{% endfor %}", "{% endif %}", "{% raw %}", "{{ }}", "{% for %}", "{# unclosed"),
    // huge ranges, nested: the runaway shape of issue #20
    fc.tuple(number, number).map(([a, b]) => `{% for i in range(${a}) %}{% for j in range(${b}) %}{{ j }}{% endfor %}{% endfor %}`),
    // big output from small input
    number.map((n) => `{% for i in range(${n}) %}{% for m in messages %}{{ m.content ~ m.content }}{% endfor %}{% endfor %}`),
    // deep nesting, for the parser's and the interpreter's recursion
    fc.tuple(fc.integer({ min: 1, max: 3000 }), fc.constantFrom("(", "[", "if", "for")).map(([n, kind]) =>
      kind === "(" ? `{{ ${"(".repeat(n)}1${")".repeat(n)} }}`
        : kind === "[" ? `{{ ${"[".repeat(n)}1${"]".repeat(n)} }}`
          : kind === "if" ? `${"{% if true %}".repeat(n)}x${"{% endif %}".repeat(n)}`
            : `${"{% for i in range(2) %}".repeat(Math.min(n, 40))}x${"{% endfor %}".repeat(Math.min(n, 40))}`),
  ) as fc.Arbitrary<string>,
  template: fc.tuple(fc.boolean(), fc.array(tie("statement"), { minLength: 1, maxLength: 5 }))
    .map(([declare, s]) => (declare ? "{% set ns = namespace(v=0) %}{% set x = 1 %}" : "") + (s as string[]).join("")),
}));

const message: fc.Arbitrary<ChatMessage> = fc.record({
  role: fc.constantFrom("system", "user", "assistant"),
  content: fc.oneof(unicode, fc.constantFrom("", "hello", "{{ 7 * 7 }}", "<|im_start|>", "x".repeat(5000))),
});
const messages = fc.array(message, { maxLength: 4 });

it("renders any template within its limits to a string or a clean error, as @huggingface/jinja renders it", async () => {
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(template as fc.Arbitrary<string>, messages, fc.boolean(), async (source, msgs, addGenerationPrompt) => {
      runs++;
      const start = performance.now();
      let text: string | undefined;
      try {
        text = await renderChatTemplate(source, msgs, { bosToken: "<s>", eosToken: "</s>", addGenerationPrompt, renderer, templateName });
      } catch (err) {
        expect(err).toBeInstanceOf(ChatTemplateError);
        const e = err as ChatTemplateError;
        expect(["steps", "time", "output", "memory", "template"]).toContain(e.kind);
        expect(e.message.startsWith(`${templateName} `)).toBe(true);
        expect(e.message).not.toMatch(/[\r\n\u2028\u2029]/);
        expect(e.message.length).toBeLessThanOrEqual(templateName.length + 160);
      }
      expect(performance.now() - start).toBeLessThan(limits.timeMs + slackMs);
      if (text === undefined) return;
      expect(typeof text).toBe("string");
      // The metered render is the plain one: same text. (Rendered here only
      // when it succeeded within the limits in the worker, so this is bounded too.)
      let expected: string;
      try {
        expected = new Template(source).render({ messages: msgs, add_generation_prompt: addGenerationPrompt, bos_token: "<s>", eos_token: "</s>" });
      } catch (err) {
        // the main thread's stack is smaller than the worker's
        if (err instanceof RangeError && /call stack/.test(err.message)) return;
        throw err;
      }
      expect(text).toBe(expected);
    }),
    { numRuns: 150, interruptAfterTimeLimit: 15_000, markInterruptAsFailure: false },
  );
  expect(runs).toBeGreaterThan(10);
  // and the renderer still works afterwards
  await expect(renderChatTemplate("{{ messages[0].content }}", [{ role: "user", content: "ok" }], { bosToken: "", eosToken: "", addGenerationPrompt: false, renderer })).resolves.toBe("ok");
});
