// The same app in Electron, driven by Playwright's _electron, where an Electron
// binary is installed (it cannot be downloaded on the build machines: then the
// spec is skipped and says why).
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { _electron as electron } from "playwright-core";
import { describe, expect, it } from "vitest";

import { findElectron } from "../app/main/cli/app-start.js";
import { artifactsDir, buildRenderer, repoRoot } from "./harness.js";

const found = findElectron();
if ("reason" in found) console.warn(`Electron e2e skipped: ${found.reason}`);

describe.skipIf("reason" in found)("Electron app", () => {
  it("opens the window, chats, and shows the profile", async () => {
    await buildRenderer();
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "guild-electron-"));
    const app = await electron.launch({
      executablePath: (found as { path: string }).path,
      args: [path.join(repoRoot, "dist", "app", "main", "shell", "main.js"), "--no-sandbox"],
      env: { ...process.env, GUILD_DATA_DIR: dataDir },
    });
    try {
      const page = await app.firstWindow();
      await page.getByText("guild-demo-qwen3moe-Q8_0.gguf").first().waitFor({ timeout: 60_000 });
      expect(await page.evaluate(() => typeof (window as unknown as { require?: unknown }).require)).toBe("undefined");
      await page.getByLabel("Message").fill("Hello! Who are you?");
      await page.getByLabel("Message").press("Enter");
      const last = page.locator("[data-testid=message-assistant]").last();
      await expect.poll(() => last.getAttribute("data-status"), { timeout: 60_000 }).toBe("complete");
      await page.getByTestId("nav-profile").click();
      await expect.poll(() => page.getByTestId("stage-row").count()).toBe(14);
      await page.screenshot({ path: path.join(artifactsDir, "electron-profile.png") });
    } finally {
      await app.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
