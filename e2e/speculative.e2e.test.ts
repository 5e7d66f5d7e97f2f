// Speculative decoding in the app, in Chromium (web mode, real services and runtime, the reference
// fixtures): the Models page's load settings choose the drafts (MTP, window rule), the current model
// says how it drafts, a reply's stats show the acceptance rate and tokens per window beside tok/s;
// draft MTP on a model without an MTP block is refused on Inspect, in the runtime's words.
import path from "node:path";

import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { fixturesSkipReason, haveFixtures, modelPath } from "../app/test/fixtures.js";
import { artifactsDir, buildRenderer, chromiumPath, openAppInChromium, serveWebMode, type Served } from "./harness.js";

const browserPath = chromiumPath();
const skip = "reason" in browserPath ? browserPath.reason : haveFixtures ? null : fixturesSkipReason;
if (skip !== null) console.warn(`speculative e2e skipped: ${skip}`);

describe.skipIf(skip !== null)("speculative decoding in the app (Chromium)", () => {
  let served: Served;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];
  const glm = modelPath("glm4moe-a-F32.gguf");
  const qwen = modelPath("qwen3moe-a-F32.gguf");

  beforeAll(async () => {
    served = await serveWebMode({ paced: false, rendererDir: await buildRenderer() });
    ({ browser, page } = await openAppInChromium(served, (browserPath as { path: string }).path, pageErrors));
  });
  afterAll(async () => {
    await browser?.close();
    await served?.close();
  });

  it("loads a model with MTP drafts from the load settings, and shows the drafts in a reply's stats", async () => {
    await page.getByTestId("nav-models").click();
    const group = page.getByTestId("draft-settings");
    await group.waitFor();
    expect(await group.textContent()).toMatch(/MTP \(nextn\) block/);
    const drafts = page.getByLabel("Speculative drafts", { exact: true });
    const window = page.getByLabel("Speculative window size", { exact: true });
    const minP = page.getByLabel("Draft min p", { exact: true });
    const rule = page.getByLabel("Speculative window rule", { exact: true });
    const errors = () => page.getByTestId("load-settings-errors").textContent();
    // None turns the window fields off; the others take them, checked as typed.
    await drafts.selectOption("none");
    for (const field of [window, minP, rule]) expect(await field.isDisabled()).toBe(true);
    await drafts.selectOption("mtp");
    expect(await window.isDisabled()).toBe(false);
    await window.fill("17");
    await expect.poll(errors).toMatch(/Window size must be a whole number from 1 to 16/);
    expect(await window.getAttribute("aria-invalid")).toBe("true");
    await window.fill("4");
    await minP.fill("1.5");
    await expect.poll(errors).toMatch(/Draft min p must be a number from 0 to 1/);
    await minP.fill("0");
    await rule.selectOption("confidence");
    await expect.poll(() => page.getByTestId("load-settings-errors").count()).toBe(0);
    await page.getByTestId("draft-settings").screenshot({ path: path.join(artifactsDir, "draft-settings.png") });

    await page.getByLabel("GGUF path", { exact: true }).fill(glm);
    await page.getByRole("button", { name: "Load GGUF" }).click();
    await expect.poll(() => page.getByTestId("current-model").textContent(), { timeout: 60_000 }).toContain("glm4moe-a-F32.gguf");
    expect(await page.getByTestId("current-drafting").textContent()).toBe("MTP block, windows of up to 4 tokens, min p 0, confidence rule");
    const current = (await served.web.services.contract.models.current())!;
    expect(current).toMatchObject({ drafter: "mtp", speculative: { draft: "mtp", specMax: 4, specMinP: 0, specRule: "confidence" } });

    const conversation = await served.web.services.contract.chat.createConversation({ settings: { temperature: 0, maxTokens: 24 } });
    await page.goto(`${served.web.serverUrl}/app/#/chat/${encodeURIComponent(conversation.id)}`);
    await page.getByLabel("Message").fill("Tell me about rivers.");
    await page.getByLabel("Message").press("Enter");
    const stats = page.locator("[data-testid=message-assistant]").last().getByTestId("message-stats");
    await expect.poll(() => stats.textContent(), { timeout: 60_000 })
      .toMatch(/^\d+ tokens · [\d.]+ tok\/s · \d+% of drafts accepted · \d+\.\d\d tokens\/window · TTFT \d+ ms/);
    const stored = (await served.web.services.contract.chat.messages({ conversationId: conversation.id })).at(-1)!;
    expect(stored.stats).toMatchObject({ drafter: "mtp" });
    expect(stored.stats!.draftTokens).toBeGreaterThan(0);
    const shown = (await stats.getByTestId("draft-stats").textContent()) ?? "";
    expect(shown).toBe(` · ${Math.round((stored.stats!.acceptedDraftTokens! / stored.stats!.draftTokens!) * 100)}% of drafts accepted · ` +
      `${(stored.stats!.generatedTokens / stored.stats!.windows!).toFixed(2)} tokens/window`);
    await page.locator("[data-testid=message-assistant]").last().screenshot({ path: path.join(artifactsDir, "chat-draft-stats.png") });
    expect(pageErrors).toEqual([]);
  });

  it("says on Inspect that draft MTP cannot load a model without an MTP block, and keeps the current model", async () => {
    await page.getByTestId("nav-models").click();
    const drafts = page.getByLabel("Speculative drafts", { exact: true });
    await drafts.waitFor();
    await drafts.selectOption("mtp");
    await page.getByLabel("GGUF path", { exact: true }).fill(qwen);
    await page.locator("form.load-form").getByRole("button", { name: "Inspect" }).click();
    await expect.poll(() => page.getByTestId("model-problems").textContent(), { timeout: 60_000 })
      .toContain('draft "mtp": the model has no MTP (nextn) block to draft with (choose draft Auto or None)');
    await drafts.selectOption("auto");
    await page.locator("form.load-form").getByRole("button", { name: "Inspect" }).click();
    await expect.poll(() => page.getByTestId("model-problems").count(), { timeout: 60_000 }).toBe(0);
    expect((await served.web.services.contract.models.current())?.name).toBe("glm4moe-a-F32.gguf");
    expect(pageErrors).toEqual([]);
  });
});
