// guild eval: logits for a token sequence, written as float32 little-endian.
import { writeFile } from "node:fs/promises";
import { endianness } from "node:os";

import type { GuildModel } from "../runtime/model.js";
import type { GuildSession } from "../runtime/session.js";
import { parseFlags, requireFlags, type FlagSpecs } from "./args.js";
import type { Command } from "./command.js";
import { CliError, exitInterrupted, exitOk, fileError, oneLine } from "./errors.js";
import { Interrupt } from "./interrupt.js";
import { openModel } from "./model-file.js";
import { checkTokenIds } from "./tokens.js";

const int32Max = 2 ** 31 - 1;

const flags = {
  model: { type: "string" },
  "prompt-tokens": { type: "ids" },
  "logits-out": { type: "string" },
  last: { type: "boolean" },
  threads: { type: "int", min: 0, max: 4096 },
  ctx: { type: "int", min: 0, max: int32Max },
  "kv-type": { type: "string", choices: ["f16", "f32"] },
  "packages-dir": { type: "string" },
} as const satisfies FlagSpecs;

const usage =
  "guild eval --model PATH --prompt-tokens ID,ID,... --logits-out FILE [--last] [--threads N] [--ctx N] [--kv-type f16|f32] [--packages-dir DIR]";

/** The context a sequence needs: its length rounded up to 64 (as the reference logits were made). */
function contextFor(n: number): number {
  return Math.ceil(n / 64) * 64;
}

function littleEndianBytes(logits: Float32Array): Uint8Array {
  if (endianness() === "LE") return new Uint8Array(logits.buffer, logits.byteOffset, logits.byteLength);
  const out = new DataView(new ArrayBuffer(logits.byteLength));
  logits.forEach((v, i) => out.setFloat32(i * 4, v, true));
  return new Uint8Array(out.buffer);
}

async function run(argv: readonly string[]): Promise<number> {
  const f = parseFlags(argv, flags, usage);
  requireFlags(f, ["model", "prompt-tokens", "logits-out"], usage);
  const file = f.model!;
  const tokens = f["prompt-tokens"]!;
  const outFile = f["logits-out"]!;
  const interrupt = new Interrupt();
  let model: GuildModel | undefined;
  let session: GuildSession | undefined;
  try {
    try {
      model = await openModel(file, { threads: f.threads, kvCacheType: f["kv-type"], packagesDir: f["packages-dir"], signal: interrupt.signal });
    } catch (err) {
      if (interrupt.interrupted) return exitInterrupted;
      throw err;
    }
    checkTokenIds(model, tokens, "--prompt-tokens");
    let logits: Float32Array;
    try {
      session = await model.createSession({ contextSize: f.ctx ?? contextFor(tokens.length) });
      logits = await session.eval(tokens, { allRows: f.last !== true });
    } catch (err) {
      throw fileError(file, err);
    }
    try {
      await writeFile(outFile, littleEndianBytes(logits));
    } catch (err) {
      throw new CliError(`${outFile}: cannot write the logits: ${oneLine((err as Error).message)}`);
    }
    return exitOk;
  } finally {
    session?.dispose();
    model?.dispose();
    interrupt.dispose();
  }
}

export const evalCommand: Command = {
  name: "eval",
  summary: "write the logits of a token sequence (float32 LE, one row of n_vocab per position)",
  usage,
  run,
};
