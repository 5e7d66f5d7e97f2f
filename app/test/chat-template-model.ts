// A copy of the embedded demo model whose tokenizer.chat_template is another
// template: how the tests get a model file with a hostile template. The GGUF
// string is rewritten in place, at the same length (the rest padded with a
// Jinja comment, which renders nothing), so no offset in the file moves.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { embeddedModelPath } from "../main/paths.js";

const templateKey = Buffer.from("tokenizer.chat_template", "utf8");
const ggufString = 8;

/** Where a GGUF file's tokenizer.chat_template string lies: key (u64 length + bytes), type (u32), value (u64 length + bytes). */
function templateValue(bytes: Buffer, file: string): { at: number; length: number } | null {
  const keyAt = bytes.indexOf(Buffer.concat([u64(templateKey.length), templateKey]));
  if (keyAt < 0) return null;
  const typeAt = keyAt + 8 + templateKey.length;
  if (bytes.readUInt32LE(typeAt) !== ggufString) throw new Error(`${file}: tokenizer.chat_template is not a string`);
  return { at: typeAt + 12, length: Number(bytes.readBigUInt64LE(typeAt + 4)) };
}

/** A model file's chat template, or null when it has none. */
export function readChatTemplate(file: string): string | null {
  const bytes = readFileSync(file);
  const value = templateValue(bytes, file);
  return value === null ? null : bytes.subarray(value.at, value.at + value.length).toString("utf8");
}

/** Writes `<dir>/<name>.gguf` (dir: a fresh temporary one) and returns its path. */
export function modelWithChatTemplate(template: string, name = "template-test", dir = mkdtempSync(path.join(os.tmpdir(), "guild-template-"))): string {
  const demo = embeddedModelPath();
  const bytes = readFileSync(demo);
  const value = templateValue(bytes, demo);
  if (value === null) throw new Error("the demo model has no tokenizer.chat_template");
  const { at: valueAt, length: capacity } = value;
  const text = Buffer.from(template, "utf8");
  const padding = capacity - text.length;
  if (padding !== 0 && padding < 4) throw new Error(`the template must be exactly ${capacity} bytes or at most ${capacity - 4}`);
  const replacement = padding === 0 ? text : Buffer.concat([text, Buffer.from(`{#${" ".repeat(padding - 4)}#}`, "utf8")]);
  replacement.copy(bytes, valueAt);
  const file = path.join(dir, `${name}.gguf`);
  writeFileSync(file, bytes);
  return file;
}

function u64(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(n));
  return b;
}

/** Two nested loops of 10^10 iterations in all: hangs a renderer without limits for hours. */
export const nestedRangeTemplate = "{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}{% endfor %}{% endfor %}";
