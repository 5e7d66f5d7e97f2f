// ApiServer: the local HTTP server (node:http, no framework) in front of
// RuntimeHost. It owns what every route shares, the safety checks first:
//   - binds 127.0.0.1 unless told otherwise; a non-loopback bind needs an API key;
//   - DNS-rebinding defence: exactly one Host header, naming this server
//     (localhost, 127.0.0.1 or [::1] with the bound port; the bound address
//     too when it was bound to a non-loopback address explicitly);
//   - a request with an Origin header is refused unless the origin is listed
//     (or is this server itself); CORS headers only for listed origins;
//   - API keys (Authorization: Bearer KEY) when configured, except on the
//     paths a RouteModule authenticates itself (web mode's session);
//   - a request-body size limit (enforced by the routes that read bodies).
// Then the routes: the OpenAI-compatible API (openai-routes.ts) and any extra
// RouteModules (web mode). Nothing here loads files or changes packages.
// docs/API.md describes the behaviour.
import { createHash, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { isIP } from "node:net";
import { hostname, networkInterfaces } from "node:os";
import type { Socket } from "node:net";

import type { RouteModule } from "./http-routes.js";
import { ApiError, defaultMaxBodyBytes, openAiRoutes, sendError } from "./openai-routes.js";
import type { RuntimeHost } from "./runtime-host.js";

export interface ApiServerOptions {
  /** Address to bind. Defaults to {@link defaultApiHost}; any non-loopback address requires apiKeys. */
  host?: string;
  /** Port to bind; 0 = an ephemeral port. Defaults to {@link defaultApiPort}. */
  port?: number;
  /**
   * When non-empty, every request must carry `Authorization: Bearer <one of these>`,
   * except on paths an extra RouteModule authenticates itself (`authenticates`).
   */
  apiKeys?: string[];
  /** Browser origins (scheme://host[:port]) allowed to call the API cross-origin. */
  allowedOrigins?: string[];
  /** Largest request body accepted (413 beyond). Defaults to {@link defaultMaxBodyBytes}. */
  maxBodyBytes?: number;
  /** More routes (e.g. web mode), tried after the OpenAI routes. */
  extraRoutes?: RouteModule[];
  /** Told about every request when its answer ends (the desktop app's request log). */
  onRequest?: (entry: { method: string; path: string; status: number; ms: number }) => void;
}

export const defaultApiHost = "127.0.0.1";
export const defaultApiPort = 8080;

/** True for addresses that only this machine can reach. */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  if (h === "localhost" || h.endsWith(".localhost")) return true;
  if (isIP(h) === 4) return h.startsWith("127.");
  if (isIP(h) === 6) return h === "::1" || h === "0:0:0:0:0:0:0:1" || /^::ffff:127\./.test(h);
  return false;
}

function isWildcard(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "");
  return h === "0.0.0.0" || h === "::" || h === "0:0:0:0:0:0:0:0";
}

/** An origin as browsers send it: scheme://host[:port], lower case, default port dropped. */
export function normalizeOrigin(origin: string): string | null {
  try {
    const u = new URL(origin);
    if (u.protocol !== "http:" && u.protocol !== "https:") return null;
    if ((u.pathname !== "/" && u.pathname !== "") || u.search || u.hash || u.username || u.password) return null;
    return u.origin;
  } catch {
    return null;
  }
}

const digest = (s: string) => createHash("sha256").update(s).digest();

export class ApiServer {
  readonly host: string;
  private readonly port: number;
  private readonly keys: Buffer[];
  private readonly origins: Set<string>;
  private readonly modules: RouteModule[];
  private server: Server | null = null;
  private boundPort = 0;
  private readonly sockets = new Set<Socket>();
  private readonly generations = new Set<string>();
  private readonly onRequest: ApiServerOptions["onRequest"];

  constructor(readonly runtime: RuntimeHost, options: ApiServerOptions = {}) {
    this.onRequest = options.onRequest;
    this.host = options.host ?? defaultApiHost;
    this.port = options.port ?? defaultApiPort;
    if (!Number.isInteger(this.port) || this.port < 0 || this.port > 65535) throw new Error(`invalid port ${this.port}`);
    const keys = (options.apiKeys ?? []).filter((k) => k !== "");
    if (!isLoopbackHost(this.host) && keys.length === 0)
      throw new Error(`binding ${this.host} (not a loopback address) requires at least one API key`);
    this.keys = keys.map(digest);
    this.origins = new Set<string>();
    for (const o of options.allowedOrigins ?? []) {
      const n = normalizeOrigin(o);
      if (n === null) throw new Error(`invalid origin ${JSON.stringify(o)}: expected scheme://host[:port]`);
      this.origins.add(n);
    }
    const maxBodyBytes = options.maxBodyBytes ?? defaultMaxBodyBytes;
    this.modules = [
      openAiRoutes(runtime, {
        maxBodyBytes,
        onGeneration: (id, done) => (done ? this.generations.delete(id) : this.generations.add(id)),
      }),
      ...(options.extraRoutes ?? []),
    ];
  }

  /** The server's base URL once started. */
  get url(): string {
    const h = this.host.includes(":") && !this.host.startsWith("[") ? `[${this.host}]` : this.host;
    return `http://${h}:${this.boundPort}`;
  }

  async start(): Promise<{ url: string }> {
    if (this.server) throw new Error("the API server is already started");
    const server = createServer({ requestTimeout: 60_000, headersTimeout: 30_000, keepAliveTimeout: 5_000 }, (req, res) => {
      void this.handle(req, res);
    });
    server.on("connection", (s) => {
      this.sockets.add(s);
      s.once("close", () => this.sockets.delete(s));
    });
    server.on("clientError", (_err, socket) => {
      if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
      else socket.destroy();
    });
    server.on("upgrade", (req: IncomingMessage, socket, head) => {
      const checked = this.check(req);
      const url = checked instanceof ApiError || this.selfAuthenticated(checked) || this.authorized(req) ? checked
        : new ApiError(401, "an API key is required", "authentication_error", null, "invalid_api_key");
      if (url instanceof ApiError) {
        socket.end(`HTTP/1.1 ${url.status} ${url.code ?? "refused"}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
        return;
      }
      for (const m of this.modules) if (m.upgrade?.(req, socket, head, url)) return;
      socket.end("HTTP/1.1 404 Not Found\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.port, this.host.replace(/^\[|\]$/g, ""), () => {
        server.off("error", reject);
        resolve();
      });
    });
    const address = server.address();
    this.boundPort = typeof address === "object" && address !== null ? address.port : this.port;
    this.server = server;
    return { url: this.url };
  }

  /** Cancels the API's generations, closes every connection and stops listening. */
  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = null;
    for (const id of this.generations) this.runtime.cancel(id);
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    // Give cancelled streams a moment to end cleanly, then drop what is left.
    const deadline = Date.now() + 2000;
    while (this.generations.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    for (const s of this.sockets) s.destroy();
    await closed;
  }

  private hostNames: Set<string> | null = null;

  /** Host names a request's Host header may carry (before the port). */
  private allowedHostNames(): Set<string> {
    if (this.hostNames) return this.hostNames;
    const names = new Set(["localhost", "127.0.0.1", "[::1]"]);
    if (!isLoopbackHost(this.host)) {
      if (isWildcard(this.host)) {
        names.add(hostname().toLowerCase());
        for (const list of Object.values(networkInterfaces()))
          for (const a of list ?? []) names.add(a.family === "IPv6" ? `[${a.address.toLowerCase()}]` : a.address);
      } else {
        const h = this.host.toLowerCase().replace(/^\[|\]$/g, "");
        names.add(isIP(h) === 6 ? `[${h}]` : h);
      }
    }
    return (this.hostNames = names);
  }

  /** The checks every request passes before any route; returns its URL or the error to answer. */
  private check(req: IncomingMessage): URL | ApiError {
    // Node keeps the first of several Host headers; a proxy may route by another.
    if ((req.headersDistinct.host?.length ?? 0) > 1)
      return new ApiError(400, "the request has more than one Host header: send exactly one", "invalid_request_error", null, "duplicate_host");
    const host = (req.headers.host ?? "").toLowerCase();
    const m = /^(\[[0-9a-f:.]+\]|[^:[\]]+)(?::(\d+))?$/.exec(host);
    const port = m?.[2] === undefined ? 80 : Number(m[2]);
    if (!m || port !== this.boundPort || !this.allowedHostNames().has(m[1]!))
      return new ApiError(403, `forbidden host ${JSON.stringify(req.headers.host ?? "")}: use http://127.0.0.1:${this.boundPort}`, "permission_error", null, "forbidden_host");
    const origin = req.headers.origin;
    if (origin !== undefined && !this.originAllowed(origin, host))
      return new ApiError(403, `cross-origin requests from ${JSON.stringify(origin)} are not allowed`, "permission_error", null, "forbidden_origin");
    try {
      return new URL(req.url ?? "/", `http://${host}`);
    } catch {
      return new ApiError(400, "malformed request URL");
    }
  }

  private originAllowed(origin: string, host: string): boolean {
    const n = normalizeOrigin(origin);
    if (n === null) return false;
    return this.origins.has(n) || n === `http://${host}`;
  }

  /** True when a route module checks this path's credentials itself (the API key is not asked for). */
  private selfAuthenticated(url: URL): boolean {
    return this.modules.some((m) => m.authenticates?.(url) === true);
  }

  private authorized(req: IncomingMessage): boolean {
    if (this.keys.length === 0) return true;
    const auth = req.headers.authorization ?? "";
    const m = /^Bearer\s+(.+)$/i.exec(auth.trim());
    const given = m ? m[1]! : typeof req.headers["x-api-key"] === "string" ? req.headers["x-api-key"] : "";
    if (given === "") return false;
    const d = digest(given);
    let ok = false;
    for (const k of this.keys) ok = timingSafeEqual(k, d) || ok;
    return ok;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const hook = this.onRequest;
    if (hook) {
      const started = performance.now();
      res.once("close", () => {
        try {
          hook({ method: req.method ?? "", path: (req.url ?? "").split("?")[0]!, status: res.statusCode, ms: performance.now() - started });
        } catch {
          // a log that fails does not touch the answer
        }
      });
    }
    try {
      const url = this.check(req);
      if (url instanceof ApiError) throw url;
      const origin = req.headers.origin;
      const listed = origin !== undefined && this.origins.has(normalizeOrigin(origin) ?? "");
      if (listed) {
        res.setHeader("access-control-allow-origin", normalizeOrigin(origin!)!);
        res.setHeader("vary", "Origin");
        res.setHeader("access-control-expose-headers", "x-guild-request-id, retry-after");
      }
      if (req.method === "OPTIONS") {
        if (listed) {
          res.writeHead(204, {
            "access-control-allow-methods": "GET, POST, OPTIONS",
            "access-control-allow-headers": "authorization, content-type, x-api-key, x-stainless-os, x-stainless-lang, x-stainless-package-version, x-stainless-runtime, x-stainless-runtime-version, x-stainless-arch, x-stainless-retry-count, x-stainless-timeout",
            "access-control-max-age": "600",
          });
        } else {
          res.writeHead(204, { allow: "GET, POST, OPTIONS" });
        }
        res.end();
        return;
      }
      if (!this.selfAuthenticated(url) && !this.authorized(req))
        throw new ApiError(401, req.headers.authorization === undefined && req.headers["x-api-key"] === undefined
          ? "an API key is required: send Authorization: Bearer <key>" : "invalid API key",
          "authentication_error", null, "invalid_api_key", { "www-authenticate": "Bearer" });
      for (const m of this.modules) if (await m.routes(req, res, url)) return;
      throw new ApiError(404, `unknown route ${req.method} ${url.pathname}`, "invalid_request_error", null, "unknown_route");
    } catch (err) {
      try {
        if (!(err instanceof ApiError)) process.emitWarning(`guild api: ${err instanceof Error ? err.message : String(err)}`);
        sendError(res, err);
      } catch {
        res.destroy();
      }
    }
  }
}
