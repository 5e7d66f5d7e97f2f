// Speculative decoding through the addon (docs/SPECULATIVE.md), on the reference fixtures:
// glm4moe-a-F32 has an MTP (nextn) block, qwen3moe-a-F32 has none. Greedy output must be the
// same token for token with and without drafts, the drafts must be counted (windows, drafted,
// accepted, who drafted), and draft "mtp" without a block is the runtime's one-line refusal.
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { fixturesSkipReason, haveFixtures, modelPath, readExpectedJson, type GreedyFile } from "../../test/fixtures.js";
import { GuildModel } from "./model.js";
import type { GenerateOptions, GenerateResult } from "./options.js";
import type { GuildSession } from "./session.js";

const mtpFixture = "glm4moe-a-F32";
const plainFixture = "qwen3moe-a-F32";
const nPredict = 32;

describe.skipIf(!haveFixtures)(`speculative decoding with the MTP block (${mtpFixture})`, () => {
  let model: GuildModel;
  const prompts = haveFixtures ? readExpectedJson<GreedyFile>(mtpFixture, "greedy.json").prompts : [];

  beforeAll(async () => {
    model = await GuildModel.load(modelPath(`${mtpFixture}.gguf`), { threads: 2 });
  });
  afterAll(() => model?.dispose());

  /** One greedy generation in a fresh session. */
  async function greedy(promptIds: readonly number[], options: GenerateOptions): Promise<GenerateResult> {
    const session: GuildSession = await model.createSession();
    try {
      return await session.generate(promptIds, { maxNewTokens: nPredict, temperature: 0, ...options });
    } finally {
      session.dispose();
    }
  }

  it("says in its profile that the nextn block drafts", () => {
    expect(model.drafter()).toEqual({ mtp: true });
  });

  it.each(prompts.slice(0, 3).map((p) => [p.name, p] as const))("%s: draft mtp gives the tokens of draft none, and counts its drafts", async (_, prompt) => {
    const plain = await greedy(prompt.prompt_ids, { draft: "none" });
    expect(plain.tokens).toHaveLength(nPredict);
    expect(plain).toMatchObject({ draftTokens: 0, acceptedDraftTokens: 0, windows: nPredict, draftedByMtp: false });
    for (const options of [
      { draft: "mtp", specRule: "confidence" },
      { draft: "mtp", specRule: "confidence", specMax: 16 },
      { draft: "auto", specRule: "confidence", specMax: 2, specMinP: 0 },
    ] as const) {
      const drafted = await greedy(prompt.prompt_ids, options);
      expect(drafted.tokens, JSON.stringify(options)).toEqual(plain.tokens);
      expect(drafted.stopReason).toBe(plain.stopReason);
      expect(drafted.draftedByMtp).toBe(true);
      expect(drafted.draftTokens, JSON.stringify(options)).toBeGreaterThan(0);
      expect(drafted.windows).toBeGreaterThan(0);
      expect(drafted.acceptedDraftTokens).toBeLessThanOrEqual(drafted.draftTokens);
      // Each window yields the drafts it accepted plus one token of the verifier's own.
      expect(drafted.windows + drafted.acceptedDraftTokens).toBe(drafted.tokens.length);
      // At most S - 1 drafts per window.
      expect(drafted.draftTokens).toBeLessThanOrEqual(drafted.windows * ((options.specMax ?? 4) - 1));
    }
  });

  it("drafts nothing when asked for none, and under a min p no draft reaches", async () => {
    const prompt = prompts[0]!;
    const plain = await greedy(prompt.prompt_ids, { draft: "none", specMax: 8 });
    expect(plain).toMatchObject({ draftTokens: 0, draftedByMtp: false, windows: nPredict });
    const sure = await greedy(prompt.prompt_ids, { draft: "mtp", specRule: "confidence", specMinP: 1 });
    expect(sure.tokens).toEqual(plain.tokens);
    expect(sure).toMatchObject({ draftTokens: 0, acceptedDraftTokens: 0, windows: nPredict, draftedByMtp: true });
  });

  it("refuses a window size outside 1..16 and a min p outside [0, 1] before generating", async () => {
    const prompt = prompts[0]!;
    await expect(greedy(prompt.prompt_ids, { draft: "mtp", specMax: 17 })).rejects.toThrow(RangeError);
    await expect(greedy(prompt.prompt_ids, { draft: "mtp", specMax: 0 })).rejects.toThrow(RangeError);
    await expect(greedy(prompt.prompt_ids, { draft: "mtp", specMinP: 1.5 })).rejects.toThrow(/specMinP/);
  });
});

describe.skipIf(!haveFixtures)(`draft mtp on a model without an MTP block (${plainFixture})`, () => {
  let model: GuildModel;
  let session: GuildSession;

  beforeAll(async () => {
    model = await GuildModel.load(modelPath(`${plainFixture}.gguf`), { threads: 2 });
    session = await model.createSession();
  });
  afterAll(() => {
    session?.dispose();
    model?.dispose();
  });

  it("is refused with the runtime's one line; auto decodes one token per window", async () => {
    expect(model.drafter()).toEqual({ mtp: false, reason: "the model has no MTP (nextn) block to draft with" });
    const refused = await session.generate([1, 2, 3], { draft: "mtp", maxNewTokens: 4 }).then(() => null, (e: unknown) => e as Error & { code?: string });
    expect(refused?.message).toBe("the model has no MTP (nextn) block to draft with");
    expect(refused?.code).toBe("invalid_argument");
    const auto = await session.generate([1, 2, 3], { draft: "auto", maxNewTokens: 4, temperature: 0 });
    expect(auto).toMatchObject({ draftTokens: 0, draftedByMtp: false, windows: auto.tokens.length });
  });
});

if (!haveFixtures) describe.skip(`speculative decoding: ${fixturesSkipReason}`, () => {});
