// Where things are on disk. The one place that knows the repository layout.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

let cachedRoot: string | undefined;

/**
 * The project root: the nearest folder above this module whose package.json is
 * named "guild". Works from the TypeScript sources (app/main) and from the
 * compiled output (dist/app/main).
 */
export function projectRoot(): string {
  if (cachedRoot !== undefined) return cachedRoot;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = path.join(dir, "package.json");
    if (existsSync(pkg)) {
      try {
        const name = (JSON.parse(readFileSync(pkg, "utf8")) as { name?: unknown }).name;
        if (name === "guild") return (cachedRoot = dir);
      } catch {
        // not ours; keep walking
      }
    }
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error("cannot find the guild project root above " + fileURLToPath(import.meta.url));
    dir = parent;
  }
}

/** The compiled native addon, as cmake-js builds it. `GUILD_ADDON_PATH` overrides it. */
export function addonPath(): string {
  return process.env["GUILD_ADDON_PATH"] ?? path.join(projectRoot(), "build", "Release", "guild_addon.node");
}

/** The model Guild ships with (assets/models/README.md is its model card). */
export function embeddedModelPath(): string {
  return path.join(projectRoot(), "assets", "models", "guild-demo-qwen3moe-Q8_0.gguf");
}
