// A small, strict command-line parser: every flag is declared with its type and
// range; anything else is a UsageError (exit 2).
import { UsageError } from "./errors.js";

export type FlagType = "string" | "int" | "number" | "boolean" | "ids";

export interface FlagSpec {
  type: FlagType;
  /** Inclusive bounds for int/number. */
  min?: number;
  max?: number;
  /** Exclusive lower bound for number. */
  above?: number;
  /** Allowed values for string. */
  choices?: readonly string[];
}

export type FlagSpecs = Readonly<Record<string, FlagSpec>>;

type ValueOf<T extends FlagType> = T extends "string"
  ? string
  : T extends "int" | "number"
    ? number
    : T extends "boolean"
      ? boolean
      : number[];

type ValueOfSpec<S extends FlagSpec> = S extends { choices: readonly (infer C)[] } ? C : ValueOf<S["type"]>;

export type ParsedFlags<S extends FlagSpecs> = { -readonly [K in keyof S]?: ValueOfSpec<S[K]> };

const int32Max = 2 ** 31 - 1;

function parseValue(name: string, spec: FlagSpec, raw: string, usage: string): string | number | number[] {
  const bad = (why: string): never => {
    throw new UsageError(`--${name}: ${why} (got ${JSON.stringify(raw)})`, usage);
  };
  switch (spec.type) {
    case "string":
      if (spec.choices && !spec.choices.includes(raw)) bad(`expected one of ${spec.choices.join(", ")}`);
      return raw;
    case "int": {
      if (!/^[+-]?\d+$/.test(raw.trim())) bad("expected an integer");
      const n = Number(raw);
      if (!Number.isSafeInteger(n)) bad("integer out of range");
      if (spec.min !== undefined && n < spec.min) bad(`must be >= ${spec.min}`);
      if (spec.max !== undefined && n > spec.max) bad(`must be <= ${spec.max}`);
      return n;
    }
    case "number": {
      const n = Number(raw);
      if (raw.trim() === "" || !Number.isFinite(n)) bad("expected a number");
      if (spec.min !== undefined && n < spec.min) bad(`must be >= ${spec.min}`);
      if (spec.max !== undefined && n > spec.max) bad(`must be <= ${spec.max}`);
      if (spec.above !== undefined && !(n > spec.above)) bad(`must be > ${spec.above}`);
      return n;
    }
    case "ids": {
      const parts = raw.split(",").map((p) => p.trim());
      if (parts.length === 0 || parts.some((p) => !/^\d+$/.test(p))) bad("expected comma-separated token ids");
      const ids = parts.map(Number);
      if (ids.some((id) => id > int32Max)) bad("token id out of range");
      return ids;
    }
    case "boolean":
      return bad("takes no value");
  }
}

/** Thrown when `--help`/`-h` stands where a flag may: print the usage, exit 0. */
export class HelpRequest extends Error {
  override name = "HelpRequest";
  constructor(readonly usage: string) {
    super("help requested");
  }
}

/**
 * Parses `--name value`, `--name=value` and boolean `--name`. Throws UsageError
 * for an unknown flag, a missing or malformed value, a repeated flag, or a
 * positional argument, and HelpRequest for `--help`/`-h`.
 */
export function parseFlags<S extends FlagSpecs>(argv: readonly string[], specs: S, usage: string): ParsedFlags<S> {
  const out: Record<string, unknown> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--help" || arg === "-h") throw new HelpRequest(usage);
    if (!arg.startsWith("--") || arg === "--") {
      throw new UsageError(`unexpected argument ${JSON.stringify(arg)}`, usage);
    }
    const eq = arg.indexOf("=");
    const name = eq < 0 ? arg.slice(2) : arg.slice(2, eq);
    const spec = Object.prototype.hasOwnProperty.call(specs, name) ? specs[name] : undefined;
    if (spec === undefined) throw new UsageError(`unknown flag --${name}`, usage);
    if (Object.prototype.hasOwnProperty.call(out, name)) throw new UsageError(`--${name} given twice`, usage);
    if (spec.type === "boolean") {
      if (eq >= 0) throw new UsageError(`--${name} takes no value`, usage);
      out[name] = true;
      continue;
    }
    let raw: string;
    if (eq >= 0) {
      raw = arg.slice(eq + 1);
    } else {
      if (i + 1 >= argv.length) throw new UsageError(`--${name} needs a value`, usage);
      raw = argv[++i]!;
    }
    out[name] = parseValue(name, spec, raw, usage);
  }
  return out as ParsedFlags<S>;
}

/** Throws UsageError unless every flag in `names` was given. */
export function requireFlags<S extends FlagSpecs>(flags: ParsedFlags<S>, names: readonly (keyof S & string)[], usage: string): void {
  for (const name of names) {
    if (flags[name] === undefined) throw new UsageError(`--${name} is required`, usage);
  }
}
