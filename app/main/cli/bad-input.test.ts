// Broken model files through the CLI: exit 1 and ONE stderr line
// `guild: error: <file>: <problem>`, never a crash or a stack trace.
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { errorLines, runCli } from "../../test/cli.js";
import { fixturesSkipReason, haveFixtures, modelPath } from "../../test/fixtures.js";

const source = "qwen3moe-a-Q4_0.gguf";
const splitShards = [1, 2, 3].map((i) => `qwen3moe-a-Q8_0-split-0000${i}-of-00003.gguf`);

let dir = "";
const cases: [string, () => string][] = [
  ["a missing file", () => path.join(dir, "missing.gguf")],
  ["a directory", () => path.join(dir, "a-directory")],
  ["an empty file", () => path.join(dir, "empty.gguf")],
  ["wrong magic", () => path.join(dir, "wrong-magic.gguf")],
  ["a file cut inside the header (8 bytes)", () => path.join(dir, "trunc-8.gguf")],
  ["a file cut inside the metadata (1 KiB)", () => path.join(dir, "trunc-1k.gguf")],
  ["a file cut inside the tensor data (half)", () => path.join(dir, "trunc-half.gguf")],
  ["a file missing its last byte", () => path.join(dir, "trunc-last-byte.gguf")],
  ["a split model missing a shard", () => path.join(dir, "split", splitShards[0]!)],
  ["a text file", () => path.join(dir, "notes.txt")],
];

describe.skipIf(!haveFixtures)("bad model files", () => {
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), "guild-bad-input-"));
    const good = readFileSync(modelPath(source));
    mkdirSync(path.join(dir, "a-directory"));
    writeFileSync(path.join(dir, "empty.gguf"), "");
    const magic = Buffer.from(good);
    magic.write("GGUX", 0, "latin1");
    writeFileSync(path.join(dir, "wrong-magic.gguf"), magic);
    writeFileSync(path.join(dir, "trunc-8.gguf"), good.subarray(0, 8));
    writeFileSync(path.join(dir, "trunc-1k.gguf"), good.subarray(0, 1024));
    writeFileSync(path.join(dir, "trunc-half.gguf"), good.subarray(0, good.length >> 1));
    writeFileSync(path.join(dir, "trunc-last-byte.gguf"), good.subarray(0, good.length - 1));
    writeFileSync(path.join(dir, "notes.txt"), "this is not a model\n");
    mkdirSync(path.join(dir, "split"));
    for (const shard of splitShards.slice(0, 2)) copyFileSync(modelPath(shard), path.join(dir, "split", shard));
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const commands: [string, (file: string) => string[]][] = [
    ["inspect", (file) => ["inspect", "--model", file, "--json"]],
    ["run", (file) => ["run", "--model", file, "--prompt-tokens", "1,2,3", "--n-predict", "2", "--json"]],
    ["tokenize", (file) => ["tokenize", "--model", file, "--text", "hello", "--json"]],
  ];

  for (const [what, file] of cases) {
    for (const [name, args] of commands) {
      it(`${name}: ${what}`, () => {
        const target = file();
        const r = runCli(args(target));
        expect(r.status, r.stderr).toBe(1);
        const lines = errorLines(r.stderr);
        expect(lines).toHaveLength(1);
        expect(lines[0]).toMatch(/^guild: error: /);
        // names the file (the given one, or for the split model the shard that is missing)
        expect(lines[0]!.includes(target) || lines[0]!.includes(dir)).toBe(true);
        expect(r.stdout).toBe("");
      });
    }
  }
});

if (!haveFixtures) describe.skip(`bad model files: ${fixturesSkipReason}`, () => {});
