// The llama.cpp reference fixtures (../shared/fixtures, or $GUILD_FIXTURES).
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";

import { projectRoot } from "../main/paths.js";

export const fixturesDir = path.resolve(process.env["GUILD_FIXTURES"] ?? path.join(projectRoot(), "..", "shared", "fixtures"));

export const haveFixtures = existsSync(path.join(fixturesDir, "models")) && existsSync(path.join(fixturesDir, "expected"));

export const fixturesSkipReason = `reference fixtures not found at ${fixturesDir} (set GUILD_FIXTURES)`;

if (!haveFixtures) console.warn(`guild tests: skipping fixture tests: ${fixturesSkipReason}`);

export function modelPath(file: string): string {
  return path.join(fixturesDir, "models", file);
}

export function expectedDir(model: string): string {
  return path.join(fixturesDir, "expected", model);
}

export function readExpectedJson<T>(model: string, file: string): T {
  return JSON.parse(readFileSync(path.join(expectedDir(model), file), "utf8")) as T;
}

/** Files in expected/<model>/ (directories hold different files: read, don't assume). */
export function expectedFiles(model: string): string[] {
  const dir = expectedDir(model);
  return existsSync(dir) ? readdirSync(dir) : [];
}

/** The architectures this runtime targets so far. */
export const targetFamilies = ["qwen3moe-a", "mixtral-a", "gptoss-a", "glm4moe-a"] as const;

export interface FixtureModel {
  /** expected/<name>/ */
  name: string;
  /** models/<file> (the split model: its first shard) */
  file: string;
  quantized: boolean;
  /** BF16/F16 weights: activations are rounded to 16 bits before each product (by llama.cpp too). */
  half: boolean;
}

/** Every model of the target families with expected outputs, plus the split model. */
export function targetModels(): FixtureModel[] {
  if (!haveFixtures) return [];
  const names = readdirSync(path.join(fixturesDir, "expected"))
    .filter((n) => targetFamilies.some((f) => n.startsWith(f + "-")))
    .sort();
  return names.map((name) => {
    const file = name.endsWith("-split") ? `${name}-00001-of-00003.gguf` : `${name}.gguf`;
    const quantized = !/-(F32|F16|BF16)$/.test(name);
    return { name, file, quantized, half: /-(F16|BF16)$/.test(name) };
  });
}

export interface GreedyPrompt {
  name: string;
  prompt_text: string;
  prompt_ids: number[];
  generated_ids: number[];
  generated_text: string;
  generated_text_utf8_valid: boolean;
  top1_minus_top2_logit: number[];
}

export interface GreedyFile {
  model: string;
  n_predict: number;
  prompts: GreedyPrompt[];
}

export interface TokenizeVector {
  text: string;
  no_parse_special: { ids: number[]; detokenized_hex: string };
  parse_special: { ids: number[]; detokenized_hex: string };
}

export interface TokenizeFile {
  model: string;
  add_special: boolean;
  vectors: TokenizeVector[];
}

export interface LogitsMeta {
  token_ids: number[];
  n_tokens: number;
  n_vocab: number;
}

export interface RoutingFile {
  token_ids: number[];
  layers: { layer: number; topk_boundary_margin: number[] }[];
}

export function readF32(file: string): Float32Array {
  const buf = readFileSync(file);
  const out = new Float32Array(buf.length / 4);
  for (let i = 0; i < out.length; i++) out[i] = buf.readFloatLE(i * 4);
  return out;
}

/** Greedy comparison length (fixtures README): up to, not including, the first step with a margin below `threshold`. */
export function comparableSteps(margins: readonly number[], threshold: number, n: number): number {
  const first = margins.findIndex((m) => m < threshold);
  return first < 0 ? n : Math.min(first, n);
}

/** The expected logit error used for greedy comparisons: 0.05 for F32 masters, 0.5 for quantized files. */
export const greedyMarginF32 = 0.05;
export const greedyMarginQuantized = 0.5;
