// Runs the compiled CLI (dist/app/main/cli/guild.js) as a child process.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";

import { projectRoot } from "../main/paths.js";

export const cliPath = path.join(projectRoot(), "dist", "app", "main", "cli", "guild.js");

if (!existsSync(cliPath)) throw new Error(`${cliPath} is missing: run \`npm run build\` first`);

export interface CliResult {
  status: number | null;
  stdout: string;
  stdoutBytes: Buffer;
  stderr: string;
}

export function runCli(args: readonly string[], options: { env?: NodeJS.ProcessEnv; input?: string } = {}): CliResult {
  const r = spawnSync(process.execPath, [cliPath, ...args], {
    cwd: projectRoot(),
    env: { ...process.env, ...options.env },
    input: options.input ?? "",
    maxBuffer: 256 * 1024 * 1024,
  });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout.toString("utf8"), stdoutBytes: r.stdout, stderr: r.stderr.toString("utf8") };
}

/** Asserts the CLI's failure shape: exactly one line, starting `guild: error:`. */
export function errorLines(stderr: string): string[] {
  return stderr.split("\n").filter((l) => l !== "");
}
