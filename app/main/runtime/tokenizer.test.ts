// Every target model's tokenizer, in-process, against tokenize.json: ids with
// and without special-token parsing, pieces, and detokenized bytes.
import { afterAll, describe, expect, it } from "vitest";

import {
  expectedFiles, fixturesSkipReason, haveFixtures, modelPath, readExpectedJson, targetModels, type TokenizeFile,
} from "../../test/fixtures.js";
import { GuildModel } from "./model.js";

interface PiecesVector {
  parse_special: { ids: number[]; pieces_hex: string[] };
}

describe.skipIf(!haveFixtures)("tokenizer (addon) vs llama.cpp", () => {
  const loaded: GuildModel[] = [];
  afterAll(() => loaded.forEach((m) => m.dispose()));

  // Only some fixture directories carry tokenizer vectors (the quant variants
  // share their master's vocabulary): every one that does is checked.
  const withVectors = targetModels().filter((m) => !m.name.endsWith("-split") && expectedFiles(m.name).includes("tokenize.json"));
  it("finds tokenizer vectors", () => expect(withVectors.length).toBeGreaterThan(0));
  for (const model of withVectors) {
    it(model.name, async () => {
      const m = await GuildModel.load(modelPath(model.file), { threads: 1 });
      loaded.push(m);
      const { vectors } = readExpectedJson<TokenizeFile>(model.name, "tokenize.json");
      for (const [i, v] of vectors.entries()) {
        expect(m.tokenize(v.text, { parseSpecial: true }), `string ${i} (parse special)`).toEqual(v.parse_special.ids);
        expect(m.tokenize(v.text, { parseSpecial: false }), `string ${i} (no parse special)`).toEqual(v.no_parse_special.ids);
        expect(Buffer.from(m.detokenize(v.parse_special.ids)).toString("hex"), `string ${i} detokenized`).toBe(v.parse_special.detokenized_hex);
        const pieces = (v as unknown as PiecesVector).parse_special.pieces_hex;
        expect(v.parse_special.ids.map((id) => Buffer.from(m.tokenToPiece(id)).toString("hex")), `string ${i} pieces`).toEqual(pieces);
      }
    });
  }
});

// vocabOnly: the tokenizer without weights or kernel packages, for vocab-only
// GGUF files (no tensors) and as a cheap open of a full model.
describe.skipIf(!haveFixtures)("vocab-only models", () => {
  it("qwen3-vocab.gguf (no tensors) tokenizes like llama.cpp", async () => {
    await expect(GuildModel.load(modelPath("qwen3-vocab.gguf"), { threads: 1 })).rejects.toThrow(/qwen3-vocab\.gguf/);
    const m = await GuildModel.load(modelPath("qwen3-vocab.gguf"), { vocabOnly: true });
    try {
      expect(m.vocabSize).toBe(151936);
      expect(m.ready).toBe(false);
      expect(m.info()["vocab_only"]).toBe(true);
      await expect(m.createSession()).rejects.toThrow(/tokenizer only/);
      const { vectors } = readExpectedJson<TokenizeFile>("qwen3-vocab", "tokenize.json");
      expect(vectors.length).toBe(30);
      for (const [i, v] of vectors.entries()) {
        expect(m.tokenize(v.text, { parseSpecial: true }), `string ${i} (parse special)`).toEqual(v.parse_special.ids);
        expect(m.tokenize(v.text, { parseSpecial: false }), `string ${i} (no parse special)`).toEqual(v.no_parse_special.ids);
        expect(Buffer.from(m.detokenize(v.parse_special.ids)).toString("hex"), `string ${i} detokenized`).toBe(v.parse_special.detokenized_hex);
      }
    } finally {
      m.dispose();
    }
  });

  it("a full model opened vocab-only gives the ids and bytes of a full load", async () => {
    const full = await GuildModel.load(modelPath("qwen3moe-a-F32.gguf"), { threads: 1 });
    const vocab = await GuildModel.load(modelPath("qwen3moe-a-F32.gguf"), { vocabOnly: true });
    try {
      expect(vocab.vocabSize).toBe(full.vocabSize);
      expect([vocab.bosToken, vocab.eosToken, vocab.trainContextSize]).toEqual([full.bosToken, full.eosToken, full.trainContextSize]);
      expect(vocab.chatTemplate()).toBe(full.chatTemplate());
      const { vectors } = readExpectedJson<TokenizeFile>("qwen3moe-a-F32", "tokenize.json");
      for (const v of vectors) {
        const ids = full.tokenize(v.text, { addSpecial: true });
        expect(vocab.tokenize(v.text, { addSpecial: true })).toEqual(ids);
        expect(Buffer.from(vocab.detokenize(ids))).toEqual(Buffer.from(full.detokenize(ids)));
      }
      const stages = (vocab.startupProfile()["stages"] as { name: string; detail: Record<string, unknown> }[]);
      expect(stages.length).toBe(14);
      expect(stages.filter((s) => "skipped" in s.detail).map((s) => s.name)).not.toContain("tokenizer");
      expect(stages.find((s) => s.name === "dense_weights")!.detail["skipped"]).toMatch(/vocab-only/);
    } finally {
      vocab.dispose();
      full.dispose();
    }
  });
});

if (!haveFixtures) describe.skip(`tokenizer: ${fixturesSkipReason}`, () => {});
