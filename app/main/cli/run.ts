// guild run: generate from a prompt (or chat) and stream the text.
import { writeFile } from "node:fs/promises";
import { createInterface } from "node:readline";

import { ChatTemplateError, chatPromptTokens, type ChatMessage } from "../runtime/chat-template.js";
import type { GuildModel } from "../runtime/model.js";
import type { GenerateOptions } from "../runtime/options.js";
import type { GuildSession } from "../runtime/session.js";
import { parseFlags, type FlagSpecs, type ParsedFlags } from "./args.js";
import type { Command } from "./command.js";
import { CliError, exitInterrupted, exitOk, fileError, UsageError } from "./errors.js";
import { doneEvent, streamGeneration } from "./generate-stream.js";
import { Interrupt } from "./interrupt.js";
import { defaultModelPath, openModel } from "./model-file.js";
import { Output } from "./output.js";
import { checkTokenIds } from "./tokens.js";
import { gpuFlag, gpuFlagSpecs, gpuPeerBudgetFlag, gpuPeersFlag } from "./gpu-flag.js";
import { checkSpeculativeFlags, speculativeFlagSpecs, speculativeOptions } from "./speculative-flags.js";

const int32Max = 2 ** 31 - 1;

const flags = {
  model: { type: "string" },
  prompt: { type: "string" },
  "prompt-tokens": { type: "ids" },
  "n-predict": { type: "int", min: -1, max: int32Max },
  temperature: { type: "number", min: 0 },
  "top-k": { type: "int", min: 0, max: int32Max },
  "top-p": { type: "number", above: 0, max: 1 },
  "min-p": { type: "number", min: 0, max: 1 },
  "repeat-penalty": { type: "number", above: 0 },
  seed: { type: "int", min: 0 },
  threads: { type: "int", min: 0, max: 4096 },
  ctx: { type: "int", min: 0, max: int32Max },
  "kv-type": { type: "string", choices: ["f16", "f32"] },
  chat: { type: "boolean" },
  json: { type: "boolean" },
  "profile-out": { type: "string" },
  "packages-dir": { type: "string" },
  ...gpuFlagSpecs,
  ...speculativeFlagSpecs,
} as const satisfies FlagSpecs;

type RunFlags = ParsedFlags<typeof flags>;

const usage =
  "guild run [--model PATH] (--prompt TEXT | --prompt-tokens ID,ID,...) [--n-predict N] [--temperature T] " +
  "[--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R] [--seed S] [--threads N] [--ctx N] " +
  "[--kv-type f16|f32] [--chat] [--json] [--profile-out FILE] [--packages-dir DIR] " +
  "[--gpu auto|cpu|cuda:N] [--gpu-budget GIB] [--experts-cpu] " +
  "[--gpu-peers cuda:N,...] [--gpu-peer-budget GIB] " +
  "[--draft auto|none|mtp] [--spec-max N] [--spec-min-p P] [--spec-rule cost|confidence]";

function generateOptions(f: RunFlags): Omit<GenerateOptions, "onToken" | "signal"> {
  return {
    ...(f["n-predict"] !== undefined && { maxNewTokens: f["n-predict"] }),
    ...(f.temperature !== undefined && { temperature: f.temperature }),
    ...(f["top-k"] !== undefined && { topK: f["top-k"] }),
    ...(f["top-p"] !== undefined && { topP: f["top-p"] }),
    ...(f["min-p"] !== undefined && { minP: f["min-p"] }),
    ...(f["repeat-penalty"] !== undefined && { repeatPenalty: f["repeat-penalty"] }),
    ...(f.seed !== undefined && { seed: f.seed }),
    ...speculativeOptions(f),
  };
}

/**
 * A chat prompt's tokens. The template renders in a worker under limits
 * (docs/TOKENIZER.md); `signal` (Ctrl-C, SIGTERM) stops it at once.
 */
async function chatTokens(model: GuildModel, messages: readonly ChatMessage[], signal: AbortSignal): Promise<number[]> {
  try {
    return await chatPromptTokens(model, messages, { modelName: model.path, signal });
  } catch (err) {
    if (signal.aborted) throw err;
    // a ChatTemplateError names the model's path already
    throw fileError(model.path, err instanceof ChatTemplateError ? err : `cannot render the chat template: ${(err as Error).message}`);
  }
}

/** The prompt's tokens: exactly as given, tokenized by the model's rules, or through the chat template. */
async function promptTokens(model: GuildModel, f: RunFlags, signal: AbortSignal): Promise<number[]> {
  let tokens: number[];
  if (f["prompt-tokens"] !== undefined) {
    tokens = f["prompt-tokens"];
    checkTokenIds(model, tokens, "--prompt-tokens");
  } else if (f.chat) {
    tokens = await chatTokens(model, [{ role: "user", content: f.prompt ?? "" }], signal);
  } else {
    tokens = model.tokenize(f.prompt ?? "", { addSpecial: true, parseSpecial: true });
  }
  if (tokens.length === 0) throw new CliError("the prompt is empty (it has no tokens)");
  return tokens;
}

async function runOnce(model: GuildModel, session: GuildSession, f: RunFlags, interrupt: Interrupt, out: Output): Promise<number> {
  let prompt: number[];
  try {
    prompt = await promptTokens(model, f, interrupt.signal);
  } catch (err) {
    if (interrupt.interrupted) return exitInterrupted;
    throw err;
  }
  const stopOnClose = new AbortController();
  out.onClose(() => stopOnClose.abort());
  const signal = AbortSignal.any([interrupt.signal, stopOnClose.signal]);
  let generation;
  try {
    generation = await streamGeneration(session, prompt, { ...generateOptions(f), signal }, out, f.json === true);
  } catch (err) {
    throw fileError(model.path, err);
  }
  if (f.json) out.line(JSON.stringify(doneEvent(prompt, generation)));
  else if (process.stdout.isTTY && !generation.text.endsWith("\n")) out.write("\n");
  await out.flush();
  return interrupt.interrupted ? exitInterrupted : exitOk;
}

/** `--chat` without `--prompt`: one user message per input line, the conversation kept in the session. */
async function runInteractive(model: GuildModel, session: GuildSession, f: RunFlags, interrupt: Interrupt, out: Output): Promise<number> {
  const tty = process.stdin.isTTY === true;
  const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: tty });
  let generating = false;
  // On a raw terminal Ctrl-C reaches readline, not the process.
  rl.on("SIGINT", () => (generating ? interrupt.handler() : rl.close()));
  const messages: ChatMessage[] = [];
  if (tty) {
    process.stderr.write(`guild: chatting with ${model.path} (Ctrl-C stops a reply, Ctrl-D quits)\n`);
    rl.setPrompt("> ");
    rl.prompt();
  }
  for await (const line of rl) {
    if (line.trim() !== "") {
      messages.push({ role: "user", content: line });
      interrupt.rearm();
      generating = true;
      let prompt: number[];
      try {
        prompt = await chatTokens(model, messages, interrupt.signal);
      } catch (err) {
        generating = false;
        if (!interrupt.interrupted) throw err;
        // Ctrl-C while the template renders: this message is dropped, the conversation goes on
        messages.pop();
        if (tty) rl.prompt();
        continue;
      }
      let generation;
      try {
        generation = await streamGeneration(session, prompt, { ...generateOptions(f), signal: interrupt.signal }, out, f.json === true);
      } catch (err) {
        throw fileError(model.path, err);
      } finally {
        generating = false;
      }
      messages.push({ role: "assistant", content: generation.text });
      if (f.json) out.line(JSON.stringify(doneEvent(prompt, generation)));
      else out.write(generation.text.endsWith("\n") ? "\n" : "\n\n");
      if (generation.result.stopReason === "context") {
        process.stderr.write("guild: the context is full; starting a new conversation\n");
        messages.length = 0;
        session.reset();
      }
      if (out.closed) break;
    }
    if (tty) rl.prompt();
  }
  rl.close();
  await out.flush();
  return exitOk;
}

async function run(argv: readonly string[]): Promise<number> {
  const f = parseFlags(argv, flags, usage);
  if (f.prompt !== undefined && f["prompt-tokens"] !== undefined) {
    throw new UsageError("give only one of --prompt and --prompt-tokens", usage);
  }
  if (f.chat && f["prompt-tokens"] !== undefined) {
    throw new UsageError("--chat renders the chat template around --prompt; it cannot take --prompt-tokens", usage);
  }
  if (!f.chat && f.prompt === undefined && f["prompt-tokens"] === undefined) {
    throw new UsageError("give --prompt TEXT or --prompt-tokens IDS (or --chat)", usage);
  }
  const gpu = gpuFlag(f.gpu, usage);
  const gpuPeers = gpuPeersFlag(f["gpu-peers"], gpu, usage);
  const gpuPeerBudgetGiB = gpuPeerBudgetFlag(f["gpu-peer-budget"], gpuPeers, usage);
  checkSpeculativeFlags(f, usage);
  const file = f.model ?? defaultModelPath();
  const interrupt = new Interrupt();
  const out = new Output();
  let model: GuildModel | undefined;
  let session: GuildSession | undefined;
  try {
    try {
      model = await openModel(file, {
        threads: f.threads,
        contextSize: f.ctx,
        kvCacheType: f["kv-type"],
        packagesDir: f["packages-dir"],
        gpu,
        gpuBudgetGiB: f["gpu-budget"],
        expertsOnCpu: f["experts-cpu"],
        gpuPeers,
        gpuPeerBudgetGiB,
        signal: interrupt.signal,
      });
    } catch (err) {
      if (interrupt.interrupted) return exitInterrupted;
      throw err;
    }
    try {
      session = await model.createSession(f.ctx !== undefined ? { contextSize: f.ctx } : {});
    } catch (err) {
      throw fileError(file, err);
    }
    // --draft mtp needs the model's MTP block: said once, before anything is printed.
    const drafter = model.drafter();
    if (f.draft === "mtp" && !drafter.mtp) throw fileError(file, `--draft mtp: ${drafter.reason}`);
    // The load's StartupProfile (docs/STARTUP_PROFILE.md): to a file, and as
    // the first JSON Lines event, before any token.
    const profile = model.startupProfile();
    if (f["profile-out"] !== undefined) {
      try {
        await writeFile(f["profile-out"], JSON.stringify(profile, null, 2) + "\n");
      } catch (err) {
        throw fileError(f["profile-out"], err);
      }
    }
    if (f.json) out.line(JSON.stringify({ event: "profile", profile }));
    if (f.chat && f.prompt === undefined) return await runInteractive(model, session, f, interrupt, out);
    return await runOnce(model, session, f, interrupt, out);
  } finally {
    session?.dispose();
    model?.dispose();
    interrupt.dispose();
  }
}

export const runCommand: Command = {
  name: "run",
  summary: "generate text from a prompt (or chat with --chat)",
  usage,
  run,
};
