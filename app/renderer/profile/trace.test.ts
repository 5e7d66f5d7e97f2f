import { describe, expect, it } from "vitest";

import type { StartupProfileJson } from "../../shared/runtime-contract.js";
import { toChromeTrace } from "./trace.js";

describe("toChromeTrace", () => {
  it("makes one complete event per stage in microseconds, plus fallbacks as instant events", () => {
    const p: StartupProfileJson = {
      schema: "guild.startup-profile/1", model: { name: "m" }, machine: {},
      stages: [
        { name: "device_policy", start_ms: 0, end_ms: 1.5, duration_ms: 1.5, bytes: 0, detail: { threads: 2 } },
        { name: "gexec", start_ms: 1.5, end_ms: 2, duration_ms: 0.5, bytes: 10, detail: {} },
      ],
      fallbacks: [{ stage: "gexec", reason: "no .gexec" }], placement: {}, total_ms: 2.5,
    };
    const t = toChromeTrace(p);
    const stages = t.traceEvents.filter((e) => (e as { cat?: string }).cat === "stage");
    expect(stages).toEqual([
      { name: "device_policy", cat: "stage", ph: "X", pid: 1, tid: 2, ts: 0, dur: 1500, args: { bytes: 0, threads: 2 } },
      { name: "gexec", cat: "stage", ph: "X", pid: 1, tid: 2, ts: 1500, dur: 500, args: { bytes: 10 } },
    ]);
    expect(t.traceEvents).toContainEqual(expect.objectContaining({ name: "fallback: gexec", ph: "i", ts: 2000, args: { reason: "no .gexec" } }));
    expect(JSON.parse(JSON.stringify(t))).toEqual(t);
  });
});
