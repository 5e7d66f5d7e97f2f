// The chat database's schema versions. chat-database.ts creates the first
// schema (version 0: conversations and a flat list of messages) and checks the
// file; these migrations bring it up to date, each in one transaction with
// `PRAGMA user_version` (so a failed step leaves the database as it was).
// A database written by a newer Guild (a higher version) is not touched.
import type Database from "better-sqlite3";

interface Migration {
  version: number;
  /** What the step changes, for the error that names a failed one. */
  what: string;
  up(db: Database.Database): void;
}

const migrations: readonly Migration[] = [
  {
    version: 1,
    what: "message tree, generation settings, presets",
    up(db) {
      db.exec(`
        ALTER TABLE conversations ADD COLUMN settings TEXT NOT NULL DEFAULT '{}';
        ALTER TABLE conversations ADD COLUMN active_leaf_id TEXT;
        UPDATE conversations SET settings = json_object('systemPrompt', system_prompt, 'temperature', temperature);
        ALTER TABLE conversations DROP COLUMN system_prompt;
        ALTER TABLE conversations DROP COLUMN temperature;

        ALTER TABLE messages ADD COLUMN parent_id TEXT REFERENCES messages(id) ON DELETE CASCADE;
        ALTER TABLE messages ADD COLUMN sibling_index INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE messages ADD COLUMN model TEXT;
        ALTER TABLE messages ADD COLUMN edited INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE messages ADD COLUMN context_from TEXT;
        -- The flat history becomes one branch: each message follows the one before it.
        UPDATE messages SET parent_id = (
          SELECT p.id FROM messages p WHERE p.conversation_id = messages.conversation_id AND p.seq < messages.seq
          ORDER BY p.seq DESC LIMIT 1);
        UPDATE conversations SET active_leaf_id = (
          SELECT m.id FROM messages m WHERE m.conversation_id = conversations.id ORDER BY m.seq DESC LIMIT 1);
        CREATE INDEX messages_by_parent ON messages(conversation_id, parent_id, sibling_index);

        CREATE TABLE presets (
          id TEXT PRIMARY KEY,
          name TEXT NOT NULL UNIQUE,
          settings TEXT NOT NULL,
          created_at TEXT NOT NULL
        );
      `);
    },
  },
];

export const chatSchemaVersion = migrations.at(-1)!.version;

/** Brings `db` up to {@link chatSchemaVersion}; throws (changing nothing) on a newer database or a failed step. */
export function migrateChatDatabase(db: Database.Database): void {
  const current = db.pragma("user_version", { simple: true }) as number;
  if (current > chatSchemaVersion)
    throw new Error(`it was written by a newer Guild (schema version ${current}; this one knows up to ${chatSchemaVersion})`);
  for (const m of migrations) {
    if (m.version <= current) continue;
    try {
      db.transaction(() => {
        m.up(db);
        db.pragma(`user_version = ${m.version}`);
      })();
    } catch (err) {
      throw new Error(`its upgrade to schema version ${m.version} (${m.what}) failed: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
}
