// guild inspect: what a model file holds, without loading its weights.
import { inspectModel } from "../runtime/model.js";
import { NativeAddonError } from "../runtime/native.js";
import { parseFlags, requireFlags, type FlagSpecs } from "./args.js";
import type { Command } from "./command.js";
import { CliError, exitOk, fileError } from "./errors.js";
import { checkModelFile } from "./model-file.js";
import { Output } from "./output.js";

const flags = {
  model: { type: "string" },
  json: { type: "boolean" },
} as const satisfies FlagSpecs;

const usage = "guild inspect --model PATH [--json]";

function formatScalar(value: unknown): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** `key: value` lines; nested objects indented (metadata, tensor types). */
function formatText(obj: Record<string, unknown>, indent = ""): string[] {
  const lines: string[] = [];
  for (const [key, value] of Object.entries(obj)) {
    if (value !== null && typeof value === "object" && !Array.isArray(value)) {
      lines.push(`${indent}${key}:`);
      lines.push(...formatText(value as Record<string, unknown>, indent + "  "));
    } else {
      lines.push(`${indent}${key}: ${formatScalar(value)}`);
    }
  }
  return lines;
}

async function run(argv: readonly string[]): Promise<number> {
  const f = parseFlags(argv, flags, usage);
  requireFlags(f, ["model"], usage);
  const file = f.model!;
  await checkModelFile(file);
  let info: Record<string, unknown>;
  try {
    info = await inspectModel(file);
  } catch (err) {
    if (err instanceof NativeAddonError) throw new CliError(err.message);
    throw fileError(file, err);
  }
  const out = new Output();
  out.line(f.json ? JSON.stringify(info, null, 2) : formatText(info).join("\n"));
  await out.flush();
  return exitOk;
}

export const inspectCommand: Command = {
  name: "inspect",
  summary: "describe a model file (architecture, tensors, experts, metadata) without loading it",
  usage,
  run,
};
