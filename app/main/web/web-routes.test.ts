// The web routes over a plain node:http server: RPC with validation and
// origin checks, SSE events, static files with CSP.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import os from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { maxUploadBytes, type AppContract, type EventName } from "../../shared/app-contract.js";
import type { EventListener } from "../services/index.js";
import { RuntimeError } from "../services/runtime-host.js";
import { CONTENT_SECURITY_POLICY, createWebRoutes } from "./web-routes.js";

describe("web routes", () => {
  let server: Server;
  let base: string;
  let dir: string;
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
    const routes = createWebRoutes({ contract, subscribe: (l) => { listeners.add(l); return () => listeners.delete(l); } }, { rendererDir: dir });
    server = createServer((req, res) => {
      void Promise.resolve(routes.routes(req, res, new URL(req.url ?? "/", "http://x"))).then((handled) => {
        if (!handled) res.writeHead(404).end();
      });
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const a = server.address();
    base = `http://127.0.0.1:${typeof a === "object" && a ? a.port : 0}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  const post = (p: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(base + p, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });

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
    expect((await fetch(base + "/app/rpc/chat/listConversations", { method: "POST", body: "{}", headers: { "content-type": "text/plain" } })).status).toBe(415);
    expect((await fetch(base + "/app/rpc/chat/listConversations")).status).toBe(405);
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
    const res = await fetch(base + "/app/events");
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
    const r = await fetch(base + "/app/");
    expect(r.status).toBe(200);
    expect(r.headers.get("content-security-policy")).toBe(CONTENT_SECURITY_POLICY);
    expect(CONTENT_SECURITY_POLICY).not.toMatch(/unsafe/);
    expect((await fetch(base + "/app/app.js")).headers.get("content-type")).toMatch(/javascript/);
    expect((await fetch(base + "/app/..%2f..%2f..%2fetc%2fpasswd")).status).toBe(403);
    expect((await fetch(base + "/app/missing.js")).status).toBe(404);
    expect(await (await fetch(base + "/app/chat")).text()).toContain("<title>t</title>");
    expect((await fetch(base + "/", { redirect: "manual" })).status).toBe(302);
  });
});
