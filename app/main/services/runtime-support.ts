// What this runtime can load, in its own words. Nothing here lists
// architectures or tensor types: the runtime's pre-flight check
// (RuntimeHost.checkLoad → guild_model_check, docs/C_ABI.md "Pre-flight check")
// runs the load's own stages that decide it — the enabled kernel packages as a
// load picks them, the file, the architecture, every tensor's type, the
// hyper-parameter and shape checks, the GPU budget, one session's memory — and
// answers "ok" or the load's own error. This file reads that verdict in the
// app's terms: the problem the Models page shows and a load refuses on, and
// whether a refusal is about memory (which unloading the current model may
// change). runtime-support.test.ts holds the check to the load, fixture by fixture.
import type { LoadCheck } from "../runtime/model.js";

/** The runtime's reason the load of `file` would fail (its line, less the leading "<file>: "), or null when it would not. */
export function loadProblem(check: LoadCheck, file: string): string | null {
  if (check.ok) return null;
  const line = check.error ?? `the load would fail (stage ${check.stage ?? "unknown"}, ${check.status})`;
  const prefix = `${file}: `;
  return line.startsWith(prefix) ? line.slice(prefix.length) : line;
}

/** True when the check refused for memory (a session, or the GPU budget): what else is loaded matters. */
export function isMemoryRefusal(check: LoadCheck): boolean {
  return !check.ok && check.status === "out_of_memory";
}

/** For a refusal of the session's memory (stage session_state): what one session needs, and what it was held to. */
export function sessionShortfall(check: LoadCheck): { needBytes: number; availableBytes: number } | null {
  const need = check.estimate.session?.totalBytes;
  const available = check.estimate.memoryAvailableBytes;
  if (check.ok || check.stage !== "session_state" || need === undefined || available === undefined) return null;
  return { needBytes: need, availableBytes: available };
}
