// A synchronous read of a small file the services own (settings.json, read
// once while the services are built), under safe-file.ts's rules: opened
// without blocking, a regular file on the handle's fstat, capped in size,
// errors naming the file and the reason but never its bytes.
import { closeSync, constants, fstatSync, openSync, readSync } from "node:fs";

/** The file's text, or null when it does not exist (nor its folder). Throws one line for anything else. */
export function readRegularTextSync(file: string, maxBytes: number): string | null {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return null;
    throw new Error(`${file}: cannot open (${code ?? "error"})`);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new Error(`${file}: not a regular file`);
    if (st.size > maxBytes) throw new Error(`${file}: larger than ${maxBytes} bytes`);
    const buf = Buffer.alloc(Math.min(maxBytes + 1, Math.max(st.size, 4096)));
    let n = 0;
    for (;;) {
      const got = readSync(fd, buf, n, buf.length - n, null);
      if (got === 0) break;
      n += got;
      if (n > maxBytes) throw new Error(`${file}: larger than ${maxBytes} bytes`);
      if (n === buf.length) break;
    }
    return buf.subarray(0, n).toString("utf8");
  } finally {
    closeSync(fd);
  }
}
