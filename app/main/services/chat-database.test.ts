// A bad chat database never stops the app (chat-database.ts): garbage bytes, a
// truncated database, a directory or a read-only file is moved aside as
// conversations.sqlite.corrupt-<time> (with its -wal/-shm) and a fresh one is
// started; a database another process holds locked, or a folder where none can
// be created, leaves the chat in memory. Each says so once: one warning line
// and one notice (notices.list) until dismissed, and the chat keeps working.
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import Database from "better-sqlite3";
import { afterAll, afterEach, describe, expect, it } from "vitest";

import type { AppEvents, EventName, Message } from "../../shared/app-contract.js";
import { projectRoot } from "../paths.js";
import { spawnServicesChild } from "../../test/spawn-services-child.js";
import { ConversationStore } from "./conversation-store.js";
import { createAppServices, type AppServices } from "./index.js";

const root = mkdtempSync(path.join(os.tmpdir(), "guild-chatdb-"));
chmodSync(root, 0o755);  // the read-only cases run a child as another user when the tests run as root
afterAll(() => rmSync(root, { recursive: true, force: true }));
let cases = 0;
const newDataDir = () => {
  const dir = path.join(root, `case-${++cases}`);
  mkdirSync(dir);
  return dir;
};
const corruptName = /^conversations\.sqlite\.corrupt-\d{8}T\d{6}\.\d{3}Z$/;

interface Started {
  app: AppServices;
  warnings: string[];
  events: { name: EventName; payload: unknown }[];
}
const running: AppServices[] = [];
afterEach(async () => {
  for (const app of running.splice(0)) await app.dispose();
});

function start(dataDir: string): Started {
  const warnings: string[] = [];
  const app = createAppServices({ dataDir, packages: null, loadEmbedded: false, warn: (line) => warnings.push(line) });
  running.push(app);
  const events: Started["events"] = [];
  app.subscribe((name, payload) => events.push({ name, payload }));
  return { app, warnings, events };
}

/** The chat works: a conversation is created, listed and renamed. */
async function chatWorks(app: AppServices): Promise<string> {
  const c = await app.contract.chat.createConversation({ title: "after the fall" });
  await app.contract.chat.renameConversation({ id: c.id, title: "still here" });
  expect((await app.contract.chat.listConversations()).map((x) => x.title)).toContain("still here");
  expect(await app.contract.chat.messages({ conversationId: c.id })).toEqual([]);
  return c.id;
}

/** Exactly one notice, the same as the one warning line; dismissing it tells every window. */
async function toldOnce(s: Started, pattern: RegExp): Promise<string> {
  const notices = await s.app.contract.notices.list();
  expect(notices).toHaveLength(1);
  expect(notices[0]!.message).toMatch(pattern);
  expect(s.warnings).toEqual([notices[0]!.message]);
  expect(await s.app.contract.notices.dismiss({ id: notices[0]!.id })).toEqual({ dismissed: true });
  expect(await s.app.contract.notices.list()).toEqual([]);
  expect(s.events.at(-1)).toEqual({ name: "notices.changed", payload: { notices: [] } satisfies AppEvents["notices.changed"] });
  expect(await s.app.contract.notices.dismiss({ id: notices[0]!.id })).toEqual({ dismissed: false });
  return notices[0]!.message;
}

function movedAside(dataDir: string): string[] {
  return readdirSync(dataDir).filter((f) => f.startsWith("conversations.sqlite.corrupt-")).sort();
}

describe("a bad chat database", () => {
  it("garbage bytes: moved aside with its -wal and -shm, a fresh database started, told once", async () => {
    const dataDir = newDataDir();
    const file = path.join(dataDir, "conversations.sqlite");
    const garbage = Buffer.from(Array.from({ length: 5000 }, (_, i) => (i * 7919 + 13) % 256));
    writeFileSync(file, garbage);
    writeFileSync(file + "-wal", "not a wal");
    writeFileSync(file + "-shm", "not a shm");
    const s = start(dataDir);
    const message = await toldOnce(s, /conversations\.sqlite could not be used \(it is not a SQLite database\); it was moved to .*conversations\.sqlite\.corrupt-\S+ and a new, empty one was started$/);
    const moved = movedAside(dataDir);
    expect(moved.filter((f) => corruptName.test(f))).toHaveLength(1);
    const target = moved.find((f) => corruptName.test(f))!;
    expect(moved).toEqual([target, `${target}-shm`, `${target}-wal`]);
    expect(message).toContain(path.join(dataDir, target));
    expect(readFileSync(path.join(dataDir, target))).toEqual(garbage);  // nothing of it is lost
    expect(readFileSync(path.join(dataDir, `${target}-wal`), "utf8")).toBe("not a wal");
    const id = await chatWorks(s.app);

    // The fresh database is the app's from now on: a restart finds the conversation and says nothing.
    await running.pop()!.dispose();
    const again = start(dataDir);
    expect(await again.app.contract.notices.list()).toEqual([]);
    expect(again.warnings).toEqual([]);
    expect((await again.app.contract.chat.listConversations()).map((c) => c.id)).toContain(id);
  });

  it("a truncated database: moved aside, a fresh one started", async () => {
    const dataDir = newDataDir();
    const file = path.join(dataDir, "conversations.sqlite");
    const store = new ConversationStore(file);
    const c = store.createConversation({ title: "long" });
    for (let i = 0; i < 400; i++) store.addMessage({ conversationId: c.id, parentId: null, role: "user", content: `message ${i} `.repeat(20), status: "complete" });
    store.close();
    const size = statSync(file).size;
    expect(size).toBeGreaterThan(64 * 1024);
    truncateSync(file, Math.floor(size / 2));
    const s = start(dataDir);
    await toldOnce(s, /could not be used \(it is damaged or truncated\); it was moved to /);
    const [target] = movedAside(dataDir);
    expect(statSync(path.join(dataDir, target!)).size).toBe(Math.floor(size / 2));
    expect(await s.app.contract.chat.listConversations()).toEqual([]);
    await chatWorks(s.app);
  });

  it("a directory where the database should be: moved aside, a fresh one started", async () => {
    const dataDir = newDataDir();
    mkdirSync(path.join(dataDir, "conversations.sqlite"));
    writeFileSync(path.join(dataDir, "conversations.sqlite", "inside"), "kept");
    const s = start(dataDir);
    await toldOnce(s, /could not be used \(it is a directory\); it was moved to /);
    const [target] = movedAside(dataDir);
    expect(readFileSync(path.join(dataDir, target!, "inside"), "utf8")).toBe("kept");
    expect(statSync(path.join(dataDir, "conversations.sqlite")).isFile()).toBe(true);
    await chatWorks(s.app);
  });

  it("a database another process holds locked: left alone, the chat runs in memory", async () => {
    const dataDir = newDataDir();
    const file = path.join(dataDir, "conversations.sqlite");
    const seed = new ConversationStore(file);
    seed.createConversation({ title: "theirs" });
    seed.close();
    const locker = await holdExclusiveLock(file);
    try {
      const s = start(dataDir);
      await toldOnce(s, /could not be used \(another process holds it locked\); conversations are kept in memory only and are lost when Guild stops$/);
      expect(movedAside(dataDir)).toEqual([]);
      expect(await s.app.contract.chat.listConversations()).toEqual([]);
      await chatWorks(s.app);
    } finally {
      locker.kill("SIGKILL");
    }
    const after = new ConversationStore(file);
    expect(after.listConversations().map((c) => c.title)).toEqual(["theirs"]);  // untouched
    after.close();
  });

  it("a data folder where no database can be created: the chat runs in memory", async () => {
    const blocker = path.join(newDataDir(), "a-file");
    writeFileSync(blocker, "");
    const s = start(path.join(blocker, "data"));  // a folder under a regular file cannot exist
    await toldOnce(s, /could not be used \(it cannot be created there \(.*\)\); conversations are kept in memory only/);
    await chatWorks(s.app);
  });
});

// Permissions do not bind root: where the tests run as root, the child runs as nobody.
const asRoot = process.getuid?.() === 0;
const childUser = asRoot ? { uid: 65534, gid: 65534 } : undefined;

describe.skipIf(process.platform === "win32")("a read-only chat database (a child process, as a user permissions bind)", () => {
  const prepared = (name: string) => {
    const dataDir = path.join(root, name);
    const packagesDir = path.join(root, `${name}-packages`);
    mkdirSync(dataDir);
    mkdirSync(packagesDir);
    const seed = new ConversationStore(path.join(dataDir, "conversations.sqlite"));
    seed.createConversation({ title: "kept" });
    seed.close();
    if (childUser) for (const p of [dataDir, packagesDir, path.join(dataDir, "conversations.sqlite")]) chownSync(p, childUser.uid, childUser.gid);
    return { dataDir, packagesDir };
  };
  const reply = async (config: { dataDir: string; packagesDir: string }) => {
    const child = spawnServicesChild({ ...config, send: "What does river mean?" }, childUser);
    const started = await child.waitFor((r) => r.event === "started", 120_000);
    const done = await child.waitFor((r) => r.event === "done", 120_000);
    const list = await child.waitFor((r) => r.event === "conversations", 120_000);
    expect(await child.exited).toEqual({ code: 0, signal: null });
    return { child, notices: started["notices"] as { message: string }[], message: done["message"] as Message, list: list["list"] as unknown[] };
  };
  const warningLines = (stderr: string) => stderr.split("\n").filter((l) => l.startsWith("guild: warning: "));

  it("a read-only file: moved aside, a fresh database started, the chat replies", async () => {
    const config = prepared("ro-file");
    chmodSync(path.join(config.dataDir, "conversations.sqlite"), 0o444);
    const r = await reply(config);
    expect(r.notices.map((n) => n.message)).toEqual([expect.stringMatching(/could not be used \(it is read-only\); it was moved to .*\.corrupt-/)]);
    expect(warningLines(r.child.stderr())).toEqual([`guild: warning: ${r.notices[0]!.message}`]);
    expect(r.message).toMatchObject({ status: "complete" });
    expect(r.message.content.length).toBeGreaterThan(0);
    expect(r.list).toHaveLength(1);
    const [target] = movedAside(config.dataDir);
    const old = new Database(path.join(config.dataDir, target!), { readonly: true });
    expect(old.prepare("SELECT title FROM conversations").pluck().all()).toEqual(["kept"]);
    old.close();
  });

  it("a read-only data folder: nothing is moved, the chat replies from memory", async () => {
    const config = prepared("ro-dir");
    const before = readdirSync(config.dataDir).sort();
    chmodSync(config.dataDir, 0o555);
    try {
      const r = await reply(config);
      expect(r.notices.map((n) => n.message)).toEqual([expect.stringMatching(/could not be used \(it is read-only\); conversations are kept in memory only/)]);
      expect(warningLines(r.child.stderr())).toHaveLength(1);
      expect(r.message).toMatchObject({ status: "complete" });
      expect(r.list).toHaveLength(1);
      expect(readdirSync(config.dataDir).sort()).toEqual(before);
    } finally {
      chmodSync(config.dataDir, 0o755);
    }
    expect(existsSync(path.join(config.dataDir, "profiles"))).toBe(false);
  });
});

/** Another process holding an exclusive lock on `file` (until killed). */
function holdExclusiveLock(file: string): Promise<ChildProcess> {
  const code = `const D = require("better-sqlite3"); const db = new D(process.argv[1]);
    db.pragma("locking_mode = EXCLUSIVE"); db.exec("BEGIN EXCLUSIVE; INSERT INTO conversations VALUES ('x','lock','',0,'','')");
    process.stdout.write("locked\\n"); setInterval(() => {}, 1000);`;
  const proc = spawn(process.execPath, ["-e", code, file], { cwd: projectRoot(), stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    proc.stdout!.on("data", (d: Buffer) => { if (d.toString().includes("locked")) resolve(proc); });
    proc.on("exit", (c) => reject(new Error(`the lock holder exited (${c})`)));
  });
}
