#!/usr/bin/env node
// The `guild` command line. Exit status: 0 ok, 1 error (one `guild: error:`
// line on stderr), 2 bad usage, 130 interrupted. Never a stack trace.
import { HelpRequest } from "./args.js";
import type { Command } from "./command.js";
import { detokenizeCommand } from "./detokenize.js";
import { CliError, exitError, exitOk, exitUsage, oneLine, UsageError } from "./errors.js";
import { evalCommand } from "./eval.js";
import { inspectCommand } from "./inspect.js";
import { packagesCommand } from "./packages.js";
import { runCommand } from "./run.js";
import { serveCommand } from "./serve.js";
import { tokenizeCommand } from "./tokenize.js";

const commands: readonly Command[] = [runCommand, evalCommand, tokenizeCommand, detokenizeCommand, inspectCommand, serveCommand, packagesCommand];

function help(): string {
  const width = Math.max(...commands.map((c) => c.name.length));
  return [
    "usage: guild <command> [flags]   (guild <command> --help for its flags)",
    "",
    ...commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`),
    "",
    "docs/CLI.md describes every flag, the JSON output and the exit codes.",
  ].join("\n");
}

export async function main(argv: readonly string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    (name === undefined ? process.stderr : process.stdout).write(help() + "\n");
    return name === undefined ? exitUsage : exitOk;
  }
  const command = commands.find((c) => c.name === name);
  try {
    if (command === undefined) throw new UsageError(`unknown command ${JSON.stringify(name)}`, "guild <command> [flags]; commands: " + commands.map((c) => c.name).join(", "));
    return await command.run(rest);
  } catch (err) {
    if (err instanceof HelpRequest) {
      process.stdout.write(`usage: ${err.usage}\n`);
      return exitOk;
    }
    if (err instanceof UsageError) {
      process.stderr.write(`guild: error: ${oneLine(err.message)}\nusage: ${err.usage}\n`);
      return exitUsage;
    }
    const message = err instanceof CliError ? err.message : `internal error: ${err instanceof Error ? err.message : String(err)}`;
    process.stderr.write(`guild: error: ${oneLine(message)}\n`);
    if (process.env["GUILD_DEBUG"] && err instanceof Error && err.stack) process.stderr.write(err.stack + "\n");
    return exitError;
  }
}

// Last line of defence: whatever escapes is still one line, not a stack trace.
function fatal(err: unknown): void {
  process.stderr.write(`guild: error: internal error: ${oneLine(err instanceof Error ? err.message : String(err))}\n`);
  process.exit(exitError);
}
process.on("uncaughtException", fatal);
process.on("unhandledRejection", fatal);

process.exitCode = await main(process.argv.slice(2));
