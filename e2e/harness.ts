// e2e harness: builds the renderer, starts web mode (real services, real
// runtime, the embedded model) on a free port with a fresh data folder, and
// finds a browser (Debian's chromium) or an Electron binary.
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { chromium, type Browser, type Page } from "playwright-core";
import { build } from "vite";

import type { MachineProbe } from "../app/main/services/machine-facts.js";
import { PackageService } from "../app/main/services/package-service.js";
import { startWebMode, type WebMode } from "../app/main/web/web-mode.js";

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const artifactsDir = path.join(repoRoot, "e2e", "artifacts");
export const rendererOut = path.join(repoRoot, "dist", "renderer");

/** Debian's chromium (or CHROMIUM_PATH), or null with the reason. */
export function chromiumPath(): { path: string } | { reason: string } {
  const candidates = [process.env["CHROMIUM_PATH"], "/usr/bin/chromium", "/usr/bin/chromium-browser"].filter((p): p is string => !!p);
  const found = candidates.find((p) => existsSync(p));
  return found ? { path: found } : { reason: `no chromium at ${candidates.join(", ")} (apt-get install chromium)` };
}

/**
 * Builds the renderer from the sources into a folder of this test file's own and returns it. The
 * e2e files run in parallel workers: a shared output folder (dist/renderer) was emptied by one
 * file's build while another file's page was loading from it.
 */
export async function buildRenderer(): Promise<string> {
  const outDir = mkdtempSync(path.join(os.tmpdir(), "guild-e2e-renderer-"));
  process.on("exit", () => rmSync(outDir, { recursive: true, force: true }));
  await build({ configFile: path.join(repoRoot, "vite.renderer.config.ts"), logLevel: "warn", build: { outDir, emptyOutDir: true } });
  return outDir;
}

/** The Electron app's own build (dist/renderer and dist/preload), for the Electron spec. */
export async function buildElectronApp(): Promise<void> {
  await build({ configFile: path.join(repoRoot, "vite.renderer.config.ts"), logLevel: "warn" });
  await build({ configFile: path.join(repoRoot, "vite.preload.config.ts"), logLevel: "warn" });
}

/** How the e2e server paces replies (RuntimeHostOptions.testPacing). */
export const e2ePacing = { tokensPerStep: 1, delayMs: 80 };

export interface Served {
  /** `web.url` is the printed link (…/app/?token=…): a page that opens it gets the session cookie. */
  web: WebMode;
  dataDir: string;
  close(): Promise<void>;
}

/** `paced: false` serves replies at the model's own speed (specs that never stop a reply midway, and want many of them). */
/** `rendererDir`: what buildRenderer() returned (default: the app's dist/renderer). */
/** `machine`: the RAM and GPU figures the memory plan sees (default: this machine's). */
export async function serveWebMode(options: { paced?: boolean; rendererDir?: string; machine?: MachineProbe } = {}): Promise<Served> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), "guild-e2e-"));
  const packagesDir = path.join(dataDir, "packages");
  await installBuiltPackages(packagesDir);
  const web = await startWebMode({
    dataDir, packagesDir, port: 0, loadDefaults: { threads: 2 }, web: { rendererDir: options.rendererDir ?? rendererOut },
    ...(options.machine ? { machine: options.machine } : {}),
    // Test-only: replies come one token at a time with a pause between (the demo model would otherwise
    // finish in tens of milliseconds), so a spec can watch a reply grow and stop it midway, by design.
    ...(options.paced === false ? {} : { runtime: { testPacing: e2ePacing } }),
  });
  await web.services.ready;
  mkdirSync(artifactsDir, { recursive: true });
  return {
    web,
    dataDir,
    async close() {
      await web.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Installs the native build's kernel packages (build/packages or GUILD_BUILT_PACKAGES), when there are any, into `dir`. */
async function installBuiltPackages(dir: string): Promise<void> {
  const built = process.env["GUILD_BUILT_PACKAGES"] ?? path.join(repoRoot, "build", "packages");
  if (!existsSync(built)) return;
  const svc = new PackageService({ dir });
  for (const name of readdirSync(built)) {
    if (!existsSync(path.join(built, name, `${name}.gkmetadata`))) continue;
    const archive = path.join(path.dirname(dir), `${name}.gkpkg`);
    if ((await svc.pack(path.join(built, name), archive)).ok) await svc.install(archive);
  }
}

/**
 * Opens the served app's printed link in Debian's chromium (headless, `--no-sandbox --disable-gpu`) and
 * waits for the demo model to be in view. Page errors, and console errors other than refused requests
 * (HTTP 4xx, which the page shows as messages; a CSP violation is a console error too), go to `errors`.
 */
export async function openAppInChromium(
  served: Served, browserPath: string, errors: string[], options: { height?: number; clipboard?: boolean } = {},
): Promise<{ browser: Browser; page: Page }> {
  const browser = await chromium.launch({ executablePath: browserPath, args: ["--no-sandbox", "--disable-gpu"] });
  const context = await browser.newContext({ viewport: { width: 1280, height: options.height ?? 800 } });
  if (options.clipboard) await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: served.web.serverUrl });
  const page = await context.newPage();
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("console", (m) => { if (m.type() === "error" && !/Failed to load resource: the server responded with a status of 4\d\d/.test(m.text())) errors.push(m.text()); });
  await page.goto(served.web.url);
  await page.getByText("guild-demo-qwen3moe-Q8_0.gguf").first().waitFor();
  return { browser, page };
}
