// The Server panel: the API server's state and its request log (events
// `server.changed` and `server.request`).
import type { StateCreator } from "zustand";

import type { RequestLogEntry, ServerState } from "../../shared/app-contract.js";
import { client } from "../transport/index.js";
import type { AppState } from "./store.js";

export interface ServerSlice {
  server: ServerState | null;
  serverError: string | null;
  serverBusy: boolean;
  refreshServer(): Promise<void>;
  startServer(port: number, apiKey: string): Promise<void>;
  stopServer(): Promise<void>;
  onServerChanged(s: ServerState): void;
  onServerRequest(e: RequestLogEntry): void;
}

const logSize = 200;
const message = (err: unknown) => (err instanceof Error ? err.message : String(err));

export const createServerSlice: StateCreator<AppState, [], [], ServerSlice> = (set, get) => ({
  server: null,
  serverError: null,
  serverBusy: false,
  refreshServer: async () => {
    try {
      set({ server: await client.server.status() });
    } catch (err) {
      set({ serverError: message(err) });
    }
  },
  startServer: async (port, apiKey) => {
    set({ serverBusy: true, serverError: null });
    try {
      set({ server: await client.server.start({ port, apiKey }), serverBusy: false });
    } catch (err) {
      set({ serverError: message(err), serverBusy: false });
    }
  },
  stopServer: async () => {
    set({ serverBusy: true, serverError: null });
    try {
      set({ server: await client.server.stop(), serverBusy: false });
    } catch (err) {
      set({ serverError: message(err), serverBusy: false });
    }
  },
  onServerChanged: (s) => set({ server: s }),
  onServerRequest: (e) => {
    const s = get().server;
    if (!s || s.log.some((x) => x.id === e.id)) return;
    set({ server: { ...s, log: [...s.log, e].slice(-logSize) } });
  },
});
