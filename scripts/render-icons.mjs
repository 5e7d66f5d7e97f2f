#!/usr/bin/env node
// Renders assets/icon.svg into assets/icons/<N>x<N>.png (16…512) with headless
// Chromium (Debian's chromium; CHROMIUM_PATH overrides). electron-builder reads
// assets/icons for Linux and derives the macOS/Windows icons from 512x512.png.
import { mkdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { chromium } from "playwright-core";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const svg = readFileSync(path.join(root, "assets", "icon.svg"), "utf8");
const outDir = path.join(root, "assets", "icons");
const sizes = [16, 24, 32, 48, 64, 128, 256, 512];

mkdirSync(outDir, { recursive: true });
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM_PATH ?? "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu"],
});
try {
  for (const size of sizes) {
    const page = await browser.newPage({ viewport: { width: size, height: size }, deviceScaleFactor: 1 });
    const sized = svg.replace(/width="\d+" height="\d+"/, `width="${size}" height="${size}"`);
    await page.setContent(`<!doctype html><html><body style="margin:0;background:transparent">${sized}</body></html>`);
    const file = path.join(outDir, `${size}x${size}.png`);
    await page.screenshot({ path: file, omitBackground: true, clip: { x: 0, y: 0, width: size, height: size } });
    await page.close();
    console.log(path.relative(root, file));
  }
} finally {
  await browser.close();
}
