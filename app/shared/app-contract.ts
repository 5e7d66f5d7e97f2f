// The app contract: what the renderer may ask the main process, and the events
// it hears back. Defined once here; implemented over Electron IPC
// (app/main/shell + app/preload) and over HTTP + SSE (app/main/web) — the
// renderer only ever sees these types. Pure TypeScript: no Node, no DOM.
import type { LoadedModel, ModelLoadSettings, StartupProfileJson, StopReason } from "./runtime-contract.js";

// ---------------------------------------------------------------- chat

export interface Conversation {
  id: string;
  title: string;
  systemPrompt: string;
  temperature: number;
  createdAt: string;  // ISO time
  updatedAt: string;
}

export interface MessageStats {
  promptTokens: number;
  generatedTokens: number;
  tokensPerSecond: number;
  ttftMs: number;
  queueMs: number;
  stopReason: StopReason;
}

export type MessageStatus = "complete" | "streaming" | "stopped" | "error";

export interface Message {
  id: string;
  conversationId: string;
  role: "user" | "assistant";
  content: string;
  status: MessageStatus;
  createdAt: string;
  stats: MessageStats | null;
  error: string | null;
}

export interface SearchHit {
  conversation: Conversation;
  /** A short piece of matching text (title or message). */
  snippet: string;
}

export interface SendReply {
  userMessage: Message | null;
  assistantMessage: Message;
}

export interface ExportedFile {
  filename: string;
  mimeType: string;
  content: string;
}

export interface ChatService {
  listConversations(): Promise<Conversation[]>;
  createConversation(req: { title?: string; systemPrompt?: string; temperature?: number }): Promise<Conversation>;
  renameConversation(req: { id: string; title: string }): Promise<Conversation>;
  updateSettings(req: { id: string; systemPrompt: string; temperature: number }): Promise<Conversation>;
  deleteConversation(req: { id: string }): Promise<{ deleted: boolean }>;
  searchConversations(req: { query: string }): Promise<SearchHit[]>;
  messages(req: { conversationId: string }): Promise<Message[]>;
  /** Adds the user's message and starts the reply; the reply streams as `chat.reply` events. */
  send(req: { conversationId: string; content: string }): Promise<SendReply>;
  /** Stops the conversation's reply (running or waiting). */
  stop(req: { conversationId: string }): Promise<{ stopped: boolean }>;
  /** Replaces the last assistant reply with a new one. */
  regenerate(req: { conversationId: string }): Promise<SendReply>;
  /**
   * Edit-and-resend: replaces the text of one of the conversation's user
   * messages, deletes every message after it, and starts a new reply to it.
   */
  editAndResend(req: { conversationId: string; messageId: string; content: string }): Promise<SendReply>;
  exportConversation(req: { id: string; format: "markdown" | "json" }): Promise<ExportedFile>;
}

// ---------------------------------------------------------------- models

export interface ModelFile {
  path: string;
  name: string;
  sizeBytes: number;
  source: "embedded" | "library" | "opened";
}

export interface MemoryEstimate {
  denseBytes: number;
  expertBytes: number;
  /** KV cache of one session at `contextSize` tokens. */
  kvCacheBytes: number;
  contextSize: number;
  totalBytes: number;
}

export interface ModelSummary {
  path: string;
  name: string;
  architecture: string;
  fileBytes: number;
  parameterCount: number;
  layers: number;
  experts: number;
  expertsPerToken: number;
  contextLength: number;
  embeddingLength: number;
  vocabSize: number;
  tensorTypes: Record<string, number>;
  memory: MemoryEstimate;
}

export interface ModelService {
  /** Model files known to the app: the embedded model and the models folder. */
  list(): Promise<ModelFile[]>;
  /** Loads a GGUF; progress arrives as `model.progress` events. Replaces the current model. */
  load(req: { path: string; settings?: ModelLoadSettings }): Promise<LoadedModel>;
  /**
   * Cancels the load in progress: its `load` call rejects with
   * {@link loadCancelledMessage} and `model.state` says "cancelled". A cancel
   * that comes while the file is still being checked keeps the current model;
   * once the runtime's load has begun, the model it replaces is already gone.
   * False when no load is running.
   */
  cancelLoad(): Promise<{ cancelled: boolean }>;
  unload(): Promise<{ unloaded: boolean }>;
  current(): Promise<LoadedModel | null>;
  /** The current model's startup profile. */
  profile(): Promise<StartupProfileJson | null>;
  inspect(req: { path: string }): Promise<ModelSummary>;
}

// ---------------------------------------------------------------- packages

export interface PackageInfo {
  name: string;
  version: string;
  compatible: boolean;
  reason?: string;
  enabled: boolean;
  /** Holders that pin the package (a loaded model, a session); disabling then fails. */
  pinnedBy: string[];
  /**
   * "bundled": shipped with the app (read-only: it can be disabled, not uninstalled); "user":
   * installed into the user's packages folder. Absent from older backends (treated as "user").
   */
  source?: "user" | "bundled";
}

export interface PackageService {
  list(): Promise<PackageInfo[]>;
  enable(req: { name: string }): Promise<PackageInfo>;
  disable(req: { name: string }): Promise<PackageInfo>;
  /** Installs (or replaces) a package from a .gkpkg archive on this machine. */
  install(req: { path: string }): Promise<PackageInfo>;
  /**
   * Installs from the bytes of a .gkpkg the user picked (base64, at most
   * {@link maxUploadBytes} decoded): how a browser tab, which never sees file
   * paths, installs a file.
   */
  installUpload(req: { fileName: string; data: string }): Promise<PackageInfo>;
  /** Removes a package; refused while a loaded model or live session pins it. */
  uninstall(req: { name: string }): Promise<{ uninstalled: boolean }>;
}

/** The largest .gkpkg `installUpload` takes (decoded bytes); larger archives install by path. */
export const maxUploadBytes = 8 * 1024 * 1024;

// ---------------------------------------------------------------- profiles

export interface ProfileRecord {
  id: string;
  modelName: string;
  modelPath: string;
  recordedAt: string;
  totalMs: number;
}

export interface ProfileService {
  recent(): Promise<ProfileRecord[]>;
  get(req: { id: string }): Promise<StartupProfileJson>;
  /**
   * Validates a profile JSON (e.g. from `guild run --profile-out`) and returns
   * it. Give one of: `json`, the text of a file the user picked (what the
   * renderer sends: a page never sees file paths); or `path`, a file inside the
   * app's profile folder (absolute or relative to it; a path, or a symbolic
   * link, leading out of it is refused). Errors never quote the file's text.
   */
  open(req: { path?: string; json?: string }): Promise<StartupProfileJson>;
}

// ---------------------------------------------------------------- notices

/** Something the user must be told once, e.g. that a damaged chat database was replaced. */
export interface AppNotice {
  id: string;
  level: "warning";
  /** One sentence, shown as it is. */
  message: string;
}

export interface NoticeService {
  /** The notices not dismissed yet: the renderer shows them when it starts. */
  list(): Promise<AppNotice[]>;
  /** Dismisses a notice for every window and tab (`notices.changed`); false when there is no such notice. */
  dismiss(req: { id: string }): Promise<{ dismissed: boolean }>;
}

// ---------------------------------------------------------------- the whole contract

export interface AppContract {
  chat: ChatService;
  models: ModelService;
  packages: PackageService;
  profiles: ProfileService;
  notices: NoticeService;
}

export type ServiceName = keyof AppContract;
export type MethodName<S extends ServiceName> = keyof AppContract[S] & string;
type Fn<S extends ServiceName, M extends MethodName<S>> = AppContract[S][M] extends (...args: infer A) => Promise<infer R>
  ? { args: A; result: R } : never;
export type RequestOf<S extends ServiceName, M extends MethodName<S>> = Fn<S, M>["args"] extends [infer R, ...unknown[]]
  ? R : Fn<S, M>["args"] extends [(infer R)?] ? R | undefined : undefined;
export type ResultOf<S extends ServiceName, M extends MethodName<S>> = Fn<S, M>["result"];

/**
 * The argument of each operation, as a tiny schema ("string", "number?", …;
 * null = no argument; "base64" = a base64 string of at most
 * {@link maxUploadBytes} decoded bytes). Both transports validate requests against it before a
 * service sees them; its keys are the operation list (the preload exposes
 * exactly these).
 */
export type FieldType = "string" | "number" | "boolean" | "object" | "base64" | "string?" | "number?" | "boolean?" | "object?";
export type RequestSchema = Readonly<Record<string, FieldType | readonly string[]>> | null;

export const OPERATIONS = {
  chat: {
    listConversations: null,
    createConversation: { title: "string?", systemPrompt: "string?", temperature: "number?" },
    renameConversation: { id: "string", title: "string" },
    updateSettings: { id: "string", systemPrompt: "string", temperature: "number" },
    deleteConversation: { id: "string" },
    searchConversations: { query: "string" },
    messages: { conversationId: "string" },
    send: { conversationId: "string", content: "string" },
    stop: { conversationId: "string" },
    regenerate: { conversationId: "string" },
    editAndResend: { conversationId: "string", messageId: "string", content: "string" },
    exportConversation: { id: "string", format: ["markdown", "json"] },
  },
  models: {
    list: null,
    load: { path: "string", settings: "object?" },
    cancelLoad: null,
    unload: null,
    current: null,
    profile: null,
    inspect: { path: "string" },
  },
  packages: {
    list: null,
    enable: { name: "string" },
    disable: { name: "string" },
    install: { path: "string" },
    installUpload: { fileName: "string", data: "base64" },
    uninstall: { name: "string" },
  },
  profiles: {
    recent: null,
    get: { id: "string" },
    open: { path: "string?", json: "string?" },
  },
  notices: {
    list: null,
    dismiss: { id: "string" },
  },
} as const satisfies { [S in ServiceName]: { [M in MethodName<S>]: RequestSchema } };

/** The IPC channel of one operation. */
export function channelOf(service: string, method: string): string {
  return `guild:${service}.${method}`;
}

/** Checks a request against its schema; returns an error message or null. */
export function validateRequest(schema: RequestSchema, req: unknown): string | null {
  if (schema === null) return req === undefined || req === null || (typeof req === "object" && Object.keys(req).length === 0)
    ? null : "this operation takes no argument";
  if (typeof req !== "object" || req === null || Array.isArray(req)) return "the argument must be an object";
  const r = req as Record<string, unknown>;
  for (const key of Object.keys(r)) if (!(key in schema)) return `unknown field ${JSON.stringify(key)}`;
  for (const [key, type] of Object.entries(schema)) {
    const v = r[key];
    if (Array.isArray(type)) {
      if (!type.includes(v as string)) return `${key} must be one of ${type.join(", ")}`;
      continue;
    }
    const t = type as FieldType;
    if (t === "base64") {
      if (typeof v !== "string" || v.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(v)) return `${key} must be base64`;
      if ((v.length / 4) * 3 > maxUploadBytes + 2) return `${key} is larger than ${maxUploadBytes / (1024 * 1024)} MiB`;
      continue;
    }
    const optional = t.endsWith("?");
    if (v === undefined && optional) continue;
    const base = optional ? t.slice(0, -1) : t;
    const ok = base === "object" ? typeof v === "object" && v !== null && !Array.isArray(v)
      : base === "number" ? typeof v === "number" && Number.isFinite(v) : typeof v === base;
    if (!ok) return `${key} must be ${base === "object" ? "an object" : `a ${base}`}`;
    if (base === "string" && (v as string).length > 1_000_000) return `${key} is too long`;
  }
  return null;
}

// ---------------------------------------------------------------- events

export type ChatReplyEvent =
  | { kind: "queued"; conversationId: string; messageId: string; position: number }
  | { kind: "started"; conversationId: string; messageId: string }
  | { kind: "delta"; conversationId: string; messageId: string; text: string }
  | { kind: "done"; conversationId: string; messageId: string; message: Message };

export interface ModelProgressEvent {
  path: string;
  stage: string;
  /** 1-based index in LOAD_STAGES; 0 for a stage outside it ("ready"). */
  stageIndex: number;
  stageCount: number;
  fraction: number;
}

export type ModelStateEvent =
  | { kind: "loading"; path: string }
  | { kind: "loaded"; model: LoadedModel }
  | { kind: "unloaded" }
  | { kind: "cancelled"; path: string }
  | { kind: "failed"; path: string; message: string };

/** The message of a load that was cancelled (ModelService.cancelLoad). */
export const loadCancelledMessage = "load cancelled";

/** Event name → payload. Each is one typed stream (IPC channel `guild:event:<name>`, SSE event `<name>`). */
export interface AppEvents {
  "chat.reply": ChatReplyEvent;
  "model.progress": ModelProgressEvent;
  "model.state": ModelStateEvent;
  "packages.changed": { packages: PackageInfo[] };
  "profiles.changed": { recent: ProfileRecord[] };
  /** The notices not dismissed yet, whenever one is added or dismissed. */
  "notices.changed": { notices: AppNotice[] };
}
export type EventName = keyof AppEvents;
export const EVENT_NAMES = [
  "chat.reply", "model.progress", "model.state", "packages.changed", "profiles.changed", "notices.changed",
] as const satisfies readonly EventName[];

export function eventChannelOf(name: EventName): string {
  return `guild:event:${name}`;
}

/** Where the main process publishes events (both transports subscribe). */
export type EventSink = <E extends EventName>(name: E, payload: AppEvents[E]) => void;

/** An error that crosses a transport: a message and a code, nothing else. */
export interface ContractErrorJson {
  error: { message: string; code: string };
}

/**
 * What the preload exposes as `window.guild`: one function per operation
 * (`guild.chat.send(req)`), and one subscribe function per event stream
 * (`guild.events["chat.reply"](listener)` → unsubscribe).
 */
export type GuildBridge = { readonly [S in ServiceName]: { readonly [M in MethodName<S>]: AppContract[S][M] } } & {
  readonly events: { readonly [E in EventName]: (listener: (payload: AppEvents[E]) => void) => () => void };
};
