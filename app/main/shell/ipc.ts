// ipcMain handlers: one per contract operation, bound to the services. Each
// checks the sender (our window's webContents, showing our guild://app/ page)
// and the argument (OPERATIONS' schema) before a service sees it.
import { ipcMain, type IpcMainInvokeEvent, type WebContents } from "electron";

import {
  channelOf, eventChannelOf, OPERATIONS, validateRequest,
  type AppContract, type RequestSchema, type ServiceName,
} from "../../shared/app-contract.js";
import type { AppServices } from "../services/index.js";
import { RuntimeError } from "../services/runtime-host.js";

export interface IpcBinding {
  dispose(): void;
}

/** True when the event comes from `trusted`'s main frame showing a page of the app (a URL under `appUrlPrefix`). */
export function isTrustedSender(event: IpcMainInvokeEvent, trusted: () => WebContents | null, appUrlPrefix: string): boolean {
  const wc = trusted();
  if (!wc || event.sender !== wc) return false;
  const frame = event.senderFrame;
  if (!frame || frame.processId !== wc.mainFrame.processId || frame.routingId !== wc.mainFrame.routingId) return false;
  return frame.url.startsWith(appUrlPrefix);
}

export function bindIpc(services: AppServices, trusted: () => WebContents | null, appUrlPrefix: string): IpcBinding {
  const channels: string[] = [];
  const ops = OPERATIONS as Record<string, Record<string, RequestSchema>>;
  for (const [service, methods] of Object.entries(ops)) {
    for (const [method, schema] of Object.entries(methods)) {
      const channel = channelOf(service, method);
      channels.push(channel);
      ipcMain.handle(channel, async (event, req: unknown) => {
        if (!isTrustedSender(event, trusted, appUrlPrefix)) throw new Error("refused: not the Guild window");
        const problem = validateRequest(schema, req);
        if (problem) throw new Error(`${service}.${method}: ${problem}`);
        const impl = services.contract[service as ServiceName] as unknown as Record<string, (arg: unknown) => Promise<unknown>>;
        try {
          return await impl[method]!.call(impl, req);
        } catch (err) {
          // Only the message crosses: no stack, no internals.
          const code = err instanceof RuntimeError ? err.code : "failed";
          throw new Error(`[${code}] ${err instanceof Error ? err.message : String(err)}`);
        }
      });
    }
  }
  const off = services.subscribe((name, payload) => {
    const wc = trusted();
    if (wc && !wc.isDestroyed()) wc.send(eventChannelOf(name), payload);
  });
  return {
    dispose() {
      off();
      for (const c of channels) ipcMain.removeHandler(c);
    },
  };
}

export type { AppContract };
