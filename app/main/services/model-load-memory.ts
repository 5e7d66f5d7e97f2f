// Load settings remembered per model: `<data>/model-load-settings.json` =
// {"version": 1, "models": {"<absolute path>": {"settings": {...}, "loadedAt": ms}}}.
// Written after every successful load (the settings the user chose, not the
// command line's defaults); read when a model is listed or inspected, so the
// Models page can offer the settings a model last loaded with. At most
// maxEntries models are kept (the least recently loaded go first). The file is
// the services' own, but it is read like any other: a regular file, capped in
// size, every entry checked (the same check as a load request); a damaged file
// is set aside with one notice and nothing is remembered, never a failed start
// or load. Writes go to a temporary file renamed over the old one.
import { mkdirSync, realpathSync, renameSync, writeFileSync } from "node:fs";
import path from "node:path";

import type { RememberedLoad } from "../../shared/app-contract.js";
import type { ModelLoadSettings } from "../../shared/runtime-contract.js";
import { readRegularTextSync } from "./settings-file.js";

export const modelLoadMemoryFileName = "model-load-settings.json";
const maxFileBytes = 512 * 1024;

export interface ModelLoadMemoryOptions {
  /** Checks (and normalises) one entry's settings; throws for a bad one (ModelManager's sanitizeSettings). */
  validate: (settings: ModelLoadSettings) => ModelLoadSettings;
  /** Where a damaged file or a failed write is reported (the NoticeBoard). */
  notify?: (message: string) => void;
  maxEntries?: number;
  /** The clock (tests). */
  now?: () => number;
}

export class ModelLoadMemory {
  private readonly file: string;
  private readonly maxEntries: number;
  private entries: Map<string, RememberedLoad> | null = null;
  private writeFailed = false;

  constructor(private readonly dataDir: string, private readonly options: ModelLoadMemoryOptions) {
    this.file = path.join(dataDir, modelLoadMemoryFileName);
    this.maxEntries = Math.max(1, options.maxEntries ?? 200);
  }

  /** The settings `modelPath` was last loaded with, or null. */
  get(modelPath: string): RememberedLoad | null {
    const hit = this.read().get(keyOf(modelPath));
    return hit ? { settings: { ...hit.settings }, loadedAt: hit.loadedAt } : null;
  }

  /**
   * Records a successful load (a load at the defaults of a model with nothing remembered records
   * nothing). Never throws: a failed write is one notice, and the load stands.
   */
  remember(modelPath: string, settings: ModelLoadSettings): void {
    const entries = this.read();
    const key = keyOf(modelPath);
    const checked = this.options.validate(settings);
    // The defaults for a model with nothing remembered: nothing to remember (and nothing to write).
    if (!entries.has(key) && Object.keys(checked).length === 0) return;
    entries.delete(key);  // re-inserted last: the map's order is the load order
    entries.set(key, { settings: checked, loadedAt: (this.options.now ?? Date.now)() });
    while (entries.size > this.maxEntries) entries.delete(entries.keys().next().value as string);
    try {
      mkdirSync(this.dataDir, { recursive: true });
      const tmp = `${this.file}.${process.pid}.tmp`;
      const models = Object.fromEntries(entries);
      writeFileSync(tmp, JSON.stringify({ version: 1, models }, null, 2) + "\n", { mode: 0o600 });
      renameSync(tmp, this.file);
    } catch (err) {
      if (!this.writeFailed) this.options.notify?.(`the load settings could not be saved in ${this.file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); models will load with the defaults next time`);
      this.writeFailed = true;
    }
  }

  private read(): Map<string, RememberedLoad> {
    if (this.entries) return this.entries;
    this.entries = new Map();
    let text: string | null;
    try {
      text = readRegularTextSync(this.file, maxFileBytes);
    } catch (err) {
      this.setAside((err as Error).message);
      return this.entries;
    }
    if (text === null) return this.entries;
    try {
      this.entries = this.parse(JSON.parse(text));
    } catch (err) {
      this.setAside((err as Error).message);
    }
    return this.entries;
  }

  /** The checked entries, oldest load first; a malformed file throws, a malformed entry is dropped. */
  private parse(v: unknown): Map<string, RememberedLoad> {
    if (typeof v !== "object" || v === null || Array.isArray(v)) throw new Error("not a JSON object");
    const o = v as Record<string, unknown>;
    if (o["version"] !== 1) throw new Error(`unknown version ${JSON.stringify(o["version"])?.slice(0, 20)}`);
    const models = o["models"];
    if (typeof models !== "object" || models === null || Array.isArray(models)) throw new Error('"models" is not an object');
    const rows: [string, RememberedLoad][] = [];
    for (const [file, entry] of Object.entries(models as Record<string, unknown>)) {
      if (!path.isAbsolute(file) || typeof entry !== "object" || entry === null) continue;
      const e = entry as Record<string, unknown>;
      const loadedAt = e["loadedAt"];
      if (typeof loadedAt !== "number" || !Number.isFinite(loadedAt)) continue;
      try {
        rows.push([file, { settings: this.options.validate(e["settings"] as ModelLoadSettings), loadedAt }]);
      } catch {
        // an entry this version cannot use: forgotten
      }
    }
    rows.sort((a, b) => a[1].loadedAt - b[1].loadedAt);
    return new Map(rows.slice(-this.maxEntries));
  }

  private setAside(why: string): void {
    const aside = `${this.file}.corrupt-${new Date().toISOString().replace(/[-:]/g, "")}`;
    try {
      renameSync(this.file, aside);
      this.options.notify?.(`the remembered load settings in ${this.file} could not be used (${why}); the file was moved to ${aside}`);
    } catch {
      this.options.notify?.(`the remembered load settings in ${this.file} could not be used (${why})`);
    }
  }
}

/** One key per file however it was named: its real path where it exists. */
function keyOf(modelPath: string): string {
  try {
    return realpathSync(modelPath);
  } catch {
    return path.resolve(modelPath);
  }
}
