// Web mode in one call: the app's services, the API server on 127.0.0.1 and
// the web routes (renderer + contract over HTTP/SSE) behind a per-launch
// session. Used by `npm start` where Electron is missing, and by the e2e tests.
import os from "node:os";
import path from "node:path";

import { ApiServer } from "../services/api-server.js";
import { createAppServices, type AppServices, type AppServicesOptions } from "../services/index.js";
import { createWebRoutes, type WebRoutesOptions } from "./web-routes.js";
import { WebSession } from "./web-session.js";

export interface WebModeOptions extends Partial<Omit<AppServicesOptions, "host">> {
  /** The address to bind. Defaults to 127.0.0.1. */
  bind?: string;
  /** 0 = any free port. Defaults to {@link defaultWebPort}. */
  port?: number;
  web?: WebRoutesOptions;
}

export const defaultWebPort = 8765;

export interface WebMode {
  /** The address to open: http://127.0.0.1:PORT/app/?token=SECRET (the secret is new on every start). */
  url: string;
  /** The server's base URL (http://127.0.0.1:PORT), without the app path or the secret. */
  serverUrl: string;
  /** The session's secret, for clients that send it as `x-guild-token` (tests, scripts). */
  token: string;
  services: AppServices;
  stop(): Promise<void>;
}

/** The app data folder: GUILD_DATA_DIR, else the platform's usual place. */
export function defaultDataDir(): string {
  const env = process.env["GUILD_DATA_DIR"];
  if (env) return env;
  if (process.platform === "darwin") return path.join(os.homedir(), "Library", "Application Support", "Guild");
  if (process.platform === "win32") return path.join(process.env["APPDATA"] ?? path.join(os.homedir(), "AppData", "Roaming"), "Guild");
  return path.join(process.env["XDG_DATA_HOME"] ?? path.join(os.homedir(), ".local", "share"), "guild");
}

export async function startWebMode(options: WebModeOptions = {}): Promise<WebMode> {
  const { bind, port, web, ...rest } = options;
  const services = createAppServices({ ...rest, dataDir: options.dataDir ?? defaultDataDir() });
  const session = new WebSession();
  const server = new ApiServer(services.host, {
    ...(bind !== undefined ? { host: bind } : {}),
    port: port ?? defaultWebPort,
    extraRoutes: [createWebRoutes(services, session, web ?? {})],
    onRequest: (r) => services.server.record("page", r),  // the Server panel's request log
  });
  let started: { url: string };
  try {
    started = await server.start();
  } catch (err) {
    await services.dispose();
    throw err;
  }
  services.server.attachPage({ url: started.url, apiKeyRequired: false });
  return {
    url: session.appUrl(started.url),
    serverUrl: started.url,
    token: session.token,
    services,
    async stop() {
      await server.stop();
      await services.dispose();
    },
  };
}
