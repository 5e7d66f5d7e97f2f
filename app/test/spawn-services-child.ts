// Starts app/test/services-child.ts in a child Node process (through Vite's
// module runner, which runs the TypeScript sources as vitest does) and reads
// its JSON-lines reports.
import { spawn, type ChildProcessWithoutNullStreams } from "node:child_process";
import path from "node:path";

import { projectRoot } from "../main/paths.js";
import type { ServicesChildConfig } from "./services-child.js";

export interface ChildReport {
  event: string;
  [field: string]: unknown;
}

export interface ServicesChild {
  proc: ChildProcessWithoutNullStreams;
  reports: ChildReport[];
  stderr(): string;
  /** The first report (already seen or still to come) that `match` accepts; rejects after `timeoutMs` or when the child exits first. */
  waitFor(match: (r: ChildReport) => boolean, timeoutMs: number): Promise<ChildReport>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const script = path.join(projectRoot(), "app", "test", "services-child.ts");
const runner = "import('vite').then((v) => v.runnerImport(process.argv[1])).catch((e) => { console.error(e); process.exit(1); })";

/** `as`: run as another user (uid/gid), e.g. so that permissions apply where the tests run as root. */
export function spawnServicesChild(config: ServicesChildConfig, as?: { uid: number; gid: number }): ServicesChild {
  const proc = spawn(process.execPath, ["-e", runner, script], {
    cwd: projectRoot(),
    env: { ...process.env, GUILD_SERVICES_CHILD: JSON.stringify(config), ...(as && { HOME: config.dataDir }) },
    ...(as && { uid: as.uid, gid: as.gid }),
  });
  const reports: ChildReport[] = [];
  const waiters = new Set<() => void>();
  let out = "";
  let err = "";
  proc.stdout.on("data", (d: Buffer) => {
    out += d.toString("utf8");
    let nl: number;
    while ((nl = out.indexOf("\n")) >= 0) {
      const line = out.slice(0, nl);
      out = out.slice(nl + 1);
      if (line.startsWith("{")) reports.push(JSON.parse(line) as ChildReport);
    }
    for (const w of [...waiters]) w();
  });
  proc.stderr.on("data", (d: Buffer) => (err += d.toString("utf8")));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    proc.on("close", (code, signal) => {
      resolve({ code, signal });
      for (const w of [...waiters]) w();
    });
  });
  let over = false;
  void exited.then(() => (over = true));
  return {
    proc,
    reports,
    stderr: () => err,
    exited,
    waitFor(match, timeoutMs) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const found = reports.find(match);
          if (found) return finish(() => resolve(found));
          if (over || proc.exitCode !== null || proc.signalCode !== null)
            return finish(() => reject(new Error(`the services child ended (${proc.exitCode ?? proc.signalCode}) first; stderr: ${err}`)));
        };
        const timer = setTimeout(() => finish(() => reject(new Error(`no such report within ${timeoutMs} ms; got ${JSON.stringify(reports.map((r) => r.event))}; stderr: ${err}`))), timeoutMs);
        const finish = (settle: () => void) => {
          clearTimeout(timer);
          waiters.delete(check);
          settle();
        };
        waiters.add(check);
        check();
      });
    },
  };
}
