// Web mode: the renderer in a browser tab. A RouteModule for ApiServer that
// serves the built renderer (dist/renderer, strict CSP) and the app contract
// over HTTP: POST /app/rpc/<service>/<method> with the JSON argument, and every
// app event on one Server-Sent Events stream, GET /app/events.
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import path from "node:path";

import {
  EVENT_NAMES, maxUploadBytes, OPERATIONS, validateRequest,
  type AppContract, type ContractErrorJson, type RequestSchema, type ServiceName,
} from "../../shared/app-contract.js";
import { projectRoot } from "../paths.js";
import type { RouteModule } from "../services/http-routes.js";
import type { AppServices } from "../services/index.js";
import { RuntimeError } from "../services/runtime-host.js";

export const CONTENT_SECURITY_POLICY = [
  "default-src 'none'", "script-src 'self'", "style-src 'self'", "img-src 'self' data:", "font-src 'self'",
  "connect-src 'self'", "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'",
].join("; ");

// Room for the largest upload (packages.installUpload: base64 is 4/3 of the bytes) and its JSON.
const maxBodyBytes = Math.ceil((maxUploadBytes * 4) / 3) + 64 * 1024;
const mimeTypes: Record<string, string> = {
  ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml", ".png": "image/png", ".json": "application/json", ".ico": "image/x-icon",
  ".woff2": "font/woff2", ".map": "application/json",
};

export interface WebRoutesOptions {
  /** The built renderer. Defaults to dist/renderer under the project root. */
  rendererDir?: string;
}

export function rendererDir(): string {
  return path.join(projectRoot(), "dist", "renderer");
}

export function createWebRoutes(services: Pick<AppServices, "contract" | "subscribe">, options: WebRoutesOptions = {}): RouteModule {
  const root = path.resolve(options.rendererDir ?? rendererDir());
  return {
    async routes(req, res, url) {
      const p = url.pathname;
      if (p.startsWith("/app/rpc/")) {
        await rpc(services.contract, req, res, p.slice("/app/rpc/".length));
        return true;
      }
      if (p === "/app/events") {
        events(services, req, res);
        return true;
      }
      if (p === "/" || p === "/app" || p === "/app/") {
        if (p === "/") {
          res.writeHead(302, { location: "/app/" }).end();
          return true;
        }
        return serveFile(root, "index.html", req, res);
      }
      if (p.startsWith("/app/")) return serveFile(root, decodeURIComponent(p.slice("/app/".length)), req, res);
      return false;
    },
  };
}

async function rpc(contract: AppContract, req: IncomingMessage, res: ServerResponse, rest: string): Promise<void> {
  if (req.method !== "POST") return sendError(res, 405, "use POST", "method_not_allowed");
  if (!sameOrigin(req)) return sendError(res, 403, "cross-origin requests are refused", "forbidden");
  if (!/^application\/json\b/i.test(req.headers["content-type"] ?? "")) return sendError(res, 415, "send application/json", "unsupported_media_type");
  const [service, method, ...extra] = rest.split("/");
  const ops = OPERATIONS as Record<string, Record<string, RequestSchema>>;
  if (extra.length > 0 || !service || !method || !Object.hasOwn(ops, service) || !Object.hasOwn(ops[service]!, method))
    return sendError(res, 404, `no operation ${rest}`, "not_found");
  let body: unknown;
  try {
    const text = await readBody(req);
    body = text.trim().length === 0 ? undefined : JSON.parse(text);
  } catch (err) {
    return sendError(res, 400, err instanceof Error ? err.message : "bad body", "invalid");
  }
  const problem = validateRequest(ops[service]![method]!, body);
  if (problem) return sendError(res, 400, `${service}.${method}: ${problem}`, "invalid");
  try {
    const impl = contract[service as ServiceName] as unknown as Record<string, (arg: unknown) => Promise<unknown>>;
    const result = await impl[method]!.call(impl, body);
    const json = JSON.stringify({ result: result ?? null });
    res.writeHead(200, { "content-type": "application/json; charset=utf-8", "cache-control": "no-store" }).end(json);
  } catch (err) {
    const code = err instanceof RuntimeError ? err.code : "failed";
    const status = code === "not_found" ? 404 : code === "invalid" ? 400
      : code === "busy" || code === "queue_full" || code === "cancelled" ? 409 : 500;
    sendError(res, status, err instanceof Error ? err.message : String(err), code);
  }
}

function events(services: Pick<AppServices, "subscribe">, req: IncomingMessage, res: ServerResponse): void {
  if (req.method !== "GET") return sendError(res, 405, "use GET", "method_not_allowed");
  if (!sameOrigin(req)) return sendError(res, 403, "cross-origin requests are refused", "forbidden");
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-store", connection: "keep-alive", "x-accel-buffering": "no",
  });
  res.flushHeaders();
  res.write(`retry: 1000\n: connected\n\n`);
  const names = new Set<string>(EVENT_NAMES);
  const off = services.subscribe((name, payload) => {
    if (names.has(name)) res.write(`event: ${name}\ndata: ${JSON.stringify(payload)}\n\n`);
  });
  const ping = setInterval(() => res.write(": ping\n\n"), 15_000);
  const close = () => {
    clearInterval(ping);
    off();
  };
  req.on("close", close);
  res.on("error", close);
}

async function serveFile(root: string, rel: string, req: IncomingMessage, res: ServerResponse): Promise<boolean> {
  if (req.method !== "GET" && req.method !== "HEAD") return false;
  const file = path.resolve(root, rel || "index.html");
  if (file !== root && !file.startsWith(root + path.sep)) {
    sendError(res, 403, "outside the app", "forbidden");
    return true;
  }
  let target = file;
  try {
    if (!(await stat(target)).isFile()) throw new Error("not a file");
  } catch {
    // Unknown paths without an extension are app routes: answer index.html.
    if (path.extname(file) !== "") return false;
    target = path.join(root, "index.html");
    try {
      await stat(target);
    } catch {
      res.writeHead(503, { "content-type": "text/plain; charset=utf-8" })
        .end("The renderer is not built: run `npm run build:renderer`.\n");
      return true;
    }
  }
  const ext = path.extname(target);
  res.writeHead(200, {
    "content-type": mimeTypes[ext] ?? "application/octet-stream",
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cross-origin-opener-policy": "same-origin",
    "cache-control": ext === ".html" ? "no-cache" : "public, max-age=3600",
  });
  if (req.method === "HEAD") res.end();
  else createReadStream(target).pipe(res);
  return true;
}

/** Browsers send Origin on cross-site requests: it must be this server. */
function sameOrigin(req: IncomingMessage): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > maxBodyBytes) {
        reject(new Error("the request body is too large"));
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

function sendError(res: ServerResponse, status: number, message: string, code: string): void {
  const body: ContractErrorJson = { error: { message, code } };
  res.writeHead(status, { "content-type": "application/json; charset=utf-8" }).end(JSON.stringify(body));
}
