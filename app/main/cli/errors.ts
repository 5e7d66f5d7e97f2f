// How the CLI fails: exit 1 with one `guild: error:` line for a problem with the
// input (a file, a model, a value the model rejects); exit 2 with a usage line
// for a malformed command line; 130 after Ctrl-C.

export const exitOk = 0;
export const exitError = 1;
export const exitUsage = 2;
export const exitInterrupted = 130;

/** A problem to report in one line, with exit status 1. */
export class CliError extends Error {
  override name = "CliError";
}

/** A malformed command line: exit status 2 and the command's usage line. */
export class UsageError extends Error {
  override name = "UsageError";
  constructor(
    message: string,
    readonly usage: string,
  ) {
    super(message);
  }
}

/** Flattens a message to one line. */
export function oneLine(message: string): string {
  return message.replace(/\s*[\r\n]+\s*/g, "; ").trim();
}

/** An error from the runtime about `file`, as one line that names the file. */
export function fileError(file: string, err: unknown): CliError {
  const message = oneLine(err instanceof Error ? err.message : String(err)) || "unknown error";
  return new CliError(message.includes(file) ? message : `${file}: ${message}`);
}
