// ProfileStore: the startup profiles of the last N model loads, one JSON file
// each in the app data folder (newest first), plus opening a profile file
// saved by `guild run --profile-out`.
import { randomUUID } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";

import type { ProfileRecord } from "../../shared/app-contract.js";
import type { StartupProfileJson } from "../../shared/runtime-contract.js";
import { RuntimeError } from "./runtime-host.js";

export const defaultProfilesKept = 20;
const maxProfileBytes = 32 * 1024 * 1024;

interface StoredProfile {
  record: ProfileRecord;
  profile: StartupProfileJson;
}

export class ProfileStore {
  constructor(private readonly dir: string, private readonly keep = defaultProfilesKept) {
    mkdirSync(dir, { recursive: true });
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
    writeFileSync(path.join(this.dir, record.id + ".json"), JSON.stringify({ record, profile } satisfies StoredProfile));
    for (const old of this.files().slice(this.keep)) rmSync(path.join(this.dir, old), { force: true });
    return record;
  }

  recent(): ProfileRecord[] {
    const out: ProfileRecord[] = [];
    for (const f of this.files()) {
      try {
        out.push((JSON.parse(readFileSync(path.join(this.dir, f), "utf8")) as StoredProfile).record);
      } catch {
        // a damaged file is skipped
      }
    }
    return out;
  }

  get(id: string): StartupProfileJson {
    if (!/^[0-9A-Za-z-]+$/.test(id)) throw new RuntimeError("bad profile id", "invalid");
    try {
      return (JSON.parse(readFileSync(path.join(this.dir, id + ".json"), "utf8")) as StoredProfile).profile;
    } catch {
      throw new RuntimeError(`no profile with id ${id}`, "not_found");
    }
  }

  /** Reads and checks a profile from a file or from JSON text. */
  async open(source: { path?: string; json?: string }): Promise<StartupProfileJson> {
    let text: string;
    if (source.json !== undefined) text = source.json;
    else if (source.path !== undefined) {
      try {
        text = await readFile(source.path, "utf8");
      } catch (err) {
        throw new RuntimeError(`cannot read ${source.path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, "not_found");
      }
    } else throw new RuntimeError("give a path or the JSON text", "invalid");
    if (text.length > maxProfileBytes) throw new RuntimeError("the profile is too large", "invalid");
    return parseProfile(text);
  }

  private files(): string[] {
    return readdirSync(this.dir).filter((f) => f.endsWith(".json")).sort().reverse();
  }
}

/** Parses a guild.startup-profile/1 document (also accepts `{"event":"profile","profile":{…}}`). */
export function parseProfile(text: string): StartupProfileJson {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new RuntimeError(`not JSON: ${err instanceof Error ? err.message : String(err)}`, "invalid");
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

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
