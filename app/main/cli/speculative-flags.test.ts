// guild run / guild serve: --draft, --spec-max, --spec-min-p, --spec-rule. Bad values are usage
// errors (exit 2, one error line, the usage line) before anything loads; on the fixtures, greedy
// output with --draft mtp equals --draft none and the done event's stats count the drafts;
// --draft mtp on a model without an MTP block is one error line, exit 1.
import { describe, expect, it } from "vitest";

import type { SpeculativeUsage } from "../../shared/runtime-contract.js";
import { errorLines, runCli } from "../../test/cli.js";
import { fixturesSkipReason, haveFixtures, modelPath, readExpectedJson, type GreedyFile } from "../../test/fixtures.js";
import { parseFlags } from "./args.js";
import { UsageError } from "./errors.js";
import type { DoneEvent } from "./generate-stream.js";
import { checkSpeculativeFlags, speculativeFlagSpecs, speculativeOptions } from "./speculative-flags.js";

const parse = (argv: string[]) => parseFlags(argv, speculativeFlagSpecs, "usage");

describe("the speculative flags", () => {
  it("parse into generation options, draft auto by default", () => {
    expect(speculativeOptions(parse([]))).toStrictEqual({ draft: "auto" });
    expect(speculativeOptions(parse(["--draft", "mtp", "--spec-max=16", "--spec-min-p", "0.25", "--spec-rule", "confidence"])))
      .toStrictEqual({ draft: "mtp", specMax: 16, specMinP: 0.25, specRule: "confidence" });
    expect(speculativeOptions(parse(["--draft=none"]))).toStrictEqual({ draft: "none" });
    expect(speculativeOptions(parse(["--spec-max", "1", "--spec-min-p", "1"]))).toStrictEqual({ draft: "auto", specMax: 1, specMinP: 1 });
  });

  it.each([
    [["--draft", "fast"], '--draft: expected one of none, auto, mtp (got "fast")'],
    [["--draft", "MTP"], '--draft: expected one of none, auto, mtp (got "MTP")'],
    [["--spec-max", "0"], '--spec-max: must be >= 1 (got "0")'],
    [["--spec-max", "17"], '--spec-max: must be <= 16 (got "17")'],
    [["--spec-max", "2.5"], '--spec-max: expected an integer (got "2.5")'],
    [["--spec-min-p", "-0.1"], '--spec-min-p: must be >= 0 (got "-0.1")'],
    [["--spec-min-p", "1.5"], '--spec-min-p: must be <= 1 (got "1.5")'],
    [["--spec-min-p", "nan"], '--spec-min-p: expected a number (got "nan")'],
    [["--spec-rule", "speed"], '--spec-rule: expected one of cost, confidence (got "speed")'],
  ])("refuse %j", (argv, message) => {
    expect(() => parse(argv)).toThrow(UsageError);
    expect(() => parse(argv)).toThrow(message);
  });

  it("refuse a window flag with --draft none", () => {
    for (const flag of [["--spec-max", "4"], ["--spec-min-p", "0.5"], ["--spec-rule", "cost"]]) {
      const f = parse(["--draft", "none", ...flag]);
      expect(() => checkSpeculativeFlags(f, "usage")).toThrow(`${flag[0]} shapes the drafts: it cannot go with --draft none`);
    }
    expect(() => checkSpeculativeFlags(parse(["--draft", "mtp", "--spec-max", "4"]), "usage")).not.toThrow();
    expect(() => checkSpeculativeFlags(parse(["--spec-max", "4"]), "usage")).not.toThrow();
  });

  it.each([
    [["--draft", "fast"], 'guild: error: --draft: expected one of none, auto, mtp (got "fast")'],
    [["--spec-max", "17"], 'guild: error: --spec-max: must be <= 16 (got "17")'],
    [["--spec-min-p", "2"], 'guild: error: --spec-min-p: must be <= 1 (got "2")'],
    [["--spec-rule", "x"], 'guild: error: --spec-rule: expected one of cost, confidence (got "x")'],
    [["--draft", "none", "--spec-max", "8"], "guild: error: --spec-max shapes the drafts: it cannot go with --draft none"],
  ])("are usage errors of guild run and guild serve: %j", (flags, line) => {
    for (const command of [["run", "--model", "m.gguf", "--prompt", "x"], ["serve", "--model", "m.gguf"]]) {
      const r = runCli([...command, ...flags]);
      expect(r.status, r.stderr).toBe(2);
      const lines = errorLines(r.stderr);
      expect(lines[0]).toBe(line);
      expect(lines[1]).toMatch(new RegExp(`^usage: guild ${command[0]} .*\\[--draft auto\\|none\\|mtp\\] \\[--spec-max N\\] \\[--spec-min-p P\\] \\[--spec-rule cost\\|confidence\\]`));
      expect(lines).toHaveLength(2);
    }
  });
});

interface RunOutput {
  done: DoneEvent;
}

function runJson(args: readonly string[]): RunOutput & { status: number | null; stderr: string } {
  const r = runCli(["run", ...args, "--json"]);
  const lines = r.stdout.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l) as { event: string });
  return { status: r.status, stderr: r.stderr, done: lines.at(-1) as unknown as DoneEvent };
}

describe.skipIf(!haveFixtures)("guild run --draft on the fixtures", () => {
  const prompt = haveFixtures ? readExpectedJson<GreedyFile>("glm4moe-a-F32", "greedy.json").prompts[0]! : undefined;
  const greedy = (...extra: string[]) =>
    runJson(["--model", modelPath("glm4moe-a-F32.gguf"), "--prompt-tokens", prompt!.prompt_ids.join(","), "--n-predict", "32", "--temperature", "0", "--threads", "2", ...extra]);

  it("prints the same tokens with --draft mtp as with --draft none, and the drafts with the stats", () => {
    const plain = greedy("--draft", "none");
    expect(plain.status, plain.stderr).toBe(0);
    expect(plain.done.stats.speculative).toEqual({
      drafter: "none", drafted_tokens: 0, accepted_tokens: 0, windows: 32, acceptance_rate: null, tokens_per_window: 1,
    } satisfies SpeculativeUsage);
    const drafted = greedy("--draft", "mtp", "--spec-rule", "confidence", "--spec-max", "4", "--spec-min-p", "0");
    expect(drafted.status, drafted.stderr).toBe(0);
    expect(drafted.stderr).toBe("");
    expect(drafted.done.tokens).toEqual(plain.done.tokens);
    expect(drafted.done.text).toBe(plain.done.text);
    const s = drafted.done.stats.speculative;
    expect(s.drafter).toBe("mtp");
    expect(s.drafted_tokens).toBeGreaterThan(0);
    expect(s.drafted_tokens).toBeLessThanOrEqual(3 * s.windows);
    expect(s.windows + s.accepted_tokens).toBe(32);
    expect(s.acceptance_rate).toBeCloseTo(s.accepted_tokens / s.drafted_tokens, 12);
    expect(s.tokens_per_window).toBeCloseTo(32 / s.windows, 12);
    expect(drafted.done.stats.decode_tokens_per_s).toBeGreaterThan(0);
  });

  it("drafts with the MTP block by default (--draft auto)", () => {
    const auto = greedy("--spec-rule", "confidence");
    expect(auto.status, auto.stderr).toBe(0);
    expect(auto.done.stats.speculative.drafter).toBe("mtp");
    expect(auto.done.stats.speculative.drafted_tokens).toBeGreaterThan(0);
  });

  it("--draft mtp on a model without an MTP block is one error line, exit 1; auto decodes without drafts", () => {
    const file = modelPath("qwen3moe-a-F32.gguf");
    const r = runCli(["run", "--model", file, "--prompt-tokens", "1,2,3", "--n-predict", "2", "--draft", "mtp", "--json"]);
    expect(r.status).toBe(1);
    expect(errorLines(r.stderr)).toEqual([`guild: error: ${file}: --draft mtp: the model has no MTP (nextn) block to draft with`]);
    expect(r.stdout).toBe("");  // refused before the profile event
    const auto = runJson(["--model", file, "--prompt-tokens", "1,2,3", "--n-predict", "2", "--temperature", "0"]);
    expect(auto.status, auto.stderr).toBe(0);
    expect(auto.done.stats.speculative).toMatchObject({ drafter: "none", drafted_tokens: 0 });
  });
});

if (!haveFixtures) describe.skip(`guild run --draft: ${fixturesSkipReason}`, () => {});
