// The exported chat file, `guild.chat/1` (docs/DESKTOP_APP.md, "Exported
// chats"): the whole message tree with its settings, written by
// exportConversation and read back by importConversation. An imported file is
// untrusted: it is checked strictly here (sizes bounded, every field known and
// typed, parents earlier in the list so the tree has no cycle) before anything
// is stored, and the first problem is one line naming the field. Unknown
// fields are refused, not ignored, so nothing in a file is silently dropped;
// a later format gets a new `format` string.
import type { Conversation, Message, MessageStats } from "../../shared/app-contract.js";
import { checkSettings, defaultGenerationSettings, withSettings } from "../../shared/chat-settings.js";
import type { ImportedChat, ImportedMessage } from "./conversation-store.js";

export const chatFileFormat = "guild.chat/1";

/** Bounds of an imported file (the file itself is at most maxImportBytes, app-contract.ts). */
export const chatFileLimits = {
  messages: 10_000,
  contentChars: 1_000_000,
  titleChars: 200,
  idChars: 128,
  modelChars: 300,
  errorChars: 10_000,
} as const;

export interface ChatFileMessage {
  id: string;
  parentId: string | null;
  role: Message["role"];
  content: string;
  status: Message["status"];
  createdAt: string;
  model: string | null;
  edited: boolean;
  stats: MessageStats | null;
  error: string | null;
}

export interface ChatFile {
  format: typeof chatFileFormat;
  exportedAt: string;
  conversation: { title: string; createdAt: string; updatedAt: string; settings: Conversation["settings"] };
  /** The message the chat showed last (its active path's end); null for an empty chat. */
  activeLeafId: string | null;
  /** Oldest first: a message's parent comes before it. */
  messages: ChatFileMessage[];
}

export function chatFileOf(c: Conversation, tree: readonly Message[], activeLeafId: string | null): ChatFile {
  return {
    format: chatFileFormat,
    exportedAt: new Date().toISOString(),
    conversation: { title: c.title, createdAt: c.createdAt, updatedAt: c.updatedAt, settings: c.settings },
    activeLeafId,
    messages: tree.map((m) => ({
      id: m.id, parentId: m.parentId, role: m.role, content: m.content, status: m.status, createdAt: m.createdAt,
      model: m.model, edited: m.edited, stats: m.stats, error: m.error,
    })),
  };
}

/** A problem with an imported file: the message is one line, naming the field. */
export class ChatFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ChatFileError";
  }
}

/** Reads the bytes of an exported chat; throws ChatFileError on the first problem. */
export function readChatFile(bytes: Uint8Array): ImportedChat {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new ChatFileError("the file is not UTF-8 text");
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ChatFileError(`the file is not JSON (${err instanceof Error ? err.message : String(err)})`);
  }
  const top = object(json, "the file");
  only(top, "the file", ["format", "exportedAt", "conversation", "activeLeafId", "messages"]);
  if (top["format"] !== chatFileFormat)
    throw new ChatFileError(`not a Guild chat export: format must be ${JSON.stringify(chatFileFormat)}`);
  if (top["exportedAt"] !== undefined) time(top["exportedAt"], "exportedAt");

  const conv = object(top["conversation"], "conversation");
  only(conv, "conversation", ["title", "createdAt", "updatedAt", "settings"]);
  const title = string(conv["title"], "conversation.title", chatFileLimits.titleChars).trim() || "Imported chat";
  const createdAt = conv["createdAt"] === undefined ? new Date().toISOString() : time(conv["createdAt"], "conversation.createdAt");
  if (conv["updatedAt"] !== undefined) time(conv["updatedAt"], "conversation.updatedAt");
  let settings = defaultGenerationSettings;
  if (conv["settings"] !== undefined) {
    const checked = checkSettings(conv["settings"]);
    if (!checked.ok) throw new ChatFileError(`conversation.settings: ${checked.problem}`);
    settings = withSettings(defaultGenerationSettings, checked.settings);
  }

  const list = top["messages"];
  if (!Array.isArray(list)) throw new ChatFileError("messages must be a list");
  if (list.length > chatFileLimits.messages) throw new ChatFileError(`messages: more than ${chatFileLimits.messages} messages`);
  const index = new Map<string, number>();
  const messages: ImportedMessage[] = list.map((item: unknown, i) => {
    const where = `messages[${i}]`;
    const m = object(item, where);
    only(m, where, ["id", "parentId", "role", "content", "status", "createdAt", "model", "edited", "stats", "error"]);
    const id = string(m["id"], `${where}.id`, chatFileLimits.idChars);
    if (id.length === 0) throw new ChatFileError(`${where}.id is empty`);
    if (index.has(id)) throw new ChatFileError(`${where}.id ${JSON.stringify(id)} is used twice`);
    let parent: number | null = null;
    if (m["parentId"] !== null && m["parentId"] !== undefined) {
      const p = index.get(string(m["parentId"], `${where}.parentId`, chatFileLimits.idChars));
      // An earlier message only: a tree, never a cycle.
      if (p === undefined) throw new ChatFileError(`${where}.parentId names no earlier message`);
      parent = p;
    }
    index.set(id, i);
    const role = m["role"];
    if (role !== "user" && role !== "assistant") throw new ChatFileError(`${where}.role must be "user" or "assistant"`);
    const status = m["status"] ?? "complete";
    if (status !== "complete" && status !== "stopped" && status !== "error" && status !== "streaming")
      throw new ChatFileError(`${where}.status must be complete, stopped or error`);
    return {
      parent,
      role,
      content: string(m["content"], `${where}.content`, chatFileLimits.contentChars),
      // A reply exported while it was still streaming is kept as stopped, as after a crash.
      status: status === "streaming" ? "stopped" : status,
      createdAt: m["createdAt"] === undefined ? createdAt : time(m["createdAt"], `${where}.createdAt`),
      model: nullable(m["model"], (v) => string(v, `${where}.model`, chatFileLimits.modelChars)),
      edited: m["edited"] === undefined ? false : boolean(m["edited"], `${where}.edited`),
      stats: nullable(m["stats"], (v) => stats(v, `${where}.stats`)),
      error: nullable(m["error"], (v) => string(v, `${where}.error`, chatFileLimits.errorChars)),
    };
  });
  let activeLeaf: number | null = messages.length > 0 ? messages.length - 1 : null;
  if (top["activeLeafId"] !== undefined && top["activeLeafId"] !== null) {
    const leaf = index.get(string(top["activeLeafId"], "activeLeafId", chatFileLimits.idChars));
    if (leaf === undefined) throw new ChatFileError("activeLeafId names no message of the file");
    activeLeaf = leaf;
  }
  return { title, createdAt, settings, messages, activeLeaf };
}

function object(v: unknown, where: string): Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new ChatFileError(`${where} must be an object`);
  return v as Record<string, unknown>;
}

function only(o: Record<string, unknown>, where: string, known: readonly string[]): void {
  for (const key of Object.keys(o)) if (!known.includes(key)) throw new ChatFileError(`${where} has an unknown field ${JSON.stringify(key.slice(0, 60))}`);
}

function string(v: unknown, where: string, max: number): string {
  if (typeof v !== "string") throw new ChatFileError(`${where} must be a string`);
  if (v.length > max) throw new ChatFileError(`${where} is longer than ${max} characters`);
  return v;
}

function boolean(v: unknown, where: string): boolean {
  if (typeof v !== "boolean") throw new ChatFileError(`${where} must be true or false`);
  return v;
}

function nullable<T>(v: unknown, read: (v: unknown) => T): T | null {
  return v === null || v === undefined ? null : read(v);
}

/** An ISO 8601 UTC time as toISOString writes it. */
function time(v: unknown, where: string): string {
  if (typeof v !== "string" || !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z$/.test(v) || !Number.isFinite(Date.parse(v)))
    throw new ChatFileError(`${where} must be a time like 2025-01-02T03:04:05.678Z`);
  return v;
}

const stopReasons = ["eos", "length", "context", "cancel", "stop"] as const;

function stats(v: unknown, where: string): MessageStats {
  const s = object(v, where);
  only(s, where, ["promptTokens", "generatedTokens", "tokensPerSecond", "ttftMs", "queueMs", "stopReason", "contextSize",
    "draftTokens", "acceptedDraftTokens", "windows", "drafter"]);
  const count = (key: string, integer: boolean) => {
    const n = s[key] ?? 0;
    if (typeof n !== "number" || !Number.isFinite(n) || n < 0 || n > 1e12 || (integer && !Number.isInteger(n)))
      throw new ChatFileError(`${where}.${key} must be a ${integer ? "whole " : ""}number ≥ 0`);
    return n;
  };
  const reason = s["stopReason"];
  if (!stopReasons.includes(reason as (typeof stopReasons)[number])) throw new ChatFileError(`${where}.stopReason must be one of ${stopReasons.join(", ")}`);
  return {
    promptTokens: count("promptTokens", true),
    generatedTokens: count("generatedTokens", true),
    tokensPerSecond: count("tokensPerSecond", false),
    ttftMs: count("ttftMs", false),
    queueMs: count("queueMs", false),
    stopReason: reason as MessageStats["stopReason"],
    contextSize: count("contextSize", true),
    ...speculativeStats(s, where, count),
  };
}

/** A reply's speculative-decoding stats, all four or none (files exported before they were recorded have none). */
function speculativeStats(s: Record<string, unknown>, where: string, count: (key: string, integer: boolean) => number):
  Pick<MessageStats, "draftTokens" | "acceptedDraftTokens" | "windows" | "drafter"> {
  const keys = ["draftTokens", "acceptedDraftTokens", "windows", "drafter"] as const;
  const given = keys.filter((k) => s[k] !== undefined);
  if (given.length === 0) return {};
  if (given.length < keys.length) throw new ChatFileError(`${where} must have all of ${keys.join(", ")} or none of them`);
  const drafter = s["drafter"];
  if (drafter !== "mtp" && drafter !== "none") throw new ChatFileError(`${where}.drafter must be "mtp" or "none"`);
  const draftTokens = count("draftTokens", true);
  const acceptedDraftTokens = count("acceptedDraftTokens", true);
  if (acceptedDraftTokens > draftTokens) throw new ChatFileError(`${where}.acceptedDraftTokens must not exceed draftTokens`);
  return { draftTokens, acceptedDraftTokens, windows: count("windows", true), drafter };
}
