// The renderer in Debian's Chromium (headless), in web mode, against the real
// services, runtime and embedded model.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { LOAD_STAGES } from "../app/shared/runtime-contract.js";
import { artifactsDir, buildRenderer, chromiumPath, openAppInChromium, serveWebMode, type Served } from "./harness.js";
import { hybridProfile, hybridShape } from "./hybrid-profile.js";

const browserPath = chromiumPath();
if ("reason" in browserPath) console.warn(`web e2e skipped: ${browserPath.reason}`);

describe.skipIf("reason" in browserPath)("web mode in Chromium", () => {
  let served: Served;
  let browser: Browser;
  let page: Page;
  const pageErrors: string[] = [];

  beforeAll(async () => {
    served = await serveWebMode({ rendererDir: await buildRenderer() });
    ({ browser, page } = await openAppInChromium(served, (browserPath as { path: string }).path, pageErrors));
  });
  afterAll(async () => {
    await browser?.close();
    await served?.close();
  });

  it("opens through the printed link: its token becomes a session cookie and leaves the address bar", async () => {
    const { serverUrl, token } = served.web;
    expect(served.web.url).toBe(`${serverUrl}/app/?token=${token}`);
    expect(page.url()).toBe(`${serverUrl}/app/`);
    const cookies = await page.context().cookies();
    expect(cookies).toHaveLength(1);
    expect(cookies[0]).toMatchObject({
      name: `guild_session_${new URL(serverUrl).port}`, value: token, path: "/app", httpOnly: true, sameSite: "Strict", expires: -1,
    });
    // Scripts in the page cannot read it.
    expect(await page.evaluate(() => document.cookie)).toBe("");
  });

  const shot = (name: string) => page.screenshot({ path: path.join(artifactsDir, `${name}.png`) });
  const lastAssistant = () => page.locator("[data-testid=message-assistant]").last();

  it("streams a reply that grows token by token, with stats", async () => {
    // Record every change of the reply's text in the page itself, so no
    // polling interval can miss the growth.
    await page.evaluate(() => {
      const w = window as unknown as { __growth: string[] };
      w.__growth = [];
      new MutationObserver(() => {
        const all = document.querySelectorAll("[data-testid=message-assistant]");
        const last = all[all.length - 1];
        if (last?.getAttribute("data-status") === "streaming") {
          const text = last.querySelector(".markdown")?.textContent ?? "";
          if (text && w.__growth.at(-1) !== text) w.__growth.push(text);
        }
      }).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
    });
    // The server paces replies (harness.ts, e2ePacing), so every token
    // reaches the page on its own; asking again only guards against a reply
    // of fewer than three tokens, which the sampler can draw at this temperature.
    let growth: string[] = [];
    for (const question of ["Hello! Who are you?", "What does river mean?", "What does abandon mean? Give examples."]) {
      await page.evaluate(() => { (window as unknown as { __growth: string[] }).__growth = []; });
      const before = await page.locator("[data-testid=message-assistant]").count();
      await page.getByLabel("Message").fill(question);
      await page.getByLabel("Message").press("Enter");
      await expect.poll(() => page.locator("[data-testid=message-assistant]").count(), { timeout: 30_000 }).toBe(before + 1);
      await expect.poll(() => lastAssistant().getAttribute("data-status"), { timeout: 60_000 }).toBe("complete");
      growth = await page.evaluate(() => (window as unknown as { __growth: string[] }).__growth);
      if (growth.length >= 3) break;
    }
    expect(growth.length).toBeGreaterThanOrEqual(3);
    for (let i = 1; i < growth.length; i++) expect(growth[i]!.startsWith(growth[i - 1]!)).toBe(true);
    const final = (await lastAssistant().locator(".markdown").textContent()) ?? "";
    expect(final.length).toBeGreaterThan(growth[0]!.length);
    await expect.poll(() => lastAssistant().locator("[data-testid=message-stats]").textContent()).toMatch(/\d+ tokens · [\d.]+ tok\/s · TTFT \d+ ms/);
    await shot("chat");
  });

  it("shows the queue position while waiting, and Esc stops the reply", async () => {
    // Keep the model busy with a few long generations, so the reply waits in the queue.
    const host = served.web.services.host;
    const modelId = (await served.web.services.contract.models.current())!.id;
    await page.getByTestId("new-chat").click();
    await page.getByLabel("Message").fill("What does river mean?");
    const busyIds = ["e2e-busy-1", "e2e-busy-2", "e2e-busy-3"];
    const busy = busyIds.map((id) =>
      host.generate({ modelId, input: { kind: "text", text: "the river ".repeat(100) }, sampling: { temperature: 0, maxTokens: 300 } }, id));
    await page.getByLabel("Message").press("Enter");
    await page.getByTestId("queue-position").waitFor({ timeout: 30_000 });
    expect(await page.getByTestId("queue-position").textContent()).toMatch(/Waiting: [1-9]\d* ahead in the queue/);
    await shot("chat-queued");
    await page.keyboard.press("Escape");
    await expect.poll(() => lastAssistant().getAttribute("data-status"), { timeout: 30_000 }).toBe("stopped");
    for (const id of busyIds) host.cancel(id);
    await Promise.all(busy);
  });

  it("stops a reply midway, keeping the text so far", async () => {
    // The e2e server paces replies (harness.ts, e2ePacing: one token, then a
    // pause), so a reply is still running when its first token arrives: the
    // page presses Stop on that token (its own EventSource, ahead of React's
    // next render), well inside the pause. Temperature 0: the full reply to
    // this question is known to be longer than what is kept.
    await page.getByTestId("new-chat").click();
    await page.getByRole("button", { name: "Settings" }).click();
    await page.locator(".settings input[type=range]").fill("0");
    await page.locator(".settings").getByRole("button", { name: "Save" }).click();
    await page.getByRole("button", { name: "Settings" }).click();
    await expect.poll(async () => (await served.web.services.contract.chat.listConversations())[0]?.settings.temperature).toBe(0);
    const conversationId = (await served.web.services.contract.chat.listConversations())[0]!.id;
    await page.evaluate(() => {
      const es = new EventSource("events");
      es.addEventListener("chat.reply", (e) => {
        if ((JSON.parse((e as MessageEvent<string>).data) as { kind: string }).kind !== "delta") return;
        const stop = document.querySelector<HTMLButtonElement>("[data-testid=stop]");
        if (stop) {
          stop.click();
          es.close();
        }
      });
    });
    await page.getByLabel("Message").fill("What does river mean?");
    await page.getByLabel("Message").press("Enter");
    await expect.poll(() => lastAssistant().getAttribute("data-status"), { timeout: 30_000 }).toMatch(/stopped|complete/);
    expect(await lastAssistant().getAttribute("data-status")).toBe("stopped");
    const stats = (await lastAssistant().locator("[data-testid=message-stats]").textContent()) ?? "";
    const tokens = Number(/(\d+) tokens/.exec(stats)?.[1]);
    expect(tokens).toBeGreaterThan(0);
    expect(await lastAssistant().textContent()).toContain("Stopped");
    const kept = (await lastAssistant().locator(".markdown").textContent()) ?? "";
    expect(kept.length).toBeGreaterThan(0);
    // What was kept is the start of the whole answer, which is longer.
    const saved = await served.web.services.contract.chat.messages({ conversationId });
    const modelId = (await served.web.services.contract.models.current())!.id;
    const full = await served.web.services.host.generate({
      modelId, input: { kind: "chat", messages: [{ role: "system", content: "You are a helpful assistant." }, { role: "user", content: "What does river mean?" }] },
      sampling: { temperature: 0, maxTokens: 512 },
    });
    expect(full.tokens.length).toBeGreaterThan(tokens);
    expect(full.text.startsWith(saved.at(-1)!.content)).toBe(true);
  });

  it("finds the conversation again after a reload", async () => {
    await page.reload();
    const item = page.getByTestId("conversation-list").getByText("Hello! Who are you?");
    await item.waitFor();
    await item.click();
    await expect.poll(() => page.locator("[data-testid=message-user]").first().textContent()).toContain("Hello! Who are you?");
    expect(await lastAssistant().getAttribute("data-status")).toBe("complete");
    await page.getByLabel("Search conversations").fill("who are");
    await expect.poll(() => page.getByTestId("conversation-list").locator("li").count()).toBe(1);
    expect(await page.getByTestId("conversation-list").textContent()).toContain("Hello! Who are you?");
    await page.getByLabel("Search conversations").fill("no such words anywhere");
    await expect.poll(() => page.getByTestId("conversation-list").textContent()).toBe("No matches");
    await page.getByLabel("Search conversations").fill("");
  });

  it("renames and deletes a conversation", async () => {
    await page.getByTestId("new-chat").click();
    const list = page.getByTestId("conversation-list");
    await list.getByRole("button", { name: "Rename New chat" }).first().click();
    await list.getByLabel("Conversation title").fill("Scratch pad");
    await list.getByLabel("Conversation title").press("Enter");
    await list.getByText("Scratch pad").waitFor();
    expect(await page.locator(".thread-head h2").textContent()).toBe("Scratch pad");
    const before = await list.locator("li").count();
    page.once("dialog", (d) => void d.accept());
    await list.getByRole("button", { name: "Delete Scratch pad" }).click();
    await expect.poll(() => list.locator("li").count()).toBe(before - 1);
    expect((await served.web.services.contract.chat.listConversations()).some((c) => c.title === "Scratch pad")).toBe(false);
  });

  it("edits a sent message and resends it: later messages are replaced by the new reply", async () => {
    // (after the search spec: the new replies would be search hits too)
    await page.getByTestId("new-chat").click();
    await page.getByLabel("Message").fill("What does river mean?");
    await page.getByLabel("Message").press("Enter");
    await expect.poll(() => lastAssistant().getAttribute("data-status"), { timeout: 60_000 }).toBe("complete");
    await page.getByLabel("Message").fill("Thanks!");
    await page.getByLabel("Message").press("Enter");
    await expect.poll(() => page.locator("[data-testid=message-assistant]").count()).toBe(2);
    await expect.poll(() => lastAssistant().getAttribute("data-status"), { timeout: 60_000 }).toBe("complete");
    await page.locator("[data-testid=message-user]").first().getByRole("button", { name: "Edit and resend" }).click();
    await page.getByLabel("Edit message").fill("What does happy mean?");
    await page.getByLabel("Edit message").press("Enter");
    await expect.poll(() => page.locator("[data-testid=message-user]").count()).toBe(1);
    expect(await page.locator("[data-testid=message-user]").textContent()).toContain("What does happy mean?");
    await expect.poll(() => page.locator("[data-testid=message-assistant]").count()).toBe(1);
    await expect.poll(() => lastAssistant().getAttribute("data-status"), { timeout: 60_000 }).toBe("complete");
    const id = (await served.web.services.contract.chat.listConversations())[0]!.id;
    const saved = await served.web.services.contract.chat.messages({ conversationId: id });
    expect(saved.map((m) => [m.role, m.status])).toEqual([["user", "complete"], ["assistant", "complete"]]);
    expect(saved[0]!.content).toBe("What does happy mean?");
    expect(await lastAssistant().locator(".markdown").textContent()).toBe(saved[1]!.content);
    await shot("chat-edited");
  });

  it("toggles a kernel package", async (ctx) => {
    await page.getByTestId("nav-packages").click();
    await page.getByRole("heading", { name: "Kernel packages" }).waitFor();
    const packages = await served.web.services.contract.packages.list();
    await shot("packages");
    const target = packages.find((p) => p.compatible && p.pinnedBy.length === 0);
    const packagesSkipReason = packages.length === 0
      ? "no kernel packages installed (the addon lacks package support, or none are built in build/packages: GUILD_BUILT_PACKAGES)"
      : "every installed package is incompatible or pinned";
    if (!target) {
      console.warn(`package toggle skipped: ${packagesSkipReason}`);
      ctx.skip(packagesSkipReason);
    }
    const box = page.getByLabel(`Enable ${target!.name}`);
    const was = await box.isChecked();
    await box.click();
    await expect.poll(() => box.isChecked()).toBe(!was);
    await box.click();
    await expect.poll(() => box.isChecked()).toBe(was);
  });

  it("uninstalls and installs a package from a file; a pinned package's uninstall is refused plainly", async (ctx) => {
    await page.getByTestId("nav-packages").click();
    await page.getByRole("heading", { name: "Kernel packages" }).waitFor();
    const packages = await served.web.services.contract.packages.list();
    const pinned = packages.find((p) => p.pinnedBy.some((h) => h.startsWith("model ")));
    // Only a user-installed package has an Uninstall button: one this CPU
    // cannot run (cpu-avx512 on an AVX2 host) stays listed as bundled.
    const free = packages.find(
      (p) => (p.source ?? "user") === "user" && p.pinnedBy.length === 0 && existsSync(path.join(served.dataDir, `${p.name}.gkpkg`)),
    );
    if (!pinned || !free) {
      const reason = "needs the native build's kernel packages (build/packages or GUILD_BUILT_PACKAGES), one pinned by the model and one free";
      console.warn(`package install/uninstall skipped: ${reason}`);
      ctx.skip(reason);
    }
    page.on("dialog", (d) => void d.accept());
    // Pinned by the loaded model: refused, and the page says why in words.
    await page.getByRole("button", { name: `Uninstall ${pinned!.name}` }).click();
    await expect.poll(() => page.getByTestId("package-error").textContent())
      .toBe(`${pinned!.name} is pinned by model guild-demo-qwen3moe-Q8_0.gguf; unload it first`);
    expect(existsSync(path.join(served.dataDir, "packages", pinned!.name))).toBe(true);
    // A free one goes...
    await page.getByRole("button", { name: `Uninstall ${free!.name}` }).click();
    await expect.poll(() => page.getByTestId("package-notice").textContent()).toBe(`Uninstalled ${free!.name}.`);
    expect(existsSync(path.join(served.dataDir, "packages", free!.name))).toBe(false);
    // ...and comes back from its .gkpkg, picked as a file (its bytes are uploaded: a browser tab never sees paths).
    await page.getByTestId("package-file").setInputFiles(path.join(served.dataDir, `${free!.name}.gkpkg`));
    await expect.poll(() => page.getByTestId("package-notice").textContent()).toMatch(new RegExp(`^Installed ${free!.name} `));
    expect(existsSync(path.join(served.dataDir, "packages", free!.name))).toBe(true);
    await page.getByTestId(`package-${free!.name}`).waitFor();
    // A file that is not a package is refused with the engine's own words.
    const junk = path.join(served.dataDir, "junk.gkpkg");
    writeFileSync(junk, "not a package");
    await page.getByTestId("package-file").setInputFiles(junk);
    await expect.poll(() => page.getByTestId("package-error").textContent()).toMatch(/not a \.gkpkg/);
    await shot("packages-install");
    page.removeAllListeners("dialog");
  });

  it("shows all 14 load stages on the profile view, with placement", async () => {
    await page.getByTestId("nav-profile").click();
    await page.getByTestId("timeline").waitFor();
    const names = await page.getByTestId("stage-row").locator(".stage-name").allTextContents();
    expect(names.map((n) => n.replace(/^\d+\.\s*/, "").replace(/fallback$/, "").trim())).toEqual([...LOAD_STAGES]);
    await page.getByTestId("placement").waitFor();
    await shot("profile");
    // The app follows the OS theme.
    await page.emulateMedia({ colorScheme: "dark" });
    const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    expect(bg).toBe("rgb(22, 23, 27)");
    await shot("profile-dark");
    await page.emulateMedia({ colorScheme: "light" });
    // Open a profile JSON saved elsewhere (as `guild run --profile-out` writes it).
    const saved = path.join(served.dataDir, "saved-profile.json");
    writeFileSync(saved, JSON.stringify(await served.web.services.contract.models.profile()));
    await page.getByTestId("profile-file").setInputFiles(saved);
    await expect.poll(() => page.locator(".source").textContent()).toContain("saved-profile.json");
    expect(await page.getByTestId("stage-row").count()).toBe(LOAD_STAGES.length);
    const download = page.waitForEvent("download");
    await page.getByRole("button", { name: "Export Chrome trace" }).click();
    const trace = JSON.parse(readFileSync(await (await download).path(), "utf8")) as { traceEvents: { cat?: string }[] };
    expect(trace.traceEvents.filter((e) => e.cat === "stage")).toHaveLength(LOAD_STAGES.length);
  });

  it("has GPU load settings: a bad budget is explained, a load on the CPU device works, the profile shows the placement", async () => {
    await page.getByTestId("nav-models").click();
    const gpu = page.getByTestId("gpu-settings");
    await gpu.waitFor();
    expect(await gpu.textContent()).toMatch(/Only used by a CUDA build/);
    // Where the current model runs, from its profile (this build: the CPU, with the runtime's reason).
    await expect.poll(() => page.getByTestId("gpu-hint").textContent()).toMatch(/The current model runs on (the CPU: .+|.+ \(cuda:\d+\))\.$/);
    const row = page.locator("tr", { hasText: "guild-demo-qwen3moe-Q8_0.gguf" });
    const budget = page.getByLabel("GPU memory budget (GiB)", { exact: true });
    await budget.fill("0");
    await expect.poll(() => page.getByTestId("load-settings-errors").textContent()).toMatch(/GPU memory budget must be a positive number of GiB/);
    expect(await row.getByRole("button", { name: "Load" }).isDisabled()).toBe(true);
    // Peer GPUs and their budget, explained as typed.
    const errors = () => page.getByTestId("load-settings-errors").textContent();
    const peers = page.getByLabel("Peer GPUs", { exact: true });
    const peerBudget = page.getByLabel("Peer budget (GiB)", { exact: true });
    expect(await peers.getAttribute("placeholder")).toBe("cuda:1,cuda:2");
    await budget.fill("");
    await peers.fill("cuda:1;cuda:2");
    await expect.poll(errors).toMatch(/Peer GPUs must be cuda:N entries separated by commas/);
    await peers.fill("cuda:1, cuda:1");
    await expect.poll(errors).toMatch(/Peer GPUs name cuda:1 twice\./);
    await page.getByLabel("Device", { exact: true }).selectOption("cuda");
    await page.getByLabel("CUDA device number", { exact: true }).fill("1");
    await peers.fill("cuda:2,cuda:1");
    await expect.poll(errors).toMatch(/Peer GPUs cannot include cuda:1: it is the device the model loads on\./);
    await peers.fill("");
    await peerBudget.fill("0");
    await expect.poll(errors).toMatch(/Peer budget must be a positive number of GiB/);
    await peerBudget.fill("4");
    await expect.poll(errors).toMatch(/Peer budget needs peer GPUs/);
    expect(await row.getByRole("button", { name: "Load" }).isDisabled()).toBe(true);
    await peers.fill("cuda:2,cuda:3");
    await expect.poll(() => page.getByTestId("load-settings-errors").count()).toBe(0);
    await page.getByTestId("gpu-settings").screenshot({ path: path.join(artifactsDir, "gpu-settings-peers.png") });
    // ModelManager checks them again, whatever the page sends.
    const refused = await served.web.services.contract.models.load({ path: "/nonexistent.gguf", settings: { gpu: "cuda:1", gpuPeers: "cuda:1" } })
      .then(() => "loaded", (e: unknown) => (e as Error).message);
    expect(refused).toBe("gpuPeers: cuda:1 is the primary device (gpu)");
    await budget.fill("0");
    await page.getByLabel("Device", { exact: true }).selectOption("cpu");
    expect(await budget.isDisabled()).toBe(true);
    expect(await peers.isDisabled()).toBe(true);
    expect(await peerBudget.isDisabled()).toBe(true);
    expect(await page.getByTestId("load-settings-errors").count()).toBe(0);
    await page.getByLabel("Threads", { exact: true }).fill("1");
    const before = (await served.web.services.contract.models.current())!.id;
    await row.getByRole("button", { name: "Load" }).click();
    await expect.poll(async () => (await served.web.services.contract.models.current())?.id, { timeout: 60_000 }).not.toBe(before);
    await expect.poll(() => page.getByTestId("current-model").textContent(), { timeout: 60_000 }).toContain("qwen3moe");
    const profile = (await served.web.services.contract.models.profile())!;
    const devicePolicy = profile.stages.find((st) => st.name === "device_policy")!.detail;
    expect([devicePolicy["gpu_choice"], devicePolicy["threads"]]).toEqual(["cpu", 1]);
    await page.getByTestId("nav-profile").click();
    await page.getByRole("button", { name: "Current model", exact: true }).click();
    await expect.poll(() => page.getByTestId("placement-device").textContent()).toMatch(/^Device: CPU.* · all \d+ experts on the CPU$/);
    expect(await page.getByTestId("calibration").textContent()).toContain("all experts on the CPU");
    expect(await page.getByTestId("layer-row").count()).toBe(profile.placement.layers!.length);
    expect(await page.getByTestId("gpu-budget").count()).toBe(0);
    // A hybrid profile (as a CUDA build writes it) shows the budget arithmetic and the calibration figures.
    const hybridFile = path.join(served.dataDir, "hybrid-profile.json");
    writeFileSync(hybridFile, JSON.stringify(hybridProfile(profile)));
    await page.getByTestId("profile-file").setInputFiles(hybridFile);
    await expect.poll(() => page.getByTestId("placement-device").textContent())
      .toMatch(/^Device: cuda:0 \(NVIDIA H200, compute 9\.0, .*\) · \d+ of 6144 experts on the GPU/);
    expect(await page.getByTestId("gpu-budget").textContent()).toMatch(/GPU memory budget · hybrid.*Budget16\.00 GiB/);
    expect(await page.getByTestId("calibration").textContent()).toMatch(/Expected hit rate94\.0 %.*CPU per expert20\.1 µs.*CPU per expert, batch96\.4 µs \(32 tokens at once\).*Copy per expert310 µs.*Prefill streamingsteps of ≥ 37 tokens/);
    expect(await page.getByTestId("layer-row").count()).toBe(hybridShape.layers);
    expect(await page.getByTestId("calibration").textContent()).not.toContain("Why");
    await page.setViewportSize({ width: 1280, height: 1700 });
    await page.locator("section.card", { has: page.getByTestId("placement") }).screenshot({ path: path.join(artifactsDir, "profile-hybrid.png") });
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it("without the session: /app/ says to open the printed link, and a tab whose session ends says so", async () => {
    const context = await browser.newContext();
    try {
      const tab = await context.newPage();
      const errors: string[] = [];
      tab.on("pageerror", (e) => errors.push(e.message));
      // No cookie: the app's page is replaced by a page that says what to do, and never shows the secret.
      const bare = await tab.goto(`${served.web.serverUrl}/app/`);
      expect(bare!.status()).toBe(401);
      expect(await tab.locator("body").textContent()).toMatch(/Open the link printed by npm start or guild serve/);
      expect(await tab.content()).not.toContain(served.web.token);
      // A wrong token is no way in either.
      expect((await tab.goto(`${served.web.serverUrl}/app/?token=${"A".repeat(43)}`))!.status()).toBe(401);
      expect(await tab.locator("body").textContent()).toMatch(/not valid any more/);
      // The printed link is.
      await tab.goto(served.web.url);
      await tab.getByText("guild-demo-qwen3moe-Q8_0.gguf").first().waitFor();
      // The session goes (as when the server restarts with a new secret): the next call says to open the new link.
      await context.clearCookies();
      await tab.getByTestId("nav-chat").click();
      // The view's own first call may already have found the session gone (its notice then covers the
      // page): the button's handler runs either way, and its call is refused the same way.
      await tab.getByTestId("new-chat").dispatchEvent("click");
      await expect.poll(() => tab.getByTestId("session-lost").textContent())
        .toBe("This tab's session has ended: the server was restarted, or this is an old link. Open the new link that npm start or guild serve printed in its terminal.");
      await tab.screenshot({ path: path.join(artifactsDir, "session-lost.png") });
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it("loads the model again with stage progress, and inspects it", async () => {
    await page.getByTestId("nav-models").click();
    const row = page.locator("tr", { hasText: "guild-demo-qwen3moe-Q8_0.gguf" });
    await row.getByRole("button", { name: "Inspect" }).click();
    await page.getByTestId("model-summary").getByText("Memory estimate").waitFor();
    expect(await page.getByTestId("model-summary").textContent()).toMatch(/Dense weights.*Experts.*KV cache/);
    // The GPU settings test loaded it on the CPU with one thread: those settings come back with it.
    const remembered = page.getByTestId("remembered-settings");
    await expect.poll(() => remembered.textContent()).toMatch(/^The settings guild-demo-qwen3moe was last loaded with/);
    expect(await page.getByLabel("Device", { exact: true }).inputValue()).toBe("cpu");
    expect(await page.getByLabel("Threads", { exact: true }).inputValue()).toBe("1");
    await remembered.getByRole("button", { name: "Use the defaults" }).click();
    expect(await page.getByLabel("Device", { exact: true }).inputValue()).toBe("auto");
    // How the model would sit in a GPU budget, as one types it.
    const fit = page.getByTestId("gpu-fit");
    await expect.poll(() => fit.textContent()).toMatch(/Type a GPU memory budget/);
    const budget = page.getByLabel("GPU memory budget (GiB)");
    await budget.fill("0.25");
    await expect.poll(() => fit.textContent()).toMatch(/too small/);
    await budget.fill("2");
    await expect.poll(() => fit.textContent()).toMatch(/everything fits/);
    // A budget that holds half the experts: with a peer budget typed, the peer takes the next quarter.
    const demo = (await served.web.services.contract.models.list()).find((f) => f.name === "guild-demo-qwen3moe-Q8_0.gguf")!;
    const memory = (await served.web.services.contract.models.inspect({ path: demo.path })).memory;
    const GiB = 2 ** 30;
    await budget.fill(((memory.denseBytes + memory.kvCacheBytes + 0.5 * GiB + memory.expertBytes / 2) / GiB).toFixed(9));
    await expect.poll(() => fit.textContent()).toMatch(/about 50 % of the expert bytes cached; .* of experts stay in RAM for the CPU/);
    const peers = page.getByLabel("Peer GPUs", { exact: true });
    await peers.fill("cuda:1");
    await expect.poll(() => fit.textContent()).toMatch(/The peer GPUs are not counted: type a peer budget/);
    await page.getByLabel("Peer budget (GiB)", { exact: true }).fill((memory.expertBytes / 4 / GiB).toFixed(12));
    await expect.poll(() => fit.textContent()).toMatch(/about 50 % of the expert bytes cached, 25 % on the peer GPU \(1 × [\d.]+ GiB\); .* of experts stay in RAM/);
    await peers.fill("");
    await page.getByLabel("Peer budget (GiB)", { exact: true }).fill("");
    await budget.fill("");
    const stages: string[] = [];
    const off = served.web.services.subscribe((name, p) => { if (name === "model.progress") stages.push((p as { stage: string }).stage); });
    await row.getByRole("button", { name: "Load" }).click();
    // The same model was loaded before, so its name is on the page already: wait for this load's last stage.
    await expect.poll(() => stages.includes(LOAD_STAGES[LOAD_STAGES.length - 1]!), { timeout: 60_000 }).toBe(true);
    await expect.poll(() => page.getByTestId("current-model").textContent(), { timeout: 60_000 }).toContain("qwen3moe");
    off();
    expect(stages.slice(0, LOAD_STAGES.length)).toEqual([...LOAD_STAGES]);
    // A bad path is reported plainly, and the loaded model stays.
    await page.getByLabel("GGUF path").fill("/nonexistent/model.gguf");
    await page.getByRole("button", { name: "Load GGUF" }).click();
    await expect.poll(() => page.getByRole("alert").textContent()).toMatch(/cannot load \/nonexistent\/model.gguf/);
    await expect.poll(() => page.getByTestId("current-model").textContent()).toContain("qwen3moe");
    await shot("models");
    expect(pageErrors).toEqual([]);
  });
});
