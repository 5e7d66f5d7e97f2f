// guild tokenize / detokenize against llama.cpp's ids and bytes (tokenize.json).
import { describe, expect, it } from "vitest";

import { runCli } from "../../test/cli.js";
import { fixturesSkipReason, haveFixtures, modelPath, readExpectedJson, type TokenizeFile } from "../../test/fixtures.js";

// One model per vocabulary through the CLI (every model's vectors run in-process
// in runtime/tokenizer.test.ts).
const models = ["qwen3moe-a-F32", "mixtral-a-F32"];

describe.skipIf(!haveFixtures)("guild tokenize / detokenize", () => {
  for (const name of models) {
    const file = modelPath(`${name}.gguf`);
    const vectors = haveFixtures ? readExpectedJson<TokenizeFile>(name, "tokenize.json").vectors : [];

    describe(name, () => {
      it.each(vectors.map((v, i) => ({ i, v })))("string $i: tokenize --json (parse special)", ({ v }) => {
        const r = runCli(["tokenize", "--model", file, "--text", v.text, "--json"]);
        expect(r.status, r.stderr).toBe(0);
        expect(JSON.parse(r.stdout)).toEqual({ tokens: v.parse_special.ids });
      });

      it.each(vectors.map((v, i) => ({ i, v })))("string $i: tokenize --no-parse-special", ({ v }) => {
        const r = runCli(["tokenize", "--model", file, "--text", v.text, "--no-parse-special"]);
        expect(r.status, r.stderr).toBe(0);
        expect(r.stdout).toBe(v.no_parse_special.ids.join(",") + "\n");
      });

      it.each(vectors.filter((v) => v.parse_special.ids.length > 0).map((v, i) => ({ i, v })))(
        "string $i: detokenize (raw bytes and --json)",
        ({ v }) => {
          const ids = v.parse_special.ids.join(",");
          const raw = runCli(["detokenize", "--model", file, "--tokens", ids]);
          expect(raw.status, raw.stderr).toBe(0);
          expect(raw.stdoutBytes.toString("hex")).toBe(v.parse_special.detokenized_hex);
          const json = runCli(["detokenize", "--model", file, "--tokens", ids, "--json"]);
          expect(json.status, json.stderr).toBe(0);
          expect(JSON.parse(json.stdout)).toEqual({ text: Buffer.from(v.parse_special.detokenized_hex, "hex").toString("utf8") });
        },
      );
    });
  }

  // A vocab-only file (no tensors): the commands open the tokenizer only, as
  // llama-tokenize does. Every 5th vector (each spawn builds the 152k-token
  // vocabulary; all 30 run in-process in runtime/tokenizer.test.ts).
  describe("qwen3-vocab (vocab-only)", () => {
    const file = modelPath("qwen3-vocab.gguf");
    const vectors = haveFixtures ? readExpectedJson<TokenizeFile>("qwen3-vocab", "tokenize.json").vectors : [];
    const picked = vectors.map((v, i) => ({ i, v })).filter(({ i }) => i % 5 === 0);
    it.each(picked)("string $i: tokenize --json, --no-parse-special and detokenize", ({ v }) => {
      const r = runCli(["tokenize", "--model", file, "--text", v.text, "--json"]);
      expect(r.status, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toEqual({ tokens: v.parse_special.ids });
      const plain = runCli(["tokenize", "--model", file, "--text", v.text, "--no-parse-special"]);
      expect(plain.status, plain.stderr).toBe(0);
      expect(plain.stdout).toBe(v.no_parse_special.ids.join(",") + "\n");
      if (v.parse_special.ids.length === 0) return;
      const raw = runCli(["detokenize", "--model", file, "--tokens", v.parse_special.ids.join(",")]);
      expect(raw.status, raw.stderr).toBe(0);
      expect(raw.stdoutBytes.toString("hex")).toBe(v.parse_special.detokenized_hex);
    });
  });

  it("--add-bos puts the vocabulary's BOS first", () => {
    const r = runCli(["tokenize", "--model", modelPath("mixtral-a-F32.gguf"), "--text", "Hello world", "--add-bos", "--json"]);
    expect(r.status, r.stderr).toBe(0);
    const plain = runCli(["tokenize", "--model", modelPath("mixtral-a-F32.gguf"), "--text", "Hello world", "--json"]);
    expect(JSON.parse(r.stdout).tokens).toEqual([1, ...JSON.parse(plain.stdout).tokens]);
  });

  it("--add-bos prepends BOS even where the vocabulary does not add one itself", () => {
    // Qwen's vocab names a BOS (<|endoftext|>) but add_bos_token is false.
    const r = runCli(["tokenize", "--model", modelPath("qwen3moe-a-F32.gguf"), "--text", "Hi", "--add-bos", "--json"]);
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).tokens[0]).toBe(2500); // <|endoftext|>: the first added token, at R = 2500
  });

  it("rejects ids outside the vocabulary with exit 1", () => {
    const r = runCli(["detokenize", "--model", modelPath("qwen3moe-a-F32.gguf"), "--tokens", "1,2560"]);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/^guild: error: .*2560.*\n$/);
  });
});

if (!haveFixtures) describe.skip(`guild tokenize: ${fixturesSkipReason}`, () => {});
