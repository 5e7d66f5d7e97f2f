// The app's speculative-decoding settings on the real runtime (the reference fixtures): a load
// setting of the Models page (draft, window size, min p, rule) is remembered with the model and
// applied to its chat replies, whose stats then carry the drafts; draft MTP on a model without an
// MTP block is refused before anything is given up, and Inspect says so.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import type { ChatReplyEvent, Message } from "../../shared/app-contract.js";
import { fixturesSkipReason, haveFixtures, modelPath } from "../../test/fixtures.js";
import { createAppServices, type AppServices } from "./index.js";

describe.skipIf(!haveFixtures)("the app's speculative decoding (real runtime)", () => {
  let dir: string;
  let app: AppServices;
  const glm = modelPath("glm4moe-a-F32.gguf");
  const qwen = modelPath("qwen3moe-a-F32.gguf");
  const done = (messageId: string) => new Promise<Message>((resolve) => {
    const off = app.subscribe((name, p) => {
      const e = p as ChatReplyEvent;
      if (name === "chat.reply" && e.kind === "done" && e.messageId === messageId) { off(); resolve(e.message); }
    });
  });
  const reply = async (content: string, maxTokens = 24) => {
    const c = await app.contract.chat.createConversation({ settings: { temperature: 0, maxTokens } });
    const r = await app.contract.chat.send({ conversationId: c.id, content });
    return done(r.assistantMessage.id);
  };

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "guild-spec-"));
    app = createAppServices({ dataDir: dir, packagesDir: path.join(dir, "packages"), loadDefaults: { threads: 2 }, loadEmbedded: false });
    await app.ready;
  });
  afterAll(async () => {
    await app?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it("applies a model's speculative load settings to its replies, and remembers them with the model", async () => {
    const settings = { draft: "mtp", specMax: 4, specMinP: 0, specRule: "confidence" } as const;
    const loaded = await app.contract.models.load({ path: glm, settings });
    expect(loaded).toMatchObject({ drafter: "mtp", speculative: settings });
    const drafted = await reply("Tell me about rivers.");
    expect(drafted.status, drafted.error ?? "").toBe("complete");
    const s = drafted.stats!;
    expect(s.drafter).toBe("mtp");
    expect(s.draftTokens).toBeGreaterThan(0);
    expect(s.windows).toBeGreaterThan(0);
    expect(s.windows! + s.acceptedDraftTokens!).toBe(s.generatedTokens);
    // Remembered per model: inspecting it offers them again.
    expect((await app.contract.models.inspect({ path: glm })).lastLoad?.settings).toEqual(settings);

    // The same reply without drafts: the same text (greedy), nothing drafted.
    await app.contract.models.load({ path: glm, settings: { draft: "none" } });
    const plain = await reply("Tell me about rivers.");
    expect(plain.content).toBe(drafted.content);
    expect(plain.stats).toMatchObject({ drafter: "none", draftTokens: 0, acceptedDraftTokens: 0, windows: plain.stats!.generatedTokens });
    expect((await app.contract.models.inspect({ path: glm })).lastLoad?.settings).toEqual({ draft: "none" });
  });

  it("refuses draft MTP for a model without an MTP block, keeping the current model; Inspect names the problem", async () => {
    const current = (await app.contract.models.current())!;
    const err = await app.contract.models.load({ path: qwen, settings: { draft: "mtp" } }).then(() => null, (e: unknown) => e as Error);
    expect(err?.message).toBe(`cannot load ${qwen}: draft "mtp": the model has no MTP (nextn) block to draft with (choose draft Auto or None); glm4moe-a-F32.gguf stays loaded`);
    expect((await app.contract.models.current())?.id).toBe(current.id);
    const inspected = await app.contract.models.inspect({ path: qwen, settings: { draft: "mtp" } });
    expect(inspected.problems).toEqual(['draft "mtp": the model has no MTP (nextn) block to draft with (choose draft Auto or None)']);
    expect((await app.contract.models.inspect({ path: qwen, settings: { draft: "auto" } })).problems).toEqual([]);
    // Auto loads it and decodes one token per window.
    const loaded = await app.contract.models.load({ path: qwen, settings: { draft: "auto" } });
    expect(loaded.drafter).toBe("none");
    const r = await reply("Hello", 8);
    expect(r.stats).toMatchObject({ drafter: "none", draftTokens: 0 });
  });
});

if (!haveFixtures) describe.skip(`the app's speculative decoding: ${fixturesSkipReason}`, () => {});
