// The web routes over a plain node:http server: RPC with validation and
// origin checks, SSE events, static files with CSP, and the session that
// guards the contract (token exchange, cookie, header; docs/API.md "Web mode").
import { execFile, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request as httpRequest, type Server } from "node:http";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { maxUploadBytes, type AppContract, type EventName } from "../../shared/app-contract.js";
import type { EventListener } from "../services/index.js";
import { RuntimeError } from "../services/runtime-host.js";
import { CONTENT_SECURITY_POLICY, createWebRoutes } from "./web-routes.js";
import { WebSession } from "./web-session.js";

const execFileAsync = promisify(execFile);

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A plain HTTP request (full control of Cookie and the other headers). */
function raw(base: string, method: string, p: string, headers: Record<string, string> = {}, body?: string): Promise<Raw> {
  const u = new URL(p, base);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: u.hostname, port: u.port, path: u.pathname + u.search, method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("error", reject);
    if (body !== undefined) req.write(body);
    req.end();
  });
}

describe("web routes", () => {
  let server: Server;
  let base: string;
  let port: number;
  let dir: string;
  const session = new WebSession();
  /** The session as a browser carries it once the printed link was opened. */
  let cookie: Record<string, string>;
  const listeners = new Set<EventListener>();
  const calls: unknown[] = [];
  const contract = {
    chat: {
      listConversations: async () => [{ id: "c1" }],
      renameConversation: async (req: unknown) => { calls.push(req); return { id: "c1", title: "t" }; },
      messages: async () => { throw new RuntimeError("no conversation with id x", "not_found"); },
    },
    models: {
      load: async () => { throw new RuntimeError("load cancelled", "cancelled"); },
    },
    packages: {
      installUpload: async (req: { fileName: string; data: string }) => {
        calls.push(req);
        return { name: Buffer.from(req.data, "base64").toString("utf8") };
      },
    },
  } as unknown as AppContract;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "guild-web-"));
    writeFileSync(path.join(dir, "index.html"), "<!doctype html><title>t</title>");
    writeFileSync(path.join(dir, "app.js"), "console.log(1)");
    const routes = createWebRoutes({ contract, subscribe: (l) => { listeners.add(l); return () => listeners.delete(l); } }, session, { rendererDir: dir });
    server = createServer((req, res) => {
      void Promise.resolve(routes.routes(req, res, new URL(req.url ?? "/", "http://x"))).then((handled) => {
        if (!handled) res.writeHead(404).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const a = server.address();
    port = typeof a === "object" && a ? a.port : 0;
    base = `http://127.0.0.1:${port}`;
    cookie = { cookie: `guild_session_${port}=${session.token}` };
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  const post = (p: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(base + p, { method: "POST", headers: { "content-type": "application/json", ...cookie, ...headers }, body: JSON.stringify(body) });

  it("calls an operation with a valid argument", async () => {
    const r = await post("/app/rpc/chat/renameConversation", { id: "c1", title: "t" });
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ result: { id: "c1", title: "t" } });
    expect(calls).toEqual([{ id: "c1", title: "t" }]);
    expect(await (await post("/app/rpc/chat/listConversations", {})).json()).toEqual({ result: [{ id: "c1" }] });
  });

  it("refuses bad arguments, unknown operations, other origins and non-JSON", async () => {
    const bad = await post("/app/rpc/chat/renameConversation", { id: 1, title: "t" });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toEqual({ error: { message: "chat.renameConversation: id must be a string", code: "invalid" } });
    expect((await post("/app/rpc/chat/renameConversation", { id: "c1", title: "t", extra: 1 })).status).toBe(400);
    expect((await post("/app/rpc/chat/constructor", {})).status).toBe(404);
    expect((await post("/app/rpc/chat/__proto__", {})).status).toBe(404);
    expect((await post("/app/rpc/chat/listConversations", {}, { origin: "http://evil.example" })).status).toBe(403);
    expect((await fetch(base + "/app/rpc/chat/listConversations", { method: "POST", body: "{}", headers: { "content-type": "text/plain", ...cookie } })).status).toBe(415);
    expect((await fetch(base + "/app/rpc/chat/listConversations", { headers: cookie })).status).toBe(405);
    const nf = await post("/app/rpc/chat/messages", { conversationId: "x" });
    expect(nf.status).toBe(404);
    expect(((await nf.json()) as { error: { message: string } }).error.message).toMatch(/no conversation/);
  });

  it("carries uploads as base64 (validated before the service sees them) and answers a cancelled load with 409", async () => {
    const data = Buffer.from("cpu-generic").toString("base64");
    const ok = await post("/app/rpc/packages/installUpload", { fileName: "a.gkpkg", data });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ result: { name: "cpu-generic" } });
    const before = calls.length;
    for (const bad of ["not base64!", "abc", 42]) {
      const r = await post("/app/rpc/packages/installUpload", { fileName: "a.gkpkg", data: bad });
      expect(r.status).toBe(400);
      expect(((await r.json()) as { error: { message: string } }).error.message).toBe("packages.installUpload: data must be base64");
    }
    // Bigger than the upload limit: refused by the schema (the body itself still fits the transport).
    const big = await post("/app/rpc/packages/installUpload", { fileName: "a.gkpkg", data: "A".repeat(Math.ceil(maxUploadBytes / 3) * 4 + 4) });
    expect(big.status).toBe(400);
    expect(((await big.json()) as { error: { message: string } }).error.message).toMatch(/data is larger than 8 MiB/);
    expect(calls.length).toBe(before);
    const cancelled = await post("/app/rpc/models/load", { path: "/m.gguf" });
    expect(cancelled.status).toBe(409);
    expect(await cancelled.json()).toEqual({ error: { message: "load cancelled", code: "cancelled" } });
  });

  it("streams events over SSE", async () => {
    const res = await fetch(base + "/app/events", { headers: cookie });
    expect(res.headers.get("content-type")).toMatch(/text\/event-stream/);
    const reader = res.body!.getReader();
    await expect.poll(() => listeners.size).toBe(1);
    for (const l of listeners) l("model.state" as EventName, { kind: "unloaded" } as never);
    let text = "";
    while (!text.includes("event: model.state")) text += new TextDecoder().decode((await reader.read()).value);
    expect(text).toContain(`data: {"kind":"unloaded"}`);
    await reader.cancel();
    await expect.poll(() => listeners.size).toBe(0);
  });

  it("serves the renderer with a strict CSP, and nothing outside it", async () => {
    const r = await fetch(base + "/app/", { headers: cookie });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-security-policy")).toBe(CONTENT_SECURITY_POLICY);
    expect(CONTENT_SECURITY_POLICY).not.toMatch(/unsafe/);
    expect((await fetch(base + "/app/app.js")).headers.get("content-type")).toMatch(/javascript/);
    expect((await fetch(base + "/app/..%2f..%2f..%2fetc%2fpasswd")).status).toBe(403);
    expect((await fetch(base + "/app/missing.js")).status).toBe(404);
    expect(await (await fetch(base + "/app/chat", { headers: cookie })).text()).toContain("<title>t</title>");
    expect((await fetch(base + "/", { redirect: "manual" })).status).toBe(302);
    // /app (no slash) would load the renderer's relative files from /: it goes to /app/, its query along.
    const bare = await raw(base, "GET", "/app?token=x");
    expect([bare.status, bare.headers["location"]]).toEqual([302, "/app/?token=x"]);
  });

  it("answers malformed percent-encoding with 400, not 500", async () => {
    for (const p of ["/app/%E0%A4%A", "/app/%", "/app/assets/%zz.js"]) {
      const r = await raw(base, "GET", p, cookie);
      expect(r.status, p).toBe(400);
      expect(JSON.parse(r.body)).toEqual({ error: { message: `malformed percent-encoding in the path ${JSON.stringify(p.replace(/\?.*/, ""))}`, code: "invalid" } });
    }
  });
});

describe("web routes: the per-launch session", () => {
  let server: Server;
  let base: string;
  let port: number;
  let dir: string;
  const session = new WebSession();
  const listeners = new Set<EventListener>();
  const calls: unknown[] = [];
  const contract = {
    chat: { listConversations: async () => { calls.push("listConversations"); return [{ id: "c1", title: "secret" }]; } },
  } as unknown as AppContract;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "guild-web-session-"));
    writeFileSync(path.join(dir, "index.html"), "<!doctype html><title>the app</title>");
    writeFileSync(path.join(dir, "app.js"), "console.log(1)");
    const routes = createWebRoutes({ contract, subscribe: (l) => { listeners.add(l); return () => listeners.delete(l); } }, session, { rendererDir: dir });
    server = createServer((req, res) => {
      void Promise.resolve(routes.routes(req, res, new URL(req.url ?? "/", "http://x"))).then((handled) => {
        if (!handled) res.writeHead(404).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const a = server.address();
    port = typeof a === "object" && a ? a.port : 0;
    base = `http://127.0.0.1:${port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  const rpc = (headers: Record<string, string>) => raw(base, "POST", "/app/rpc/chat/listConversations", { "content-type": "application/json", ...headers }, "{}");
  const cookieOf = (token: string) => ({ cookie: `other=1; guild_session_${port}=${token}` });
  const wrong = "x".repeat(43);

  it("makes a fresh 256-bit base64url secret per session, and prints it in the app's URL", () => {
    expect(session.token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(session.token, "base64url")).toHaveLength(32);
    expect(new WebSession().token).not.toBe(session.token);
    expect(session.appUrl("http://127.0.0.1:8765")).toBe(`http://127.0.0.1:8765/app/?token=${session.token}`);
    expect(session.matches(session.token)).toBe(true);
    expect(session.matches(session.token.slice(0, -1))).toBe(false);
    expect(session.matches("")).toBe(false);
  });

  it("refuses /app/rpc without the session, with a wrong one, and answers with the right cookie or header", async () => {
    const before = calls.length;
    const none = await rpc({});
    expect(none.status).toBe(401);
    expect(JSON.parse(none.body)).toEqual({ error: { message: expect.stringMatching(/session is missing: open the link that `npm start` or `guild serve` printed/), code: "session_required" } });
    expect(none.body).not.toContain(session.token);
    for (const headers of [cookieOf(wrong), cookieOf(""), { "x-guild-token": wrong }, { cookie: `guild_session_1=${session.token}` }]) {
      const r = await rpc(headers);
      expect(r.status, JSON.stringify(headers)).toBe(401);
      expect((JSON.parse(r.body) as { error: { code: string } }).error.code).toMatch(/^session_(invalid|required)$/);
    }
    // The cookie of another port (another server on this host) is not this session.
    expect(JSON.parse((await rpc({ cookie: `guild_session_1=${session.token}` })).body).error.code).toBe("session_required");
    // A wrong header is not rescued by a right cookie.
    expect((await rpc({ ...cookieOf(session.token), "x-guild-token": wrong })).status).toBe(401);
    expect(calls.length).toBe(before);
    for (const headers of [cookieOf(session.token), { "x-guild-token": session.token }]) {
      const r = await rpc(headers);
      expect(r.status).toBe(200);
      expect(JSON.parse(r.body)).toEqual({ result: [{ id: "c1", title: "secret" }] });
    }
    expect(calls.length).toBe(before + 2);
  });

  it("refuses /app/events without the session, and streams with it", async () => {
    for (const headers of [{}, cookieOf(wrong), { "x-guild-token": wrong }]) {
      const r = await raw(base, "GET", "/app/events", headers);
      expect(r.status).toBe(401);
      expect(r.headers["content-type"]).toMatch(/^application\/json/);
      expect(listeners.size).toBe(0);
    }
    for (const headers of [cookieOf(session.token), { "x-guild-token": session.token }]) {
      const res = await fetch(base + "/app/events", { headers });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/text\/event-stream/);
      await expect.poll(() => listeners.size).toBe(1);
      await res.body!.cancel();
      await expect.poll(() => listeners.size).toBe(0);
    }
  });

  it("answers the session probe: 204 with the session, 401 without", async () => {
    expect((await raw(base, "GET", "/app/session", cookieOf(session.token))).status).toBe(204);
    expect((await raw(base, "GET", "/app/session")).status).toBe(401);
    expect((await raw(base, "GET", "/app/session", cookieOf(wrong))).status).toBe(401);
  });

  it("trades the printed link's token for an HttpOnly, SameSite=Strict, Path=/app cookie and a 303 to the address without it", async () => {
    const r = await raw(base, "GET", `/app/?token=${session.token}`);
    expect(r.status).toBe(303);
    expect(r.headers["location"]).toBe("/app/");
    expect(r.headers["set-cookie"]).toEqual([`guild_session_${port}=${session.token}; Path=/app; HttpOnly; SameSite=Strict`]);
    expect(r.headers["cache-control"]).toBe("no-store");
    expect(r.headers["referrer-policy"]).toBe("no-referrer");
    // Other query parameters and the path stay.
    const deep = await raw(base, "GET", `/app/chat?view=models&token=${encodeURIComponent(session.token)}`);
    expect([deep.status, deep.headers["location"]]).toEqual([303, "/app/chat?view=models"]);
    // The cookie it set opens the app.
    const page = await raw(base, "GET", "/app/", cookieOf(session.token));
    expect([page.status, page.body]).toEqual([200, "<!doctype html><title>the app</title>"]);
    // A wrong token sets nothing.
    const bad = await raw(base, "GET", `/app/?token=${wrong}`);
    expect(bad.status).toBe(401);
    expect(bad.headers["set-cookie"]).toBeUndefined();
    expect(bad.body).toMatch(/This link is not valid any more/);
  });

  it("shows /app/ without a session as a page that says to open the printed link, under the same CSP; static files need no session", async () => {
    for (const p of ["/app/", "/app/index.html", "/app/chat"]) {
      const r = await raw(base, "GET", p);
      expect(r.status, p).toBe(401);
      expect(r.headers["content-type"]).toBe("text/html; charset=utf-8");
      expect(r.headers["content-security-policy"]).toBe(CONTENT_SECURITY_POLICY);
      expect(r.body).toMatch(/Open the link printed by <code>npm start<\/code> or <code>guild serve<\/code>/);
      expect(r.body).not.toContain("the app</title>");
      expect(r.body).not.toContain(session.token);
      expect(r.body).not.toMatch(/<script|style=/);
    }
    expect((await raw(base, "GET", "/app/", cookieOf(wrong))).body).toMatch(/not valid any more/);
    const js = await raw(base, "GET", "/app/app.js");
    expect([js.status, js.body]).toEqual([200, "console.log(1)"]);
  });

  it("refuses a foreign Origin even with the session", async () => {
    const r = await rpc({ ...cookieOf(session.token), origin: "http://evil.example" });
    expect(r.status).toBe(403);
    expect((await raw(base, "GET", "/app/events", { ...cookieOf(session.token), origin: "http://evil.example" })).status).toBe(403);
  });

  // Bonus check on Linux: connections from another uid are refused whatever they carry.
  // curl runs as `nobody`; asynchronously, since this process is the server.
  const curlAsNobody = process.platform === "linux" && process.getuid?.() === 0 && spawnSync("curl", ["--version"]).status === 0;
  it.runIf(curlAsNobody)("refuses session routes and the token exchange to another local user (uid from /proc/net/tcp)", async () => {
    const curl = async (uid: number, p: string, args: string[] = []) => {
      const { stdout } = await execFileAsync("curl", ["-s", "-m", "20", "-w", "\n%{http_code}", ...args, `${base}${p}`], { uid, gid: uid, encoding: "utf8" });
      const lines = stdout.split("\n");
      return { status: Number(lines.at(-1)), body: lines.slice(0, -1).join("\n") };
    };
    const nobody = 65534;
    const token = ["-H", `x-guild-token: ${session.token}`];
    const post = await curl(nobody, "/app/rpc/chat/listConversations", [...token, "-H", "content-type: application/json", "-d", "{}"]);
    expect(post.status).toBe(403);
    expect(JSON.parse(post.body)).toEqual({ error: { message: `connections from another user (uid ${nobody}) are refused: this server belongs to uid 0`, code: "forbidden_user" } });
    expect((await curl(nobody, "/app/events", token)).status).toBe(403);
    const exchange = await curl(nobody, `/app/?token=${session.token}`);
    expect(exchange.status).toBe(403);
    expect(exchange.body).toMatch(/belongs to another user of this machine/);
    // Static files are for everyone; the same requests from this user pass.
    expect((await curl(nobody, "/app/app.js")).status).toBe(200);
    expect((await curl(0, `/app/?token=${session.token}`)).status).toBe(303);
    expect((await curl(0, "/app/rpc/chat/listConversations", [...token, "-H", "content-type: application/json", "-d", "{}"])).status).toBe(200);
  });
});
