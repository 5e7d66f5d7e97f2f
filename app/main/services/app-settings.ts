// The app's settings (SettingsService), one JSON file in the data folder:
// `<data>/settings.json` = {"modelsDir"?, "hubEndpoint"?, "theme"?, "apiServer"?}.
// Absent keys take their defaults (<data>/models, the Hugging Face Hub,
// "system"); GUILD_HF_ENDPOINT wins over the saved hub endpoint. A damaged or
// unreadable file is set aside as settings.json.corrupt-<time> with one notice,
// never a failed start. Writes go to a temporary file renamed over the old one
// (mode 0600: the API server's key is kept here).
import { accessSync, constants, mkdirSync, renameSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";

import { THEME_CHOICES, type AppSettings, type SettingsService, type ThemeChoice } from "../../shared/app-contract.js";
import { RuntimeError } from "./runtime-host.js";
import { readRegularTextSync } from "./settings-file.js";

export const defaultHubEndpoint = "https://huggingface.co";
export const hubEndpointEnv = "GUILD_HF_ENDPOINT";
export const settingsFileName = "settings.json";
const maxSettingsBytes = 256 * 1024;

/** What settings.json holds (every key optional). */
export interface StoredSettings {
  modelsDir?: string;
  hubEndpoint?: string;
  theme?: ThemeChoice;
  apiServer?: { port: number; apiKey: string };
}

/** Why `url` cannot be a hub endpoint, or null: an http(s) URL without credentials, query or fragment. */
export function badHubEndpoint(url: string): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return `${JSON.stringify(url)} is not a URL (e.g. https://huggingface.co)`;
  }
  if (u.protocol !== "https:" && u.protocol !== "http:") return "the hub endpoint must be an http:// or https:// URL";
  if (u.username || u.password || u.search || u.hash) return "the hub endpoint must not carry credentials, a query or a fragment";
  return null;
}

export interface SettingsStoreOptions {
  /** Where a damaged settings file is reported (the NoticeBoard). */
  notify?: (message: string) => void;
  /** The environment's hub endpoint; defaults to process.env.GUILD_HF_ENDPOINT. */
  envHubEndpoint?: string | undefined;
  /** Called after every change. */
  onChange?: (settings: AppSettings) => void;
  /** Electron's choose-folder dialog; absent: pickFolder is refused. */
  pickFolder?: () => Promise<string | null>;
}

export class SettingsStore implements SettingsService {
  private stored: StoredSettings;
  private readonly file: string;
  private readonly env: string | undefined;

  constructor(readonly dataDir: string, private readonly options: SettingsStoreOptions = {}) {
    this.file = path.join(dataDir, settingsFileName);
    const env = Object.hasOwn(options, "envHubEndpoint") ? options.envHubEndpoint : process.env[hubEndpointEnv];
    this.env = env && badHubEndpoint(env) === null ? env.replace(/\/+$/, "") : undefined;
    if (env && this.env === undefined) options.notify?.(`${hubEndpointEnv}=${env} is ignored: ${badHubEndpoint(env)}`);
    this.stored = this.read();
  }

  get modelsDirDefault(): string {
    return path.join(this.dataDir, "models");
  }

  get modelsDir(): string {
    return this.stored.modelsDir ?? this.modelsDirDefault;
  }

  get hubEndpoint(): string {
    return this.env ?? this.stored.hubEndpoint ?? defaultHubEndpoint;
  }

  get apiServer(): { port: number; apiKey: string } | undefined {
    return this.stored.apiServer;
  }

  snapshot(): AppSettings {
    return {
      dataDir: this.dataDir,
      modelsDir: this.modelsDir,
      modelsDirDefault: this.modelsDirDefault,
      hubEndpoint: this.hubEndpoint,
      hubEndpointDefault: defaultHubEndpoint,
      hubEndpointFromEnv: this.env !== undefined,
      theme: this.stored.theme ?? "system",
    };
  }

  async get(): Promise<AppSettings> {
    return this.snapshot();
  }

  async update(req: { modelsDir?: string; hubEndpoint?: string; theme?: string }): Promise<AppSettings> {
    const next: StoredSettings = { ...this.stored };
    if (req.theme !== undefined) {
      if (!(THEME_CHOICES as readonly string[]).includes(req.theme)) throw new RuntimeError(`theme must be one of ${THEME_CHOICES.join(", ")}`, "invalid");
      next.theme = req.theme as ThemeChoice;
    }
    if (req.hubEndpoint !== undefined) {
      const url = req.hubEndpoint.trim();
      if (url === "") delete next.hubEndpoint;
      else {
        const bad = badHubEndpoint(url);
        if (bad) throw new RuntimeError(bad, "invalid");
        next.hubEndpoint = url.replace(/\/+$/, "");
      }
    }
    if (req.modelsDir !== undefined) {
      const dir = req.modelsDir.trim();
      if (dir === "" || path.resolve(dir) === this.modelsDirDefault) delete next.modelsDir;
      else {
        if (!path.isAbsolute(dir)) throw new RuntimeError("the models folder must be an absolute path (e.g. /home/me/models)", "invalid");
        next.modelsDir = path.resolve(dir);
      }
      ensureWritableFolder(next.modelsDir ?? this.modelsDirDefault);
    }
    this.write(next);
    this.stored = next;
    const snap = this.snapshot();
    this.options.onChange?.(snap);
    return snap;
  }

  /** Saves the API server panel's port and key (ServerPanel). */
  saveApiServer(value: { port: number; apiKey: string }): void {
    const next = { ...this.stored, apiServer: value };
    this.write(next);
    this.stored = next;
  }

  async pickFolder(): Promise<{ path: string | null }> {
    if (!this.options.pickFolder) throw new RuntimeError("a browser tab cannot open this computer's folder dialog: type the folder's path, or pick it with Browse…", "invalid");
    return { path: await this.options.pickFolder() };
  }

  private read(): StoredSettings {
    let text: string | null;
    try {
      text = readRegularTextSync(this.file, maxSettingsBytes);
    } catch (err) {
      return this.setAside(err instanceof Error ? err.message : String(err));
    }
    if (text === null) return {};
    try {
      return validStored(JSON.parse(text));
    } catch (err) {
      return this.setAside(err instanceof Error ? err.message : String(err));
    }
  }

  /** A settings file that cannot be used is moved aside (kept for the user) and the defaults apply. */
  private setAside(why: string): StoredSettings {
    const stamp = new Date().toISOString().replace(/[-:]/g, "");
    const aside = `${this.file}.corrupt-${stamp}`;
    try {
      renameSync(this.file, aside);
      this.options.notify?.(`the settings file ${this.file} could not be used (${why}); it was moved to ${aside} and the defaults apply`);
    } catch {
      this.options.notify?.(`the settings file ${this.file} could not be used (${why}); the defaults apply`);
    }
    return {};
  }

  private write(next: StoredSettings): void {
    try {
      mkdirSync(this.dataDir, { recursive: true });
      const tmp = `${this.file}.${process.pid}.tmp`;
      writeFileSync(tmp, JSON.stringify(next, null, 2) + "\n", { mode: 0o600 });
      renameSync(tmp, this.file);
    } catch (err) {
      throw new RuntimeError(`cannot save the settings in ${this.file}: ${(err as Error).message}`, "failed");
    }
  }
}

/** Creates `dir` when missing and checks that it is a folder this process can write. */
export function ensureWritableFolder(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true });
  } catch (err) {
    throw new RuntimeError(`cannot create the folder ${dir}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`, "invalid");
  }
  if (!statSync(dir).isDirectory()) throw new RuntimeError(`${dir} is not a folder`, "invalid");
  try {
    accessSync(dir, constants.W_OK);
  } catch {
    throw new RuntimeError(`the folder ${dir} is not writable`, "invalid");
  }
}

/** The known keys of a parsed settings.json, each checked; unknown keys are dropped. */
function validStored(v: unknown): StoredSettings {
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new Error("not a JSON object");
  const o = v as Record<string, unknown>;
  const out: StoredSettings = {};
  if (typeof o["modelsDir"] === "string" && path.isAbsolute(o["modelsDir"])) out.modelsDir = o["modelsDir"];
  if (typeof o["hubEndpoint"] === "string" && badHubEndpoint(o["hubEndpoint"]) === null) out.hubEndpoint = o["hubEndpoint"];
  if (typeof o["theme"] === "string" && (THEME_CHOICES as readonly string[]).includes(o["theme"])) out.theme = o["theme"] as ThemeChoice;
  const api = o["apiServer"];
  if (typeof api === "object" && api !== null) {
    const a = api as Record<string, unknown>;
    if (typeof a["port"] === "number" && Number.isInteger(a["port"]) && a["port"] >= 0 && a["port"] <= 65535 && typeof a["apiKey"] === "string")
      out.apiServer = { port: a["port"], apiKey: a["apiKey"] };
  }
  return out;
}
