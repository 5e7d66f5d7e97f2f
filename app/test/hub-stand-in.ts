// A local stand-in for the Hugging Face Hub (node:http), for tests on machines
// without internet: it serves fixture files under the Hub's routes and JSON
// shapes, so the app's hub endpoint (GUILD_HF_ENDPOINT) can point at it.
//   GET /api/models?search=&filter=gguf        [{_id, id, modelId, downloads, likes, tags, lastModified}]
//   GET /api/models/{repo}/tree/main           [{type, oid, size, path, lfs?: {oid (sha256), size, pointerSize}}],
//                                              paged (Link: <…&cursor=N>; rel="next") when pageSize is set
//   GET /{repo}/resolve/main/{path}            302 to /cdn/… (as the Hub redirects to its CDN), which
//                                              serves the bytes with Range support (206, 416)
// Test controls: cut the next download of a file after N bytes (the socket is
// destroyed), serve a file with one byte flipped while the tree keeps the true
// sha256, pace downloads, and a log of every request with its Range header.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";

export interface StandInFile {
  /** Path in the repository ("Q4_K_M/model-00001-of-00002.gguf"). */
  path: string;
  /** The fixture file whose bytes it serves. */
  source?: string;
  /** Or the bytes themselves. */
  bytes?: Buffer;
}

export interface StandInRepo {
  id: string;
  files: StandInFile[];
  downloads?: number;
  likes?: number;
}

export interface HubStandInOptions {
  repos: StandInRepo[];
  /** Downloads are sent at about this many bytes a second (0 or absent: at once). */
  bytesPerSecond?: number;
  /** Tree entries per page (absent: one page). */
  pageSize?: number;
}

export interface StandInRequest {
  method: string;
  path: string;
  range: string | null;
}

interface Served {
  repo: string;
  path: string;
  bytes: Buffer;
  sha256: string;
  gitOid: string;
}

export class HubStandIn {
  readonly requests: StandInRequest[] = [];
  private readonly files = new Map<string, Served>();
  private readonly cuts = new Map<string, number>();
  private readonly corrupted = new Set<string>();
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  private port = 0;
  bytesPerSecond: number;

  constructor(private readonly options: HubStandInOptions) {
    this.bytesPerSecond = options.bytesPerSecond ?? 0;
    for (const repo of options.repos) {
      for (const f of repo.files) {
        const bytes = f.bytes ?? readFileSync(f.source!);
        this.files.set(`${repo.id}/${f.path}`, {
          repo: repo.id, path: f.path, bytes,
          sha256: createHash("sha256").update(bytes).digest("hex"),
          gitOid: createHash("sha1").update(`blob ${bytes.length}\0`).update(bytes).digest("hex"),
        });
      }
    }
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The sha256 the tree lists for a file. */
  sha256(repo: string, filePath: string): string {
    return this.file(repo, filePath).sha256;
  }

  bytes(repo: string, filePath: string): Buffer {
    return this.file(repo, filePath).bytes;
  }

  /** The next download of this file stops after `afterBytes` bytes of its body: the connection is destroyed. */
  cutNext(repo: string, filePath: string, afterBytes: number): void {
    this.cuts.set(`${repo}/${filePath}`, afterBytes);
  }

  /** Serves this file with one byte changed (its listed sha256 stays the true one) until healed. */
  corrupt(repo: string, filePath: string, on = true): void {
    if (on) this.corrupted.add(`${repo}/${filePath}`);
    else this.corrupted.delete(`${repo}/${filePath}`);
  }

  /** The Range headers of the downloads of one file, in order (null: the whole file). */
  rangesOf(repo: string, filePath: string): (string | null)[] {
    const p = `/cdn/${repo}/${filePath}`;
    return this.requests.filter((r) => r.path === p).map((r) => r.range);
  }

  async start(): Promise<string> {
    const server = createServer((req, res) => this.handle(req, res));
    server.on("connection", (s) => {
      this.sockets.add(s);
      s.once("close", () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
    return this.url;
  }

  async stop(): Promise<void> {
    const s = this.server;
    this.server = null;
    if (!s) return;
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }

  private file(repo: string, filePath: string): Served {
    const f = this.files.get(`${repo}/${filePath}`);
    if (!f) throw new Error(`the stand-in has no ${repo}/${filePath}`);
    return f;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? "/", "http://stand-in");
    const p = decodeURIComponent(url.pathname);
    this.requests.push({ method: req.method ?? "", path: p, range: typeof req.headers.range === "string" ? req.headers.range : null });
    const json = (status: number, body: unknown, headers: Record<string, string> = {}): void => {
      res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(body));
    };
    if (req.method !== "GET" && req.method !== "HEAD") return json(405, { error: "method not allowed" });
    if (p === "/api/models") return json(200, this.search(url));
    let m = /^\/api\/models\/([^/]+\/[^/]+)\/tree\/main(?:\/.*)?$/.exec(p);
    if (m) return this.tree(m[1]!, url, json);
    m = /^\/([^/]+\/[^/]+)\/resolve\/main\/(.+)$/.exec(p);
    if (m) {
      if (!this.files.has(`${m[1]}/${m[2]}`)) return json(404, { error: "Entry not found" });
      // The Hub answers downloads with a redirect to its CDN.
      res.writeHead(302, { location: `/cdn/${m[1]}/${m[2]!.split("/").map(encodeURIComponent).join("/")}` }).end();
      return;
    }
    m = /^\/cdn\/([^/]+\/[^/]+)\/(.+)$/.exec(p);
    if (m) return this.serveFile(m[1]!, m[2]!, req, res);
    json(404, { error: "not found" });
  }

  private search(url: URL): unknown[] {
    const q = (url.searchParams.get("search") ?? "").toLowerCase();
    const gguf = url.searchParams.get("filter") === "gguf";
    return this.options.repos
      .filter((r) => r.id.toLowerCase().includes(q))
      .filter((r) => !gguf || r.files.some((f) => f.path.endsWith(".gguf")))
      .map((r) => ({
        _id: createHash("md5").update(r.id).digest("hex").slice(0, 24), id: r.id, modelId: r.id,
        likes: r.likes ?? 0, downloads: r.downloads ?? 0, private: false, tags: ["gguf"], library_name: "gguf",
        createdAt: "2025-01-02T03:04:05.000Z", lastModified: "2025-01-02T03:04:05.000Z",
      }));
  }

  private tree(repoId: string, url: URL, json: (s: number, b: unknown, h?: Record<string, string>) => void): void {
    const repo = this.options.repos.find((r) => r.id === repoId);
    if (!repo) return json(404, { error: "Repository not found" });
    const entries: unknown[] = [];
    const dirs = new Set<string>();
    for (const f of repo.files) {
      const parts = f.path.split("/");
      for (let i = 1; i < parts.length; i++) dirs.add(parts.slice(0, i).join("/"));
    }
    for (const d of dirs) entries.push({ type: "directory", oid: createHash("sha1").update(d).digest("hex"), size: 0, path: d });
    for (const f of repo.files) {
      const s = this.file(repo.id, f.path);
      entries.push({
        type: "file", oid: s.gitOid, size: s.bytes.length, path: f.path,
        lfs: { oid: s.sha256, size: s.bytes.length, pointerSize: 135 },
      });
    }
    const size = this.options.pageSize;
    if (!size) return json(200, entries);
    const at = Number(url.searchParams.get("cursor") ?? 0);
    const page = entries.slice(at, at + size);
    const headers: Record<string, string> = {};
    if (at + size < entries.length) {
      const next = new URL(url.href.replace("http://stand-in", this.url));
      next.searchParams.set("cursor", String(at + size));
      headers["link"] = `<${next.href}>; rel="next"`;
    }
    json(200, page, headers);
  }

  private serveFile(repo: string, filePath: string, req: IncomingMessage, res: ServerResponse): void {
    const key = `${repo}/${filePath}`;
    const f = this.files.get(key);
    if (!f) return void res.writeHead(404).end();
    let body = f.bytes;
    if (this.corrupted.has(key)) {
      body = Buffer.from(f.bytes);
      const at = Math.floor(body.length / 2);
      body[at] = body[at]! ^ 0xff;
    }
    const total = body.length;
    let start = 0;
    let end = total - 1;
    let status = 200;
    const range = req.headers.range;
    if (typeof range === "string") {
      const m = /^bytes=(\d+)-(\d*)$/.exec(range);
      if (!m || Number(m[1]) >= total) {
        res.writeHead(416, { "content-range": `bytes */${total}` }).end();
        return;
      }
      start = Number(m[1]);
      if (m[2]) end = Math.min(total - 1, Number(m[2]));
      status = 206;
    }
    const headers: Record<string, string | number> = {
      "content-type": "application/octet-stream", "accept-ranges": "bytes", "content-length": end - start + 1,
      etag: `"${f.sha256}"`, "x-linked-size": total,
    };
    if (status === 206) headers["content-range"] = `bytes ${start}-${end}/${total}`;
    res.writeHead(status, headers);
    if (req.method === "HEAD") return void res.end();
    const cut = this.cuts.get(key);
    if (cut !== undefined) this.cuts.delete(key);
    void this.send(res, body.subarray(start, end + 1), cut);
  }

  /** Writes `data` in pieces at the configured pace; destroys the connection after `cutAfter` bytes. */
  private async send(res: ServerResponse, data: Buffer, cutAfter: number | undefined): Promise<void> {
    const piece = 64 * 1024;
    let sent = 0;
    while (sent < data.length) {
      if (res.destroyed) return;
      let n = Math.min(piece, data.length - sent);
      if (cutAfter !== undefined && sent + n >= cutAfter) n = cutAfter - sent;
      if (n > 0) {
        const ok = res.write(data.subarray(sent, sent + n));
        sent += n;
        if (!ok) await new Promise((r) => res.once("drain", r));
      }
      if (cutAfter !== undefined && sent >= cutAfter) {
        // Let the bytes so far reach the client, then drop the connection as a network failure would.
        await new Promise((r) => setTimeout(r, 50));
        res.socket?.destroy();
        return;
      }
      if (this.bytesPerSecond > 0) await new Promise((r) => setTimeout(r, (n / this.bytesPerSecond) * 1000));
    }
    res.end();
  }
}
