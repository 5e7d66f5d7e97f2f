// The composition root of the app's services: builds them once, from a
// RuntimeHost and a data folder, and hands out the AppContract (what both
// transports serve) plus the one event bus they listen to.
import path from "node:path";

import type { AppContract, AppEvents, EventName, EventSink } from "../../shared/app-contract.js";
import type { ModelLoadSettings } from "../../shared/runtime-contract.js";
import { embeddedModelPath } from "../paths.js";
import { SettingsStore } from "./app-settings.js";
import { describeOutcome } from "./chat-database.js";
import { ChatServiceImpl, type ChatServiceOptions } from "./chat-service.js";
import { ConversationStore } from "./conversation-store.js";
import { ModelLibrary } from "./model-library.js";
import type { MachineProbe } from "./machine-facts.js";
import { ModelDownloads } from "./model-downloads.js";
import { ModelLoadMemory } from "./model-load-memory.js";
import { ModelManager, sanitizeSettings } from "./model-manager.js";
import { NoticeBoard, stderrWarning, type WarningWriter } from "./notices.js";
import { AppPackageService, packageBackendFrom, type PackageBackend } from "./package-adapter.js";
import { PackageService } from "./package-service.js";
import { ProfileStore } from "./profile-store.js";
import { RuntimeHost, type RuntimeHostOptions } from "./runtime-host.js";
import { ServerPanel } from "./server-panel.js";

export interface AppServicesOptions {
  /** Where the database, profiles and models folder live (Electron: app.getPath("userData")). */
  dataDir: string;
  host?: RuntimeHost;
  /** Options of the RuntimeHost made here when `host` is not given. */
  runtime?: RuntimeHostOptions;
  /** The default model. Defaults to embeddedModelPath() (a packaged app passes its resources copy). */
  embeddedModel?: string;
  /** Kernel packages; defaults to PackageService over `packagesDir`. null = none. */
  packages?: PackageBackend | null;
  /** The kernel packages folder; defaults to PackageService's ($GUILD_PACKAGES_DIR, else the user's). */
  packagesDir?: string;
  /** Defaults for every load (threads, context). */
  loadDefaults?: ModelLoadSettings;
  /** Load the embedded model on start (the first-start experience) unless the host already holds a model. Defaults to true. */
  loadEmbedded?: boolean;
  chat?: ChatServiceOptions;
  /** Where a notice's one warning line goes when it is raised. Defaults to stderr (`guild: warning: …`). */
  warn?: WarningWriter;
  /** The system's dialogs (Electron's shell); absent in web mode, whose page browses with models.browse. */
  dialogs?: { pickModelFile(): Promise<string | null>; pickFolder(): Promise<string | null> };
  /** RAM and GPU figures for the memory plan; defaults to the live machine (tests pass a fake). */
  machine?: MachineProbe;
}

export type EventListener = <E extends EventName>(name: E, payload: AppEvents[E]) => void;

export interface AppServices {
  contract: AppContract;
  host: RuntimeHost;
  models: ModelManager;
  settings: SettingsStore;
  downloads: ModelDownloads;
  /** The API server panel; web mode tells it about its own server (attachPage, record). */
  server: ServerPanel;
  /** Receives every app event; returns the unsubscribe function. */
  subscribe(listener: EventListener): () => void;
  /** Resolves when the start-up load (if any) has finished or failed. */
  ready: Promise<void>;
  dispose(): Promise<void>;
}

export function createAppServices(options: AppServicesOptions): AppServices {
  const listeners = new Set<EventListener>();
  // What a load learned about the installed kernel packages is forgotten when they change (ModelManager, set below).
  let onPackagesChanged: (() => void) | null = null;
  const emit: EventSink = (name, payload) => {
    if (name === "packages.changed") onPackagesChanged?.();
    for (const l of listeners) {
      try {
        l(name, payload);
      } catch {
        // one listener's failure does not stop the others
      }
    }
  };
  const ownHost = options.host === undefined;
  // The runtime's load (stage 2, packages) reads the same folder the package page manages
  // (a host passed in was given its folder by its maker, as `guild serve --packages-dir` does).
  const host = options.host ?? new RuntimeHost({
    ...(options.packagesDir !== undefined ? { packagesDir: options.packagesDir } : {}),
    ...(options.runtime ?? {}),
  });
  const notices = new NoticeBoard(options.warn ?? stderrWarning, emit);
  // A bad chat database is moved aside (or the chat runs in memory) and the user is told once: never a failed start.
  const databaseFile = path.join(options.dataDir, "conversations.sqlite");
  const { store, outcome } = ConversationStore.openResilient(databaseFile);
  const databaseNotice = describeOutcome(databaseFile, outcome);
  if (databaseNotice) notices.add(databaseNotice);
  const profiles = new ProfileStore(path.join(options.dataDir, "profiles"));
  const modelsChanged = async () => emit("models.changed", { files: await library.list() });
  const settings = new SettingsStore(options.dataDir, {
    notify: (m) => notices.add(m),
    onChange: (snap) => {
      library.setModelsDir(snap.modelsDir);
      emit("settings.changed", snap);
      void modelsChanged();
    },
    ...(options.dialogs ? { pickFolder: options.dialogs.pickFolder } : {}),
  });
  const library = new ModelLibrary(options.embeddedModel ?? embeddedModelPath(), settings.modelsDir);
  const models = new ModelManager(host, library, profiles, emit, options.loadDefaults ?? {}, {
    loadMemory: new ModelLoadMemory(options.dataDir, { validate: sanitizeSettings, notify: (m) => notices.add(m) }),
    ...(options.machine ? { machine: options.machine } : {}),
    ...(options.dialogs ? { pickFile: options.dialogs.pickModelFile } : {}),
  });
  onPackagesChanged = () => models.packagesChanged();
  const downloads = new ModelDownloads({
    hubEndpoint: () => settings.hubEndpoint, modelsDir: () => settings.modelsDir, emit, onDownloaded: modelsChanged,
  });
  const server = new ServerPanel(host, settings, emit, () => models.currentPath());
  const chat = new ChatServiceImpl(store, host, models, emit, options.chat ?? {});
  const packageBackend = options.packages !== undefined ? options.packages
    : packageBackendFrom(new PackageService(options.packagesDir !== undefined ? { dir: options.packagesDir } : {}));
  const packages = new AppPackageService(packageBackend, emit);
  const contract: AppContract = {
    chat,
    models,
    packages,
    profiles: {
      recent: async () => profiles.recent(),
      get: async (req) => profiles.get(req.id),
      open: async (req) => profiles.open(req),
    },
    notices,
    settings,
    hub: downloads,
    server,
  };
  // A host that already holds a model (guild serve --model) keeps it; otherwise the embedded model is loaded.
  const existing = host.listModels()[0];
  if (existing) models.adopt(existing);
  const ready = existing || options.loadEmbedded === false
    ? Promise.resolve()
    : models.load({ path: library.embeddedModel }).then(() => undefined, () => undefined);
  return {
    contract,
    host,
    models,
    settings,
    downloads,
    server,
    ready,
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async dispose() {
      await server.dispose();
      await downloads.dispose();
      await chat.dispose();
      await models.settled();
      await models.unload().catch(() => undefined);
      if (ownHost) await host.dispose();
      store.close();
      listeners.clear();
    },
  };
}
