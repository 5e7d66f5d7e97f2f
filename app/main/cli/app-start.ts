// `npm start`: the desktop app when Electron's binary is installed, else web
// mode (the same renderer in a browser tab), after one line saying why.
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";

import { projectRoot } from "../paths.js";
import { startWebMode } from "../web/web-mode.js";

/**
 * The Electron binary's path, or the reason there is none. Reads the electron
 * package's path.txt itself: requiring the package would try to download the
 * binary.
 */
export function findElectron(): { path: string } | { reason: string } {
  let pkgDir: string;
  try {
    pkgDir = path.dirname(createRequire(import.meta.url).resolve("electron/package.json"));
  } catch {
    return { reason: "the electron package is not installed" };
  }
  const pathFile = path.join(pkgDir, "path.txt");
  const override = process.env["ELECTRON_OVERRIDE_DIST_PATH"];
  const rel = existsSync(pathFile) ? readFileSync(pathFile, "utf8").trim() : "";
  const binary = override ? path.join(override, rel || "electron") : rel ? path.join(pkgDir, "dist", rel) : "";
  if (binary && existsSync(binary)) return { path: binary };
  return { reason: "Electron's binary is not installed (npm skipped its download: ELECTRON_SKIP_BINARY_DOWNLOAD)" };
}

export async function startApp(argv: readonly string[] = process.argv.slice(2)): Promise<number> {
  const electron = process.env["GUILD_WEB"] === "1" ? { reason: "GUILD_WEB=1" } : findElectron();
  if ("path" in electron) {
    const main = path.join(projectRoot(), "dist", "app", "main", "shell", "main.js");
    const child = spawn(electron.path, [main, ...argv], { stdio: "inherit" });
    return new Promise((resolve) => child.on("exit", (code) => resolve(code ?? 1)));
  }
  const portArg = argv.find((a) => a.startsWith("--port="));
  const port = portArg ? Number(portArg.slice("--port=".length)) : Number(process.env["GUILD_PORT"] ?? 8765);
  process.stdout.write(`guild: ${electron.reason}; starting web mode instead.\n`);
  const web = await startWebMode({ port });
  // The link carries this start's secret (docs/API.md, "Web mode"): it is the way in, so print it whole.
  process.stdout.write(`Guild is running: open ${web.url}  (a new link on every start; Ctrl+C to quit)\n`);
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  await web.stop();
  return 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname)) {
  startApp().then((code) => process.exit(code), (err: unknown) => {
    process.stderr.write(`guild: error: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
