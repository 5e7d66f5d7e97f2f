// Malformed command lines: exit 2, the error line, then the usage line. None of
// these needs a model: they fail before anything is loaded.
import { existsSync } from "node:fs";

import { describe, expect, it } from "vitest";

import { embeddedModelPath } from "../paths.js";
import { errorLines, runCli } from "../../test/cli.js";

describe("guild: bad usage exits 2 with a usage line", () => {
  it.each([
    [[]],
    [["frobnicate"]],
    [["run", "--model", "m.gguf", "--prompt", "x", "--bogus"]],
    [["run", "--model", "m.gguf"]],
    [["run", "--model", "m.gguf", "--prompt", "x", "--prompt-tokens", "1"]],
    [["run", "--model", "m.gguf", "--chat", "--prompt-tokens", "1"]],
    [["run", "--model", "m.gguf", "--prompt", "x", "--n-predict", "ten"]],
    [["run", "--model", "m.gguf", "--prompt", "x", "--temperature", "-1"]],
    [["run", "--model", "m.gguf", "--prompt", "x", "--top-p", "1.5"]],
    [["run", "--model", "m.gguf", "--prompt-tokens", "1,x"]],
    [["run", "--model", "m.gguf", "--prompt", "x", "--kv-type", "q4"]],
    [["run", "--model", "m.gguf", "--prompt", "x", "--json=yes"]],
    [["eval", "--model", "m.gguf", "--prompt-tokens", "1,2"]],
    [["eval", "--model", "m.gguf", "--logits-out", "x.f32"]],
    [["tokenize", "--model", "m.gguf"]],
    [["tokenize", "--text", "hi"]],
    [["detokenize", "--model", "m.gguf", "--tokens", ""]],
    [["inspect"]],
    [["inspect", "--model", "m.gguf", "extra"]],
  ])("guild %j", (args) => {
    const r = runCli(args);
    expect(r.status).toBe(2);
    const lines = errorLines(r.stderr);
    expect(lines[0]).toMatch(/^guild: (error:|usage)|^usage:/);
    expect(lines.some((l) => /usage/.test(l))).toBe(true);
    expect(r.stderr).not.toMatch(/\n\s+at /); // never a stack trace
  });

  it("--help prints the usage and exits 0", () => {
    const r = runCli(["run", "--help"]);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^usage: guild run /);
  });
});

describe("guild run without --model", () => {
  it.skipIf(existsSync(embeddedModelPath()))("explains that the embedded default model is missing (exit 1, one line)", () => {
    const r = runCli(["run", "--chat", "--prompt", "hi"], { env: { GUILD_MODEL: "" } });
    expect(r.status).toBe(1);
    expect(errorLines(r.stderr)).toEqual([expect.stringMatching(/^guild: error: the embedded default model is missing.*--model/)]);
  });

  it.runIf(existsSync(embeddedModelPath()))("uses the embedded default model", () => {
    const r = runCli(["run", "--chat", "--prompt", "hi", "--n-predict", "2", "--json"], { env: { GUILD_MODEL: "" } });
    expect(r.status, r.stderr).toBe(0);
  });
});
