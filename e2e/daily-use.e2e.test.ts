// Daily use in Chromium against web mode (e2e/harness.ts), the parts of issue 25
// the other specs leave out: the chat's generation settings (presets, the
// sampling values and the seed reaching the model, unsaved values never dropped
// silently); GitHub-flavoured markdown as a page shows it (task lists, nested
// lists, highlighted code, readable in both themes); a models folder of the
// user's choosing, where a Hub download goes and loads from (the stand-in Hub,
// app/test/hub-stand-in.ts); and the memory plan with a GPU (a machine probe
// that reports one, since this machine has none): what goes where as the GPU
// budget and experts-on-CPU change, the warning before Load when RAM is short,
// the refused load that keeps the current model, and Load anyway.
import { copyFileSync, existsSync, mkdirSync } from "node:fs";
import path from "node:path";

import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { embeddedModelPath } from "../app/main/paths.js";
import { liveMachineProbe, type MachineProbe } from "../app/main/services/machine-facts.js";
import type { GpuFacts } from "../app/shared/memory-plan.js";
import { HubStandIn } from "../app/test/hub-stand-in.js";
import { fixturesDir } from "../app/test/fixtures.js";
import { lowContrastText } from "./contrast-check.js";
import { artifactsDir, buildRenderer, chromiumPath, openAppInChromium, serveWebMode, type Served } from "./harness.js";

const browserPath = chromiumPath();
if ("reason" in browserPath) console.warn(`daily-use e2e skipped: ${browserPath.reason}`);

const GiB = 2 ** 30;
const fixtures = path.join(fixturesDir, "models");
const repo = "guild-test/qwen3moe-a-GGUF";
const single = "qwen3moe-a-Q8_0.gguf";
const local = "qwen3moe-a-Q4_K_M.gguf";
const demo = "guild-demo-qwen3moe-Q8_0.gguf";

/** This machine's figures, except what a test sets: the RAM available and the GPUs the last load "saw". */
class TestMachine implements MachineProbe {
  ram: number | null = null;
  gpus: GpuFacts[] = [];
  private readonly live = liveMachineProbe();
  async facts() {
    const f = await this.live.facts();
    return { ...f, ...(this.ram !== null ? { ramAvailableBytes: this.ram } : {}), gpus: this.gpus, gpuNote: this.gpus.length > 0 ? "" : f.gpuNote };
  }
  observe(): void {
    // The loads here run on the CPU; the GPU is the test's.
  }
}

describe.skipIf("reason" in browserPath)("daily use in Chromium", () => {
  let hub: HubStandIn;
  let served: Served;
  let browser: Browser;
  let page: Page;
  const machine = new TestMachine();
  const pageErrors: string[] = [];
  const endpointBefore = process.env["GUILD_HF_ENDPOINT"];
  const contract = () => served.web.services.contract;
  const lastAssistant = () => page.locator("[data-testid=message-assistant]").last();
  const shot = (name: string) => page.screenshot({ path: path.join(artifactsDir, `${name}.png`), fullPage: true });

  beforeAll(async () => {
    hub = new HubStandIn({ repos: [{ id: repo, downloads: 7, files: [{ path: single, source: path.join(fixtures, single) }] }] });
    await hub.start();
    process.env["GUILD_HF_ENDPOINT"] = hub.url;
    served = await serveWebMode({ paced: false, rendererDir: await buildRenderer(), machine });
    ({ browser, page } = await openAppInChromium(served, (browserPath as { path: string }).path, pageErrors, { height: 900 }));
  });
  afterAll(async () => {
    await browser?.close();
    await served?.close();
    await hub?.stop();
    if (endpointBefore === undefined) delete process.env["GUILD_HF_ENDPOINT"];
    else process.env["GUILD_HF_ENDPOINT"] = endpointBefore;
  });

  /** Sends a message and waits for its reply to end; returns the reply's text. */
  const ask = async (text: string) => {
    const before = await page.locator("[data-testid=message-assistant]").count();
    await page.getByLabel("Message").fill(text);
    await page.getByLabel("Message").press("Enter");
    await expect.poll(() => page.locator("[data-testid=message-assistant]").count(), { timeout: 30_000 }).toBe(before + 1);
    await expect.poll(() => lastAssistant().getAttribute("data-status"), { timeout: 60_000 }).toBe("complete");
    return (await lastAssistant().locator(".markdown").textContent()) ?? "";
  };
  /** Regenerates the last reply (a new version) and returns its text. */
  const regenerate = async () => {
    const versions = (await lastAssistant().getByTestId("branch-nav").count()) === 0 ? 1 : Number(/\/(\d+)/.exec((await lastAssistant().getByTestId("branch-nav").textContent()) ?? "")?.[1]);
    await page.getByTestId("regenerate").click();
    await expect.poll(() => lastAssistant().getByTestId("branch-nav").textContent(), { timeout: 30_000 }).toMatch(new RegExp(`${versions + 1}/${versions + 1}`));
    await expect.poll(() => lastAssistant().getAttribute("data-status"), { timeout: 60_000 }).toBe("complete");
    return (await lastAssistant().locator(".markdown").textContent()) ?? "";
  };
  const settingsButton = () => page.locator(".thread-head").getByRole("button", { name: /^Settings/ });
  const openSettings = async () => {
    if ((await page.getByTestId("chat-settings").count()) === 0) await settingsButton().click();
    await page.getByTestId("chat-settings").waitFor();
  };
  const newChat = async () => {
    const before = (await contract().chat.listConversations()).length;
    await page.getByTestId("new-chat").click();
    await expect.poll(async () => (await contract().chat.listConversations()).length).toBe(before + 1);
    await expect.poll(() => page.locator("[data-testid=messages] .message").count()).toBe(0);
    return (await contract().chat.listConversations())[0]!;
  };
  const settingsOf = async (id: string) => (await contract().chat.listConversations()).find((c) => c.id === id)!.settings;
  /** Whether the page asks before it is closed (its beforeunload listener cancels the event). */
  const asksBeforeClosing = () => page.evaluate(() => {
    const e = new Event("beforeunload", { cancelable: true });
    window.dispatchEvent(e);
    return e.defaultPrevented;
  });

  it("chat settings: presets set the sampling values, your own preset is kept, the seed makes a reply repeatable", async () => {
    const chat = await newChat();
    await openSettings();
    // A built-in preset fills the sampling fields; nothing is saved until the form is.
    await page.getByLabel("Preset").selectOption({ label: "Precise" });
    expect(await page.getByLabel("Top-p").inputValue()).toBe("0.9");
    expect(await page.getByLabel("Top-k").inputValue()).toBe("20");
    expect(await page.getByLabel("Min-p").inputValue()).toBe("0.1");
    expect(await page.getByTestId("settings-state").textContent()).toBe("● Unsaved changes");
    expect((await settingsOf(chat.id)).topK).not.toBe(20);
    await page.getByTestId("chat-settings").getByRole("button", { name: "Save" }).click();
    await expect.poll(() => page.getByTestId("settings-state").textContent()).toBe("Saved with this chat");
    expect(await settingsOf(chat.id)).toMatchObject({ temperature: 0.2, topP: 0.9, topK: 20, minP: 0.1, repeatPenalty: 1 });

    // Wide-open sampling (temperature 2, no top-k/top-p/min-p cut) with a seed: a preset of the user's.
    await page.getByLabel("Temperature").fill("2");
    await page.getByLabel("Top-p").fill("1");
    await page.getByLabel("Top-k").fill("0");
    await page.getByLabel("Min-p").fill("0");
    await page.getByLabel("Seed").fill("1234");
    await page.getByLabel("Max tokens").fill("16");
    await page.getByRole("button", { name: "Add preset…" }).click();
    await page.getByLabel("Preset name").fill("Wild, seeded");
    await page.getByRole("button", { name: "Keep" }).click();
    await expect.poll(() => page.getByLabel("Preset").locator("option").allTextContents()).toContain("Wild, seeded (yours)");
    expect((await contract().chat.listPresets()).find((p) => p.name === "Wild, seeded")).toMatchObject({
      builtIn: false, settings: { temperature: 2, topP: 1, topK: 0, minP: 0, seed: 1234, maxTokens: 16 },
    });
    await page.getByTestId("chat-settings").getByRole("button", { name: "Save" }).click();
    await expect.poll(() => page.getByTestId("settings-state").textContent()).toBe("Saved with this chat");
    expect(await settingsOf(chat.id)).toMatchObject({ temperature: 2, topP: 1, topK: 0, minP: 0, seed: 1234, maxTokens: 16 });

    // The seed reaches the model: at temperature 2 the same seed writes the same reply, another seed another one.
    const first = await ask("What does river mean?");
    expect(first.length).toBeGreaterThan(0);
    expect(await regenerate()).toBe(first);
    await openSettings();
    await page.getByLabel("Seed").fill("98765");
    await page.getByTestId("chat-settings").getByRole("button", { name: "Save" }).click();
    await expect.poll(async () => (await settingsOf(chat.id)).seed).toBe(98765);
    expect(await regenerate()).not.toBe(first);

    // The preset survives a reload and sets a new chat's fields.
    await page.reload();
    await page.getByText(demo).first().waitFor();
    await newChat();
    await openSettings();
    await page.getByLabel("Preset").selectOption({ label: "Wild, seeded (yours)" });
    expect(await page.getByLabel("Seed").inputValue()).toBe("1234");
    expect(await page.getByLabel("Top-k").inputValue()).toBe("0");
    expect(await page.getByLabel("Max tokens").inputValue()).toBe("16");
    await page.getByTestId("chat-settings").getByRole("button", { name: "Save" }).click();
    await expect.poll(() => page.getByTestId("settings-state").textContent()).toBe("Saved with this chat");
    expect(pageErrors).toEqual([]);
  });

  it("never drops unsaved chat settings silently: leaving asks, closing the tab asks, leaving the chat saves", async () => {
    const a = await newChat();
    const b = await newChat();
    expect((await contract().chat.listConversations())[0]!.id).toBe(b.id);
    await openSettings();
    // The list is newest first: b, then a (both "New chat" so far).
    const chatA = () => page.getByTestId("conversation-list").locator(".conv-title").nth(1);
    const topKBefore = (await settingsOf(b.id)).topK;
    // A value that cannot be saved: the form says so and keeps it.
    await page.getByLabel("Top-k").fill("1.5");
    await page.getByLabel("Message").focus();  // leaving the form tries to save
    await expect.poll(() => page.getByTestId("settings-state").textContent()).toBe("Not saved");
    expect(await page.getByTestId("settings-problems").textContent()).toBe("Top-k: must be a whole number from 0 to 2147483647.");
    expect(await asksBeforeClosing()).toBe(true);
    // Choosing another chat asks first; "Cancel" stays here with the value.
    const asked: string[] = [];
    page.once("dialog", (d) => { asked.push(d.message()); void d.dismiss(); });
    await chatA().click();
    await expect.poll(() => asked.length).toBe(1);
    expect(asked[0]).toMatch(/^This chat's settings were changed but cannot be saved: Top-k: must be a whole number/);
    expect(await page.getByTestId("conversation-list").locator('[aria-current="true"]').count()).toBe(1);
    expect(new URL(page.url()).hash).toBe(`#/chat/${encodeURIComponent(b.id)}`);
    expect(await page.getByLabel("Top-k").inputValue()).toBe("1.5");
    // Another view keeps it too, and a browser tab still asks before it closes.
    await page.getByTestId("nav-models").click();
    await page.getByRole("heading", { name: "Models", exact: true }).waitFor();
    expect(await asksBeforeClosing()).toBe(true);
    await page.getByTestId("nav-chat").click();
    expect(await settingsButton().textContent()).toBe("Settings ●");
    await openSettings();
    expect(await page.getByLabel("Top-k").inputValue()).toBe("1.5");
    // "OK" drops it, and only then.
    page.once("dialog", (d) => { asked.push(d.message()); void d.accept(); });
    await chatA().click();
    await expect.poll(() => new URL(page.url()).hash).toBe(`#/chat/${encodeURIComponent(a.id)}`);
    expect(asked).toHaveLength(2);
    expect((await settingsOf(b.id)).topK).toBe(topKBefore);
    expect(await asksBeforeClosing()).toBe(false);
    // A good value typed and left by a shortcut (the focus never leaves the field) is saved with its chat.
    await openSettings();
    await page.getByLabel("Min-p").fill("0.07");
    await page.keyboard.press("Control+Comma");
    await page.getByRole("heading", { name: "Preferences" }).waitFor();
    await expect.poll(async () => (await settingsOf(a.id)).minP).toBe(0.07);
    expect(await asksBeforeClosing()).toBe(false);
    await page.getByTestId("nav-chat").click();
    expect(pageErrors).toEqual([]);
  });

  it("renders task lists, nested lists and highlighted code, readable in both themes", async () => {
    await newChat();
    await openSettings();
    await page.getByLabel("Max tokens").fill("8");
    await settingsButton().click();  // closing saves
    await ask("What does happy mean?");
    const markdown = [
      "Tea, step by step:", "",
      "- [x] boil the water", "- [ ] choose a tea", "  1. green", "  2. black", "     - assam", "     - darjeeling", "",
      "```ts", "const cup: string = \"hot\"; // wait 3 minutes", "let count = 42;", "```",
    ].join("\n");
    await lastAssistant().getByRole("button", { name: "Edit reply" }).click();
    await page.getByLabel("Edit message").fill(markdown);
    await page.getByRole("button", { name: "Save version" }).click();
    const md = lastAssistant().locator(".markdown");
    await md.locator("pre").waitFor();
    // Task lists: disabled checkboxes, the first one ticked.
    const boxes = md.locator("li input[type=checkbox]");
    expect(await boxes.count()).toBe(2);
    expect(await boxes.evaluateAll((els) => els.map((e) => [(e as HTMLInputElement).checked, (e as HTMLInputElement).disabled]))).toEqual([[true, true], [false, true]]);
    // Nested lists: an ordered list in a task item, a bullet list in its second item.
    expect(await md.locator("ul > li ol > li").allTextContents()).toEqual(["green", expect.stringMatching(/^black\s*assam\s*darjeeling\s*$/)]);
    expect(await md.locator("ul > li ol > li ul > li").allTextContents()).toEqual(["assam", "darjeeling"]);
    // Highlighted code: keywords, strings, numbers and comments in colours of their own.
    const code = md.locator("pre code");
    expect(await code.locator(".hljs-keyword").allTextContents()).toEqual(expect.arrayContaining(["const", "let"]));
    expect(await code.locator(".hljs-string").allTextContents()).toEqual(["\"hot\""]);
    expect(await code.locator(".hljs-number").allTextContents()).toEqual(["42"]);
    expect(await code.locator(".hljs-comment").allTextContents()).toEqual(["// wait 3 minutes"]);
    const colours = async () => code.evaluate((el) => {
      const colour = (sel: string) => getComputedStyle(sel ? el.querySelector(sel)! : el).color;
      return [colour(""), colour(".hljs-keyword"), colour(".hljs-string"), colour(".hljs-number"), colour(".hljs-comment")];
    });
    expect(await lastAssistant().locator(".code-head").textContent()).toMatch(/^ts/);
    const failures: string[] = [];
    for (const theme of ["light", "dark"] as const) {
      await page.getByLabel("Theme", { exact: true }).selectOption(theme);
      await expect.poll(() => page.evaluate(() => document.documentElement.dataset["theme"])).toBe(theme);
      const c = await colours();
      expect(new Set(c).size, `${theme}: ${c.join(" / ")}`).toBe(5);
      await lastAssistant().scrollIntoViewIfNeeded();
      for (const f of await page.evaluate(lowContrastText)) failures.push(`${theme}: "${f.text}" ${f.color} on ${f.background} = ${f.ratio}`);
      await shot(`markdown-${theme}`);
    }
    await page.getByLabel("Theme", { exact: true }).selectOption("system");
    expect(failures).toEqual([]);
    expect(pageErrors).toEqual([]);
  });

  it("uses the models folder the user chooses: its files are listed, a Hub download goes there, loads and answers", async () => {
    const mine = path.join(served.dataDir, "my-models");
    const defaultDir = path.join(served.dataDir, "models");
    mkdirSync(mine, { recursive: true });
    copyFileSync(path.join(fixtures, local), path.join(mine, local));
    await page.getByTestId("nav-settings").click();
    const folder = page.getByLabel("Models folder");
    await expect.poll(() => folder.inputValue()).toBe(defaultDir);
    await folder.fill(mine);
    await page.locator("form", { has: folder }).getByRole("button", { name: "Save" }).click();
    await expect.poll(() => page.getByTestId("preferences-saved").textContent()).toBe("The models folder is saved.");
    expect((await contract().settings.get()).modelsDir).toBe(mine);
    // The Models page lists what the folder holds.
    await page.getByTestId("nav-models").click();
    const row = (name: string) => page.locator("tr", { hasText: name }).filter({ has: page.getByRole("button", { name: "Inspect" }) });
    await expect.poll(() => row(local).textContent()).toMatch(/models folder.*qwen3moe · Q4_K_M/);
    // A download from the Hub lands in it, verified, and loads from the download's own Load now.
    await page.getByLabel("Search the Hugging Face Hub").fill("qwen3moe");
    await page.getByRole("button", { name: "Search", exact: true }).click();
    await page.getByRole("button", { name: `Show the models of ${repo}` }).click();
    await page.getByRole("button", { name: `Download ${single}` }).click();
    const item = page.getByTestId("download").filter({ hasText: single });
    await expect.poll(() => item.getAttribute("data-state"), { timeout: 60_000 }).toBe("done");
    expect(existsSync(path.join(mine, single))).toBe(true);
    expect(existsSync(path.join(defaultDir, single))).toBe(false);
    await expect.poll(() => row(single).textContent()).toMatch(/models folder.*qwen3moe · Q8_0/);
    await item.getByRole("button", { name: `Load ${single} now` }).click();
    await expect.poll(async () => (await contract().models.current())?.path, { timeout: 60_000 }).toBe(path.join(mine, single));
    await page.getByTestId("nav-chat").click();
    await newChat();
    // (a small random test model rarely ends a reply by itself: a short one)
    await openSettings();
    await page.getByLabel("Max tokens").fill("16");
    await settingsButton().click();
    await page.getByLabel("Message").fill("Hello!");
    await page.getByLabel("Message").press("Enter");
    await expect.poll(() => lastAssistant().getAttribute("data-status"), { timeout: 60_000 }).toMatch(/^(complete|error)$/);
    expect(await lastAssistant().getAttribute("data-status")).toBe("complete");
    expect(await lastAssistant().getByTestId("message-model").textContent()).toBe(single);
    // Back to the default folder: its files go from the list (the loaded model stays loaded).
    await page.getByTestId("nav-settings").click();
    await page.getByRole("button", { name: "Use the default" }).click();
    await expect.poll(async () => (await contract().settings.get()).modelsDir).toBe(defaultDir);
    await page.getByTestId("nav-models").click();
    await page.getByRole("heading", { name: "Models", exact: true }).waitFor();
    await expect.poll(() => row(local).count()).toBe(0);
    expect((await contract().models.current())?.name).toBe(single);
    expect(pageErrors).toEqual([]);
  });

  it("says what goes where on a GPU as the settings change, warns before Load when RAM is short, keeps the current model when the load is refused", async () => {
    const small = path.join(fixtures, single);
    if ((await contract().models.current())?.path !== small) await contract().models.load({ path: small, settings: { threads: 2 } });
    await expect.poll(async () => (await contract().models.current())?.path, { timeout: 60_000 }).toBe(small);
    machine.gpus = [{ device: "cuda:0", name: "Test GPU", totalBytes: 24 * GiB, freeBytes: 8 * GiB }];
    try {
      await page.getByTestId("nav-models").click();
      await page.getByLabel("GGUF path").fill(small);
      await page.getByLabel("GGUF path").locator("..").getByRole("button", { name: "Inspect" }).click();
      const summary = page.getByTestId("plan-summary");
      const plan = page.getByTestId("memory-plan");
      const goesTo = (part: string) => plan.locator("tr", { hasText: part }).locator("td").nth(2).textContent();
      await expect.poll(() => summary.textContent()).toBe("Everything on cuda:0 (Test GPU).");
      expect(await goesTo("Dense weights")).toBe("GPU (cuda:0)");
      expect(await goesTo("Experts")).toBe("GPU (cuda:0)");
      // A budget that holds the dense part, the KV cache, the workspace and half of the experts.
      const inspected = await contract().models.inspect({ path: small });
      const shape = inspected.shape;
      const half = (shape.denseBytes + inspected.plan.kvCacheBytes + 0.5 * GiB + shape.expertBytes / 2) / GiB;
      await page.getByLabel("GPU memory budget (GiB)", { exact: true }).fill(half.toFixed(6));
      await expect.poll(() => summary.textContent())
        .toBe("Dense weights, KV cache and 50 % of the expert bytes on cuda:0 (Test GPU); the other experts in RAM, computed by the CPU.");
      expect(await goesTo("Experts, cached (50 %)")).toBe("GPU (cuda:0)");
      expect(await goesTo("Experts, the rest (50 %, computed by the CPU)")).toBe("RAM");
      // All experts on the CPU: only the dense part and the KV cache stay on the GPU.
      await page.getByLabel("Compute all experts on the CPU").check();
      await expect.poll(() => summary.textContent()).toBe("Dense weights and KV cache on cuda:0 (Test GPU); every expert in RAM, computed by the CPU.");
      expect(await goesTo("Experts (computed by the CPU)")).toBe("RAM");
      await page.getByLabel("Compute all experts on the CPU").uncheck();
      // A budget too small for the dense part: Auto falls back to the CPU, and the page says so.
      await page.getByLabel("GPU memory budget (GiB)", { exact: true }).fill("0.1");
      await expect.poll(() => page.getByTestId("plan-warnings").textContent()).toMatch(/^The GPU budget \(102 MiB\) is smaller than the dense weights, KV cache and workspace \(.+\): under Auto the load falls back to the CPU\./);
      expect(await summary.textContent()).toBe("Everything in RAM, computed by the CPU.");
      await page.getByLabel("GPU memory budget (GiB)", { exact: true }).fill("");
      await page.getByLabel("Device", { exact: true }).selectOption("cpu");
      await expect.poll(() => summary.textContent()).toBe("Everything in RAM, computed by the CPU (device CPU).");
      await shot("memory-plan-gpu");

      // Short of RAM: Inspect warns, Load anyway replaces Load, and a plain Load is refused with the current model kept.
      machine.ram = 2 ** 20;
      const demoRow = page.locator("tr", { hasText: demo }).filter({ has: page.getByRole("button", { name: "Inspect" }) });
      await demoRow.getByRole("button", { name: "Inspect" }).click();
      await expect.poll(() => page.getByTestId("model-summary").locator("h3").textContent()).toMatch(/^guild-demo/);
      await expect.poll(() => page.getByTestId("plan-warnings").textContent()).toMatch(/^It needs about [\d.]+ MiB of RAM; 1\.0 MiB is available now\.$/);
      expect(await page.getByRole("button", { name: "Load this model" }).count()).toBe(0);
      const anyway = page.getByTestId("model-summary").getByRole("button", { name: "Load anyway" });
      expect(await anyway.count()).toBe(1);
      await demoRow.getByRole("button", { name: "Load" }).click();
      await expect.poll(() => page.locator(".banner.error").first().textContent(), { timeout: 30_000 })
        .toMatch(new RegExp(`cannot load .*${demo.replace(/\./g, "\\.")}: it needs about .+ of RAM with these settings and .+ is available \\(about .+ with ${single.replace(/\./g, "\\.")} unloaded\\); .*Load anyway; ${single.replace(/\./g, "\\.")} stays loaded`));
      expect((await contract().models.current())?.path).toBe(small);
      expect(await page.getByTestId("current-model").textContent()).toContain("qwen3moe-a");
      await shot("memory-plan-short-of-ram");
      await anyway.click();
      await expect.poll(async () => (await contract().models.current())?.name, { timeout: 60_000 }).toBe(demo);
      expect(served.web.services.host.listModels()).toHaveLength(1);
    } finally {
      machine.ram = null;
      machine.gpus = [];
    }
    // The demo model is back: loaded with the defaults again for whatever runs next.
    if ((await contract().models.current())?.path !== embeddedModelPath()) await contract().models.load({ path: embeddedModelPath(), settings: { threads: 2 } });
    expect(pageErrors).toEqual([]);
  });
});
