// Electron: the preload's window.guild (one function per operation).
import type { GuildBridge, ServiceName } from "../../shared/app-contract.js";
import type { Transport } from "./transport.js";

declare global {
  interface Window {
    guild?: GuildBridge;
  }
}

export function ipcTransport(bridge: GuildBridge): Transport {
  return {
    kind: "electron",
    call(service: ServiceName, method: string, req: unknown) {
      const fn = (bridge[service] as unknown as Record<string, ((req: unknown) => Promise<unknown>) | undefined>)[method];
      if (!fn) return Promise.reject(new Error(`the preload has no ${service}.${method}`));
      return fn(req);
    },
    subscribe(name, listener) {
      return bridge.events[name](listener);
    },
  };
}
