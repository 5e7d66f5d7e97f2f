// `guild serve` end to end, as a child process of the compiled CLI, on the
// embedded demo model: curl streaming, the openai client agreeing with
// `guild run --chat`, the safe-default refusals and a graceful stop.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import os from "node:os";
import path from "node:path";

import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { cliPath, errorLines, runCli } from "../../test/cli.js";
import { projectRoot } from "../paths.js";

interface Served {
  proc: ChildProcessWithoutNullStreams;
  url: string;
  stdout: () => string;
  stderr: () => string;
  exit: Promise<number | null>;
}

/** Starts `guild serve ARGS` and resolves once it prints its serving line. */
function serve(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<Served> {
  const proc = spawn(process.execPath, [cliPath, "serve", ...args], { cwd: projectRoot(), env: { ...process.env, GUILD_API_KEY: "", GUILD_MODEL: "", ...env } });
  let out = "";
  let err = "";
  const exit = new Promise<number | null>((resolve) => proc.on("close", (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { proc.kill("SIGKILL"); reject(new Error(`guild serve did not start: ${err}`)); }, 60_000);
    proc.stdout.on("data", (d: Buffer) => {
      out += d.toString("utf8");
      const m = /^guild: serving (.+) at (http:\/\/\S+)\n/m.exec(out);
      // On a loopback bind the app's link follows in a second write: wait for it too (a server
      // reachable from other machines has no web mode, hence no link).
      const exposed = args.includes("--host") && !["127.0.0.1", "localhost", "::1"].includes(args[args.indexOf("--host") + 1] ?? "");
      if (m && (exposed || /^guild: the app: \S+\n/m.test(out) || /web mode is off/.test(err))) {
        clearTimeout(timer);
        resolve({ proc, url: m[2]!, stdout: () => out, stderr: () => err, exit });
      }
    });
    proc.stderr.on("data", (d: Buffer) => (err += d.toString("utf8")));
    void exit.then((code) => { clearTimeout(timer); reject(new Error(`guild serve exited ${code}: ${err}`)); });
  });
}

/** The app's link `guild serve` printed (…/app/?token=…). */
function appLink(s: Served): string {
  const m = /^guild: the app: (\S+)$/m.exec(s.stdout());
  if (!m) throw new Error(`no app link in ${JSON.stringify(s.stdout())}`);
  return m[1]!;
}

function curl(args: readonly string[]): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve, reject) => {
    const p = spawn("curl", args);
    let s = "";
    p.stdout.on("data", (d: Buffer) => (s += d.toString("utf8")));
    p.on("error", reject);
    p.on("close", (code) => resolve({ code, stdout: s }));
  });
}

describe("guild serve", () => {
  let served: Served;

  beforeAll(async () => {
    served = await serve(["--port", "0", "--threads", "1"]);
  });
  afterAll(() => {
    if (served && served.proc.exitCode === null) served.proc.kill("SIGKILL");
  });

  it("prints where it serves: the embedded model on 127.0.0.1, and the app's link with this start's secret", async () => {
    expect(served.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    await expect.poll(() => served.stdout().split("\n").length).toBe(3);
    expect(served.stdout()).toMatch(/^guild: serving .*guild-demo-qwen3moe-Q8_0\.gguf at http:\/\/127\.0\.0\.1:\d+\nguild: the app: http:\/\/127\.0\.0\.1:\d+\/app\/\?token=[A-Za-z0-9_-]{43}\n$/);
    expect(appLink(served)).toContain(`${served.url}/app/?token=`);
    expect(served.stderr()).toBe("");
  });

  it("streams several chunks to curl -N", async () => {
    const r = await curl(["-sN", `${served.url}/v1/chat/completions`, "-H", "content-type: application/json",
                          "-d", '{"messages":[{"role":"user","content":"hi"}],"stream":true}']);
    expect(r.code).toBe(0);
    const events = r.stdout.split("\n\n").filter((e) => e.startsWith("data: "));
    expect(events.at(-1)).toBe("data: [DONE]");
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)) as { object: string; choices: { delta: { content?: string } }[] });
    expect(chunks.length).toBeGreaterThan(3);
    expect(chunks.every((c) => c.object === "chat.completion.chunk")).toBe(true);
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? "").join("").length).toBeGreaterThan(0);
  });

  it("gives the openai client at temperature 0 exactly the text `guild run --chat --temperature 0` prints", async () => {
    const client = new OpenAI({ baseURL: `${served.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const api = await client.chat.completions.create({ model: "guild-demo-qwen3moe-Q8_0", messages: [{ role: "user", content: "hi" }], temperature: 0, max_tokens: 24 });
    let streamed = "";
    for await (const c of await client.chat.completions.create({ model: "guild-demo-qwen3moe-Q8_0", messages: [{ role: "user", content: "hi" }], temperature: 0, max_tokens: 24, stream: true }))
      streamed += c.choices[0]?.delta.content ?? "";
    const cli = runCli(["run", "--chat", "--temperature", "0", "--prompt", "hi", "--n-predict", "24", "--threads", "1"], { env: { GUILD_MODEL: "" } });
    expect(cli.status, cli.stderr).toBe(0);
    expect(cli.stdout.length).toBeGreaterThan(0);
    expect(api.choices[0]!.message.content).toBe(cli.stdout);
    expect(streamed).toBe(cli.stdout);
  });

  it("stops gracefully on SIGTERM", async () => {
    served.proc.kill("SIGTERM");
    expect(await served.exit).toBe(0);
    expect(served.stderr()).toBe("guild: stopping\n");
  });
});

describe("guild serve: safe defaults and bad usage", () => {
  it("refuses a non-loopback --host without an API key (exit 2)", () => {
    const r = runCli(["serve", "--host", "0.0.0.0", "--port", "0"], { env: { GUILD_API_KEY: "" } });
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(/^guild: error: --host 0\.0\.0\.0 is not a loopback address.*--api-key/);
  });

  it("--help prints the usage and exits 0", () => {
    const r = runCli(["serve", "--help"]);
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^usage: guild serve \[--model PATH\] \[--port N\] \[--host ADDR\] \[--api-key KEY\] \[--allow-origin ORIGIN \.\.\.\]/);
  });

  it("rejects malformed flags with exit 2 and a missing model with exit 1", () => {
    for (const args of [["--port", "70000"], ["--port", "x"], ["--allow-origin", "not an origin"], ["--bogus"], ["--threads", "-1"], ["--api-key", ""], ["--packages-dir", " "]]) {
      const r = runCli(["serve", ...args]);
      expect(r.status, args.join(" ")).toBe(2);
      expect(r.stderr).toMatch(/^guild: error: /);
    }
    const r = runCli(["serve", "--model", "/nonexistent/model.gguf", "--port", "0"]);
    expect(r.status).toBe(1);
    expect(errorLines(r.stderr)).toEqual(["guild: error: /nonexistent/model.gguf: no such file"]);
  });

  it("loads with the kernel packages of --packages-dir: none usable there is one line naming it (exit 1)", () => {
    const dir = path.join(os.tmpdir(), `guild-serve-no-packages-${process.pid}`);
    // No bundled packages and an empty folder: nothing to run the model on.
    const r = runCli(["serve", "--port", "0", "--packages-dir", dir], { env: { GUILD_MODEL: "", GUILD_BUNDLED_PACKAGES_DIR: "" } });
    expect(r.status).toBe(1);
    const lines = errorLines(r.stderr);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^guild: error: /);
    expect(lines[0]).toContain(`no usable CPU kernel package in ${dir}`);
  });

  it("reports a port in use in one line (exit 1)", async () => {
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, "127.0.0.1", () => r()));
    const port = (blocker.address() as { port: number }).port;
    try {
      const proc = spawn(process.execPath, [cliPath, "serve", "--port", String(port), "--threads", "1"], { cwd: projectRoot() });
      let err = "";
      proc.stderr.on("data", (d: Buffer) => (err += d.toString()));
      const code = await new Promise<number | null>((r) => proc.on("close", r));
      expect(code).toBe(1);
      expect(errorLines(err)).toEqual([`guild: error: cannot listen on 127.0.0.1:${port}: the address is already in use (try --port N)`]);
    } finally {
      blocker.close();
    }
  });

  it("with --api-key on loopback, the printed app link still opens the app (its session, not the key), while /v1 needs the key", async () => {
    const dataDir = mkdtempSync(path.join(os.tmpdir(), "guild-serve-key-"));
    const s = await serve(["--port", "0", "--threads", "1", "--api-key", "sk-local"], { GUILD_DATA_DIR: dataDir });
    try {
      await expect.poll(() => /^guild: the app: /m.test(s.stdout())).toBe(true);
      const link = new URL(appLink(s));
      const port = link.port;
      const exchange = await fetch(link, { redirect: "manual" });
      expect(exchange.status).toBe(303);
      expect(exchange.headers.get("location")).toBe("/app/");
      const cookie = exchange.headers.get("set-cookie")!;
      expect(cookie).toBe(`guild_session_${port}=${link.searchParams.get("token")}; Path=/app; HttpOnly; SameSite=Strict`);
      const rpc = (headers: Record<string, string>) => fetch(`${s.url}/app/rpc/models/current`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: "{}" });
      const current = await rpc({ cookie: cookie.split(";")[0]! });
      expect(current.status).toBe(200);
      expect(((await current.json()) as { result: { name: string } }).result.name).toBe("guild-demo-qwen3moe-Q8_0.gguf");
      expect((await rpc({ authorization: "Bearer sk-local" })).status).toBe(401);
      expect((await rpc({})).status).toBe(401);
      expect((await fetch(`${s.url}/v1/models`, { headers: { cookie: cookie.split(";")[0]! } })).status).toBe(401);
      expect((await fetch(`${s.url}/v1/models`, { headers: { authorization: "Bearer sk-local" } })).status).toBe(200);
    } finally {
      s.proc.kill("SIGINT");
      expect(await s.exit).toBe(0);
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it("binds a non-loopback address with a key (from GUILD_API_KEY), warns, and requires the key", async () => {
    const s = await serve(["--host", "0.0.0.0", "--port", "0", "--threads", "1", "--allow-origin", "http://a.example,http://b.example:8000"], { GUILD_API_KEY: "sk-test" });
    try {
      expect(s.stderr()).toMatch(/^guild: warning: listening on 0\.0\.0\.0/);
      // No web mode off loopback: no app link either.
      expect(s.stdout()).not.toMatch(/the app:/);
      const port = new URL(s.url).port;
      const local = `http://127.0.0.1:${port}`;
      expect((await fetch(`${local}/v1/models`)).status).toBe(401);
      expect((await fetch(`${local}/v1/models`, { headers: { authorization: "Bearer sk-test" } })).status).toBe(200);
      const cors = await fetch(`${local}/v1/models`, { headers: { authorization: "Bearer sk-test", origin: "http://b.example:8000" } });
      expect(cors.headers.get("access-control-allow-origin")).toBe("http://b.example:8000");
      expect((await fetch(`${local}/v1/models`, { headers: { authorization: "Bearer sk-test", origin: "http://c.example" } })).status).toBe(403);
    } finally {
      s.proc.kill("SIGINT");
      expect(await s.exit).toBe(0);
    }
  });
});
