// An uploaded .gkpkg (base64 from the renderer) as a file on disk for as long
// as the installer needs it: a private temporary folder, removed afterwards.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";

import { maxUploadBytes } from "../../shared/app-contract.js";
import { RuntimeError } from "./runtime-host.js";

export async function withUploadedFile<T>(fileName: string, base64: string, use: (file: string) => Promise<T>): Promise<T> {
  const base = path.basename(fileName.replace(/\\/g, "/")).replace(/[^A-Za-z0-9._-]+/g, "_").slice(0, 100);
  if (!base.toLowerCase().endsWith(".gkpkg")) throw new RuntimeError(`${fileName || "the file"} is not a .gkpkg archive`, "invalid");
  const bytes = Buffer.from(base64, "base64");
  if (bytes.length === 0) throw new RuntimeError(`${fileName} is empty`, "invalid");
  if (bytes.length > maxUploadBytes) throw new RuntimeError(`${fileName} is larger than ${maxUploadBytes / (1024 * 1024)} MiB; install it by path`, "invalid");
  const dir = await mkdtemp(path.join(os.tmpdir(), "guild-upload-"));
  try {
    const file = path.join(dir, base);
    await writeFile(file, bytes, { mode: 0o600 });
    try {
      return await use(file);
    } catch (err) {
      // The user knows the file by its own name, not by our temporary copy's path.
      if (err instanceof RuntimeError) throw new RuntimeError(err.message.split(file).join(base), err.code);
      throw err;
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
