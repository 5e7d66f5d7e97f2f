// guild serve: the local OpenAI-compatible API (docs/API.md) over one loaded
// model, until SIGINT/SIGTERM. Safe by default: binds 127.0.0.1; any other
// address needs --host and an API key (--api-key or $GUILD_API_KEY).
import { defaultMaxQueued, RuntimeHost } from "../services/runtime-host.js";
import { createAppServices, type AppServices } from "../services/index.js";
import { defaultDataDir } from "../web/web-mode.js";
import { createWebRoutes } from "../web/web-routes.js";
import { WebSession } from "../web/web-session.js";
import { ApiServer, defaultApiHost, defaultApiPort, isLoopbackHost, normalizeOrigin } from "../services/api-server.js";
import { parseFlags, type FlagSpecs } from "./args.js";
import type { Command } from "./command.js";
import { CliError, exitInterrupted, exitOk, fileError, oneLine, UsageError } from "./errors.js";
import { checkModelFile, defaultModelPath } from "./model-file.js";
import { gpuFlag, gpuFlagSpecs, gpuPeerBudgetFlag, gpuPeersFlag } from "./gpu-flag.js";
import { checkSpeculativeFlags, speculativeFlagSpecs } from "./speculative-flags.js";

const int32Max = 2 ** 31 - 1;

const flags = {
  model: { type: "string" },
  port: { type: "int", min: 0, max: 65535 },
  host: { type: "string" },
  "api-key": { type: "string" },
  "allow-origin": { type: "string" },
  threads: { type: "int", min: 0, max: 4096 },
  ctx: { type: "int", min: 0, max: int32Max },
  "kv-type": { type: "string", choices: ["f16", "f32"] },
  "max-queue": { type: "int", min: 0, max: 100_000 },
  "packages-dir": { type: "string" },
  ...gpuFlagSpecs,
  ...speculativeFlagSpecs,
} as const satisfies FlagSpecs;

const usage =
  "guild serve [--model PATH] [--port N] [--host ADDR] [--api-key KEY] [--allow-origin ORIGIN ...] " +
  "[--threads N] [--ctx N] [--kv-type f16|f32] [--max-queue N] [--packages-dir DIR] " +
  "[--gpu auto|cpu|cuda:N] [--gpu-budget GIB] [--experts-cpu] " +
  "[--gpu-peers cuda:N,...] [--gpu-peer-budget GIB] " +
  "[--draft auto|none|mtp] [--spec-max N] [--spec-min-p P] [--spec-rule cost|confidence]";

/** Takes every `--allow-origin X` / `--allow-origin=X` out of argv (the flag may repeat; values may be comma-separated). */
function takeOrigins(argv: readonly string[]): { rest: string[]; origins: string[] } {
  const rest: string[] = [];
  const origins: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--allow-origin") {
      if (i + 1 >= argv.length) throw new UsageError("--allow-origin needs a value", usage);
      origins.push(argv[++i]!);
    } else if (a.startsWith("--allow-origin=")) origins.push(a.slice("--allow-origin=".length));
    else rest.push(a);
  }
  const list = origins.flatMap((o) => o.split(",")).map((o) => o.trim()).filter((o) => o !== "");
  for (const o of list)
    if (normalizeOrigin(o) === null) throw new UsageError(`--allow-origin: expected scheme://host[:port] (got ${JSON.stringify(o)})`, usage);
  if (origins.length > 0 && list.length === 0) throw new UsageError("--allow-origin: expected scheme://host[:port]", usage);
  return { rest, origins: list };
}

async function run(argv: readonly string[]): Promise<number> {
  const { rest, origins } = takeOrigins(argv);
  const f = parseFlags(rest, flags, usage);
  const host = f.host ?? defaultApiHost;
  if (host.trim() === "") throw new UsageError("--host: expected an address", usage);
  const keys = [f["api-key"], process.env["GUILD_API_KEY"]].filter((k): k is string => k !== undefined && k !== "");
  if (f["api-key"] !== undefined && f["api-key"].trim() === "") throw new UsageError("--api-key: the key is empty", usage);
  const loopback = isLoopbackHost(host);
  if (!loopback && keys.length === 0)
    throw new UsageError(`--host ${host} is not a loopback address: anyone who can reach it could use the model; give --api-key KEY (or set GUILD_API_KEY)`, usage);
  const gpu = gpuFlag(f.gpu, usage);
  const gpuPeers = gpuPeersFlag(f["gpu-peers"], gpu, usage);
  const gpuPeerBudgetGiB = gpuPeerBudgetFlag(f["gpu-peer-budget"], gpuPeers, usage);
  checkSpeculativeFlags(f, usage);
  const file = f.model ?? defaultModelPath();
  await checkModelFile(file);

  const packagesDir = f["packages-dir"];
  if (packagesDir !== undefined && packagesDir.trim() === "") throw new UsageError("--packages-dir: the directory is empty", usage);
  // The model loads and the web mode's package page use the same packages folder.
  const runtime = new RuntimeHost({ maxQueued: f["max-queue"] ?? defaultMaxQueued, ...(packagesDir !== undefined && { packagesDir }) });
  let stopping: (() => void) | null = null;
  let signals = 0;
  const stopped = new Promise<void>((resolve) => (stopping = resolve));
  const onSignal = () => {
    signals++;
    if (signals > 1) process.exit(exitInterrupted);
    stopping?.();
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  let server: ApiServer | undefined;
  let services: AppServices | undefined;
  try {
    const loading = runtime.loadModel(file, {
      ...(f.threads !== undefined && { threads: f.threads }),
      ...(f.ctx !== undefined && { contextSize: f.ctx }),
      ...(f["kv-type"] !== undefined && { kvCacheType: f["kv-type"] }),
      ...(gpu !== undefined && { gpu }),
      ...(f["gpu-budget"] !== undefined && { gpuBudgetGiB: f["gpu-budget"] }),
      ...(f["experts-cpu"] !== undefined && { expertsOnCpu: f["experts-cpu"] }),
      ...(gpuPeers !== undefined && { gpuPeers }),
      ...(gpuPeerBudgetGiB !== undefined && { gpuPeerBudgetGiB }),
      // The defaults of every generation with the model (API requests override them; absent draft: auto).
      ...(f.draft !== undefined && { draft: f.draft }),
      ...(f["spec-max"] !== undefined && { specMax: f["spec-max"] }),
      ...(f["spec-min-p"] !== undefined && { specMinP: f["spec-min-p"] }),
      ...(f["spec-rule"] !== undefined && { specRule: f["spec-rule"] }),
    });
    const first = await Promise.race([loading.then(() => "loaded" as const), stopped.then(() => "stopped" as const)]);
    if (first === "stopped") {
      // Interrupted while loading: let the load finish or fail, then free it.
      await loading.catch(() => undefined);
      return exitInterrupted;
    }
    // The app's web mode (renderer + its contract) rides on the same server and
    // the same RuntimeHost, so the browser tab and API clients share one queue.
    // Its contract can load model files and change packages, so it is mounted
    // only on loopback binds: a server reachable from other machines offers the
    // OpenAI-compatible API alone (docs/API.md, "Security defaults").
    if (loopback) {
      // The app's data folder is no reason to lose the API, nor the model's fault: warn and serve the API alone.
      try {
        services = createAppServices({ dataDir: defaultDataDir(), host: runtime, loadEmbedded: false, ...(packagesDir !== undefined && { packagesDir }) });
      } catch (err) {
        process.stderr.write(`guild: warning: web mode is off: ${oneLine(err instanceof Error ? err.message : String(err))}\n`);
      }
    }
    // The app's routes need this start's secret (the API key is for the OpenAI API only).
    const session = new WebSession();
    try {
      server = new ApiServer(runtime, {
        host,
        port: f.port ?? defaultApiPort,
        apiKeys: keys,
        allowedOrigins: origins,
        extraRoutes: services ? [createWebRoutes(services, session)] : [],
      });
    } catch (err) {
      throw new CliError((err as Error).message);
    }
    let url: string;
    try {
      url = (await server.start()).url;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      const where = `${host}:${f.port ?? defaultApiPort}`;
      if (code === "EADDRINUSE") throw new CliError(`cannot listen on ${where}: the address is already in use (try --port N)`);
      if (code === "EADDRNOTAVAIL") throw new CliError(`cannot listen on ${where}: no such local address`);
      if (code === "EACCES") throw new CliError(`cannot listen on ${where}: permission denied`);
      throw new CliError(`cannot listen on ${where}: ${(err as Error).message}`);
    }
    if (!loopback)
      process.stderr.write(`guild: warning: listening on ${host}, reachable from other machines; requests need the API key\n`);
    // One write: whoever reads the serving line has the app's link (its session token) with it.
    process.stdout.write(`guild: serving ${file} at ${url}\n` + (services ? `guild: the app: ${session.appUrl(url)}\n` : ""));
    await stopped;
    process.stderr.write("guild: stopping\n");
    return exitOk;
  } catch (err) {
    if (err instanceof CliError || err instanceof UsageError) throw err;
    throw fileError(file, err);
  } finally {
    try {
      await server?.stop();
      await services?.dispose();
      await runtime.dispose();
    } finally {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    }
  }
}

export const serveCommand: Command = {
  name: "serve",
  summary: "serve the local OpenAI-compatible API (docs/API.md)",
  usage,
  run,
};
