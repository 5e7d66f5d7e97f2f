// What every `guild` subcommand provides.

export interface Command {
  name: string;
  /** One line for `guild --help`. */
  summary: string;
  /** The usage line printed with a usage error. */
  usage: string;
  /** Runs the command; resolves to the exit status. */
  run(argv: readonly string[]): Promise<number>;
}
