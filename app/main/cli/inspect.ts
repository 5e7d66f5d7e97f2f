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

interface TypeShare { type: string; tensors: number; parameters: number; bytes: number; bits_per_weight: number | null; byte_share: number }

function isTypeMix(value: unknown): value is TypeShare[] {
  return Array.isArray(value) && value.every((r) => r !== null && typeof r === "object" && typeof (r as TypeShare).type === "string");
}

const bpw = (v: unknown) => (typeof v === "number" ? v.toFixed(2) : "-");

/** One line per type, largest first: "q4_K: 7 tensors, 1,048,576 parameters, 4.50 bpw, 61.3% of the bytes". */
function formatTypeMix(mix: TypeShare[], indent: string): string[] {
  return mix.map((r) => `${indent}${r.type}: ${r.tensors} tensors, ${r.parameters.toLocaleString("en-US")} parameters, ` +
    `${bpw(r.bits_per_weight)} bpw, ${(100 * r.byte_share).toFixed(1)}% of the bytes`);
}

/** `key: value` lines; nested objects indented (metadata, tensor types). */
function formatText(obj: Record<string, unknown>, indent = ""): string[] {
  const lines: string[] = [];
  for (const [key, value] of Object.entries(obj)) {
    if (key === "type_mix" && isTypeMix(value)) {
      lines.push(`${indent}${key}:`);
      lines.push(...formatTypeMix(value, indent + "  "));
    } else if (key.endsWith("bits_per_weight") && typeof value === "number") {
      lines.push(`${indent}${key}: ${bpw(value)}`);
    } else if (value !== null && typeof value === "object" && !Array.isArray(value)) {
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
