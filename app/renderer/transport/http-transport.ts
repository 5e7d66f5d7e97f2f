// Web mode: POST /app/rpc/<service>/<method> and one EventSource on /app/events.
// Both carry the session cookie the printed link set (same origin: fetch and
// EventSource send it). When the server answers 401 the session is gone (the
// server restarted with a new secret): every call fails with words saying so,
// and a bar tells the user to open the new link (session-notice.ts).
import { EVENT_NAMES, type AppEvents, type ContractErrorJson, type EventName, type ServiceName } from "../../shared/app-contract.js";
import type { Transport } from "./transport.js";
import { sessionLostMessage, showSessionLost } from "./session-notice.js";

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
    const events = new EventSource(new URL("events", base));
    source = events;
    // A refused stream is closed for good (a dropped connection is retried by
    // EventSource itself): ask the server whether the session is the reason.
    events.addEventListener("error", () => {
      if (events.readyState !== EventSource.CLOSED) return;
      const reopen = () => setTimeout(() => {
        if (source === events) source = null;
        ensureSource();
      }, 1000);
      void fetch(new URL("session", base), { cache: "no-store" }).then((r) => (r.status === 401 ? showSessionLost() : reopen()), reopen);
    });
    for (const name of EVENT_NAMES) {
      events.addEventListener(name, (e) => {
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
      if (res.status === 401) {
        showSessionLost();
        throw new ContractError(sessionLostMessage, body?.error?.code ?? "session_required");
      }
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
