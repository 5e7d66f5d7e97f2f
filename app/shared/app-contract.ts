// The app contract: what the renderer may ask the main process, and the events
// it hears back. Defined once here; implemented over Electron IPC
// (app/main/shell + app/preload) and over HTTP + SSE (app/main/web) — the
// renderer only ever sees these types. Pure TypeScript: no Node, no DOM.
import type { GenerationSettings, Preset } from "./chat-settings.js";
import type { LoadedModel, ModelLoadSettings, StartupProfileJson, StopReason } from "./runtime-contract.js";
import type { MachineFacts, MemoryPlan, ModelShape } from "./memory-plan.js";

// ---------------------------------------------------------------- chat

export interface Conversation {
  id: string;
  title: string;
  /** Generation settings of this chat (app/shared/chat-settings.ts). */
  settings: GenerationSettings;
  createdAt: string;  // ISO time
  updatedAt: string;
}

export interface MessageStats {
  promptTokens: number;
  generatedTokens: number;
  tokensPerSecond: number;
  ttftMs: number;
  queueMs: number;
  /** "context": the reply (or the prompt) ran into the end of the model's context. */
  stopReason: StopReason;
  /** The model's context in tokens when the reply was written: the context meter's limit. */
  contextSize: number;
  /**
   * Speculative decoding (docs/SPECULATIVE.md), absent in replies written before it was recorded:
   * draft tokens proposed and accepted, the verifier's passes, and who drafted ("mtp" or "none").
   */
  draftTokens?: number;
  acceptedDraftTokens?: number;
  windows?: number;
  drafter?: "mtp" | "none";
}

export type MessageStatus = "complete" | "streaming" | "stopped" | "error";

/**
 * One message of a chat's tree: editing or regenerating a message adds a
 * sibling (a new version with the same parent), so no text is ever thrown away.
 * `chat.messages` answers the active path, root first.
 */
export interface Message {
  id: string;
  conversationId: string;
  role: "user" | "assistant";
  content: string;
  status: MessageStatus;
  createdAt: string;
  stats: MessageStats | null;
  error: string | null;
  /** The message this one follows; null for the first of the chat. */
  parentId: string | null;
  /** Every version of this turn (the messages with the same parent, oldest first), this one included: ‹ i/n ›. */
  siblingIds: string[];
  /** The model that wrote this reply (its file name); null for your messages. */
  model: string | null;
  /** A version made with Edit (by hand), not by the model. */
  edited: boolean;
  /**
   * A reply's view of the chat: the first message of its path that was in the
   * model's prompt (older ones were shifted out of the context), or null when
   * the whole path was.
   */
  contextFrom: string | null;
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

/** The largest chat file `chat.importConversation` takes (decoded bytes). */
export const maxImportBytes = 8 * 1024 * 1024;

export interface ChatService {
  listConversations(): Promise<Conversation[]>;
  /** `settings`: any of GenerationSettings' fields, over the defaults. */
  createConversation(req: { title?: string; settings?: Partial<GenerationSettings> }): Promise<Conversation>;
  renameConversation(req: { id: string; title: string }): Promise<Conversation>;
  /** Changes any of the chat's settings (the others stay); every value is checked. */
  updateSettings(req: { id: string; settings: Partial<GenerationSettings> }): Promise<Conversation>;
  deleteConversation(req: { id: string }): Promise<{ deleted: boolean }>;
  searchConversations(req: { query: string }): Promise<SearchHit[]>;
  /** The active path of the chat's message tree, first message first. */
  messages(req: { conversationId: string }): Promise<Message[]>;
  /** Adds the user's message and starts the reply; the reply streams as `chat.reply` events. */
  send(req: { conversationId: string; content: string }): Promise<SendReply>;
  /** Stops the conversation's reply (running or waiting) or its summary. */
  stop(req: { conversationId: string }): Promise<{ stopped: boolean }>;
  /**
   * A new version of a reply (the last one on the path, or `messageId`): the
   * old one stays as a sibling to flip back to.
   */
  regenerate(req: { conversationId: string; messageId?: string }): Promise<SendReply>;
  /**
   * Edit-and-resend: a new version of one of your messages with `content`,
   * and a new reply to it. The old version and what followed it stay on their branch.
   */
  editAndResend(req: { conversationId: string; messageId: string; content: string }): Promise<SendReply>;
  /** A new version of any message with `content`, made by hand (no reply is generated); it becomes the active path's end. */
  editMessage(req: { conversationId: string; messageId: string; content: string }): Promise<Message>;
  /** Makes `messageId` (a version of its turn) active, with the newest branch under it; answers the new path. */
  switchBranch(req: { conversationId: string; messageId: string }): Promise<Message[]>;
  /**
   * A summary of the chat written by the model itself, for a new chat to carry
   * on from (`chat.stop` cancels it). Not saved: the user edits it first.
   */
  summarize(req: { conversationId: string }): Promise<{ summary: string }>;
  /** Markdown: the active path. JSON (`guild.chat/1`, docs/DESKTOP_APP.md): the whole tree, for chat.importConversation. */
  exportConversation(req: { id: string; format: "markdown" | "json" }): Promise<ExportedFile>;
  /** A new conversation from the bytes of an exported `.json` (base64, at most {@link maxImportBytes}); checked strictly. */
  importConversation(req: { fileName: string; data: string }): Promise<Conversation>;
  /** The built-in presets, then the user's. */
  listPresets(): Promise<Preset[]>;
  /** Saves (or replaces, by name) a user preset. */
  savePreset(req: { name: string; settings: Partial<GenerationSettings> }): Promise<Preset>;
  deletePreset(req: { id: string }): Promise<{ deleted: boolean }>;
}

// ---------------------------------------------------------------- models

/** What a model file holds, from its inspect (cached by the library per file version). */
export interface ModelFacts {
  architecture: string;
  parameterCount: number;
  /** The quantization its name states (Q4_K_M), else its most common weight type (Q8_0). */
  quant: string | null;
  contextLength: number;
  /** Why this runtime cannot load it, one sentence each; empty when it can. */
  problems: string[];
}

/** The settings a model was last loaded with (ModelLoadMemory). */
export interface RememberedLoad {
  settings: ModelLoadSettings;
  /** When (ms since the epoch). */
  loadedAt: number;
}

export interface ModelFile {
  /** A split model is listed once, by its first shard. */
  path: string;
  name: string;
  /** All shards together for a split model. */
  sizeBytes: number;
  source: "embedded" | "library" | "opened";
  /** A split model: the shards found in the folder of `count`. */
  shards?: { present: number; count: number };
  /** Null when the file could not be inspected (`factsError` says why). */
  facts?: ModelFacts | null;
  factsError?: string;
  /** The settings it was last loaded with; absent when it never was (or they were forgotten). */
  lastLoad?: RememberedLoad;
}

export interface MemoryEstimate {
  denseBytes: number;
  expertBytes: number;
  /** KV cache of one session at `contextSize` tokens. */
  kvCacheBytes: number;
  contextSize: number;
  totalBytes: number;
}

/** One tensor type of a model file: how many tensors, parameters and bytes it holds. */
export interface TypeShare {
  type: string;
  tensors: number;
  parameters: number;
  bytes: number;
  bitsPerWeight: number | null;
  /** Fraction of the file's tensor bytes, 0..1. */
  byteShare: number;
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
  tensorCount: number;
  /** 1 for a single file. */
  shards: number;
  tensorTypes: Record<string, number>;
  /** The tensor types by their share of the tensor bytes, largest first (mixed files hold 5+ types). */
  typeMix: TypeShare[];
  /** Bits per weight of all tensors, of the routed-expert stacks and of the rest (null where there are none). */
  bitsPerWeight: { all: number | null; experts: number | null; dense: number | null };
  memory: MemoryEstimate;
  /** Why this runtime cannot load the file (architecture, tensor types); empty when it can. Load refuses while any is left. */
  problems: string[];
  /** The facts the memory plan needs; the renderer recomputes the plan from them as load settings are typed. */
  shape: ModelShape;
  /** The settings it was last loaded with, or null. */
  lastLoad: RememberedLoad | null;
  machine: MachineFacts;
  /** Where it would go with the settings inspect was given (shared/memory-plan.ts). */
  plan: MemoryPlan;
}

/** A folder of the server-side file browser (web mode: a page cannot see paths). */
export interface FolderListing {
  /** The folder listed (absolute). */
  dir: string;
  /** Its parent, or null at a root. */
  parent: string | null;
  /** Where browsing may go: the models folder and the user's home. */
  roots: { label: string; path: string }[];
  entries: { name: string; path: string; kind: "folder" | "model"; sizeBytes: number }[];
  /** More entries than were listed. */
  truncated: boolean;
}

export interface ModelService {
  /** Model files known to the app: the embedded model, the models folder, files opened by path. */
  list(): Promise<ModelFile[]>;
  /**
   * Loads a GGUF; progress arrives as `model.progress` events. Replaces the current model,
   * which stays loaded until the new one has passed the file, architecture, tensor-type and
   * memory checks; it is unloaded first only when memory requires it, and is loaded again if
   * the new load then fails. `ignoreMemory` loads even when the estimate exceeds free RAM.
   */
  load(req: { path: string; settings?: ModelLoadSettings; ignoreMemory?: boolean }): Promise<LoadedModel>;
  /**
   * Cancels the load in progress: its `load` call rejects with
   * {@link loadCancelledMessage} and `model.state` says "cancelled". The current
   * model stays (or, when it had to be unloaded to make room, is loaded again).
   * False when no load is running.
   */
  cancelLoad(): Promise<{ cancelled: boolean }>;
  unload(): Promise<{ unloaded: boolean }>;
  current(): Promise<LoadedModel | null>;
  /** The current model's startup profile. */
  profile(): Promise<StartupProfileJson | null>;
  /** What a file holds, whether this runtime can load it, and where it would go with `settings`. */
  inspect(req: { path: string; settings?: ModelLoadSettings }): Promise<ModelSummary>;
  /** Lists a folder inside the models folder or the user's home (folders and *.gguf files); default: the models folder. */
  browse(req: { dir?: string }): Promise<FolderListing>;
  /** Electron: the system's open-file dialog (GGUF files); null when cancelled. Web mode refuses: use browse. */
  pickFile(): Promise<{ path: string | null }>;
  /** Deletes a model (all its shards) from the models folder; refused for the loaded model and files elsewhere. */
  remove(req: { path: string }): Promise<{ removed: string[] }>;
}

// ---------------------------------------------------------------- settings

export type ThemeChoice = "system" | "light" | "dark";
export const THEME_CHOICES = ["system", "light", "dark"] as const satisfies readonly ThemeChoice[];

/** The app's settings, kept in `<data>/settings.json`. */
export interface AppSettings {
  dataDir: string;
  /** Where downloads go and *.gguf files are listed from. */
  modelsDir: string;
  /** `<data>/models`. */
  modelsDirDefault: string;
  /** The Hugging Face Hub (or a mirror): its API and downloads. */
  hubEndpoint: string;
  hubEndpointDefault: string;
  /** GUILD_HF_ENDPOINT is set: it wins over the setting. */
  hubEndpointFromEnv: boolean;
  theme: ThemeChoice;
}

export interface SettingsService {
  get(): Promise<AppSettings>;
  /** Changes some settings; a models folder is created if missing and must be writable. "" = back to the default. */
  update(req: { modelsDir?: string; hubEndpoint?: string; theme?: string }): Promise<AppSettings>;
  /** Electron: the system's choose-folder dialog; null when cancelled. Web mode refuses: use models.browse. */
  pickFolder(): Promise<{ path: string | null }>;
}

// ---------------------------------------------------------------- the Hugging Face Hub

export interface HubModel {
  /** "owner/name" */
  id: string;
  downloads: number;
  likes: number;
  updatedAt: string | null;
}

export interface HubFile {
  /** Path in the repository. */
  path: string;
  /** Base name: the file's name in the models folder. */
  name: string;
  sizeBytes: number;
  /** The Hub's LFS sha256 (what a download is verified against); null when the Hub gives none. */
  sha256: string | null;
}

/** One model of a repository: a single .gguf, or the shards of a split one. */
export interface HubModelChoice {
  /** The first (or only) file's name: what `download` takes. */
  name: string;
  quant: string | null;
  files: HubFile[];
  totalBytes: number;
  /** Every shard of a split model is listed. */
  complete: boolean;
  /** Already in the models folder (same names and sizes). */
  inLibrary: boolean;
}

export interface HubRepoFiles {
  repo: string;
  models: HubModelChoice[];
  /** .gguf files left out: names that cannot be a file of the models folder. */
  skipped: string[];
}

export type DownloadState = "queued" | "downloading" | "verifying" | "done" | "failed" | "cancelled";

export interface DownloadInfo {
  id: string;
  repo: string;
  /** The model's (first file's) name. */
  name: string;
  state: DownloadState;
  files: number;
  /** 1-based: the file being fetched. */
  fileIndex: number;
  totalBytes: number;
  receivedBytes: number;
  bytesPerSecond: number;
  /** Seconds left at the current speed; null before it is known. */
  etaSeconds: number | null;
  /** Bytes that were already there (a .partial file) when a file was resumed. */
  resumedBytes: number;
  /** An error, or a note ("resumed after the connection dropped"). */
  message: string | null;
  /** Where the model is once done (its first shard). */
  path: string | null;
}

export interface HubService {
  search(req: { query: string }): Promise<HubModel[]>;
  /** The GGUF models of a repository, shards grouped, with sizes and quantizations. */
  files(req: { repo: string }): Promise<HubRepoFiles>;
  /** Starts (or resumes: a .partial file is continued) downloading one model of `repo` into the models folder. */
  download(req: { repo: string; name: string }): Promise<DownloadInfo>;
  downloads(): Promise<DownloadInfo[]>;
  /** Stops a download; its .partial file stays, so a later download resumes it. */
  cancel(req: { id: string }): Promise<{ cancelled: boolean }>;
  /** Starts a failed or cancelled download again, from where its .partial file ends. */
  resume(req: { id: string }): Promise<DownloadInfo>;
  /** Forgets a finished, failed or cancelled download (its .partial file stays). */
  clear(req: { id: string }): Promise<{ cleared: boolean }>;
}

// ---------------------------------------------------------------- the API server panel

export interface RequestLogEntry {
  id: number;
  time: string;
  /** "page": web mode's own server (which serves this page and the API); "api": the API-only server. */
  server: "page" | "api";
  method: string;
  path: string;
  status: number;
  ms: number;
}

export interface ServerState {
  /** Web mode: the server this page comes from, which serves the OpenAI API too. Null in Electron. */
  page: { url: string; apiKeyRequired: boolean } | null;
  /** The API-only server the panel starts and stops. */
  api: { running: boolean; url: string | null; port: number; apiKey: string; error: string | null };
  /** The newest requests to either server, oldest first (the OpenAI API's paths, not the page's own). */
  log: RequestLogEntry[];
  /** The loaded model's API id (its file name without .gguf), for the examples. */
  modelId: string | null;
}

export interface ServerService {
  status(): Promise<ServerState>;
  /** Starts the API-only server on 127.0.0.1:port (0: any free port) with an API key ("" = none). */
  start(req: { port: number; apiKey: string }): Promise<ServerState>;
  stop(): Promise<ServerState>;
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
  settings: SettingsService;
  hub: HubService;
  server: ServerService;
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
    createConversation: { title: "string?", settings: "object?" },
    renameConversation: { id: "string", title: "string" },
    updateSettings: { id: "string", settings: "object" },
    deleteConversation: { id: "string" },
    searchConversations: { query: "string" },
    messages: { conversationId: "string" },
    send: { conversationId: "string", content: "string" },
    stop: { conversationId: "string" },
    regenerate: { conversationId: "string", messageId: "string?" },
    editAndResend: { conversationId: "string", messageId: "string", content: "string" },
    editMessage: { conversationId: "string", messageId: "string", content: "string" },
    switchBranch: { conversationId: "string", messageId: "string" },
    summarize: { conversationId: "string" },
    exportConversation: { id: "string", format: ["markdown", "json"] },
    importConversation: { fileName: "string", data: "base64" },
    listPresets: null,
    savePreset: { name: "string", settings: "object" },
    deletePreset: { id: "string" },
  },
  models: {
    list: null,
    load: { path: "string", settings: "object?", ignoreMemory: "boolean?" },
    cancelLoad: null,
    unload: null,
    current: null,
    profile: null,
    inspect: { path: "string", settings: "object?" },
    browse: { dir: "string?" },
    pickFile: null,
    remove: { path: "string" },
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
  settings: {
    get: null,
    update: { modelsDir: "string?", hubEndpoint: "string?", theme: "string?" },
    pickFolder: null,
  },
  hub: {
    search: { query: "string" },
    files: { repo: "string" },
    download: { repo: "string", name: "string" },
    downloads: null,
    cancel: { id: "string" },
    resume: { id: "string" },
    clear: { id: "string" },
  },
  server: {
    status: null,
    start: { port: "number", apiKey: "string" },
    stop: null,
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
  /** `restored`: the model that had been unloaded to make room, loaded again. */
  | { kind: "cancelled"; path: string; restored?: LoadedModel }
  | { kind: "failed"; path: string; message: string; restored?: LoadedModel };

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
  /** The model files changed (a download finished, a model was removed, the models folder moved). */
  "models.changed": { files: ModelFile[] };
  /** Every download, a few times a second while one runs. */
  "downloads.changed": { downloads: DownloadInfo[] };
  "settings.changed": AppSettings;
  "server.changed": ServerState;
  /** One request to the OpenAI API (either server), as it ends. */
  "server.request": RequestLogEntry;
}
export type EventName = keyof AppEvents;
export const EVENT_NAMES = [
  "chat.reply", "model.progress", "model.state", "packages.changed", "profiles.changed", "notices.changed",
  "models.changed", "downloads.changed", "settings.changed", "server.changed", "server.request",
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
