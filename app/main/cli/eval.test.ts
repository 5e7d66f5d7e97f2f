// guild eval against llama.cpp's logits, with the fixtures README's acceptance
// criteria ("Suggested acceptance criteria"):
// - F32 masters vs the `.exact` files (F32 KV cache, no flash attention; we run
//   --kv-type f32): max |d| <= 1e-3. Against the default-settings files (F16 KV,
//   our default): max |d| <= 1e-3 + 0.02.
// - Quantized files (default settings): on positions before the first router
//   top-k margin < 0.05 (routing-<prompt>.json), rms |d| <= 0.5 per position
//   and argmax agreement >= 90 %; from there on only statistics: median |d| <= 0.5
//   and argmax agreement >= 80 %. Where llama.cpp's own top-1/top-2 margin is
//   below a quantized file's expected logit error (0.5, the README's greedy
//   rule), a different argmax is a tie within that error, not a disagreement.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { runCli } from "../../test/cli.js";
import {
  expectedDir,
  expectedFiles,
  fixturesSkipReason,
  haveFixtures,
  modelPath,
  readExpectedJson,
  readF32,
  targetModels,
  type LogitsMeta,
  greedyMarginQuantized,
  type RoutingFile,
} from "../../test/fixtures.js";

const f32MaxAbs = 1e-3;
// BF16/F16 masters: a 1-ulp difference upstream flips a 16-bit activation
// rounding (2^-9 relative) now and then; llama.cpp's own batch and
// one-token-at-a-time runs of these prompts differ by 0.04-0.07
// (tolerances.json, batch_vs_sequential). The rms bound is the fixtures'
// criterion (README: F16/BF16 rms <= 0.05): the result depends on the dot's
// summation order (AVX-512 BF16, as the reference run: max 0.042; AVX2 and
// generic: max 0.089, rms 0.025). Same rule as test_runtime_fixtures.
const halfMaxAbs = 0.1;
const halfRmsPerPosition = 0.05;
const f32DefaultSettingsExtra = 0.02;
const routerMarginLimit = 0.05;
const quantRmsPerPosition = 0.5;
const quantArgmaxBefore = 0.9;
const quantMedianAfter = 0.5;
const quantArgmaxAfter = 0.8;

let tmp = "";
beforeAll(() => {
  tmp = mkdtempSync(path.join(tmpdir(), "guild-eval-"));
});
afterAll(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

function evalLogits(file: string, ids: readonly number[], extra: string[] = []): Float32Array {
  const out = path.join(tmp, `logits-${process.pid}-${Math.random().toString(36).slice(2)}.f32`);
  const r = runCli(["eval", "--model", modelPath(file), "--prompt-tokens", ids.join(","), "--logits-out", out, ...extra]);
  expect(r.status, r.stderr).toBe(0);
  expect(r.stdout).toBe("");
  return readF32(out);
}

function argmax(row: Float32Array): number {
  let best = 0;
  for (let i = 1; i < row.length; i++) if (row[i]! > row[best]!) best = i;
  return best;
}

function top2Margin(row: Float32Array): number {
  let a = -Infinity;
  let b = -Infinity;
  for (const v of row) {
    if (v > a) { b = a; a = v; } else if (v > b) b = v;
  }
  return a - b;
}

interface RowStats {
  maxAbs: number;
  rms: number;
  argmaxEqual: boolean;
  /** llama.cpp's top-1 minus top-2 logit at this position. */
  refMargin: number;
  absDiffs: number[];
}

/** Argmax agreement of a quantized file: equal, or llama.cpp's own choice is a near-tie. */
const quantArgmaxAgrees = (r: RowStats) => r.argmaxEqual || r.refMargin < greedyMarginQuantized;

function compareRows(ours: Float32Array, ref: Float32Array, nVocab: number): RowStats[] {
  expect(ours.length).toBe(ref.length);
  const rows: RowStats[] = [];
  for (let p = 0; p * nVocab < ref.length; p++) {
    const a = ours.subarray(p * nVocab, (p + 1) * nVocab);
    const b = ref.subarray(p * nVocab, (p + 1) * nVocab);
    let maxAbs = 0;
    let sq = 0;
    const absDiffs: number[] = [];
    for (let i = 0; i < nVocab; i++) {
      const d = Math.abs(a[i]! - b[i]!);
      absDiffs.push(d);
      maxAbs = Math.max(maxAbs, Number.isNaN(d) ? Infinity : d);
      sq += d * d;
    }
    rows.push({ maxAbs, rms: Math.sqrt(sq / nVocab), argmaxEqual: argmax(a) === argmax(b), refMargin: top2Margin(b), absDiffs });
  }
  return rows;
}

function median(values: number[]): number {
  const s = [...values].sort((x, y) => x - y);
  return s.length === 0 ? 0 : s[s.length >> 1]!;
}

/** The first prompt position where any layer's router top-k margin is below the limit (n if none). */
function firstSmallMargin(routing: RoutingFile, n: number): number {
  for (let p = 0; p < n; p++) {
    if (routing.layers.some((l) => (l.topk_boundary_margin[p] ?? Infinity) < routerMarginLimit)) return p;
  }
  return n;
}

/** Logit files present for a model: { prompt, exact } from logits-<prompt>[.exact].json */
function logitCases(model: string): { prompt: string; exact: boolean; base: string }[] {
  return expectedFiles(model)
    .filter((f) => /^logits-[^.]+(\.exact)?\.json$/.test(f))
    .map((f) => {
      const base = f.replace(/\.json$/, "");
      return { prompt: base.replace(/^logits-/, "").replace(/\.exact$/, ""), exact: base.endsWith(".exact"), base };
    });
}

describe.skipIf(!haveFixtures)("guild eval: logits match llama.cpp", () => {
  for (const model of targetModels()) {
    // A BF16/F16 master's default-settings logits (F16 KV, flash attention)
    // differ from its own exact ones by 0.16-0.27 inside llama.cpp: only the
    // exact files pin it down (as in test_runtime_fixtures).
    for (const c of logitCases(model.name).filter((c) => !model.half || c.exact)) {
      it(`${model.name}: ${c.base}`, () => {
        const meta = readExpectedJson<LogitsMeta>(model.name, `${c.base}.json`);
        const ref = readF32(path.join(expectedDir(model.name), `${c.base}.f32`));
        expect(ref.length).toBe(meta.n_tokens * meta.n_vocab);
        if (!model.quantized) {
          const ours = evalLogits(model.file, meta.token_ids, c.exact ? ["--kv-type", "f32"] : []);
          const limit = model.half ? halfMaxAbs : c.exact ? f32MaxAbs : f32MaxAbs + f32DefaultSettingsExtra;
          const rows = compareRows(ours, ref, meta.n_vocab);
          const worst = Math.max(...rows.map((r) => r.maxAbs));
          expect(worst, `max |d| over ${rows.length} positions`).toBeLessThanOrEqual(limit);
          if (model.half) expect(Math.max(...rows.map((r) => r.rms))).toBeLessThanOrEqual(halfRmsPerPosition);
          expect(rows.every((r) => r.argmaxEqual)).toBe(true);
          return;
        }
        expect(c.exact).toBe(false);
        const ours = evalLogits(model.file, meta.token_ids);
        const rows = compareRows(ours, ref, meta.n_vocab);
        const routing = readExpectedJson<RoutingFile>(model.name, `routing-${c.prompt}.json`);
        const cut = firstSmallMargin(routing, rows.length);
        const before = rows.slice(0, cut);
        const after = rows.slice(cut);
        for (const [p, r] of before.entries()) {
          expect(r.rms, `rms |d| at position ${p} (before the first small router margin at ${cut})`).toBeLessThanOrEqual(quantRmsPerPosition);
        }
        if (before.length > 0) {
          expect(before.filter(quantArgmaxAgrees).length / before.length).toBeGreaterThanOrEqual(quantArgmaxBefore);
        }
        if (after.length > 0) {
          expect(median(after.flatMap((r) => r.absDiffs))).toBeLessThanOrEqual(quantMedianAfter);
          expect(after.filter(quantArgmaxAgrees).length / after.length).toBeGreaterThanOrEqual(quantArgmaxAfter);
        }
      });
    }
  }

  it("--last writes only the last row, equal to the last row of the full output", () => {
    const meta = readExpectedJson<LogitsMeta>("qwen3moe-a-Q8_0", "logits-chat.json");
    const all = evalLogits("qwen3moe-a-Q8_0.gguf", meta.token_ids);
    const last = evalLogits("qwen3moe-a-Q8_0.gguf", meta.token_ids, ["--last"]);
    expect(last.length).toBe(meta.n_vocab);
    const tail = all.subarray(all.length - meta.n_vocab);
    let maxAbs = 0;
    for (let i = 0; i < meta.n_vocab; i++) maxAbs = Math.max(maxAbs, Math.abs(tail[i]! - last[i]!));
    expect(maxAbs).toBeLessThanOrEqual(1e-4);
  });

  it("a sequence longer than --ctx fails with one line (exit 1)", () => {
    const r = runCli(["eval", "--model", modelPath("qwen3moe-a-Q4_0.gguf"), "--prompt-tokens", "1,2,3,4,5", "--ctx", "4", "--logits-out", path.join(tmp, "x.f32")]);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^guild: error: .*context.*\n$/);
  });
});

if (!haveFixtures) describe.skip(`guild eval: ${fixturesSkipReason}`, () => {});
