// Getting and running models, the Server panel, and the window's keyboard and
// accessibility, in Chromium against web mode (e2e/harness.ts) with a local
// stand-in for the Hugging Face Hub (app/test/hub-stand-in.ts; GUILD_HF_ENDPOINT
// points the app at it): a load the runtime cannot do keeps the current model;
// a download completes, resumes after the connection drops, refuses a
// corrupted file, is cancelled and resumed, then the model is listed with its
// facts, loads and chats; the Server panel's API server answers the curl it
// shows; Ctrl+N / Ctrl+K / Ctrl+, and focus; the URL follows the view; the
// window works at 800×600; the theme toggle; and WCAG contrast of the rendered
// text in both themes.
import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";

import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { HubStandIn } from "../app/test/hub-stand-in.js";
import { fixturesDir } from "../app/test/fixtures.js";
import { lowContrastText } from "./contrast-check.js";
import { artifactsDir, buildRenderer, chromiumPath, openAppInChromium, serveWebMode, type Served } from "./harness.js";

const browserPath = chromiumPath();
if ("reason" in browserPath) console.warn(`models e2e skipped: ${browserPath.reason}`);

const fixtures = path.join(fixturesDir, "models");
const repo = "guild-test/qwen3moe-a-GGUF";
const single = "qwen3moe-a-Q8_0.gguf";
const shards = [1, 2, 3].map((i) => `qwen3moe-a-Q8_0-split-0000${i}-of-00003.gguf`);
const unsupported = path.join(fixtures, "deepseek2-a-Q4_K_M.gguf");

describe.skipIf("reason" in browserPath)("models, server and accessibility in Chromium", () => {
  let hub: HubStandIn;
  let served: Served;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];
  const endpointBefore = process.env["GUILD_HF_ENDPOINT"];

  beforeAll(async () => {
    hub = new HubStandIn({
      bytesPerSecond: 1.5 * 2 ** 20,
      repos: [
        { id: repo, downloads: 4321, likes: 12, files: [
          { path: single, source: path.join(fixtures, single) },
          ...shards.map((s) => ({ path: `split/${s}`, source: path.join(fixtures, s) })),
        ] },
        { id: "guild-test/deepseek2-a-GGUF", downloads: 10, files: [{ path: "deepseek2-a-Q4_K_M.gguf", source: unsupported }] },
      ],
    });
    await hub.start();
    process.env["GUILD_HF_ENDPOINT"] = hub.url;
    served = await serveWebMode({ rendererDir: await buildRenderer() });
    ({ browser, page } = await openAppInChromium(served, (browserPath as { path: string }).path, pageErrors, { clipboard: true }));
  });
  afterAll(async () => {
    await browser?.close();
    await served?.close();
    await hub?.stop();
    if (endpointBefore === undefined) delete process.env["GUILD_HF_ENDPOINT"];
    else process.env["GUILD_HF_ENDPOINT"] = endpointBefore;
  });

  const shot = (name: string) => page.screenshot({ path: path.join(artifactsDir, `${name}.png`), fullPage: true });
  const currentId = async () => (await served.web.services.contract.models.current())?.id;

  it("refuses a model of an architecture this runtime cannot run, before the current model is touched", async () => {
    await page.getByTestId("nav-models").click();
    const before = await currentId();
    await page.getByLabel("GGUF path").fill(unsupported);
    await page.getByLabel("GGUF path").locator("..").getByRole("button", { name: "Inspect" }).click();
    await expect.poll(() => page.getByTestId("model-problems").textContent())
      .toMatch(/^This runtime cannot load it: unknown architecture 'deepseek2' \(supported: [a-z0-9, -]+\)\. Loading it would keep guild-demo-qwen3moe-Q8_0\.gguf\.$/);
    await page.getByRole("button", { name: "Load GGUF" }).click();
    await expect.poll(() => page.locator(".banner.error").first().textContent())
      .toMatch(/cannot load .*deepseek2-a-Q4_K_M\.gguf: unknown architecture 'deepseek2' .*; guild-demo-qwen3moe-Q8_0\.gguf stays loaded/);
    expect(await currentId()).toBe(before);
    expect(await page.getByTestId("current-model").textContent()).toContain("guild-demo-qwen3moe");
    // The inspected plan follows the load settings as they are typed: a longer context, f32 KV.
    const demo = page.locator("tr", { hasText: "guild-demo-qwen3moe-Q8_0.gguf" });
    await demo.getByRole("button", { name: "Inspect" }).click();
    const kvRow = page.getByTestId("memory-plan").locator("tr", { hasText: "KV cache" });
    await expect.poll(() => kvRow.textContent()).toMatch(/^KV cache \(512 tokens, f16\)/);
    const small = (await kvRow.locator("td").nth(1).textContent())!;
    await page.getByLabel("Context size").fill("2048");
    await page.getByLabel("KV cache precision").selectOption("f32");
    await expect.poll(() => kvRow.textContent()).toMatch(/^KV cache \(2,048 tokens, f32\)/);
    expect(await kvRow.locator("td").nth(1).textContent()).not.toBe(small);
    expect(await page.getByTestId("plan-summary").textContent()).toMatch(/^Everything in RAM, computed by the CPU/);
    // A field's error is attached to the field.
    await page.getByLabel("Context size").fill("lots");
    const field = page.getByLabel("Context size");
    await expect.poll(() => field.getAttribute("aria-invalid")).toBe("true");
    const describedBy = (await field.getAttribute("aria-describedby"))!;
    expect(await page.locator(`[id="${describedBy}"]`).textContent()).toBe("Context must be a whole number of tokens (0 = the model's default).");
    await page.getByLabel("Context size").fill("");
    await page.getByLabel("KV cache precision").selectOption("");
  });

  it("downloads from the Hub: refuses a corrupted file, resumes after a dropped connection, then lists, loads and chats with the model", async () => {
    await page.getByLabel("Search the Hugging Face Hub").fill("qwen3moe");
    await page.getByRole("button", { name: "Search", exact: true }).click();
    await page.getByRole("button", { name: `Show the models of ${repo}` }).click();
    const files = page.getByTestId("hub-files");
    await files.locator("tr", { hasText: "qwen3moe-a-Q8_0-split-00001-of-00003.gguf" }).getByText("3 shards").waitFor();
    // A corrupted file is refused: its sha256 is not the Hub's, and nothing reaches the models folder.
    hub.corrupt(repo, single);
    await page.getByRole("button", { name: `Download ${single}` }).click();
    const item = page.getByTestId("download").filter({ hasText: single });
    await expect.poll(() => item.getAttribute("data-state"), { timeout: 30_000 }).toBe("failed");
    expect(await item.getByTestId("download-message").textContent()).toMatch(new RegExp(`^${single.replace(/\./g, "\\.")} is damaged: its sha256 is [0-9a-f]{64}, the Hub lists ${hub.sha256(repo, single)}; the download was deleted`));
    hub.corrupt(repo, single, false);
    // Again, with the connection dropped a third of the way: it resumes by itself from where it stopped.
    hub.cutNext(repo, single, 1_000_000);
    await item.getByRole("button", { name: `Resume the download of ${single}` }).click();
    await expect.poll(() => item.getByTestId("download-progress").textContent(), { timeout: 30_000 }).toMatch(/MiB of [\d.]+ MiB · [\d.]+ (KiB|MiB)\/s · \d+ s left/);
    await expect.poll(() => item.getAttribute("data-state"), { timeout: 60_000 }).toBe("done");
    expect(await item.getByTestId("download-message").textContent()).toBe("Verified against the Hub's sha256; the connection dropped once and the download resumed where it stopped.");
    const ranges = hub.rangesOf(repo, single);
    expect(ranges.at(-2)).toBeNull();
    expect(ranges.at(-1)).toMatch(/^bytes=[1-9]\d*-$/);
    await shot("models-download");
    // A split model, cancelled midway and resumed: only the rest is asked for.
    await page.getByRole("button", { name: `Download ${shards[0]}` }).click();
    const split = page.getByTestId("download").filter({ hasText: shards[0]! });
    await expect.poll(() => split.getByTestId("download-progress").textContent(), { timeout: 30_000 }).toMatch(/^[1-9][\d.]* (KiB|MiB) of/);
    await split.getByRole("button", { name: `Cancel the download of ${shards[0]}` }).click();
    await expect.poll(() => split.getAttribute("data-state")).toBe("cancelled");
    await split.getByRole("button", { name: `Resume the download of ${shards[0]}` }).click();
    await expect.poll(() => split.getAttribute("data-state"), { timeout: 60_000 }).toBe("done");
    expect(hub.rangesOf(repo, `split/${shards[0]}`).at(-1)).toMatch(/^bytes=[1-9]\d*-$/);
    // Both are in the library, with what they hold; the split one once, with its shards.
    const row = page.locator("tr", { hasText: single }).filter({ has: page.getByRole("button", { name: "Inspect" }) });
    await expect.poll(() => row.textContent()).toMatch(/models folder.*qwen3moe · Q8_0/);
    await expect.poll(() => page.locator("tr", { hasText: shards[0]! }).filter({ hasText: "3 of 3 shards" }).count()).toBe(1);
    expect(await page.locator("tr", { hasText: shards[1]! }).count()).toBe(0);
    expect(await files.locator("tr", { hasText: single }).getByText("in the library").count()).toBe(1);
    // A browser tab has no file dialog: Browse… lists the models folder (and the home folder), and a pick is inspected.
    const modelsDir = path.join(served.dataDir, "models");
    await page.getByTestId("open-file").click();
    const picker = page.getByTestId("folder-browser");
    await expect.poll(() => picker.getByTestId("browser-dir").textContent()).toBe(modelsDir);
    await picker.getByRole("button", { name: `Pick ${single}` }).click();
    await expect.poll(() => page.getByLabel("GGUF path").inputValue()).toBe(path.join(modelsDir, single));
    await expect.poll(() => page.getByTestId("model-summary").locator("h3").textContent()).toBe("qwen3moe-a");
    // Its type mix: Q8_0 experts and matrices (8.50 bits per weight), F32 norms.
    expect(await page.getByTestId("bits-per-weight").textContent()).toMatch(/^\d+\.\d\d \(experts 8\.50, the rest \d+\.\d\d\)$/);
    const mix = page.getByTestId("type-mix");
    expect(await mix.locator("tbody tr").first().locator("td").first().textContent()).toBe("Q8_0");
    expect(await mix.locator("tbody tr", { hasText: "Q8_0" }).locator("td").last().textContent()).toBe("8.50");
    expect(await mix.getByRole("img").getAttribute("aria-label")).toMatch(/^tensor bytes by type: Q8_0 \d+\.\d%, F32 \d+\.\d+%$/);
    await expect(served.web.services.contract.models.browse({ dir: "/etc" })).rejects.toThrow(/outside the models folder and your home folder/);
    // It loads (next to the demo model, which goes once the new one is ready), and answers in the chat.
    await row.getByRole("button", { name: "Load" }).click();
    await expect.poll(async () => (await served.web.services.contract.models.current())?.name, { timeout: 60_000 }).toBe(single);
    expect(served.web.services.host.listModels()).toHaveLength(1);
    await page.getByTestId("nav-chat").click();
    await page.getByTestId("new-chat").click();
    await page.getByLabel("Message").fill("Hello!");
    await page.getByLabel("Message").press("Enter");
    const reply = page.locator("[data-testid=message-assistant]").last();
    await expect.poll(async () => ((await reply.locator(".markdown").textContent()) ?? "").length, { timeout: 30_000 }).toBeGreaterThan(0);
    await page.keyboard.press("Escape");
    await expect.poll(() => reply.getAttribute("data-status"), { timeout: 30_000 }).toMatch(/stopped|complete/);
    // The reply was announced to screen readers.
    await expect.poll(() => page.getByTestId("live-region").textContent()).toMatch(/^Reply( stopped)?: .*\S/s);
  });

  it("starts an API server from the Server panel, and the curl it shows works", async () => {
    await page.getByTestId("nav-server").click();
    expect(await page.getByTestId("page-server").textContent()).toContain(`${served.web.serverUrl}/v1`);
    await page.getByLabel("Port").fill("0");  // any free port
    await page.getByLabel("API key", { exact: true }).fill("sk-e2e-key");
    await page.getByTestId("server-start").click();
    await expect.poll(() => page.getByTestId("server-status").textContent()).toMatch(/^Running at http:\/\/127\.0\.0\.1:\d+\/v1, with an API key\./);
    const curl = (await page.getByTestId("curl-example").textContent())!;
    expect(curl).toContain("authorization: Bearer sk-e2e-key");
    expect(curl).toContain(`"model":"${single.replace(/\.gguf$/, "")}"`);
    const { stdout } = await promisify(execFile)("bash", ["-c", curl.replace('"max_tokens":64', '"max_tokens":4')], { timeout: 60_000 });
    const answer = JSON.parse(stdout) as { object: string; choices: { message: { role: string } }[] };
    expect(answer.object).toBe("chat.completion");
    expect(answer.choices[0]!.message.role).toBe("assistant");
    // The request is in the log; Copy puts the example on the clipboard.
    await expect.poll(() => page.getByTestId("request-log").textContent()).toMatch(/API-onlyPOST \/v1\/chat\/completions200/);
    await page.getByRole("button", { name: "Copy the curl example" }).last().click();
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText())).toBe(curl);
    await shot("server-panel");
    await page.getByTestId("server-stop").click();
    await expect.poll(() => page.getByTestId("server-status").textContent()).toBe("Stopped.");
  });

  it("has keyboard shortcuts that move the focus to where the work is", async () => {
    await page.getByTestId("nav-models").click();
    const before = (await served.web.services.contract.chat.listConversations()).length;
    await page.keyboard.press("Control+n");
    await expect.poll(async () => (await served.web.services.contract.chat.listConversations()).length).toBe(before + 1);
    await expect.poll(() => page.evaluate(() => document.activeElement?.getAttribute("aria-label"))).toBe("Message");
    // The selected conversation is marked for assistive technology.
    expect(await page.getByTestId("conversation-list").locator('[aria-current="true"]').count()).toBe(1);
    await page.keyboard.press("Control+k");
    await expect.poll(() => page.evaluate(() => document.activeElement?.getAttribute("aria-label"))).toBe("Search conversations");
    await page.keyboard.press("Control+Comma");
    await page.getByRole("heading", { name: "Preferences" }).waitFor();
    await expect.poll(() => page.evaluate(() => document.activeElement?.textContent)).toBe("Preferences");
    await page.keyboard.press("Alt+n");
    await expect.poll(async () => (await served.web.services.contract.chat.listConversations()).length).toBe(before + 2);
    await expect.poll(() => page.evaluate(() => document.activeElement?.getAttribute("aria-label"))).toBe("Message");
  });

  it("keeps the view in the URL: Back, reload and a conversation's link", async () => {
    await page.getByTestId("nav-models").click();
    expect(new URL(page.url()).hash).toBe("#/models");
    await page.getByTestId("nav-server").click();
    expect(new URL(page.url()).hash).toBe("#/server");
    await page.goBack();
    await page.getByRole("heading", { name: "Models", exact: true }).waitFor();
    await page.reload();
    await page.getByRole("heading", { name: "Models", exact: true }).waitFor();
    const [conversation] = await served.web.services.contract.chat.listConversations();
    await page.goto(`${served.web.serverUrl}/app/#/chat/${encodeURIComponent(conversation!.id)}`);
    await expect.poll(() => page.getByTestId("conversation-list").locator('[aria-current="true"]').getAttribute("title")).toBe(conversation!.title);
    expect(page.url()).toBe(`${served.web.serverUrl}/app/#/chat/${encodeURIComponent(conversation!.id)}`);
  });

  it("works at 800×600: nothing overflows sideways, the message box is in view, the sidebars collapse", async () => {
    await page.setViewportSize({ width: 800, height: 600 });
    try {
      for (const view of ["chat", "models", "server", "packages", "profile", "settings", "help"]) {
        await page.getByTestId(`nav-${view}`).click();
        await page.locator("main h2, main .thread").first().waitFor();
        const overflow = await page.evaluate(() => [document.documentElement.scrollWidth, document.querySelector("main")!.scrollWidth, document.querySelector("main")!.clientWidth]);
        if (overflow[1]! > overflow[2]! + 1) await shot(`overflow-${view}`);
        expect(overflow[0], `${view}: the page is wider than the window`).toBeLessThanOrEqual(800);
        expect(overflow[1], `${view}: the view is wider than its column`).toBeLessThanOrEqual(overflow[2]! + 1);
      }
      await page.getByTestId("nav-chat").click();
      const box = (await page.getByLabel("Message").boundingBox())!;
      expect(box.y + box.height).toBeLessThanOrEqual(600);
      expect(box.x + box.width).toBeLessThanOrEqual(800);
      expect(box.width).toBeGreaterThan(250);
      const send = (await page.getByTestId("send").boundingBox())!;
      expect(send.x + send.width).toBeLessThanOrEqual(800);
      // The rail narrows to icons and back; the conversation list hides and comes back.
      const wide = (await page.locator(".rail").boundingBox())!.width;
      await page.getByTestId("rail-toggle").click();
      const narrow = (await page.locator(".rail").boundingBox())!.width;
      expect(narrow).toBeLessThan(70);
      expect(await page.getByTestId("nav-models").getAttribute("aria-current")).toBeNull();
      expect(await page.getByRole("button", { name: "Models" }).count()).toBe(1);  // still named for assistive technology
      await page.getByTestId("toggle-conversations").click();
      expect(await page.locator(".conversations").isVisible()).toBe(false);
      expect((await page.getByLabel("Message").boundingBox())!.width).toBeGreaterThan(box.width + 150);
      await shot("small-window");
      await page.getByTestId("toggle-conversations").click();
      await page.getByTestId("rail-toggle").click();
      expect((await page.locator(".rail").boundingBox())!.width).toBe(wide);
    } finally {
      await page.setViewportSize({ width: 1280, height: 800 });
    }
  });

  it("switches the theme (system, light, dark) and keeps the choice", async () => {
    await page.emulateMedia({ colorScheme: "light" });
    const bodyBg = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    expect(await bodyBg()).toBe("rgb(247, 247, 248)");
    await page.getByLabel("Theme", { exact: true }).selectOption("dark");
    await expect.poll(bodyBg).toBe("rgb(22, 23, 27)");
    expect(await page.evaluate(() => document.documentElement.dataset["theme"])).toBe("dark");
    expect((await served.web.services.contract.settings.get()).theme).toBe("dark");
    await page.reload();
    await page.getByText("Guild").first().waitFor();
    expect(await bodyBg()).toBe("rgb(22, 23, 27)");
    // Light wins over a dark system; "system" follows it again.
    await page.emulateMedia({ colorScheme: "dark" });
    await page.getByLabel("Theme", { exact: true }).selectOption("light");
    await expect.poll(bodyBg).toBe("rgb(247, 247, 248)");
    await page.getByLabel("Theme", { exact: true }).selectOption("system");
    await expect.poll(bodyBg).toBe("rgb(22, 23, 27)");
    await page.emulateMedia({ colorScheme: "light" });
    await expect.poll(bodyBg).toBe("rgb(247, 247, 248)");
  });

  it("remembers the load settings per model, and never replaces settings the user typed", async () => {
    await page.getByTestId("nav-models").click();
    const row = page.locator("tr", { hasText: single }).filter({ has: page.getByRole("button", { name: "Inspect" }) });
    const context = page.getByLabel("Context size");
    await context.fill("1024");
    await row.getByRole("button", { name: "Load" }).click();
    await expect.poll(async () => (await served.web.services.contract.models.current())?.contextSize, { timeout: 60_000 }).toBe(1024);
    // A new visit: the form starts empty; inspecting the model brings what it last loaded with.
    await page.reload();
    await page.getByTestId("nav-models").click();
    expect(await context.inputValue()).toBe("");
    await row.getByRole("button", { name: "Inspect" }).click();
    await expect.poll(() => context.inputValue()).toBe("1024");
    expect(await page.getByTestId("remembered-settings").textContent()).toMatch(/^The settings qwen3moe-a was last loaded with \(.+\)\. Use the defaults$/);
    // Typed settings are the user's: inspecting again keeps them, and the remembered ones are offered instead.
    await page.getByLabel("Threads").fill("1");
    await expect.poll(() => page.getByTestId("remembered-settings").count()).toBe(0);
    await row.getByRole("button", { name: "Inspect" }).click();
    await page.getByTestId("model-summary").waitFor();
    await page.waitForTimeout(200);
    expect(await page.getByLabel("Threads").inputValue()).toBe("1");
    const offer = page.getByTestId("remembered-settings-offer");
    expect(await offer.textContent()).toMatch(/^qwen3moe-a was last loaded with other settings; yours are kept\./);
    await offer.getByRole("button", { name: "Use those instead" }).click();
    expect(await page.getByLabel("Threads").inputValue()).toBe("");
    expect(await context.inputValue()).toBe("1024");
    // A row's Load with an untouched form uses that model's remembered settings (the service saw the same).
    await page.reload();
    await page.getByTestId("nav-models").click();
    await served.web.services.contract.models.unload();
    await expect.poll(() => page.getByTestId("unload").count()).toBe(0);
    await row.getByRole("button", { name: "Load" }).click();
    await expect.poll(async () => (await served.web.services.contract.models.current())?.contextSize, { timeout: 60_000 }).toBe(1024);
    expect(pageErrors).toEqual([]);
  });

  it("gives all visible text at least 4.5:1 contrast in both themes", async () => {
    // The check finds low contrast where there is some (so an empty list below means something).
    await page.getByTestId("nav-help").click();
    // (through CSSOM: the page's CSP refuses inline style sheets)
    const faint = (color: string) => page.evaluate((c) => { document.querySelectorAll<HTMLElement>(".help h3").forEach((h) => { h.style.color = c; }); }, color);
    await faint("#c8c8c8");
    expect((await page.evaluate(lowContrastText)).map((f) => f.text)).toContain("Getting started");
    await faint("");
    expect(await page.evaluate(lowContrastText)).toEqual([]);
    const failures: string[] = [];
    for (const theme of ["light", "dark"] as const) {
      await page.getByLabel("Theme", { exact: true }).selectOption(theme);
      for (const view of ["chat", "models", "server", "packages", "profile", "settings", "help"]) {
        await page.getByTestId(`nav-${view}`).click();
        await page.locator("main h2, main .thread").first().waitFor();
        if (view === "models") {
          await page.locator("tr", { hasText: single }).filter({ has: page.getByRole("button", { name: "Inspect" }) }).getByRole("button", { name: "Inspect" }).click();
          await page.getByTestId("model-summary").waitFor();
        }
        await page.waitForTimeout(100);
        for (const f of await page.evaluate(lowContrastText)) failures.push(`${theme} ${view}: "${f.text}" ${f.color} on ${f.background} = ${f.ratio}`);
      }
      await shot(`contrast-${theme}`);
    }
    await page.getByLabel("Theme", { exact: true }).selectOption("system");
    expect(failures).toEqual([]);
    expect(pageErrors).toEqual([]);
  });
});
