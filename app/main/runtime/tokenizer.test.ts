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

if (!haveFixtures) describe.skip(`tokenizer: ${fixturesSkipReason}`, () => {});
