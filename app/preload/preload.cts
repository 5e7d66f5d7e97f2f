// The preload (CommonJS, sandboxed): `window.guild`, one function per contract
// operation and one subscribe function per event stream. It never hands the
// renderer ipcRenderer or a free-form channel. Bundled into dist/preload.
import electron = require("electron");

import contract = require("../shared/app-contract.js");
import type { AppEvents, EventName, GuildBridge } from "../shared/app-contract.js";

const { contextBridge, ipcRenderer } = electron;
const { channelOf, EVENT_NAMES, eventChannelOf, OPERATIONS } = contract;

function operations(): Record<string, Record<string, (req?: unknown) => Promise<unknown>>> {
  const out: Record<string, Record<string, (req?: unknown) => Promise<unknown>>> = {};
  for (const [service, methods] of Object.entries(OPERATIONS)) {
    const s: Record<string, (req?: unknown) => Promise<unknown>> = {};
    for (const method of Object.keys(methods)) {
      const channel = channelOf(service, method);
      s[method] = (req?: unknown) => ipcRenderer.invoke(channel, req).catch((err: unknown) => {
        // Electron prefixes "Error invoking remote method '…': "; keep the service's message.
        const m = err instanceof Error ? err.message : String(err);
        throw new Error(m.replace(/^Error invoking remote method '[^']*': (Error: )?/, "").replace(/^\[\w+\] /, ""));
      });
    }
    out[service] = s;
  }
  return out;
}

function events(): Record<EventName, (listener: (payload: never) => void) => () => void> {
  const out = {} as Record<EventName, (listener: (payload: never) => void) => () => void>;
  for (const name of EVENT_NAMES) {
    out[name] = (listener: (payload: never) => void) => {
      if (typeof listener !== "function") throw new TypeError("listener must be a function");
      const wrapped = (_e: electron.IpcRendererEvent, payload: AppEvents[typeof name]) => listener(payload as never);
      ipcRenderer.on(eventChannelOf(name), wrapped);
      return () => { ipcRenderer.removeListener(eventChannelOf(name), wrapped); };
    };
  }
  return out;
}

const bridge = { ...operations(), events: events() } as unknown as GuildBridge;
contextBridge.exposeInMainWorld("guild", bridge);
