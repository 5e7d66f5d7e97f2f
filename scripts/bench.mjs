#!/usr/bin/env node
// npm run bench -- --model PATH [--threads N] [--prompt-tokens 512] [--gen-tokens 128] [--reps K] [--json]
//
// Guild against llama.cpp (through node-llama-cpp's prebuilt binaries) on the
// same GGUF: the same random prompt (regular, non-special token ids), the
// same thread count, context size and batch (the whole prompt in one batch),
// greedy decoding of the same number of tokens. The engines run alternately
// (G L, L G, G L, ...), every run in its own child process, so each run's
// peak RSS is that process's own. Each child warms up untimed first (a short
// prompt and 4 decode steps), then is timed once with the same wall-clock
// points on both sides:
//   prompt  = from submitting the prompt to the first token's logits
//             (prompt tokens / that time = prompt tokens/s; TTFT is the same
//             interval plus sampling the first token),
//   decode  = from the first generated token to the last
//             ((gen tokens - 1) / that time = decode tokens/s).
// Prints a table (min / median / max over the runs of each engine, and the
// median of the per-pair ratios Guild / llama.cpp) and, with --json, a JSON
// object on stdout (the table then goes to stderr).
//
// Other flags: --ctx N (default prompt + gen + 16), --seed S (prompt), --warmup N (warm-up prompt
// tokens, default 32, 0 = none), --engines guild,llama, --guild-bench PATH (else $GUILD_BENCH_BIN,
// else the newest build*/native/tools/guild-bench, built into build/native-tests when missing), --llama-dir DIR (a
// folder whose node_modules holds node-llama-cpp; else $NODE_LLAMA_CPP_DIR, else this project).
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const self = fileURLToPath(import.meta.url);

// ---- command line -------------------------------------------------------------------

const USAGE = `usage: npm run bench -- --model PATH [--threads N] [--prompt-tokens 512] [--gen-tokens 128] [--reps K] [--json]
         [--ctx N] [--seed S] [--warmup N] [--engines guild,llama] [--guild-bench PATH] [--llama-dir DIR]`;

function parseArgs(argv) {
  const out = { _: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith("--")) { out._.push(a); continue; }
    const key = a.slice(2);
    if (key === "json" || key === "help") { out[key] = true; continue; }
    if (i + 1 >= argv.length) fail(`missing value for --${key}\n${USAGE}`);
    out[key] = argv[++i];
  }
  return out;
}

function fail(msg) {
  process.stderr.write(`bench: ${msg}\n`);
  process.exit(2);
}

function intArg(args, key, def, min = 1) {
  if (args[key] === undefined) return def;
  const v = Number(args[key]);
  if (!Number.isInteger(v) || v < min) fail(`--${key} expects an integer >= ${min}, got '${args[key]}'`);
  return v;
}

// ---- GGUF metadata (enough to pick regular token ids) ------------------------------------

// Reads the metadata of a GGUF file: returns { meta: Map(key -> value) } where
// arrays of numbers come back as arrays (strings arrays are skipped, returning
// their count only), and the tensor infos' names and shapes.
function readGgufMeta(file) {
  const fd = fs.openSync(file, "r");
  let buf = Buffer.alloc(0);
  let pos = 0;
  let fileOff = 0;
  const need = (n) => {
    if (pos + n <= buf.length) return;
    const rest = buf.subarray(pos);
    const chunk = Buffer.alloc(Math.max(n, 1 << 22));
    const got = fs.readSync(fd, chunk, 0, chunk.length, fileOff);
    fileOff += got;
    buf = Buffer.concat([rest, chunk.subarray(0, got)]);
    pos = 0;
    if (buf.length < n) throw new Error(`${file}: truncated GGUF header`);
  };
  const u32 = () => { need(4); const v = buf.readUInt32LE(pos); pos += 4; return v; };
  const u64 = () => { need(8); const v = buf.readBigUInt64LE(pos); pos += 8; return Number(v); };
  const str = () => { const n = u64(); need(n); const s = buf.toString("utf8", pos, pos + n); pos += n; return s; };
  const scalarSize = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  const scalar = (t) => {
    need(scalarSize[t]);
    let v;
    switch (t) {
      case 0: v = buf.readUInt8(pos); break;
      case 1: v = buf.readInt8(pos); break;
      case 2: v = buf.readUInt16LE(pos); break;
      case 3: v = buf.readInt16LE(pos); break;
      case 4: v = buf.readUInt32LE(pos); break;
      case 5: v = buf.readInt32LE(pos); break;
      case 6: v = buf.readFloatLE(pos); break;
      case 7: v = buf.readUInt8(pos) !== 0; break;
      case 10: v = Number(buf.readBigUInt64LE(pos)); break;
      case 11: v = Number(buf.readBigInt64LE(pos)); break;
      case 12: v = buf.readDoubleLE(pos); break;
      default: throw new Error(`${file}: bad GGUF value type ${t}`);
    }
    pos += scalarSize[t];
    return v;
  };
  const value = (t) => {
    if (t === 8) return str();
    if (t === 9) {
      const et = u32();
      const n = u64();
      if (et === 8) { for (let i = 0; i < n; i++) str(); return { stringCount: n }; }
      const arr = new Array(n);
      for (let i = 0; i < n; i++) arr[i] = value(et);
      return arr;
    }
    return scalar(t);
  };
  try {
    need(4);
    if (buf.toString("latin1", 0, 4) !== "GGUF") throw new Error(`${file}: not a GGUF file`);
    pos = 4;
    const version = u32();
    if (version < 2) throw new Error(`${file}: GGUF v${version} is not supported`);
    const nTensors = u64();
    const nMeta = u64();
    const meta = new Map();
    for (let i = 0; i < nMeta; i++) {
      const key = str();
      meta.set(key, value(u32()));
    }
    const tensors = new Map();
    for (let i = 0; i < nTensors; i++) {
      const name = str();
      const nd = u32();
      const ne = [];
      for (let d = 0; d < nd; d++) ne.push(u64());
      u32();
      u64();
      tensors.set(name, ne);
    }
    return { meta, tensors };
  } finally {
    fs.closeSync(fd);
  }
}

// Deterministic PRNG (mulberry32) for the prompt.
function rng32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function randomPrompt(modelPath, n, seed) {
  const { meta, tensors } = readGgufMeta(modelPath);
  const types = meta.get("tokenizer.ggml.token_type");
  const embd = tensors.get("token_embd.weight");
  const nVocab = embd ? embd[1] : Array.isArray(types) ? types.length : 0;
  if (!nVocab) throw new Error(`${modelPath}: cannot tell the vocabulary size`);
  // Regular tokens only (type 1): no control / byte / unused ids.
  const regular = [];
  for (let id = 0; id < nVocab; id++) if (!Array.isArray(types) || types[id] === 1) regular.push(id);
  if (regular.length === 0) throw new Error(`${modelPath}: no regular tokens`);
  const r = rng32(seed);
  const out = [];
  for (let i = 0; i < n; i++) out.push(regular[Math.floor(r() * regular.length)]);
  return out;
}

// ---- child: llama.cpp through node-llama-cpp ------------------------------------------------

async function importNodeLlamaCpp(dir) {
  const candidates = [];
  if (dir) candidates.push(path.resolve(dir));
  if (process.env.NODE_LLAMA_CPP_DIR) candidates.push(path.resolve(process.env.NODE_LLAMA_CPP_DIR));
  candidates.push(root);
  for (const c of candidates) {
    const entry = path.join(c, "node_modules", "node-llama-cpp", "dist", "index.js");
    if (fs.existsSync(entry)) return { mod: await import(pathToFileURL(entry).href), entry };
  }
  throw new Error(
    "node-llama-cpp is not installed (looked in " + candidates.join(", ") +
      "); install it as a devDependency (npm install -D node-llama-cpp@3.21.1) or pass --llama-dir DIR");
}

async function childLlama(args) {
  const { mod, entry } = await importNodeLlamaCpp(args["llama-dir"]);
  const { getLlama, LlamaLogLevel } = mod;
  const prompt = fs.readFileSync(args["prompt-file"], "utf8").trim().split(/[\s,]+/).map(Number);
  const threads = intArg(args, "threads", 2);
  const nGen = intArg(args, "gen-tokens", 128);
  const nCtx = intArg(args, "ctx", prompt.length + nGen + 16);
  const nWarm = intArg(args, "warmup", 0, 0);
  const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error, maxThreads: threads });
  const tLoad = performance.now();
  const model = await llama.loadModel({ modelPath: args.model, gpuLayers: 0 });
  const context = await model.createContext({
    contextSize: nCtx,
    batchSize: prompt.length,
    threads: { ideal: threads, min: threads },
    sequences: 1,
  });
  const loadMs = performance.now() - tLoad;
  const seq = context.getSequence();
  if (nWarm > 0) {
    const it = seq.evaluate(prompt.slice(0, Math.min(nWarm, prompt.length)), { temperature: 0 });
    for (let i = 0; i < 4; i++) await it.next();
    await it.return();
    await seq.clearHistory();
  }
  // Timed: the prompt in one batch, then greedy decoding.
  const t0 = performance.now();
  const it = seq.evaluate(prompt, { temperature: 0 });
  let r = await it.next();
  const tFirst = performance.now();
  const tokens = [r.value];
  for (let i = 1; i < nGen; i++) {
    r = await it.next();
    if (r.done) break;
    tokens.push(r.value);
  }
  const tEnd = performance.now();
  await it.return();
  const promptMs = tFirst - t0;
  const decodeMs = tEnd - tFirst;
  const out = {
    engine: "llama.cpp",
    binding: `node-llama-cpp ${JSON.parse(fs.readFileSync(path.join(path.dirname(entry), "..", "package.json"), "utf8")).version}`,
    build: llama.buildType,
    cpu: llama.systemInfo.trim(),
    threads: context.currentThreads,
    ctx: context.contextSize,
    batch: context.batchSize,
    flash_attention: context.flashAttention,
    load_ms: loadMs,
    prompt_tokens: prompt.length,
    gen_tokens: tokens.length,
    prompt_ms: promptMs,
    decode_ms: decodeMs,
    ttft_ms: promptMs,
    prompt_tokens_per_s: prompt.length / (promptMs / 1000),
    decode_tokens_per_s: tokens.length > 1 ? (tokens.length - 1) / (decodeMs / 1000) : null,
    tokens,
  };
  await context.dispose();
  await model.dispose();
  out.peak_rss_bytes = process.resourceUsage().maxRSS * 1024;
  process.stdout.write(JSON.stringify(out) + "\n");
}

// ---- parent ------------------------------------------------------------------------------

function findGuildBench(explicit) {
  if (explicit) {
    if (!fs.existsSync(explicit)) fail(`${explicit}: no such file`);
    return path.resolve(explicit);
  }
  if (process.env.GUILD_BENCH_BIN) return path.resolve(process.env.GUILD_BENCH_BIN);
  // The most recently built of the project's build folders.
  const found = [];
  for (const d of fs.readdirSync(root)) {
    if (!d.startsWith("build")) continue;
    for (const sub of [path.join(d, "native", "tools"), path.join(d, "native-tests", "native", "tools")]) {
      const c = path.join(root, sub, "guild-bench");
      if (fs.existsSync(c)) found.push({ c, t: fs.statSync(c).mtimeMs });
    }
  }
  found.sort((a, b) => b.t - a.t);
  if (found.length) return found[0].c;
  // Build it (Release) in build/native-tests, the folder `npm run test:native` uses.
  const dir = path.join(root, "build", "native-tests");
  process.stderr.write(`bench: guild-bench not found; building it in ${dir}\n`);
  for (const args of [
    ["-S", root, "-B", dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"],
    ["--build", dir, "--target", "guild-bench", "--parallel", String(os.availableParallelism())],
  ]) {
    const r = spawnSync("cmake", args, { stdio: ["ignore", "inherit", "inherit"] });
    if (r.status !== 0) fail(`cmake ${args.join(" ")} failed`);
  }
  const built = path.join(dir, "native", "tools", "guild-bench");
  if (!fs.existsSync(built)) fail(`the build did not produce ${built}`);
  return built;
}

function runChild(cmd, argv) {
  const r = spawnSync(cmd, argv, { encoding: "utf8", maxBuffer: 64 << 20 });
  if (r.error) throw new Error(`cannot run ${cmd}: ${r.error.message}`);
  if (r.status !== 0) throw new Error(`${path.basename(cmd)} exited with ${r.status}:\n${(r.stderr || "").trim()}`);
  const text = r.stdout.trim();
  const start = text.indexOf("{");
  try {
    return JSON.parse(text.slice(start));
  } catch {
    throw new Error(`${path.basename(cmd)} printed no JSON:\n${text}\n${r.stderr}`);
  }
}

function runGuild(bin, o) {
  const j = runChild(bin, [
    "--model", o.model, "--threads", String(o.threads), "--prompt-file", o.promptFile,
    "--gen-tokens", String(o.gen), "--reps", "1", "--ctx", String(o.ctx), "--warmup", String(o.warmup),
  ]);
  return {
    engine: "guild",
    kernels: j.kernels,
    threads: j.threads,
    ctx: j.ctx,
    prompt_tokens_per_s: j.prompt_tokens_per_s.median,
    decode_tokens_per_s: j.decode_tokens_per_s ? j.decode_tokens_per_s.median : null,
    ttft_ms: j.ttft_ms.median,
    peak_rss_bytes: j.peak_rss_bytes,
    load_ms: j.load_ms,
  };
}

function runLlama(o) {
  const argv = [
    self, "--child", "llama", "--model", o.model, "--threads", String(o.threads), "--prompt-file", o.promptFile,
    "--gen-tokens", String(o.gen), "--ctx", String(o.ctx), "--warmup", String(o.warmup),
  ];
  if (o.llamaDir) argv.push("--llama-dir", o.llamaDir);
  return runChild(process.execPath, argv);
}

function stats(v) {
  const s = v.filter((x) => x != null && Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return null;
  const mid = s.length >> 1;
  const median = s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
  return { min: s[0], median, max: s[s.length - 1] };
}

function fmt(x, digits = 1) {
  return x == null ? "-" : x.toFixed(digits);
}

async function parent(args) {
  if (args.help) { process.stdout.write(USAGE + "\n"); return; }
  if (!args.model) fail(`--model is required\n${USAGE}`);
  const model = path.resolve(args.model);
  if (!fs.existsSync(model)) fail(`${model}: no such file`);
  const o = {
    model,
    threads: intArg(args, "threads", Math.min(os.availableParallelism(), 8)),
    promptTokens: intArg(args, "prompt-tokens", 512),
    gen: intArg(args, "gen-tokens", 128),
    reps: intArg(args, "reps", 3),
    warmup: intArg(args, "warmup", 32, 0),
    seed: intArg(args, "seed", 1234, 0),
    llamaDir: args["llama-dir"],
  };
  o.ctx = intArg(args, "ctx", o.promptTokens + o.gen + 16);
  const engines = (args.engines || "guild,llama").split(",").map((s) => s.trim());
  for (const e of engines) if (e !== "guild" && e !== "llama") fail(`unknown engine '${e}' (guild, llama)`);
  const log = args.json ? (s) => process.stderr.write(s + "\n") : (s) => process.stdout.write(s + "\n");

  const prompt = randomPrompt(model, o.promptTokens, o.seed);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "guild-bench-"));
  o.promptFile = path.join(tmp, "prompt.txt");
  fs.writeFileSync(o.promptFile, prompt.join(" ") + "\n");
  const guildBin = engines.includes("guild") ? findGuildBench(args["guild-bench"]) : null;
  if (engines.includes("llama")) await importNodeLlamaCpp(o.llamaDir);  // fail early when missing

  log(`model ${model}`);
  log(`threads ${o.threads}, prompt ${o.promptTokens} tokens (seed ${o.seed}), decode ${o.gen} tokens, ctx ${o.ctx}, ` +
      `${o.reps} alternating runs per engine, warm-up ${o.warmup} tokens`);
  const runs = { guild: [], llama: [] };
  try {
    for (let rep = 0; rep < o.reps; rep++) {
      const order = rep % 2 === 0 ? engines : [...engines].reverse();
      for (const e of order) {
        const load = os.loadavg()[0];
        const r = e === "guild" ? runGuild(guildBin, o) : runLlama(o);
        r.load_avg_1m_before = load;
        runs[e].push(r);
        log(`  run ${rep + 1} ${e.padEnd(5)}  prompt ${fmt(r.prompt_tokens_per_s).padStart(8)} tok/s  decode ` +
            `${fmt(r.decode_tokens_per_s, 2).padStart(8)} tok/s  ttft ${fmt(r.ttft_ms).padStart(8)} ms  ` +
            `rss ${fmt(r.peak_rss_bytes / 1048576, 0)} MiB  (load ${load.toFixed(2)})`);
      }
    }
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }

  const metrics = [
    ["prompt_tokens_per_s", "prompt tok/s", 1],
    ["decode_tokens_per_s", "decode tok/s", 2],
    ["ttft_ms", "TTFT ms", 1],
    ["peak_rss_bytes", "peak RSS MiB", 0, 1 / 1048576],
  ];
  const summary = {};
  for (const e of engines) {
    summary[e] = {};
    for (const [k] of metrics) summary[e][k] = stats(runs[e].map((r) => r[k]));
  }
  const ratios = {};
  if (engines.length === 2) {
    for (const [k] of metrics) {
      const per = runs.guild.map((g, i) => (g[k] != null && runs.llama[i][k] ? g[k] / runs.llama[i][k] : null));
      ratios[k] = { per_pair: per, ...stats(per) };
    }
  }
  const names = { guild: "Guild", llama: "llama.cpp" };
  log("");
  log(`| metric | ${engines.map((e) => `${names[e]} min / median / max`).join(" | ")} |${engines.length === 2 ? " Guild / llama.cpp (median of pairs) |" : ""}`);
  log(`|---|${engines.map(() => "---|").join("")}${engines.length === 2 ? "---|" : ""}`);
  for (const [k, label, digits, scale = 1] of metrics) {
    const cells = engines.map((e) => {
      const s = summary[e][k];
      return s ? `${fmt(s.min * scale, digits)} / **${fmt(s.median * scale, digits)}** / ${fmt(s.max * scale, digits)}` : "-";
    });
    const ratio = engines.length === 2 && ratios[k] && ratios[k].median != null ? ` ${ratios[k].median.toFixed(3)} |` : engines.length === 2 ? " - |" : "";
    log(`| ${label} | ${cells.join(" | ")} |${ratio}`);
  }
  if (engines.length === 2) log("(ratios above 1 favour Guild for tok/s, favour llama.cpp for TTFT and RSS)");

  if (args.json) {
    const out = {
      model,
      threads: o.threads,
      prompt_tokens: o.promptTokens,
      gen_tokens: o.gen,
      ctx: o.ctx,
      reps: o.reps,
      seed: o.seed,
      host: { cpu: os.cpus()[0]?.model, logical_cpus: os.availableParallelism(), node: process.version, load_avg: os.loadavg() },
      runs,
      summary,
      ratio_guild_over_llama: ratios,
    };
    process.stdout.write(JSON.stringify(out, null, 2) + "\n");
  }
}

const args = parseArgs(process.argv.slice(2));
try {
  if (args.child === "llama") await childLlama(args);
  else await parent(args);
} catch (e) {
  process.stderr.write(`bench: ${e && e.message ? e.message : e}\n`);
  process.exit(1);
}
