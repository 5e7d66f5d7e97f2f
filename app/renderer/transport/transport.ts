// The renderer's only way out: a Transport carries contract calls and event
// streams. Two implementations: Electron IPC (window.guild) and HTTP + SSE.
import {
  OPERATIONS, type AppContract, type AppEvents, type EventName, type MethodName, type ServiceName,
} from "../../shared/app-contract.js";

export interface Transport {
  readonly kind: "electron" | "web";
  call(service: ServiceName, method: string, req: unknown): Promise<unknown>;
  subscribe<E extends EventName>(name: E, listener: (payload: AppEvents[E]) => void): () => void;
}

export type Client = AppContract & {
  on<E extends EventName>(name: E, listener: (payload: AppEvents[E]) => void): () => void;
  readonly transportKind: Transport["kind"];
};

/** A typed client: one function per operation of OPERATIONS, all through `transport`. */
export function createClient(transport: Transport): Client {
  const services = {} as Record<string, Record<string, (req?: unknown) => Promise<unknown>>>;
  for (const [service, methods] of Object.entries(OPERATIONS)) {
    const s: Record<string, (req?: unknown) => Promise<unknown>> = {};
    for (const method of Object.keys(methods)) s[method] = (req?: unknown) => transport.call(service as ServiceName, method, req);
    services[service] = s;
  }
  return {
    ...(services as unknown as AppContract),
    on: (name, listener) => transport.subscribe(name, listener),
    transportKind: transport.kind,
  };
}

export type { MethodName };
