// Opening the chat database so that a bad one never stops the app: a file
// that is not a database, is damaged, truncated, a directory or read-only is
// moved aside as `<file>.corrupt-<ISO time>` (with its -wal/-shm/-journal) and
// a fresh database is started; one locked by another process, or a folder
// where no database can be created, leaves the app on an in-memory database.
// The outcome says which, for the notice the user sees once (index.ts).
import { lstatSync, mkdirSync, renameSync } from "node:fs";
import path from "node:path";

import Database from "better-sqlite3";

const schema = `
CREATE TABLE IF NOT EXISTS conversations (
  id TEXT PRIMARY KEY,
  title TEXT NOT NULL,
  system_prompt TEXT NOT NULL,
  temperature REAL NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
  role TEXT NOT NULL CHECK (role IN ('user', 'assistant')),
  content TEXT NOT NULL,
  status TEXT NOT NULL,
  created_at TEXT NOT NULL,
  stats TEXT,
  error TEXT
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, seq);
`;

/** How long opening waits for another connection's lock before calling the database locked. */
export const openBusyTimeoutMs = 2000;
// SQLite keeps these next to the database; they belong to it and move with it.
const sidecars = ["-wal", "-shm", "-journal"] as const;

export type ChatDatabaseOutcome =
  | { kind: "opened" }
  /** The old database was moved to `movedTo`; a fresh one took its place. */
  | { kind: "replaced"; reason: string; movedTo: string }
  /** Nothing is saved on disk this run; `movedTo` is where the old database went, if it was moved. */
  | { kind: "memory"; reason: string; movedTo: string | null };

export interface ChatDatabase {
  db: Database.Database;
  outcome: ChatDatabaseOutcome;
}

/** Opens `file` (":memory:" allowed) as the chat database; throws on any problem. */
export function openChatDatabaseStrict(file: string, busyTimeoutMs = openBusyTimeoutMs): Database.Database {
  const r = attempt(file, busyTimeoutMs);
  if (r.db) return r.db;
  r.handle?.close();
  throw r.error;
}

/** Opens `file` as the chat database, falling back as the header says; never throws. */
export function openChatDatabase(file: string, options: { now?: Date; busyTimeoutMs?: number } = {}): ChatDatabase {
  const timeout = options.busyTimeoutMs ?? openBusyTimeoutMs;
  const first = attempt(file, timeout);
  if (first.db) return { db: first.db, outcome: { kind: "opened" } };
  const reason = describe(file, first.error);
  // A lock is another process's live database, not a damaged one: leave it alone.
  if (isLockError(first.error) || !exists(file)) {
    closeQuietly(first.handle);
    return inMemory(reason, null);
  }
  // Moved while the failed connection is still open: SQLite deletes the -wal and -shm
  // files of a database when its last connection closes, and they belong to the old one.
  const target = asideName(file, options.now ?? new Date());
  let moved = tryMoveAside(file, target);
  closeQuietly(first.handle);
  // (Windows cannot rename open files: what is left moves now that the connection is closed.)
  if (!moved) moved = tryMoveAside(file, target);
  // A -wal left behind would be replayed into a fresh database: without a clean move, no fresh start.
  if (!moved) return inMemory(reason, exists(target) ? target : null);
  const movedTo = target;
  const fresh = attempt(file, timeout);
  if (fresh.db) return { db: fresh.db, outcome: { kind: "replaced", reason, movedTo } };
  closeQuietly(fresh.handle);
  return inMemory(`${reason}; a new one cannot be created either: ${describe(file, fresh.error)}`, movedTo);
}

/** The one line the user is told about an outcome other than "opened". */
export function describeOutcome(file: string, outcome: ChatDatabaseOutcome): string | null {
  switch (outcome.kind) {
    case "opened":
      return null;
    case "replaced":
      return `the chat database ${file} could not be used (${outcome.reason}); it was moved to ${outcome.movedTo} and a new, empty one was started`;
    case "memory":
      return `the chat database ${file} could not be used (${outcome.reason}); conversations are kept in memory only and are lost when Guild stops` +
        (outcome.movedTo ? ` (the old database was moved to ${outcome.movedTo})` : "");
  }
}

type Attempt =
  | { db: Database.Database; error?: undefined; handle?: undefined }
  /** `handle`: the connection that opened but failed to prepare, still open (or null). */
  | { db?: undefined; error: unknown; handle: Database.Database | null };

function attempt(file: string, timeout: number): Attempt {
  let db: Database.Database;
  try {
    if (file !== ":memory:") mkdirSync(path.dirname(file), { recursive: true });
    db = new Database(file, { timeout });
  } catch (error) {
    return { error, handle: null };
  }
  try {
    prepare(db, file !== ":memory:");
    return { db };
  } catch (error) {
    return { error, handle: db };
  }
}

function closeQuietly(db: Database.Database | null): void {
  try {
    db?.close();
  } catch {
    // already unusable
  }
}

function inMemory(reason: string, movedTo: string | null): ChatDatabase {
  return { db: openChatDatabaseStrict(":memory:"), outcome: { kind: "memory", reason, movedTo } };
}

function prepare(db: Database.Database, onDisk: boolean): void {
  db.pragma("journal_mode = WAL");
  db.pragma("foreign_keys = ON");
  // Reads every page: a truncated or damaged file is found now, not in the middle of a chat.
  if (db.pragma("quick_check", { simple: true }) !== "ok") throw Object.assign(new Error("it failed its integrity check"), { code: "SQLITE_CORRUPT" });
  db.exec(schema);
  // A database that can be read but not written (a read-only file or folder) is found by taking the write lock.
  if (onDisk) db.exec("BEGIN IMMEDIATE; COMMIT");
  // A reply that was streaming when the app stopped is kept as stopped.
  db.prepare("UPDATE messages SET status = 'stopped' WHERE status = 'streaming'").run();
}

/** `<file>.corrupt-<time>`, with a counter when that name (or one of its sidecars) is taken. */
function asideName(file: string, now: Date): string {
  // ISO 8601 basic format: no colons, which some file systems refuse.
  const stamp = now.toISOString().replace(/[-:]/g, "");
  let target = `${file}.corrupt-${stamp}`;
  for (let n = 1; [target, ...sidecars.map((s) => target + s)].some(exists); n++) target = `${file}.corrupt-${stamp}-${n}`;
  return target;
}

/** Renames what is left of `file` and its sidecars to `target` (+ the same suffixes); true when nothing is left. */
function tryMoveAside(file: string, target: string): boolean {
  for (const [from, to] of [[file, target], ...sidecars.map((s) => [file + s, target + s])] as const) {
    if (!exists(from)) continue;
    try {
      renameSync(from, to);
    } catch {
      return false;
    }
  }
  return true;
}

function describe(file: string, err: unknown): string {
  try {
    if (lstatSync(file).isDirectory()) return "it is a directory";
  } catch {
    // gone or unreachable: the error says why
  }
  const code = codeOf(err);
  if (code.startsWith("SQLITE_READONLY")) return "it is read-only";
  if (isLockError(err)) return "another process holds it locked";
  if (code === "SQLITE_NOTADB") return "it is not a SQLite database";
  if (code.startsWith("SQLITE_CORRUPT")) return "it is damaged or truncated";
  const message = err instanceof Error ? err.message : String(err);
  return exists(file) ? message : `it cannot be created there (${message})`;
}

function isLockError(err: unknown): boolean {
  const code = codeOf(err);
  return code.startsWith("SQLITE_BUSY") || code.startsWith("SQLITE_LOCKED");
}

function codeOf(err: unknown): string {
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === "string" ? code : "";
}

function exists(p: string): boolean {
  try {
    lstatSync(p);
    return true;
  } catch {
    return false;
  }
}
