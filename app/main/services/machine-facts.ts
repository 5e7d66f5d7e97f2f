// What the machine has free for a model, as the memory plan (shared/
// memory-plan.ts) needs it: RAM available now (Linux: MemAvailable, which counts
// reclaimable page cache, within the process's cgroup limit), and the CUDA
// devices with their free memory as the last load's startup profile measured
// them (stage device_policy: `cuda_devices`, else the `gpu` it used). The
// runtime is the only code that talks to the GPU; a CPU build has none.
import { readFile } from "node:fs/promises";
import os from "node:os";

import type { GpuFacts, MachineFacts } from "../../shared/memory-plan.js";
import type { StartupProfileJson } from "../../shared/runtime-contract.js";

export interface MachineProbe {
  facts(): Promise<MachineFacts>;
  /** Tells the probe about a load's profile (its GPU figures). */
  observe(profile: StartupProfileJson): void;
}

/** MemAvailable from /proc/meminfo in bytes, or null where there is no such file. */
export function parseMemAvailable(meminfo: string): number | null {
  const m = /^MemAvailable:\s+(\d+)\s*kB/m.exec(meminfo);
  return m ? Number(m[1]) * 1024 : null;
}

async function ramAvailable(): Promise<number> {
  let available = os.freemem();
  try {
    available = parseMemAvailable(await readFile("/proc/meminfo", "utf8")) ?? available;
  } catch {
    // not Linux: os.freemem() it is
  }
  // A container's limit is the real ceiling (Node reports it where the OS has one).
  const limit = typeof process.constrainedMemory === "function" ? process.constrainedMemory() : 0;
  if (limit && limit > 0 && limit < Number.MAX_SAFE_INTEGER) available = Math.min(available, Math.max(0, limit - process.memoryUsage().rss));
  return available;
}

const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);

function gpuOf(v: unknown): GpuFacts | null {
  if (typeof v !== "object" || v === null) return null;
  const g = v as Record<string, unknown>;
  const device = typeof g["device"] === "number" ? `cuda:${g["device"]}` : typeof g["device"] === "string" ? g["device"] : null;
  if (device === null) return null;
  return { device, name: typeof g["name"] === "string" ? g["name"] : device, totalBytes: num(g["total_bytes"]), freeBytes: num(g["free_bytes"]) };
}

/** The GPUs a startup profile saw, and the runtime's note when it saw none. */
export function gpusOfProfile(profile: StartupProfileJson): { gpus: GpuFacts[]; note: string } {
  const detail = profile.stages.find((s) => s.name === "device_policy")?.detail ?? {};
  const listed = Array.isArray(detail["cuda_devices"]) ? (detail["cuda_devices"] as unknown[]).map(gpuOf).filter((g): g is GpuFacts => g !== null) : [];
  const used = gpuOf(detail["gpu"]);
  const gpus = listed.length > 0 ? listed : used ? [used] : [];
  const machineNote = typeof profile.machine["gpu_note"] === "string" ? profile.machine["gpu_note"] : "";
  const why = typeof detail["gpu"] === "string" ? detail["gpu"] : "";
  return { gpus, note: gpus.length > 0 ? "" : why || machineNote };
}

/** The live probe: RAM read on every call, GPU figures from the last profile observed. */
export function liveMachineProbe(): MachineProbe {
  let gpus: GpuFacts[] = [];
  let note = "no load has looked for a GPU yet";
  return {
    async facts() {
      return { ramAvailableBytes: await ramAvailable(), ramTotalBytes: os.totalmem(), gpus, gpuNote: note };
    },
    observe(profile) {
      const seen = gpusOfProfile(profile);
      gpus = seen.gpus;
      note = seen.note;
    },
  };
}
