// guild inspect --json against what the fixtures README says each file holds.
import { statSync } from "node:fs";

import { describe, expect, it } from "vitest";

import { runCli } from "../../test/cli.js";
import { fixturesSkipReason, haveFixtures, modelPath } from "../../test/fixtures.js";

interface Expected {
  file: string;
  files: string[];
  architecture: string;
  tensorTypes: Record<string, number>;
  experts: [number, number];
  vocab: number;
}

// From the fixtures README ("Models" and "Configurations").
const qwenSplit = [1, 2, 3].map((i) => `qwen3moe-a-Q8_0-split-0000${i}-of-00003.gguf`);
const models: Expected[] = [
  { file: "qwen3moe-a-F32.gguf", files: [], architecture: "qwen3moe", tensorTypes: { F32: 27 }, experts: [8, 2], vocab: 2560 },
  { file: "qwen3moe-a-Q8_0.gguf", files: [], architecture: "qwen3moe", tensorTypes: { Q8_0: 16, F32: 11 }, experts: [8, 2], vocab: 2560 },
  { file: "qwen3moe-a-Q4_0.gguf", files: [], architecture: "qwen3moe", tensorTypes: { Q4_0: 11, Q8_0: 4, Q6_K: 1, F32: 11 }, experts: [8, 2], vocab: 2560 },
  {
    file: "qwen3moe-a-Q4_K_M.gguf",
    files: [],
    architecture: "qwen3moe",
    tensorTypes: { Q4_K: 7, Q5_K: 2, Q6_K: 1, Q8_0: 5, Q5_0: 1, F32: 11 },
    experts: [8, 2],
    vocab: 2560,
  },
  { file: "qwen3moe-a-Q6_K.gguf", files: [], architecture: "qwen3moe", tensorTypes: { Q6_K: 10, Q8_0: 6, F32: 11 }, experts: [8, 2], vocab: 2560 },
  { file: qwenSplit[0]!, files: qwenSplit, architecture: "qwen3moe", tensorTypes: { Q8_0: 16, F32: 11 }, experts: [8, 2], vocab: 2560 },
  { file: "mixtral-a-F32.gguf", files: [], architecture: "llama", tensorTypes: { F32: 23 }, experts: [8, 2], vocab: 3000 },
  {
    file: "mixtral-a-Q4_K_M.gguf",
    files: [],
    architecture: "llama",
    tensorTypes: { Q4_K: 7, Q5_K: 2, Q6_K: 1, Q8_0: 5, Q5_0: 1, F32: 7 },
    experts: [8, 2],
    vocab: 3000,
  },
];

const upperKeys = (o: Record<string, number>) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k.toUpperCase(), v]));

describe.skipIf(!haveFixtures)("guild inspect --json", () => {
  it.each(models)("$file", (m) => {
    const r = runCli(["inspect", "--model", modelPath(m.file), "--json"]);
    expect(r.status, r.stderr).toBe(0);
    const info = JSON.parse(r.stdout) as Record<string, unknown>;
    const meta = info["metadata"] as Record<string, unknown>;
    expect(info["architecture"]).toBe(m.architecture);
    expect(upperKeys(info["tensor_types"] as Record<string, number>)).toEqual(m.tensorTypes);
    const nTensors = Object.values(m.tensorTypes).reduce((a, b) => a + b, 0);
    expect(info["tensor_count"]).toBe(nTensors);
    expect(info["parameter_count"]).toBeGreaterThan(0);
    expect(info["expert_count"]).toBe(m.experts[0]);
    expect(info["expert_used_count"]).toBe(m.experts[1]);
    expect(info["context_length"]).toBe(meta[`${m.architecture}.context_length`]);
    expect(info["context_length"]).toBeGreaterThan(0);
    const files = m.files.length > 0 ? m.files : [m.file];
    const bytes = files.map((f) => statSync(modelPath(f)).size).reduce((a, b) => a + b, 0);
    expect(info["file_size"]).toBe(bytes);
    // long arrays are summarised, not dumped
    const tokens = meta["tokenizer.ggml.tokens"] as { count: number; head: unknown[] };
    expect(tokens.count).toBe(m.vocab);
    expect(tokens.head.length).toBeLessThan(m.vocab);
    expect(r.stdout.length).toBeLessThan(200_000);
  });

  it("F32 parameter count equals the tensor bytes / 4", () => {
    const r = runCli(["inspect", "--model", modelPath("qwen3moe-a-F32.gguf"), "--json"]);
    const info = JSON.parse(r.stdout) as Record<string, number>;
    expect(info["parameter_count"]! * 4).toBe(info["tensor_bytes"]);
  });

  // The type mix (#24 item 4): per type and in total, from the tensor infos.
  it.each(models)("$file: the type mix adds up and shows bits per weight", (m) => {
    const r = runCli(["inspect", "--model", modelPath(m.file), "--json"]);
    expect(r.status, r.stderr).toBe(0);
    const info = JSON.parse(r.stdout) as Record<string, unknown>;
    const mix = info["type_mix"] as { type: string; tensors: number; parameters: number; bytes: number; bits_per_weight: number; byte_share: number }[];
    expect(Object.fromEntries(mix.map((t) => [t.type.toUpperCase(), t.tensors]))).toEqual(m.tensorTypes);
    const sum = (k: "tensors" | "parameters" | "bytes") => mix.reduce((a, t) => a + t[k], 0);
    expect(sum("tensors")).toBe(info["tensor_count"]);
    expect(sum("parameters")).toBe(info["parameter_count"]);
    expect(sum("bytes")).toBe(info["tensor_bytes"]);
    expect(mix.reduce((a, t) => a + t.byte_share, 0)).toBeCloseTo(1, 12);
    for (let i = 1; i < mix.length; ++i) expect(mix[i - 1]!.bytes).toBeGreaterThanOrEqual(mix[i]!.bytes);
    // Block sizes are format facts: bits per weight of whole tensors of one type.
    const known: Record<string, number> = { F32: 32, Q8_0: 8.5, Q4_0: 4.5, Q5_0: 5.5, Q4_K: 4.5, Q5_K: 5.5, Q6_K: 6.5625 };
    for (const t of mix) {
      expect(t.bits_per_weight).toBeCloseTo((8 * t.bytes) / t.parameters, 12);
      const want = known[t.type.toUpperCase()];
      if (want !== undefined) expect(t.bits_per_weight, t.type).toBeCloseTo(want, 12);
    }
    expect(info["bits_per_weight"]).toBeCloseTo((8 * (info["tensor_bytes"] as number)) / (info["parameter_count"] as number), 12);
    const single = Object.keys(m.tensorTypes).filter((t) => t !== "F32");
    // Files whose expert stacks are all one type: the experts' bits per weight is that type's.
    if (m.file.includes("F32")) expect(info["expert_bits_per_weight"]).toBe(32);
    if (single.length === 1) expect(info["expert_bits_per_weight"]).toBeCloseTo(known[single[0]!]!, 12);
    expect(info["dense_bits_per_weight"]).toBeGreaterThan(0);
  });

  it("prints the type mix as one line per type", () => {
    const r = runCli(["inspect", "--model", modelPath("qwen3moe-a-Q4_K_M.gguf")]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^type_mix:\n  \w+: \d+ tensors, [\d,]+ parameters, \d+\.\d\d bpw, \d+\.\d% of the bytes$/m);
    expect(r.stdout).toMatch(/^bits_per_weight: \d+\.\d\d$/m);
    expect(r.stdout).toMatch(/^expert_bits_per_weight: \d+\.\d\d$/m);
  });

  it("prints readable text without --json", () => {
    const r = runCli(["inspect", "--model", modelPath("qwen3moe-a-F32.gguf")]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^architecture: qwen3moe$/m);
  });
});

if (!haveFixtures) describe.skip(`guild inspect: ${fixturesSkipReason}`, () => {});
