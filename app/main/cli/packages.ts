// guild packages: kernel packages (docs/PACKAGES.md) — list, enable, disable,
// install, uninstall, pin, pack (build a .gkpkg from a package directory), and
// reset-state (set a corrupt state file aside).
import { PackageService, type PackageInfo, type PackageResult } from "../services/package-service.js";
import { parseFlags, type FlagSpecs } from "./args.js";
import type { Command } from "./command.js";
import { CliError, exitOk, UsageError } from "./errors.js";
import { Output } from "./output.js";

const flags = {
  json: { type: "boolean" },
  "packages-dir": { type: "string" },
  out: { type: "string" },
  version: { type: "string" },
} as const satisfies FlagSpecs;

const usage =
  "guild packages list|enable NAME|disable NAME|install FILE|uninstall NAME|pin MODEL NAME [--version V]|pack DIR --out FILE|reset-state [--json] [--packages-dir DIR]";

const subcommands: Record<string, { args: string[] }> = {
  list: { args: [] },
  enable: { args: ["NAME"] },
  disable: { args: ["NAME"] },
  install: { args: ["FILE"] },
  uninstall: { args: ["NAME"] },
  pin: { args: ["MODEL", "NAME"] },
  pack: { args: ["DIR"] },
  "reset-state": { args: [] },
};

/** Splits positionals from flags (flags may come anywhere). */
function split(argv: readonly string[]): { positionals: string[]; flagArgs: string[] } {
  const positionals: string[] = [];
  const flagArgs: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a.startsWith("-")) {
      flagArgs.push(a);
      const name = a.startsWith("--") ? a.slice(2) : "";
      const spec = (flags as FlagSpecs)[name];
      if (spec !== undefined && spec.type !== "boolean" && !a.includes("=") && i + 1 < argv.length) flagArgs.push(argv[++i]!);
    } else {
      positionals.push(a);
    }
  }
  return { positionals, flagArgs };
}

function unwrap<T>(r: PackageResult<T>): T {
  if (!r.ok) throw new CliError(r.message);
  return r.value;
}

function describe(p: PackageInfo): string {
  const state = !p.valid ? "invalid" : p.enabled ? "enabled" : "disabled";
  const compat = p.compatible ? "compatible" : `incompatible: ${p.reason ?? "unknown reason"}`;
  const pinned = p.pinnedBy.length > 0 ? `; in use by ${p.pinnedBy.join(", ")}` : "";
  const pins = p.modelPins.length > 0 ? `; pinned: ${p.modelPins.map((m) => `${m.model}@${m.version}`).join(", ")}` : "";
  const shadows = p.shadows !== null ? "; hides the bundled one" : "";
  return `${p.name.padEnd(16)} ${(p.version ?? "-").padEnd(8)} ${p.source.padEnd(8)} ${state.padEnd(8)} ${compat}${pinned}${pins}${shadows}`;
}

async function run(argv: readonly string[]): Promise<number> {
  const { positionals, flagArgs } = split(argv);
  const f = parseFlags(flagArgs, flags, usage);
  const [sub, ...args] = positionals;
  if (sub === undefined) throw new UsageError("a subcommand is required", usage);
  const spec = subcommands[sub];
  if (spec === undefined) throw new UsageError(`unknown subcommand ${JSON.stringify(sub)}`, usage);
  if (args.length !== spec.args.length) {
    throw new UsageError(`${sub} takes ${spec.args.length === 0 ? "no arguments" : spec.args.join(" ")}`, usage);
  }
  if (sub === "pack" && f.out === undefined) throw new UsageError("pack needs --out FILE", usage);
  if (f.version !== undefined && sub !== "pin") throw new UsageError("--version is for pin", usage);
  if (f.out !== undefined && sub !== "pack") throw new UsageError("--out is for pack", usage);

  const service = new PackageService(f["packages-dir"] !== undefined ? { dir: f["packages-dir"] } : {});
  const out = new Output();
  const done = (text: string, json: Record<string, unknown>): void => {
    out.line(f.json ? JSON.stringify({ ok: true, ...json }, null, 2) : text);
  };
  const dir = (): string => unwrap(service.dir());

  switch (sub) {
    case "list": {
      const list = unwrap(await service.list());
      if (f.json) {
        out.line(JSON.stringify(list, null, 2));
      } else {
        const bundled = list.bundledDir !== null ? ` and the bundled packages in ${list.bundledDir}` : "";
        if (list.packages.length === 0) {
          out.line(`no kernel packages in ${list.dir}${list.exists ? "" : " (the directory does not exist)"}${bundled}`);
        } else {
          out.line(`kernel packages in ${list.dir}${bundled}:`);
          for (const p of list.packages) out.line("  " + describe(p));
        }
      }
      break;
    }
    case "enable":
      unwrap(await service.enable(args[0]!));
      done(`enabled ${args[0]!} in ${dir()}`, { action: "enable", name: args[0]!, dir: dir() });
      break;
    case "disable":
      unwrap(await service.disable(args[0]!));
      done(`disabled ${args[0]!} in ${dir()}`, { action: "disable", name: args[0]!, dir: dir() });
      break;
    case "install": {
      const name = unwrap(await service.install(args[0]!));
      done(`installed ${name} into ${dir()}`, { action: "install", name, dir: dir() });
      break;
    }
    case "uninstall":
      unwrap(await service.uninstall(args[0]!));
      done(`uninstalled ${args[0]!} from ${dir()}`, { action: "uninstall", name: args[0]!, dir: dir() });
      break;
    case "pin": {
      const [model, name] = [args[0]!, args[1]!];
      unwrap(await service.pin(model, name, f.version));
      done(f.version ? `pinned ${model} to ${name} ${f.version}` : `unpinned ${model} from ${name}`, {
        action: "pin",
        model,
        name,
        version: f.version ?? null,
      });
      break;
    }
    case "pack":
      unwrap(await service.pack(args[0]!, f.out!));
      done(`packed ${args[0]!} into ${f.out!}`, { action: "pack", dir: args[0]!, file: f.out! });
      break;
    case "reset-state": {
      const movedTo = unwrap(await service.resetState());
      done(
        movedTo === null
          ? `no package state file in ${dir()}; nothing to reset`
          : `set the package state file aside as ${movedTo}; every package is enabled again, with no pins`,
        { action: "reset-state", dir: dir(), movedTo },
      );
      break;
    }
  }
  await out.flush();
  return exitOk;
}

export const packagesCommand: Command = {
  name: "packages",
  summary: "manage kernel packages: list, enable, disable, install, uninstall, pin, pack, reset-state",
  usage,
  run,
};
