// Finding and opening the model file a command names.
import { existsSync } from "node:fs";
import { stat } from "node:fs/promises";

import { embeddedModelPath } from "../paths.js";
import { GuildModel } from "../runtime/model.js";
import { NativeAddonError } from "../runtime/native.js";
import type { GpuChoice, KvCacheType } from "../runtime/options.js";
import { CliError, fileError } from "./errors.js";

/** The model `guild run` uses without --model: $GUILD_MODEL, else the embedded default. */
export function defaultModelPath(): string {
  const fromEnv = process.env["GUILD_MODEL"];
  if (fromEnv) return fromEnv;
  const embedded = embeddedModelPath();
  if (existsSync(embedded)) return embedded;
  throw new CliError(
    `the embedded default model is missing (${embedded}): pass --model PATH (with npm start: npm start -- --model PATH) or set GUILD_MODEL`,
  );
}

/** Fails with one clear line when `file` is missing, a directory, or unreadable. */
export async function checkModelFile(file: string): Promise<void> {
  try {
    const st = await stat(file);
    if (st.isDirectory()) throw new CliError(`${file}: is a directory, not a model file`);
    if (!st.isFile()) throw new CliError(`${file}: not a regular file`);
  } catch (err) {
    if (err instanceof CliError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") throw new CliError(`${file}: no such file`);
    if (code === "EACCES") throw new CliError(`${file}: permission denied`);
    throw fileError(file, err);
  }
}

export interface OpenModelOptions {
  threads?: number | undefined;
  contextSize?: number | undefined;
  kvCacheType?: KvCacheType | undefined;
  /** The user's kernel packages directory (--packages-dir); absent: $GUILD_PACKAGES_DIR, else the user's. */
  packagesDir?: string | undefined;
  gpu?: GpuChoice | undefined;
  gpuBudgetGiB?: number | undefined;
  expertsOnCpu?: boolean | undefined;
  gpuPeers?: string | undefined;
  gpuPeerBudgetGiB?: number | undefined;
  /** The tokenizer only (tokenize / detokenize): works on vocab-only files, reads no weights. */
  vocabOnly?: boolean | undefined;
  signal?: AbortSignal | undefined;
}

/** Loads a model for a command; every failure is a CliError naming the file. */
export async function openModel(file: string, options: OpenModelOptions = {}): Promise<GuildModel> {
  await checkModelFile(file);
  try {
    return await GuildModel.load(file, {
      ...(options.threads !== undefined && { threads: options.threads }),
      ...(options.contextSize !== undefined && { contextSize: options.contextSize }),
      ...(options.kvCacheType !== undefined && { kvCacheType: options.kvCacheType }),
      ...(options.packagesDir !== undefined && { packagesDir: options.packagesDir }),
      ...(options.gpu !== undefined && { gpu: options.gpu }),
      ...(options.gpuBudgetGiB !== undefined && { gpuBudgetGiB: options.gpuBudgetGiB }),
      ...(options.expertsOnCpu !== undefined && { expertsOnCpu: options.expertsOnCpu }),
      ...(options.gpuPeers !== undefined && { gpuPeers: options.gpuPeers }),
      ...(options.gpuPeerBudgetGiB !== undefined && { gpuPeerBudgetGiB: options.gpuPeerBudgetGiB }),
      ...(options.vocabOnly !== undefined && { vocabOnly: options.vocabOnly }),
      ...(options.signal !== undefined && { signal: options.signal }),
    });
  } catch (err) {
    if (options.signal?.aborted) throw err;
    if (err instanceof NativeAddonError) throw new CliError(err.message);
    throw fileError(file, err);
  }
}
