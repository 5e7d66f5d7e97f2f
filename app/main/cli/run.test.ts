import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { embeddedModelPath } from "../paths.js";
// guild run --prompt-tokens ... --temperature 0 --json against llama.cpp's greedy
// continuations (expected/<model>/greedy.json), compared as the fixtures README
// suggests: identical ids until the first step whose recorded top-1/top-2 margin
// is below the expected logit error (0.05 for F32 models, 0.5 for quantized
// ones); all 32 when no margin is that small.
import { describe, expect, it } from "vitest";

import { runCli } from "../../test/cli.js";
import {
  comparableSteps,
  fixturesSkipReason,
  greedyMarginF32,
  greedyMarginQuantized,
  haveFixtures,
  modelPath,
  readExpectedJson,
  targetModels,
  type GreedyFile,
} from "../../test/fixtures.js";
import type { DoneEvent } from "./generate-stream.js";


interface TokenEvent {
  event: "token";
  id: number;
  text: string;
}

function parseEvents(stdout: string): { tokens: TokenEvent[]; done: DoneEvent } {
  const events = stdout
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as TokenEvent | DoneEvent | { event: "profile" });
  // The load's startup profile comes first (docs/CLI.md), then tokens, then done.
  const first = events.shift();
  if (first?.event !== "profile") throw new Error("the first event is not `profile`");
  const done = events.pop();
  if (done?.event !== "done") throw new Error("the last event is not `done`");
  if (events.some((e) => e.event !== "token")) throw new Error("events before `done` must all be `token`");
  return { tokens: events as TokenEvent[], done };
}

describe.skipIf(!haveFixtures)("guild run: greedy continuations match llama.cpp", () => {
  for (const model of targetModels()) {
    const greedy = readExpectedJson<GreedyFile>(model.name, "greedy.json");
    const threshold = model.quantized ? greedyMarginQuantized : greedyMarginF32;
    it.each(greedy.prompts)(`${model.name}: $name`, (prompt) => {
      const r = runCli([
        "run",
        "--model",
        modelPath(model.file),
        "--prompt-tokens",
        prompt.prompt_ids.join(","),
        "--n-predict",
        String(greedy.n_predict),
        "--temperature",
        "0",
        "--json",
      ]);
      expect(r.status, r.stderr).toBe(0);
      expect(r.stderr).toBe("");
      const { tokens, done } = parseEvents(r.stdout);
      const n = comparableSteps(prompt.top1_minus_top2_logit, threshold, prompt.generated_ids.length);
      expect(done.prompt_tokens).toEqual(prompt.prompt_ids);
      expect(done.tokens.slice(0, n)).toEqual(prompt.generated_ids.slice(0, n));
      expect(done.tokens.length).toBe(greedy.n_predict); // the reference never stops at EOG
      expect(done.stop_reason).toBe("length");
      // streamed events agree with the summary
      expect(tokens.map((t) => t.id)).toEqual(done.tokens);
      // token texts concatenate to the final text, which may end with one U+FFFD
      // for a character the last token left incomplete
      const streamed = tokens.map((t) => t.text).join("");
      expect(done.text.startsWith(streamed)).toBe(true);
      expect(["", "\uFFFD"]).toContain(done.text.slice(streamed.length));
      if (n === greedy.n_predict && prompt.generated_text_utf8_valid) expect(done.text).toBe(prompt.generated_text);
      expect(done.stats.decode_tokens_per_s).toBeGreaterThan(0);
      expect(done.stats.prompt_tokens_per_s).toBeGreaterThan(0);
      expect(done.stats.ttft_ms).toBeGreaterThan(0);
    });
  }
});

describe.skipIf(!haveFixtures)("guild run: text prompts", () => {
  it("--prompt is tokenized with the model's rules (BOS as the vocab says, special tokens parsed)", () => {
    for (const name of ["qwen3moe-a-Q8_0", "mixtral-a-Q4_K_M"]) {
      const greedy = readExpectedJson<GreedyFile>(name, "greedy.json");
      const prompt = greedy.prompts[0]!;
      const r = runCli(["run", "--model", modelPath(`${name}.gguf`), "--prompt", prompt.prompt_text, "--n-predict", "1", "--temperature", "0", "--json"]);
      expect(r.status, r.stderr).toBe(0);
      expect(parseEvents(r.stdout).done.prompt_tokens).toEqual(prompt.prompt_ids);
    }
  });

  it("streams plain text without --json", () => {
    const greedy = readExpectedJson<GreedyFile>("qwen3moe-a-F32", "greedy.json");
    const prompt = greedy.prompts[0]!;
    const r = runCli(["run", "--model", modelPath("qwen3moe-a-F32.gguf"), "--prompt-tokens", prompt.prompt_ids.join(","), "--n-predict", "32", "--temperature", "0"]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toBe(prompt.generated_text);
  });

  it("--chat renders the model's template (one BOS at most)", () => {
    const r = runCli(["run", "--model", modelPath("qwen3moe-a-Q4_0.gguf"), "--chat", "--prompt", "What is the capital of France?", "--n-predict", "4", "--temperature", "0", "--json"]);
    expect(r.status, r.stderr).toBe(0);
    const { done } = parseEvents(r.stdout);
    const greedy = readExpectedJson<GreedyFile>("qwen3moe-a-Q4_0", "greedy.json");
    const chat = greedy.prompts.find((p) => p.name === "chat")!;
    // the fixtures' chat prompt is the ChatML rendering of the same question (Qwen's template may add a think block)
    expect(done.prompt_tokens.slice(0, chat.prompt_ids.length)).toEqual(chat.prompt_ids);
  });

  it("--chat on a Llama-2 SPM model starts with exactly one BOS", () => {
    const r = runCli(["run", "--model", modelPath("mixtral-a-Q4_K_M.gguf"), "--chat", "--prompt", "Hello", "--n-predict", "2", "--temperature", "0", "--json"]);
    expect(r.status, r.stderr).toBe(0);
    const { done } = parseEvents(r.stdout);
    expect(done.prompt_tokens[0]).toBe(1);
    expect(done.prompt_tokens[1]).not.toBe(1);
  });

  it("stops at the context limit with stop_reason context", () => {
    const r = runCli(["run", "--model", modelPath("qwen3moe-a-Q4_0.gguf"), "--prompt-tokens", "1,2,3,4", "--ctx", "8", "--n-predict", "100", "--temperature", "0", "--json"]);
    expect(r.status, r.stderr).toBe(0);
    const { done } = parseEvents(r.stdout);
    expect(done.stop_reason).toBe("context");
    expect(done.tokens.length).toBeLessThanOrEqual(5);
  });

  it("rejects a prompt id outside the vocabulary with exit 1", () => {
    const r = runCli(["run", "--model", modelPath("qwen3moe-a-Q4_0.gguf"), "--prompt-tokens", "1,99999", "--json"]);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^guild: error: --prompt-tokens: token id 99999 .*\n$/);
  });
});

if (!haveFixtures) describe.skip(`guild run: ${fixturesSkipReason}`, () => {});

describe("guild run --profile-out / profile event", () => {
  it.skipIf(!existsSync(embeddedModelPath()))("writes the startup profile and emits it before the first token", () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), "guild-profile-"));
    const file = path.join(dir, "p.json");
    const r = runCli(["run", "--prompt", "hi", "--n-predict", "2", "--temperature", "0", "--json", "--profile-out", file], { env: { GUILD_MODEL: "" } });
    expect(r.status, r.stderr).toBe(0);
    const events = r.stdout.trim().split("\n").map((l) => JSON.parse(l) as { event: string; profile?: { schema: string; stages: { name: string }[] } });
    expect(events[0]!.event).toBe("profile");
    expect(events[0]!.profile!.schema).toBe("guild.startup-profile/1");
    expect(events[0]!.profile!.stages).toHaveLength(14);
    expect(events.findIndex((e) => e.event === "token")).toBeGreaterThan(0);
    const written = JSON.parse(readFileSync(file, "utf8")) as { stages: { name: string }[] };
    expect(written.stages.map((s) => s.name)).toEqual(events[0]!.profile!.stages.map((s) => s.name));
    rmSync(dir, { recursive: true, force: true });
  });
});
