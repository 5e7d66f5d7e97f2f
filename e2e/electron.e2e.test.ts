// The same app in Electron, driven by Playwright's _electron, where an Electron
// binary is installed (it cannot be downloaded on the build machines: then the
// spec is skipped and says why). It checks what only the shell does: the page
// comes from guild://app/ with no Node in it, the system's file dialog feeds the
// Models page (stubbed in the main process), Copy reaches the clipboard (the
// permission the shell grants), and Help opens the in-app help.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { _electron as electron } from "playwright-core";
import { describe, expect, it } from "vitest";

import { findElectron } from "../app/main/cli/app-start.js";
import { fixturesDir } from "../app/test/fixtures.js";
import { artifactsDir, buildElectronApp, repoRoot } from "./harness.js";

const found = findElectron();
if ("reason" in found) console.warn(`Electron e2e skipped: ${found.reason}`);

describe.skipIf("reason" in found)("Electron app", () => {
  it("opens the window from guild://app, chats, picks a file, copies, and shows help and the profile", async () => {
    await buildElectronApp();
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "guild-electron-"));
    const app = await electron.launch({
      executablePath: (found as { path: string }).path,
      args: [path.join(repoRoot, "dist", "app", "main", "shell", "main.js"), "--no-sandbox"],
      env: { ...process.env, GUILD_DATA_DIR: dataDir },
    });
    try {
      const page = await app.firstWindow();
      await page.getByText("guild-demo-qwen3moe-Q8_0.gguf").first().waitFor({ timeout: 60_000 });
      expect(page.url()).toMatch(/^guild:\/\/app\/index\.html/);
      expect(await page.evaluate(() => typeof (window as unknown as { require?: unknown }).require)).toBe("undefined");
      expect(await page.evaluate(() => typeof (window as unknown as { guild?: unknown }).guild)).toBe("object");
      await page.getByLabel("Message").fill("Hello! Who are you?");
      await page.getByLabel("Message").press("Enter");
      const last = page.locator("[data-testid=message-assistant]").last();
      await expect.poll(() => last.getAttribute("data-status"), { timeout: 60_000 }).toBe("complete");
      // The Models page's "Open a file…" is the system dialog, in the main process (stubbed here to pick a fixture).
      const fixture = path.join(fixturesDir, "models", "qwen3moe-a-Q8_0.gguf");
      await app.evaluate(({ dialog }, file) => {
        dialog.showOpenDialog = (async () => ({ canceled: false, filePaths: [file] })) as typeof dialog.showOpenDialog;
      }, fixture);
      await page.getByTestId("nav-models").click();
      expect(page.url()).toMatch(/#\/models$/);
      await page.getByTestId("open-file").click();
      await expect.poll(() => page.getByLabel("GGUF path").inputValue()).toBe(fixture);
      await page.getByTestId("model-summary").getByText("Memory estimate").waitFor();
      // Copy works: the shell grants clipboard-sanitized-write to the app's page.
      await page.getByTestId("nav-server").click();
      await page.getByLabel("Port").fill("0");
      await page.getByTestId("server-start").click();
      await page.getByTestId("curl-example").waitFor();
      const curl = await page.getByTestId("curl-example").textContent();
      await page.getByRole("button", { name: "Copy the curl example" }).click();
      await expect.poll(() => app.evaluate(({ clipboard }) => clipboard.readText())).toBe(curl);
      await page.getByTestId("server-stop").click();
      // Help → the in-app help page.
      await app.evaluate(({ Menu }) => {
        const help = Menu.getApplicationMenu()?.items.find((i) => i.role === "help");
        help?.submenu?.items[0]?.click();
      });
      await page.getByRole("heading", { name: "Help", exact: true }).waitFor();
      expect(page.url()).toBe("guild://app/index.html#/help");
      await page.getByTestId("nav-profile").click();
      await expect.poll(() => page.getByTestId("stage-row").count()).toBe(14);
      await page.screenshot({ path: path.join(artifactsDir, "electron-profile.png") });
    } finally {
      await app.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
