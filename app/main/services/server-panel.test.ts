// The Server panel's service: an API-only server started and stopped on the
// port and key chosen (saved in the settings), its requests logged, a port in
// use refused in words.
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import os from "node:os";
import path from "node:path";

import { afterAll, describe, expect, it } from "vitest";

import type { RequestLogEntry, ServerState } from "../../shared/app-contract.js";
import { SettingsStore } from "./app-settings.js";
import { RuntimeHost } from "./runtime-host.js";
import { isApiPath, ServerPanel } from "./server-panel.js";

describe("ServerPanel", () => {
  const data = mkdtempSync(path.join(os.tmpdir(), "guild-server-panel-"));
  const host = new RuntimeHost();
  afterAll(async () => {
    await host.dispose();
    rmSync(data, { recursive: true, force: true });
  });

  it("starts an API-only server with a key, logs its requests, and stops it", async () => {
    const settings = new SettingsStore(data, { envHubEndpoint: undefined });
    const changes: ServerState[] = [];
    const logged: RequestLogEntry[] = [];
    const panel = new ServerPanel(host, settings, (name, payload) => {
      if (name === "server.changed") changes.push(payload as ServerState);
      if (name === "server.request") logged.push(payload as RequestLogEntry);
    }, () => "/models/demo-Q8_0.gguf");
    const started = await panel.start({ port: 0, apiKey: "sk-local-test" });
    expect(started.api).toMatchObject({ running: true, apiKey: "sk-local-test", error: null });
    expect(started.modelId).toBe("demo-Q8_0");
    const url = started.api.url!;
    expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await fetch(`${url}/v1/models`)).status).toBe(401);
    const ok = await fetch(`${url}/v1/models`, { headers: { authorization: "Bearer sk-local-test" } });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ object: "list", data: [] });
    // The web mode's page routes are not there: an API-only server.
    expect((await fetch(`${url}/app/`, { headers: { authorization: "Bearer sk-local-test" } })).status).toBe(404);
    await expect.poll(() => logged.length).toBe(2);  // /app/ is not an API path: not logged
    expect(logged.map((e) => [e.server, e.method, e.path, e.status])).toEqual([["api", "GET", "/v1/models", 401], ["api", "GET", "/v1/models", 200]]);
    expect((await panel.status()).log.map((e) => e.status)).toEqual([401, 200]);
    // The port and key are kept for the next start.
    expect(new SettingsStore(data, { envHubEndpoint: undefined }).apiServer).toEqual({ port: 0, apiKey: "sk-local-test" });
    const stopped = await panel.stop();
    expect(stopped.api).toMatchObject({ running: false, url: null });
    await expect(fetch(`${url}/v1/models`)).rejects.toThrow();
    expect(changes.at(-1)!.api.running).toBe(false);
  });

  it("says so when the port is in use, and refuses a bad port or key", async () => {
    const busy = createServer();
    await new Promise<void>((r) => busy.listen(0, "127.0.0.1", r));
    const port = (busy.address() as { port: number }).port;
    const panel = new ServerPanel(host, new SettingsStore(data, { envHubEndpoint: undefined }), () => undefined, () => null);
    try {
      await expect(panel.start({ port, apiKey: "" })).rejects.toThrow(`port ${port} is in use (by another program): choose another`);
      expect((await panel.status()).api).toMatchObject({ running: false, error: `port ${port} is in use (by another program): choose another` });
      await expect(panel.start({ port: 70000, apiKey: "" })).rejects.toThrow(/whole number from 0 to 65535/);
      await expect(panel.start({ port: 0, apiKey: "two words" })).rejects.toThrow(/without spaces/);
    } finally {
      busy.close();
      await panel.dispose();
    }
  });

  it("logs the OpenAI API's paths of the page's own server, not the page's", () => {
    expect(["/v1/chat/completions", "/v1/models", "/health", "/guild/v1/queue"].every(isApiPath)).toBe(true);
    expect(["/app/", "/app/rpc/models/list", "/app/events", "/"].some(isApiPath)).toBe(false);
  });
});
