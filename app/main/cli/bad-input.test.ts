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

// Valid GGUF files whose model settings are hostile (issue #20): the load
// refuses them with one line naming the file and the key, before anything is
// sized from them.
describe.skipIf(!haveFixtures)("hostile model settings", () => {
  let hostileDir = "";
  // [what, file name, metadata key, edit of the value bytes (after the type tag)]
  const edits: [string, string, string, (b: Buffer, at: number) => void][] = [
    ["a NaN rms epsilon", "nan-eps.gguf", "qwen3moe.attention.layer_norm_rms_epsilon", (b, at) => b.writeFloatLE(NaN, at)],
    ["a zero rms epsilon", "zero-eps.gguf", "qwen3moe.attention.layer_norm_rms_epsilon", (b, at) => b.writeFloatLE(0, at)],
    ["a negative rope base", "neg-rope.gguf", "qwen3moe.rope.freq_base", (b, at) => b.writeFloatLE(-10000, at)],
    ["feed_forward_length 2^31-1", "ff-huge.gguf", "qwen3moe.feed_forward_length", (b, at) => b.writeUInt32LE(0x7fffffff, at)],
    ["an expert width beyond the limit", "ffexp-huge.gguf", "qwen3moe.expert_feed_forward_length", (b, at) => b.writeUInt32LE(1048577, at)],
    ["embedding_length not matching token_embd", "embd-512.gguf", "qwen3moe.embedding_length", (b, at) => b.writeUInt32LE(512, at)],
    ["head_count not matching attn_q", "heads-8.gguf", "qwen3moe.attention.head_count", (b, at) => b.writeUInt32LE(8, at)],
  ];
  beforeAll(() => {
    hostileDir = mkdtempSync(path.join(tmpdir(), "guild-hostile-"));
    const good = readFileSync(modelPath(source));
    for (const [, name, key, edit] of edits) {
      const b = Buffer.from(good);
      const at = b.indexOf(Buffer.from(key, "latin1")) + key.length + 4; // value after the u32 type tag
      expect(at).toBeGreaterThan(key.length + 4);
      edit(b, at);
      writeFileSync(path.join(hostileDir, name), b);
    }
  });
  afterAll(() => {
    if (hostileDir) rmSync(hostileDir, { recursive: true, force: true });
  });

  for (const [what, name, key] of edits) {
    it(`run: ${what}`, () => {
      const target = path.join(hostileDir, name);
      const r = runCli(["run", "--model", target, "--prompt-tokens", "1,2,3", "--n-predict", "2", "--json"]);
      expect(r.status, r.stderr).toBe(1);
      const lines = errorLines(r.stderr);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^guild: error: /);
      expect(lines[0]).toContain(target);
      expect(lines[0]).toContain(key);
      expect(r.stdout).toBe("");
    });
  }
});

if (!haveFixtures) describe.skip(`bad model files: ${fixturesSkipReason}`, () => {});
