// A copy of the embedded demo model whose vocabulary spells some tokens
// differently: how the tests get a real model, run by the real runtime, whose
// replies carry text the demo model never writes (a `<think>` block, harmony's
// channel tokens, hostile markup). The weights and the token ids are the demo
// model's, so it generates the same ids; only what they read as changes. The
// GGUF is rewritten around the new tokenizer.ggml.tokens array: everything
// else is copied, the tensor data realigned (tensor offsets are relative to
// the data section, so none of them changes). Byte-level BPE (gpt2) only.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { embeddedModelPath } from "../main/paths.js";

const ggufMagic = 0x46554747; // "GGUF", little-endian
const typeSizes: Record<number, number> = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
const typeString = 8;
const typeArray = 9;
const tokensKey = "tokenizer.ggml.tokens";

/** Where the parts of a GGUF file lie. */
interface Layout {
  alignment: number;
  /** The tokens array's value: from its element type to its last string. */
  tokens: { at: number; end: number; values: string[] };
  /** The end of the tensor infos (where the padding before the data begins). */
  infosEnd: number;
  /** Where the tensor data begins. */
  dataAt: number;
}

function layoutOf(bytes: Buffer, file: string): Layout {
  let at = 0;
  const u32 = () => { const v = bytes.readUInt32LE(at); at += 4; return v; };
  const u64 = () => { const v = Number(bytes.readBigUInt64LE(at)); at += 8; return v; };
  const str = () => { const n = u64(); const s = bytes.toString("utf8", at, at + n); at += n; return s; };
  const skip = (type: number): void => {
    if (type === typeString) {
      const n = u64();
      at += n;
    } else if (type === typeArray) {
      const elem = u32();
      const n = u64();
      for (let i = 0; i < n; i++) skip(elem);
    } else {
      const size = typeSizes[type];
      if (size === undefined) throw new Error(`${file}: unknown GGUF value type ${type}`);
      at += size;
    }
  };
  if (u32() !== ggufMagic) throw new Error(`${file}: not a GGUF file`);
  if (u32() !== 3) throw new Error(`${file}: only GGUF version 3 is rewritten`);
  const tensorCount = u64();
  const kvCount = u64();
  let alignment = 32;
  let tokens: Layout["tokens"] | null = null;
  for (let i = 0; i < kvCount; i++) {
    const key = str();
    const type = u32();
    if (key === "general.alignment" && type === 4) alignment = bytes.readUInt32LE(at);
    if (key === tokensKey) {
      const start = at;
      if (type !== typeArray || u32() !== typeString) throw new Error(`${file}: ${tokensKey} is not an array of strings`);
      const n = u64();
      const values: string[] = [];
      for (let j = 0; j < n; j++) values.push(str());
      tokens = { at: start, end: at, values };
      continue;
    }
    skip(type);
  }
  if (tokens === null) throw new Error(`${file}: no ${tokensKey}`);
  for (let i = 0; i < tensorCount; i++) {
    str();
    const dims = u32();
    at += 8 * dims + 4 + 8; // dims, type, offset
  }
  const infosEnd = at;
  return { alignment, tokens, infosEnd, dataAt: Math.ceil(infosEnd / alignment) * alignment };
}

/** The demo model's vocabulary, as GGUF stores it (byte-level text: see {@link fromByteLevel}). */
export function readTokens(file = embeddedModelPath()): string[] {
  return layoutOf(readFileSync(file), file).tokens.values;
}

/**
 * Writes `<dir>/<name>.gguf` (dir: a fresh temporary one), the demo model with
 * token `id` spelled `spellings.get(id)` (byte-level text), and returns its path.
 */
export function modelWithTokens(spellings: ReadonlyMap<number, string>, name = "vocab-test", dir = mkdtempSync(path.join(os.tmpdir(), "guild-vocab-"))): string {
  const demo = embeddedModelPath();
  const bytes = readFileSync(demo);
  const { alignment, tokens, infosEnd, dataAt } = layoutOf(bytes, demo);
  const values = tokens.values.map((v, id) => spellings.get(id) ?? v);
  for (const id of spellings.keys()) if (!(id >= 0 && id < values.length)) throw new Error(`no token ${id} (the vocabulary has ${values.length})`);
  const array: Buffer[] = [u32(typeString), u64(values.length)];
  for (const v of values) {
    const b = Buffer.from(v, "utf8");
    array.push(u64(b.length), b);
  }
  const head = Buffer.concat([bytes.subarray(0, tokens.at), ...array, bytes.subarray(tokens.end, infosEnd)]);
  const padding = Buffer.alloc((alignment - (head.length % alignment)) % alignment);
  const file = path.join(dir, `${name}.gguf`);
  writeFileSync(file, Buffer.concat([head, padding, bytes.subarray(dataAt)]));
  return file;
}

// GPT-2's byte-level text: every byte is one code point, the printable ones
// themselves, the others (space, newline, …) moved above 255 (space is Ġ).
const byteToChar: string[] = [];
{
  const printable = (b: number) => (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
  let next = 256;
  for (let b = 0; b < 256; b++) byteToChar.push(String.fromCodePoint(printable(b) ? b : next++));
}
const charToByte = new Map(byteToChar.map((c, b) => [c, b]));

/** Text as a byte-level BPE token spells it. */
export function toByteLevel(text: string): string {
  return [...Buffer.from(text, "utf8")].map((b) => byteToChar[b]).join("");
}

/** What a byte-level BPE token's spelling reads as. */
export function fromByteLevel(spelling: string): string {
  return Buffer.from([...spelling].map((c) => {
    const b = charToByte.get(c);
    if (b === undefined) throw new Error(`not byte-level text: ${JSON.stringify(spelling)}`);
    return b;
  })).toString("utf8");
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
}

function u64(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64LE(BigInt(n));
  return b;
}
