// ServerPanel: the app's ServerService, the OpenAI-compatible API without the
// command line. It starts and stops an API-only ApiServer (no web mode routes)
// on 127.0.0.1 with the port and key the user chose (kept in settings.json),
// over the app's own RuntimeHost, so the API and the chat share one queue. It
// keeps a log of the newest API requests to it and, in web mode, to the server
// the page itself comes from (which serves the API too: attachPage).
import path from "node:path";

import type { EventSink, RequestLogEntry, ServerService, ServerState } from "../../shared/app-contract.js";
import { ApiServer, defaultApiPort } from "./api-server.js";
import type { SettingsStore } from "./app-settings.js";
import { RuntimeError, type RuntimeHost } from "./runtime-host.js";

export const requestLogSize = 200;

/** Paths of the OpenAI API and its neighbours: what the log shows (the page's own /app traffic is not). */
export function isApiPath(p: string): boolean {
  return p.startsWith("/v1/") || p === "/v1" || p === "/health" || p.startsWith("/guild/");
}

export class ServerPanel implements ServerService {
  private server: ApiServer | null = null;
  private url: string | null = null;
  private error: string | null = null;
  private page: ServerState["page"] = null;
  private readonly log: RequestLogEntry[] = [];
  private nextId = 1;
  private port: number;
  private apiKey: string;

  constructor(
    private readonly host: RuntimeHost,
    private readonly settings: Pick<SettingsStore, "apiServer" | "saveApiServer">,
    private readonly emit: EventSink,
    private readonly modelPath: () => string | null,
  ) {
    this.port = settings.apiServer?.port ?? defaultApiPort;
    this.apiKey = settings.apiServer?.apiKey ?? "";
  }

  /** Web mode: the server that serves the page (its URL, whether its API needs a key). */
  attachPage(page: { url: string; apiKeyRequired: boolean }): void {
    this.page = page;
    this.changed();
  }

  /** A request to either server ended (ApiServer's onRequest). */
  record(server: RequestLogEntry["server"], r: { method: string; path: string; status: number; ms: number }): void {
    if (!isApiPath(r.path)) return;
    const entry: RequestLogEntry = { id: this.nextId++, time: new Date().toISOString(), server, method: r.method, path: r.path, status: r.status, ms: Math.round(r.ms) };
    this.log.push(entry);
    if (this.log.length > requestLogSize) this.log.splice(0, this.log.length - requestLogSize);
    this.emit("server.request", entry);
  }

  async status(): Promise<ServerState> {
    return this.state();
  }

  async start(req: { port: number; apiKey: string }): Promise<ServerState> {
    if (!Number.isInteger(req.port) || req.port < 0 || req.port > 65535) throw new RuntimeError("the port must be a whole number from 0 to 65535 (0: any free port)", "invalid");
    const key = req.apiKey.trim();
    if (key.length > 200 || /\s/.test(key)) throw new RuntimeError("the API key must be at most 200 characters, without spaces", "invalid");
    await this.stopServer();
    this.port = req.port;
    this.apiKey = key;
    this.settings.saveApiServer({ port: req.port, apiKey: key });
    const server = new ApiServer(this.host, {
      port: req.port, apiKeys: key ? [key] : [], onRequest: (r) => this.record("api", r),
    });
    try {
      this.url = (await server.start()).url;
      this.server = server;
      this.error = null;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      this.error = code === "EADDRINUSE" ? `port ${req.port} is in use (by another program${this.page ? ", or this page's own server" : ""}): choose another`
        : code === "EACCES" ? `port ${req.port} needs more privileges: choose one above 1023`
        : `cannot listen on 127.0.0.1:${req.port}: ${(err as Error).message}`;
      this.changed();
      throw new RuntimeError(this.error, "failed");
    }
    this.changed();
    return this.state();
  }

  async stop(): Promise<ServerState> {
    await this.stopServer();
    this.error = null;
    this.changed();
    return this.state();
  }

  async dispose(): Promise<void> {
    await this.stopServer();
  }

  private async stopServer(): Promise<void> {
    const s = this.server;
    this.server = null;
    this.url = null;
    await s?.stop();
  }

  private state(): ServerState {
    const p = this.modelPath();
    return {
      page: this.page,
      api: { running: this.server !== null, url: this.url, port: this.port, apiKey: this.apiKey, error: this.error },
      log: [...this.log],
      modelId: p ? path.basename(p).replace(/\.gguf$/i, "") : null,
    };
  }

  private changed(): void {
    this.emit("server.changed", this.state());
  }
}
