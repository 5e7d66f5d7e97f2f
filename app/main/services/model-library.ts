// ModelLibrary: the model files the app knows (the embedded default model and
// the *.gguf files of a models folder) and what a file holds without loading
// it: an inspect summary plus a memory estimate (dense weights, experts and
// one session's KV cache, each on its own line). The native runtime opens
// model files itself; a path is checked to be a regular file first
// (requireModelFile), so a FIFO or a device never reaches it.
import { readdir, stat } from "node:fs/promises";
import path from "node:path";

import type { MemoryEstimate, ModelFile, ModelSummary } from "../../shared/app-contract.js";
import { inspectModel } from "../runtime/model.js";
import { checkRegularFile } from "./safe-file.js";

export const defaultEstimateContext = 4096;

export class ModelLibrary {
  private readonly opened = new Set<string>();

  constructor(readonly embeddedModel: string, readonly modelsDir: string) {}

  /** Remembers a file the user opened by path, so the list shows it. */
  remember(file: string): void {
    if (path.resolve(file) !== path.resolve(this.embeddedModel)) this.opened.add(path.resolve(file));
  }

  async list(): Promise<ModelFile[]> {
    const out: ModelFile[] = [];
    const add = async (file: string, source: ModelFile["source"]) => {
      try {
        const s = await stat(file);
        if (s.isFile() && !out.some((m) => m.path === file)) out.push({ path: file, name: path.basename(file), sizeBytes: s.size, source });
      } catch {
        // gone since; skip it
      }
    };
    await add(this.embeddedModel, "embedded");
    let names: string[] = [];
    try {
      names = (await readdir(this.modelsDir)).filter((n) => n.toLowerCase().endsWith(".gguf")).sort();
    } catch {
      // no models folder yet
    }
    for (const n of names) await add(path.join(this.modelsDir, n), "library");
    for (const f of this.opened) await add(f, "opened");
    return out;
  }

  async inspect(file: string, contextSize = defaultEstimateContext): Promise<ModelSummary> {
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
    const memory = estimateMemory({
      tensorBytes, params, layers, experts, embedding,
      expertFf: key("expert_feed_forward_length"),
      headsKv: key("attention.head_count_kv") || key("attention.head_count"),
      keyLength: key("attention.key_length") || (key("attention.head_count") ? embedding / key("attention.head_count") : 0),
      valueLength: key("attention.value_length") || (key("attention.head_count") ? embedding / key("attention.head_count") : 0),
      contextSize: Math.min(contextSize, contextLength || contextSize),
    });
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
      tensorTypes: (info["tensor_types"] ?? {}) as Record<string, number>,
      memory,
    };
  }
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
