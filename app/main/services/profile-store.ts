// ProfileStore: the startup profiles of the last N model loads, one JSON file
// each in the app data folder (newest first), plus opening a profile saved by
// `guild run --profile-out`. Every file is read through safe-file.ts; a path
// given to `open` must lie inside the store (the UI sends a picked file's JSON
// text instead), so the contract cannot be used to read other files.
import { randomUUID } from "node:crypto";
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { readdir, realpath } from "node:fs/promises";
import path from "node:path";

import type { ProfileRecord } from "../../shared/app-contract.js";
import type { StartupProfileJson } from "../../shared/runtime-contract.js";
import { jsonSyntaxErrorOffset } from "./json-syntax.js";
import { RuntimeError } from "./runtime-host.js";
import { readRegularText, SafeFileError } from "./safe-file.js";

export const defaultProfilesKept = 20;
/** The largest profile file read (a real one is tens of KiB). */
export const maxProfileBytes = 32 * 1024 * 1024;
const what = "startup profile JSON";

interface StoredProfile {
  record: ProfileRecord;
  profile: StartupProfileJson;
}

export class ProfileStore {
  constructor(private readonly dir: string, private readonly keep = defaultProfilesKept) {
    try {
      mkdirSync(dir, { recursive: true });
    } catch {
      // A read-only data folder: nothing is recorded (add throws, its callers carry on), the app still runs.
    }
  }

  /** The folder holding the recorded profiles. */
  get directory(): string {
    return this.dir;
  }

  add(profile: StartupProfileJson, modelPath: string): ProfileRecord {
    const recordedAt = new Date().toISOString();
    const record: ProfileRecord = {
      id: recordedAt.replace(/[-:.TZ]/g, "") + "-" + randomUUID().slice(0, 8),
      modelName: typeof profile.model["name"] === "string" ? profile.model["name"] : path.basename(modelPath),
      modelPath,
      recordedAt,
      totalMs: profile.total_ms,
    };
    mkdirSync(this.dir, { recursive: true });
    writeFileSync(path.join(this.dir, record.id + ".json"), JSON.stringify({ record, profile } satisfies StoredProfile));
    this.prune();
    return record;
  }

  async recent(): Promise<ProfileRecord[]> {
    const out: ProfileRecord[] = [];
    for (const f of await this.files()) {
      try {
        const record = (JSON.parse(await this.readStored(f)) as Partial<StoredProfile> | null)?.record;
        if (isObject(record) && typeof record.id === "string" && typeof record.recordedAt === "string") out.push(record);
      } catch {
        // a damaged or odd file (too large, not a regular file, not JSON) is skipped
      }
    }
    return out;
  }

  async get(id: string): Promise<StartupProfileJson> {
    if (!/^[0-9A-Za-z-]+$/.test(id)) throw new RuntimeError("bad profile id", "invalid");
    let text: string;
    try {
      text = await this.readStored(id + ".json");
    } catch (err) {
      if (err instanceof SafeFileError && err.problem !== "missing") throw new RuntimeError(`profile ${id}: ${err.reason}`, "invalid");
      throw new RuntimeError(`no profile with id ${id}`, "not_found");
    }
    try {
      return (JSON.parse(text) as StoredProfile).profile;
    } catch {
      throw new RuntimeError(`profile ${id} is damaged (not JSON)`, "invalid");
    }
  }

  /**
   * Reads and checks a profile from JSON text (what the UI sends for a file the
   * user picked) or from a path inside this store (resolved, symbolic links
   * included: none may lead out of it).
   */
  async open(source: { path?: string; json?: string }): Promise<StartupProfileJson> {
    if (source.json !== undefined && source.path !== undefined) throw new RuntimeError("give a path or the JSON text, not both", "invalid");
    if (source.json !== undefined) {
      if (Buffer.byteLength(source.json, "utf8") > maxProfileBytes) throw new RuntimeError(`the profile is larger than ${maxProfileBytes >> 20} MiB`, "invalid");
      return parseProfile(source.json);
    }
    if (source.path === undefined) throw new RuntimeError("give a path or the JSON text", "invalid");
    const file = await this.insideStore(source.path);
    let text: string;
    try {
      text = await readRegularText(file, { what, maxBytes: maxProfileBytes, noFollow: true });
    } catch (err) {
      if (err instanceof SafeFileError) throw new RuntimeError(err.message, err.problem === "missing" ? "not_found" : "invalid");
      throw err;
    }
    return parseProfile(text);
  }

  /** `p` (absolute, or relative to the store) as a real path inside the store; refused otherwise. */
  private async insideStore(p: string): Promise<string> {
    const refused = () => new RuntimeError(
      `profiles.open reads only files in the profile folder (${this.dir}); to view another profile, open it with the file picker`, "invalid");
    const lexical = path.resolve(this.dir, p);
    // Refused before touching the file system: the answer says nothing about what exists elsewhere.
    if (!isInside(path.resolve(this.dir), lexical)) throw refused();
    let root: string;
    let real: string;
    try {
      root = await realpath(this.dir);
      real = await realpath(lexical);
    } catch {
      throw new RuntimeError(`${p}: no such profile file in the profile folder`, "not_found");
    }
    if (!isInside(root, real)) throw refused();
    return real;
  }

  private readStored(name: string): Promise<string> {
    // No link is followed out of the store's own files.
    return readRegularText(path.join(this.dir, name), { what, maxBytes: maxProfileBytes, noFollow: true });
  }

  private prune(): void {
    try {
      const names = readdirSync(this.dir).filter((f) => f.endsWith(".json")).sort().reverse();
      for (const old of names.slice(this.keep)) rmSync(path.join(this.dir, old), { force: true });
    } catch {
      // pruning is best effort
    }
  }

  private async files(): Promise<string[]> {
    try {
      return (await readdir(this.dir)).filter((f) => f.endsWith(".json")).sort().reverse();
    } catch {
      return [];  // no folder (a read-only data folder): no profiles
    }
  }
}

/**
 * Parses a guild.startup-profile/1 document (also accepts `{"event":"profile","profile":{…}}`).
 * Its errors never quote the text.
 */
export function parseProfile(raw: string): StartupProfileJson {
  const text = raw.replace(/^\uFEFF/, "");  // a byte-order mark some editors write
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    const bom = raw.length - text.length === 1 ? 3 : 0;  // offsets count the file's bytes, its mark included
    const at = bom + (jsonSyntaxErrorOffset(text) ?? Buffer.byteLength(text, "utf8"));
    throw new RuntimeError(`not a ${what} (parse error at byte ${at})`, "invalid");
  }
  if (isObject(doc) && doc["event"] === "profile" && isObject(doc["profile"])) doc = doc["profile"];
  if (!isObject(doc) || doc["schema"] !== "guild.startup-profile/1")
    throw new RuntimeError("not a Guild startup profile (schema guild.startup-profile/1)", "invalid");
  const stages = doc["stages"];
  if (!Array.isArray(stages) || !stages.every((s) => isObject(s) && typeof s["name"] === "string" &&
      typeof s["start_ms"] === "number" && typeof s["end_ms"] === "number" && typeof s["duration_ms"] === "number"))
    throw new RuntimeError("the profile's stages are malformed", "invalid");
  const p = doc as unknown as StartupProfileJson;
  return {
    ...p,
    model: isObject(p.model) ? p.model : {},
    machine: isObject(p.machine) ? p.machine : {},
    fallbacks: Array.isArray(p.fallbacks) ? p.fallbacks : [],
    placement: isObject(p.placement) ? p.placement : {},
    stages: p.stages.map((s) => ({ ...s, bytes: typeof s.bytes === "number" ? s.bytes : 0, detail: isObject(s.detail) ? s.detail : {} })),
  };
}

function isInside(root: string, p: string): boolean {
  const rel = path.relative(root, p);
  return rel !== "" && rel !== ".." && !rel.startsWith(".." + path.sep) && !path.isAbsolute(rel);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
