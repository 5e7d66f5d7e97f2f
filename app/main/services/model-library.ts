// ModelLibrary: the model files the app knows (the embedded default model, the
// *.gguf files of the models folder, files opened by path) and what a file
// holds without loading it: an inspect summary (architecture, shape, tensor
// types) plus the memory estimate's inputs, and in the list whether this
// runtime can load it (the load check its owner sets: the runtime's own answer).
// Split models are one entry (their first shard). The folder can change at run
// time (the models-folder setting). The native runtime opens model files
// itself; a path is checked to be a regular file first (requireModelFile), so
// a FIFO or a device never reaches it. browse() and remove() stay inside the
// folders they are allowed (realpath, so no `..` or link leads out).
import { readdir, realpath, stat, unlink } from "node:fs/promises";
import os from "node:os";
import path from "node:path";

import type { FolderListing, MemoryEstimate, ModelFacts, ModelFile, ModelSummary, RememberedLoad, TypeShare } from "../../shared/app-contract.js";
import type { ModelShape } from "../../shared/memory-plan.js";
import { inspectModel } from "../runtime/model.js";
import { parseShardName, quantOfName, shardFileName } from "./gguf-names.js";
import { RuntimeError } from "./runtime-host.js";
import { checkRegularFile } from "./safe-file.js";

export const defaultEstimateContext = 4096;
/** The most entries one browse() lists. */
export const maxBrowseEntries = 2000;

/** An inspect summary before the machine is looked at (ModelManager adds the memory plan). */
export type InspectedModel = Omit<ModelSummary, "machine" | "plan" | "lastLoad">;

interface CachedFacts {
  mtimeMs: number;
  size: number;
  facts: ModelFacts | null;
  error?: string;
}

/** Why the runtime would not load a file (one sentence each; empty when it would). */
export type LoadCheckFn = (file: string) => Promise<string[]>;

export class ModelLibrary {
  private readonly opened = new Set<string>();
  private readonly factsCache = new Map<string, CachedFacts>();
  private dir: string;
  private loadCheck: LoadCheckFn | null = null;
  private lastLoadOf: (file: string) => RememberedLoad | null = () => null;

  constructor(readonly embeddedModel: string, modelsDir: string, private readonly home: string = os.homedir()) {
    this.dir = path.resolve(modelsDir);
  }

  get modelsDir(): string {
    return this.dir;
  }

  /** Points the library at another models folder (the setting changed). */
  setModelsDir(dir: string): void {
    this.dir = path.resolve(dir);
  }

  /** What the list's `problems` come from (ModelManager sets the runtime's pre-flight check). */
  setLoadCheck(check: LoadCheckFn): void {
    this.loadCheck = check;
    this.factsCache.clear();
  }

  /** Where each listed file's remembered load settings come from (ModelManager's ModelLoadMemory). */
  setLastLoad(lookup: (file: string) => RememberedLoad | null): void {
    this.lastLoadOf = lookup;
  }

  /** The load checks' answers may have changed (the kernel packages did): they are asked again. */
  forgetLoadChecks(): void {
    this.factsCache.clear();
  }

  /** Remembers a file the user opened by path, so the list shows it. */
  remember(file: string): void {
    const f = path.resolve(file);
    if (f !== path.resolve(this.embeddedModel) && path.dirname(f) !== this.dir) this.opened.add(f);
  }

  async list(): Promise<ModelFile[]> {
    const out: ModelFile[] = [];
    const add = async (file: string, source: ModelFile["source"], names?: string[]) => {
      if (out.some((m) => m.path === file)) return;
      try {
        const s = await stat(file);
        if (!s.isFile()) return;
        const entry: ModelFile = { path: file, name: path.basename(file), sizeBytes: s.size, source };
        const shard = parseShardName(entry.name);
        if (shard) {
          // One entry per split model: the shards' sizes together, and how many are here.
          const siblings = names ?? await readdir(path.dirname(file)).catch(() => [] as string[]);
          let present = 0;
          let bytes = 0;
          for (let i = 1; i <= shard.count; i++) {
            const n = shardFileName(shard, i);
            if (!siblings.includes(n)) continue;
            const ss = await stat(path.join(path.dirname(file), n)).catch(() => null);
            if (ss?.isFile()) {
              present++;
              bytes += ss.size;
            }
          }
          entry.sizeBytes = bytes;
          entry.shards = { present, count: shard.count };
        }
        const cached = await this.facts(file, s.mtimeMs, s.size);
        entry.facts = cached.facts;
        if (cached.error !== undefined) entry.factsError = cached.error;
        const lastLoad = this.lastLoadOf(file);
        if (lastLoad) entry.lastLoad = lastLoad;
        if (entry.shards && entry.shards.present < entry.shards.count && entry.facts)
          entry.facts = { ...entry.facts, problems: [...entry.facts.problems, `only ${entry.shards.present} of its ${entry.shards.count} shards are in the folder`] };
        out.push(entry);
      } catch {
        // gone since; skip it
      }
    };
    await add(this.embeddedModel, "embedded");
    let names: string[] = [];
    try {
      names = (await readdir(this.dir)).filter((n) => n.toLowerCase().endsWith(".gguf")).sort();
    } catch {
      // no models folder yet
    }
    for (const n of names) {
      const shard = parseShardName(n);
      // A split model is listed by its first shard (or, when that is missing, by the lowest one here).
      if (shard && shard.index !== 1 && names.some((o) => {
        const s = parseShardName(o);
        return s !== null && s.stem === shard.stem && s.count === shard.count && s.index < shard.index;
      })) continue;
      await add(path.join(this.dir, n), "library", names);
    }
    for (const f of this.opened) await add(f, "opened");
    return out;
  }

  /** The list's facts of one file, inspected once per version (mtime and size). */
  private async facts(file: string, mtimeMs: number, size: number): Promise<CachedFacts> {
    const hit = this.factsCache.get(file);
    if (hit && hit.mtimeMs === mtimeMs && hit.size === size) return hit;
    let entry: CachedFacts;
    try {
      const s = await inspectFile(file);
      const problems = this.loadCheck ? await this.loadCheck(file).catch((err: unknown) => [err instanceof Error ? err.message : String(err)]) : [];
      entry = {
        mtimeMs, size, facts: {
          architecture: s.architecture, parameterCount: s.parameterCount, contextLength: s.contextLength,
          quant: quantOfName(path.basename(file)) ?? dominantType(s.tensorTypes), problems,
        },
      };
    } catch (err) {
      entry = { mtimeMs, size, facts: null, error: err instanceof Error ? err.message : String(err) };
    }
    this.factsCache.set(file, entry);
    return entry;
  }

  async inspect(file: string, contextSize = defaultEstimateContext): Promise<InspectedModel> {
    return inspectFile(file, contextSize);
  }

  /** The folders browse() may list: the models folder and the user's home. */
  browseRoots(): { label: string; path: string }[] {
    return [{ label: "Models folder", path: this.dir }, { label: "Home", path: this.home }];
  }

  /** Folders and *.gguf files of `dir` (default: the models folder), which must lie inside a browse root. */
  async browse(dir?: string): Promise<FolderListing> {
    const roots = this.browseRoots();
    const wanted = path.resolve(dir && dir.trim() !== "" ? dir : this.dir);
    let real: string;
    try {
      real = await realpath(wanted);
    } catch {
      if (wanted === this.dir) return { dir: wanted, parent: null, roots, entries: [], truncated: false };  // not made yet: nothing in it
      throw new RuntimeError(`${wanted}: no such folder`, "not_found");
    }
    const realRoots = await Promise.all(roots.map(async (r) => realpath(r.path).catch(() => path.resolve(r.path))));
    const inside = (p: string) => realRoots.some((r) => p === r || p.startsWith(r.endsWith(path.sep) ? r : r + path.sep));
    if (!inside(real)) throw new RuntimeError(`${wanted}: outside the models folder and your home folder, which is all the file browser shows`, "invalid");
    if (!(await stat(real)).isDirectory()) throw new RuntimeError(`${wanted}: not a folder`, "invalid");
    const names = (await readdir(real, { withFileTypes: true })).filter((d) => !d.name.startsWith("."));
    const entries: FolderListing["entries"] = [];
    for (const d of names) {
      const full = path.join(real, d.name);
      let s;
      try {
        s = await stat(full);
      } catch {
        continue;  // a dangling link
      }
      if (s.isDirectory()) entries.push({ name: d.name, path: full, kind: "folder", sizeBytes: 0 });
      else if (s.isFile() && d.name.toLowerCase().endsWith(".gguf")) entries.push({ name: d.name, path: full, kind: "model", sizeBytes: s.size });
    }
    entries.sort((a, b) => (a.kind === b.kind ? a.name.localeCompare(b.name) : a.kind === "folder" ? -1 : 1));
    return {
      dir: real, parent: real !== path.dirname(real) && inside(path.dirname(real)) ? path.dirname(real) : null, roots,
      entries: entries.slice(0, maxBrowseEntries), truncated: entries.length > maxBrowseEntries,
    };
  }

  /** Deletes a model of the models folder, all its shards; returns the files deleted. */
  async remove(file: string): Promise<string[]> {
    const target = path.resolve(file);
    const realDir = await realpath(this.dir).catch(() => this.dir);
    const realParent = await realpath(path.dirname(target)).catch(() => null);
    if (realParent !== realDir || !target.toLowerCase().endsWith(".gguf"))
      throw new RuntimeError(`${file}: only models in the models folder (${this.dir}) can be deleted here`, "invalid");
    const shard = parseShardName(path.basename(target));
    const names = shard ? Array.from({ length: shard.count }, (_, i) => shardFileName(shard, i + 1)) : [path.basename(target)];
    const removed: string[] = [];
    for (const n of names) {
      const f = path.join(path.dirname(target), n);
      try {
        await unlink(f);
        removed.push(f);
        this.factsCache.delete(f);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw new RuntimeError(`cannot delete ${f}: ${(err as Error).message}`, "failed");
      }
    }
    if (removed.length === 0) throw new RuntimeError(`${file}: no such model`, "not_found");
    return removed;
  }
}

/** The most common weight type other than f32 (norms and biases are f32 in every file), upper case. */
function dominantType(types: Record<string, number>): string | null {
  const entries = Object.entries(types).filter(([t]) => t !== "f32").sort((a, b) => b[1] - a[1]);
  const top = entries[0]?.[0] ?? (types["f32"] ? "f32" : null);
  return top ? top.toUpperCase() : null;
}

/** Inspects one file (the native inspect) into the summary the app shows. */
export async function inspectFile(file: string, contextSize = defaultEstimateContext): Promise<InspectedModel> {
  await requireModelFile(file);
  const info = await inspectModel(file);
  const meta = (typeof info["metadata"] === "object" && info["metadata"] !== null ? info["metadata"] : {}) as Record<string, unknown>;
  const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
  const arch = typeof info["architecture"] === "string" ? info["architecture"] : "unknown";
  const key = (k: string) => num(meta[`${arch}.${k}`]);
  const layers = num(info["block_count"]);
  const experts = num(info["expert_count"]);
  const embedding = num(info["embedding_length"]);
  const contextLength = num(info["context_length"]);
  const tensorBytes = num(info["tensor_bytes"]);
  const params = num(info["parameter_count"]);
  const heads = key("attention.head_count");
  const headsKv = key("attention.head_count_kv") || heads;
  const keyLength = key("attention.key_length") || (heads ? embedding / heads : 0);
  const valueLength = key("attention.value_length") || (heads ? embedding / heads : 0);
  const memory = estimateMemory({
    tensorBytes, params, layers, experts, embedding, expertFf: key("expert_feed_forward_length"),
    headsKv, keyLength, valueLength, contextSize: Math.min(contextSize, contextLength || contextSize),
  });
  const tensorTypes = (typeof info["tensor_types"] === "object" && info["tensor_types"] !== null ? info["tensor_types"] : {}) as Record<string, number>;
  const tensorCount = num(info["tensor_count"]);
  const numOrNull = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : null);
  const typeMix: TypeShare[] = (Array.isArray(info["type_mix"]) ? info["type_mix"] : []).flatMap((r: unknown) => {
    if (r === null || typeof r !== "object" || typeof (r as Record<string, unknown>)["type"] !== "string") return [];
    const row = r as Record<string, unknown>;
    return [{
      type: row["type"] as string, tensors: num(row["tensors"]), parameters: num(row["parameters"]), bytes: num(row["bytes"]),
      bitsPerWeight: numOrNull(row["bits_per_weight"]), byteShare: num(row["byte_share"]),
    }];
  });
  const shape: ModelShape = {
    layers, contextLength, denseBytes: memory.denseBytes, expertBytes: memory.expertBytes, headsKv, keyLength, valueLength,
  };
  return {
    path: file,
    name: typeof info["name"] === "string" ? info["name"] : path.basename(file),
    architecture: arch,
    fileBytes: num(info["file_size"]),
    parameterCount: params,
    layers,
    experts,
    expertsPerToken: num(info["expert_used_count"]),
    contextLength,
    embeddingLength: embedding,
    vocabSize: num(info["vocab_size"]),
    tensorCount,
    shards: num(info["n_shards"]) || 1,
    tensorTypes,
    typeMix,
    bitsPerWeight: {
      all: numOrNull(info["bits_per_weight"]), experts: numOrNull(info["expert_bits_per_weight"]), dense: numOrNull(info["dense_bits_per_weight"]),
    },
    memory,
    // Whether the runtime can load it is the runtime's pre-flight check, asked by the caller with its settings.
    problems: [],
    shape,
  };
}

/**
 * Refuses a path that is not a regular file (a directory, FIFO, device or
 * socket: the runtime's reads would block or fail obscurely) with one clear
 * line. Symbolic links are followed: model caches often link their files.
 * The runtime opens the path again afterwards; this guards against mistakes
 * and hostile paths given to the services, not against a file swapped meanwhile.
 */
export async function requireModelFile(file: string): Promise<void> {
  await checkRegularFile(file, { what: "model file" });
}

export interface EstimateInput {
  tensorBytes: number; params: number; layers: number; experts: number; embedding: number; expertFf: number;
  headsKv: number; keyLength: number; valueLength: number; contextSize: number;
}

/**
 * Weights split into routed experts (gate/up/down per expert per layer, at the
 * file's average bytes per parameter) and the rest (dense), plus an f16 KV
 * cache for one session of `contextSize` tokens.
 */
export function estimateMemory(x: EstimateInput): MemoryEstimate {
  const bytesPerParam = x.params > 0 ? x.tensorBytes / x.params : 0;
  const expertParams = x.layers * x.experts * 3 * x.embedding * x.expertFf;
  const expertBytes = Math.min(x.tensorBytes, Math.round(expertParams * bytesPerParam));
  const denseBytes = x.tensorBytes - expertBytes;
  const kvCacheBytes = Math.round(x.layers * x.contextSize * x.headsKv * (x.keyLength + x.valueLength) * 2);
  return { denseBytes, expertBytes, kvCacheBytes, contextSize: x.contextSize, totalBytes: denseBytes + expertBytes + kvCacheBytes };
}
