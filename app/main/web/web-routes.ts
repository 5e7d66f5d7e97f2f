// Web mode: the renderer in a browser tab. A RouteModule for ApiServer that
// serves the built renderer (dist/renderer, strict CSP) and the app contract
// over HTTP: POST /app/rpc/<service>/<method> with the JSON argument, and every
// app event on one Server-Sent Events stream, GET /app/events. The contract
// can read every conversation, load files and install packages, so it needs
// the per-launch session (web-session.ts) and, on Linux, a client of this
// server's own user (peer-uid.ts); the renderer's static files do not.
// ApiServer's API key does not apply here (docs/API.md, "Web mode").
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
import { peerUid } from "./peer-uid.js";
import { noSessionPage, type NoSessionReason } from "./session-page.js";
import { tokenParam, type WebSession } from "./web-session.js";

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
/** Headers of every page web mode answers with. */
const pageHeaders = {
  "content-security-policy": CONTENT_SECURITY_POLICY,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cross-origin-opener-policy": "same-origin",
};

export interface WebRoutesOptions {
  /** The built renderer. Defaults to dist/renderer under the project root. */
  rendererDir?: string;
  /**
   * Refuse session routes to connections opened by another local user (looked
   * up in /proc/net/tcp{,6}). Defaults to true on Linux; a no-op elsewhere.
   */
  sameUserOnly?: boolean;
}

export function rendererDir(): string {
  return path.join(projectRoot(), "dist", "renderer");
}

/** The paths web mode answers and authenticates itself (with its session, not the API key). */
export function isWebPath(pathname: string): boolean {
  return pathname === "/" || pathname === "/app" || pathname.startsWith("/app/");
}

/** A refusal: the status and contract error for API calls, the reason for the page. */
type Gate = "ok" | { status: number; message: string; code: string; reason: NoSessionReason };

export function createWebRoutes(services: Pick<AppServices, "contract" | "subscribe">, session: WebSession, options: WebRoutesOptions = {}): RouteModule {
  const root = path.resolve(options.rendererDir ?? rendererDir());
  const ownUid = (options.sameUserOnly ?? process.platform === "linux") ? process.getuid?.() : undefined;

  /** Another user's connection is refused before its session is even looked at. */
  async function sameUser(req: IncomingMessage): Promise<Gate> {
    if (ownUid === undefined) return "ok";
    const uid = await peerUid(req.socket);
    if (uid === null || uid === ownUid) return "ok";
    return { status: 403, message: `connections from another user (uid ${uid}) are refused: this server belongs to uid ${ownUid}`, code: "forbidden_user", reason: "other-user" };
  }

  async function gate(req: IncomingMessage): Promise<Gate> {
    const user = await sameUser(req);
    if (user !== "ok") return user;
    const state = session.check(req);
    if (state === "ok") return "ok";
    return state === "invalid"
      ? { status: 401, message: "the app's session is not valid (the server was restarted?): open the link that `npm start` or `guild serve` printed last", code: "session_invalid", reason: "invalid" }
      : { status: 401, message: "the app's session is missing: open the link that `npm start` or `guild serve` printed (…/app/?token=…)", code: "session_required", reason: "missing" };
  }

  return {
    authenticates: (url) => isWebPath(url.pathname),
    async routes(req, res, url) {
      const p = url.pathname;
      if (p === "/" || p === "/app") {
        // The renderer loads its files relative to /app/; the query (a token) goes along.
        res.writeHead(302, { location: `/app/${url.search}` }).end();
        return true;
      }
      if (!p.startsWith("/app/")) return false;
      const rest = p.slice("/app/".length);
      if (rest.startsWith("rpc/") || rest === "events" || rest === "session") {
        const g = await gate(req);
        if (g !== "ok") {
          sendError(res, g.status, g.message, g.code);
          return true;
        }
        if (rest === "events") events(services, req, res);
        else if (rest === "session") sessionProbe(req, res);
        else await rpc(services.contract, req, res, rest.slice("rpc/".length));
        return true;
      }
      if (req.method !== "GET" && req.method !== "HEAD") return false;
      let rel: string;
      try {
        rel = decodeURIComponent(rest);
      } catch {
        sendError(res, 400, `malformed percent-encoding in the path ${JSON.stringify(p)}`, "invalid");
        return true;
      }
      if (url.searchParams.has(tokenParam)) {
        await exchangeToken(req, res, url);
        return true;
      }
      const found = await findFile(root, rel);
      if (found === "outside") {
        sendError(res, 403, "outside the app", "forbidden");
        return true;
      }
      if (found === "missing") return false;
      if (found === "not-built") {
        res.writeHead(503, { "content-type": "text/plain; charset=utf-8" }).end("The renderer is not built: run `npm run build:renderer`.\n");
        return true;
      }
      // The app's page needs the session (without it every call would fail);
      // its scripts, styles and images are the same for everyone.
      if (found === path.join(root, "index.html")) {
        const g = await gate(req);
        if (g !== "ok") {
          sendPage(req, res, g.status, noSessionPage(g.reason));
          return true;
        }
      }
      sendFile(found, req, res);
      return true;
    },
  };

  /** /app/…?token=SECRET: a valid token becomes the cookie, and the address loses the token (303 to the same path). */
  async function exchangeToken(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const user = await sameUser(req);
    if (user !== "ok") return sendPage(req, res, user.status, noSessionPage(user.reason));
    if (!session.matches(url.searchParams.get(tokenParam) ?? "")) return sendPage(req, res, 401, noSessionPage("invalid"));
    const params = new URLSearchParams(url.search);
    params.delete(tokenParam);
    const query = params.toString();
    res.writeHead(303, {
      location: url.pathname + (query ? `?${query}` : ""),
      "set-cookie": session.setCookie(req.socket.localPort ?? 0),
      "cache-control": "no-store",
      "referrer-policy": "no-referrer",
    }).end();
  }
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

/** GET /app/session: 204 while the session is valid (the gate answered 401 otherwise). The renderer asks when its event stream is refused. */
function sessionProbe(req: IncomingMessage, res: ServerResponse): void {
  if (req.method !== "GET" && req.method !== "HEAD") return sendError(res, 405, "use GET", "method_not_allowed");
  res.writeHead(204, { "cache-control": "no-store" }).end();
}

/** The file a static path names, index.html for app routes (no extension), or why there is none. */
async function findFile(root: string, rel: string): Promise<string | "outside" | "missing" | "not-built"> {
  const file = path.resolve(root, rel || "index.html");
  if (file !== root && !file.startsWith(root + path.sep)) return "outside";
  try {
    if ((await stat(file)).isFile()) return file;
  } catch {
    // not there: below
  }
  // Unknown paths without an extension are app routes: answer index.html.
  if (path.extname(file) !== "") return "missing";
  const index = path.join(root, "index.html");
  try {
    await stat(index);
    return index;
  } catch {
    return "not-built";
  }
}

function sendFile(target: string, req: IncomingMessage, res: ServerResponse): void {
  const ext = path.extname(target);
  res.writeHead(200, {
    ...pageHeaders,
    "content-type": mimeTypes[ext] ?? "application/octet-stream",
    "cache-control": ext === ".html" ? "no-cache" : "public, max-age=3600",
  });
  if (req.method === "HEAD") res.end();
  else createReadStream(target).pipe(res);
}

function sendPage(req: IncomingMessage, res: ServerResponse, status: number, html: string): void {
  res.writeHead(status, {
    ...pageHeaders,
    "content-type": "text/html; charset=utf-8",
    "content-length": Buffer.byteLength(html),
    "cache-control": "no-store",
  });
  res.end(req.method === "HEAD" ? undefined : html);
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
