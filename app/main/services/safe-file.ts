// Opening files the services read from paths they are given: regular files
// only, read under a size cap, and errors that name the file but never echo
// its bytes. A FIFO, a device, a socket or a directory is refused from the
// open handle's fstat before anything is read, and the open itself cannot
// block (O_NONBLOCK), so a path like /dev/zero or a FIFO with no writer costs
// one open and one fstat instead of unbounded memory or a libuv pool thread.
import { constants, type Stats } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";

export type SafeFileProblem = "missing" | "denied" | "symlink" | "not_regular" | "too_large" | "unreadable";

/** "<file>: <reason>"; `reason` alone for callers that name the file their own way. */
export class SafeFileError extends Error {
  override name = "SafeFileError";
  constructor(readonly file: string, readonly reason: string, readonly problem: SafeFileProblem) {
    super(`${file}: ${reason}`);
  }
}

export interface SafeOpenOptions {
  /** What the file should be, for messages ("startup profile", "model file"). */
  what: string;
  /** Refuse a path whose last component is a symbolic link (O_NOFOLLOW). */
  noFollow?: boolean;
}

export interface SafeReadOptions extends SafeOpenOptions {
  /** The most bytes read; a larger (or growing) file is refused. */
  maxBytes: number;
}

// O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer
// (regular files ignore the flag). Both flags are absent on Windows (0 there).
const nonBlocking = constants.O_NONBLOCK ?? 0;
const noFollowFlag = constants.O_NOFOLLOW ?? 0;
const readChunkBytes = 1 << 20;
const minReadBytes = 64 * 1024;

/** Opens `file` and checks, on the handle, that it is a regular file. The caller closes the handle. */
export async function openRegularFile(file: string, options: SafeOpenOptions): Promise<{ handle: FileHandle; stats: Stats }> {
  let handle: FileHandle;
  try {
    handle = await open(file, constants.O_RDONLY | nonBlocking | (options.noFollow ? noFollowFlag : 0));
  } catch (err) {
    throw openError(file, options, err);
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) throw new SafeFileError(file, `is ${kindOf(stats)}, not a ${options.what}`, "not_regular");
    return { handle, stats };
  } catch (err) {
    await handle.close().catch(() => undefined);
    if (err instanceof SafeFileError) throw err;
    throw new SafeFileError(file, `cannot read (${codeOf(err)})`, "unreadable");
  }
}

/** Checks that `file` is a regular file one can open for reading (for paths handed to the native runtime). */
export async function checkRegularFile(file: string, options: SafeOpenOptions): Promise<Stats> {
  const { handle, stats } = await openRegularFile(file, options);
  await handle.close().catch(() => undefined);
  return stats;
}

/**
 * Reads a regular file of at most `maxBytes`. The cap is checked on the
 * fstat size and again while reading, so a file that grows meanwhile stops
 * at the cap too.
 */
export async function readRegularFile(file: string, options: SafeReadOptions): Promise<Buffer> {
  const { handle, stats } = await openRegularFile(file, options);
  const tooLarge = () => new SafeFileError(file, `larger than ${formatLimit(options.maxBytes)}, too large for a ${options.what}`, "too_large");
  try {
    if (stats.size > options.maxBytes) throw tooLarge();
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      // Room for the rest of the file as fstat sized it (some files report 0), and never more than
      // one byte past the cap: that byte is enough to know the file is over it.
      const want = Math.min(readChunkBytes, options.maxBytes + 1 - total, Math.max(stats.size + 1 - total, minReadBytes));
      const chunk = Buffer.allocUnsafe(want);
      const { bytesRead } = await handle.read(chunk, 0, want, null);
      if (bytesRead === 0) break;
      chunks.push(bytesRead === want ? chunk : chunk.subarray(0, bytesRead));
      total += bytesRead;
      if (total > options.maxBytes) throw tooLarge();
    }
    return Buffer.concat(chunks, total);
  } catch (err) {
    if (err instanceof SafeFileError) throw err;
    throw new SafeFileError(file, `cannot read (${codeOf(err)})`, "unreadable");
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/** readRegularFile, decoded as UTF-8. */
export async function readRegularText(file: string, options: SafeReadOptions): Promise<string> {
  return (await readRegularFile(file, options)).toString("utf8");
}

function openError(file: string, options: SafeOpenOptions, err: unknown): SafeFileError {
  const code = codeOf(err);
  if (code === "ENOENT" || code === "ENOTDIR") return new SafeFileError(file, "no such file", "missing");
  if (code === "EACCES" || code === "EPERM") return new SafeFileError(file, "permission denied", "denied");
  if (code === "ELOOP") {
    return options.noFollow
      ? new SafeFileError(file, `is a symbolic link, not a ${options.what}`, "symlink")
      : new SafeFileError(file, "too many levels of symbolic links", "unreadable");
  }
  // Opening a socket gives ENXIO; a directory EISDIR on some systems.
  if (code === "ENXIO" || code === "ENODEV") return new SafeFileError(file, `is a socket or device, not a ${options.what}`, "not_regular");
  if (code === "EISDIR") return new SafeFileError(file, `is a directory, not a ${options.what}`, "not_regular");
  return new SafeFileError(file, `cannot open (${code})`, "unreadable");
}

function kindOf(s: Stats): string {
  if (s.isDirectory()) return "a directory";
  if (s.isFIFO()) return "a FIFO (named pipe)";
  if (s.isCharacterDevice() || s.isBlockDevice()) return "a device";
  if (s.isSocket()) return "a socket";
  return "an unusual file";
}

function codeOf(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === "string" ? code : err instanceof Error ? err.name : "unknown error";
}

function formatLimit(bytes: number): string {
  return bytes >= 1 << 20 && bytes % (1 << 20) === 0 ? `${bytes / (1 << 20)} MiB` : `${bytes} bytes`;
}
