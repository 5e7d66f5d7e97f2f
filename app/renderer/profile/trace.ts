// A startup profile as Chrome trace events (chrome://tracing, Perfetto).
import type { StartupProfileJson } from "../../shared/runtime-contract.js";

export function toChromeTrace(p: StartupProfileJson): { traceEvents: object[]; displayTimeUnit: "ms"; metadata: object } {
  const name = typeof p.model["name"] === "string" ? p.model["name"] : "model";
  return {
    displayTimeUnit: "ms",
    metadata: { schema: p.schema, model: p.model, machine: p.machine },
    traceEvents: [
      { name: "process_name", ph: "M", pid: 1, tid: 1, args: { name: `guild load: ${name}` } },
      { name: "load", cat: "load", ph: "X", pid: 1, tid: 1, ts: 0, dur: Math.round(p.total_ms * 1000), args: { fallbacks: p.fallbacks } },
      ...p.stages.map((s) => ({
        name: s.name, cat: "stage", ph: "X", pid: 1, tid: 2,
        ts: Math.round(s.start_ms * 1000), dur: Math.max(1, Math.round(s.duration_ms * 1000)),
        args: { bytes: s.bytes, ...s.detail },
      })),
      ...p.fallbacks.map((f) => {
        const st = p.stages.find((s) => s.name === f.stage);
        return { name: `fallback: ${f.stage}`, cat: "fallback", ph: "i", s: "t", pid: 1, tid: 2, ts: Math.round((st?.end_ms ?? 0) * 1000), args: { reason: f.reason } };
      }),
    ],
  };
}
