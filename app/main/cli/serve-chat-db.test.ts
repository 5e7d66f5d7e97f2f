// `guild serve` with a bad chat database (the app's web mode keeps its
// conversations in the data folder; the OpenAI API needs none): it serves
// anyway, says what happened in one warning line, never blames the model file,
// and the web mode offers the same words as a notice.
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { afterAll, describe, expect, it } from "vitest";

import { cliPath } from "../../test/cli.js";
import { projectRoot } from "../paths.js";

interface Served {
  url: string;
  stderr: () => string;
  /** The web mode's session token, from the app URL serve prints (none where the build has no sessions). */
  token: () => string | null;
  stop(): Promise<number | null>;
}

/** `guild serve --port 0` with GUILD_DATA_DIR=dataDir; resolves on its serving line, rejects if it exits first. */
function serve(dataDir: string): Promise<Served> {
  const proc = spawn(process.execPath, [cliPath, "serve", "--port", "0", "--threads", "1"], {
    cwd: projectRoot(), env: { ...process.env, GUILD_API_KEY: "", GUILD_MODEL: "", GUILD_DATA_DIR: dataDir },
  });
  let out = "";
  let err = "";
  const exit = new Promise<number | null>((resolve) => proc.on("close", (code) => resolve(code)));
  proc.stderr.on("data", (d: Buffer) => (err += d.toString("utf8")));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { proc.kill("SIGKILL"); reject(new Error(`guild serve did not start: ${err}`)); }, 120_000);
    proc.stdout.on("data", (d: Buffer) => {
      out += d.toString("utf8");
      const m = /^guild: serving .+ at (http:\/\/\S+)\n/m.exec(out);
      // The app's link (its session token) is a second write: wait for it too, unless web mode is off.
      if (m && (/^guild: the app: \S+\n/m.test(out) || /web mode is off/.test(err))) {
        clearTimeout(timer);
        const token = () => /[?&]token=([A-Za-z0-9_-]+)/.exec(out)?.[1] ?? null;
        resolve({ url: m[1]!, stderr: () => err, token, stop: () => { proc.kill("SIGTERM"); return exit; } });
      }
    });
    void exit.then((code) => { clearTimeout(timer); reject(new Error(`guild serve exited ${code}: ${err}`)); });
  });
}

async function rpc(served: Served, op: string, body: unknown = {}): Promise<unknown> {
  const token = served.token();
  const res = await fetch(`${served.url}/app/rpc/${op}`, {
    method: "POST", headers: { "content-type": "application/json", ...(token !== null && { "x-guild-token": token }) }, body: JSON.stringify(body),
  });
  expect(res.status, op).toBe(200);
  return ((await res.json()) as { result: unknown }).result;
}

describe("guild serve with a bad chat database", () => {
  const root = mkdtempSync(path.join(os.tmpdir(), "guild-serve-db-"));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  const warnings = (stderr: string) => stderr.split("\n").filter((l) => l.startsWith("guild: warning: "));

  it("garbage bytes: moved aside, a fresh database, /v1/models and the web mode still answer", async () => {
    const dataDir = path.join(root, "garbage");
    mkdirSync(dataDir);
    writeFileSync(path.join(dataDir, "conversations.sqlite"), Buffer.alloc(4096, 0x5a));
    const served = await serve(dataDir);
    try {
      const models = await fetch(`${served.url}/v1/models`);
      expect(models.status).toBe(200);
      expect(((await models.json()) as { data: unknown[] }).data).toHaveLength(1);
      const lines = warnings(served.stderr());
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^guild: warning: the chat database .*conversations\.sqlite could not be used \(it is not a SQLite database\); it was moved to .*\.corrupt-\S+ and a new, empty one was started$/);
      expect(lines[0]).not.toContain("guild-demo-qwen3moe");  // the model file is not to blame
      const notices = (await rpc(served, "notices/list")) as { message: string }[];
      expect(notices.map((n) => `guild: warning: ${n.message}`)).toEqual(lines);
      const c = (await rpc(served, "chat/createConversation", { title: "fresh" })) as { id: string };
      expect(((await rpc(served, "chat/listConversations")) as { id: string }[]).map((x) => x.id)).toEqual([c.id]);
      expect(readdirSync(dataDir).filter((f) => f.includes(".corrupt-"))).toHaveLength(1);
    } finally {
      expect(await served.stop()).toBe(0);
    }
  });

  it("a data folder where no database can be created: serves, the chat in memory", async () => {
    const blocker = path.join(root, "a-file");
    writeFileSync(blocker, "");
    const served = await serve(path.join(blocker, "data"));
    try {
      expect((await fetch(`${served.url}/v1/models`)).status).toBe(200);
      const lines = warnings(served.stderr());
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/could not be used \(it cannot be created there .*\); conversations are kept in memory only/);
      await rpc(served, "chat/createConversation", {});
    } finally {
      expect(await served.stop()).toBe(0);
    }
  });
});
