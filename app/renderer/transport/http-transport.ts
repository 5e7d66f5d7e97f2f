// Web mode: POST /app/rpc/<service>/<method> and one EventSource on /app/events.
import type { AppEvents, ContractErrorJson, EventName, ServiceName } from "../../shared/app-contract.js";
import type { Transport } from "./transport.js";

export class ContractError extends Error {
  constructor(message: string, readonly code: string) {
    super(message);
    this.name = "ContractError";
  }
}

export function httpTransport(base = new URL("./", window.location.href)): Transport {
  const listeners = new Map<string, Set<(payload: never) => void>>();
  let source: EventSource | null = null;
  const ensureSource = () => {
    if (source) return;
    source = new EventSource(new URL("events", base));
    for (const name of ["chat.reply", "model.progress", "model.state", "packages.changed", "profiles.changed"] as const) {
      source.addEventListener(name, (e) => {
        const payload = JSON.parse((e as MessageEvent<string>).data) as never;
        for (const l of listeners.get(name) ?? []) l(payload);
      });
    }
  };
  return {
    kind: "web",
    async call(service: ServiceName, method: string, req: unknown) {
      ensureSource();
      const res = await fetch(new URL(`rpc/${service}/${method}`, base), {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(req ?? {}),
      });
      const body = (await res.json().catch(() => null)) as { result?: unknown } & Partial<ContractErrorJson> | null;
      if (!res.ok || body === null || "error" in body) {
        throw new ContractError(body?.error?.message ?? `HTTP ${res.status}`, body?.error?.code ?? "failed");
      }
      return body.result;
    },
    subscribe<E extends EventName>(name: E, listener: (payload: AppEvents[E]) => void) {
      ensureSource();
      let set = listeners.get(name);
      if (!set) listeners.set(name, (set = new Set()));
      set.add(listener as (payload: never) => void);
      return () => set.delete(listener as (payload: never) => void);
    },
  };
}
