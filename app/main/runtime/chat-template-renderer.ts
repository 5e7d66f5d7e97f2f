// Renders chat templates off the event loop: one long-lived worker thread
// (chat-template-worker.ts) takes the renders one at a time, in call order.
// The worker meters steps and output itself; this side enforces the time limit
// (a timer, then Worker.terminate, which stops even a tight loop) and the
// memory limit (Worker resourceLimits). When any limit trips, or a render is
// aborted while it runs, the worker is terminated and the next render starts a
// fresh one. The worker is unref'd: an idle renderer never keeps a process alive.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";

import {
  ChatTemplateError,
  limitError,
  quoteUntrusted,
  type ChatTemplateLimits,
  type RenderJob,
  type WorkerMessage,
} from "./chat-template-limits.js";

/** One render: the template, its variables, and how to name the template in errors. */
export interface RenderRequest {
  source: string;
  messages: readonly { role: string; content: string }[];
  bosToken: string;
  eosToken: string;
  addGenerationPrompt: boolean;
  /** The template's `reasoning_effort` variable; absent = not defined. */
  reasoningEffort?: string | undefined;
  /** Names the template in errors, e.g. "the chat template of model.gguf". */
  templateName: string;
  /** Output size limit for this render, in characters. */
  maxOutputChars: number;
  /** Aborting drops a waiting render, or stops a running one (terminating the worker). */
  signal?: AbortSignal | undefined;
}

interface Job {
  job: RenderJob;
  templateName: string;
  signal: AbortSignal | undefined;
  resolve: (text: string) => void;
  reject: (err: unknown) => void;
  onAbort: () => void;
}

/** How long a fresh worker may take to load before its render fails (a loaded machine, not a template, is slow here). */
const workerStartTimeoutMs = 30_000;

/**
 * Under vitest the app runs from its .ts sources, and a worker thread is plain
 * Node, which runs no TypeScript: the worker file (it has type imports only)
 * is then transpiled once with the typescript package, a dev dependency, and
 * each worker runs that as CommonJS. The compiled app (dist/) starts
 * chat-template-worker.js directly.
 */
const sourceWorkerBootstrap = `
const { workerData } = require("node:worker_threads");
const { createRequire } = require("node:module");
const path = require("node:path");
const vm = require("node:vm");
const { entry, code } = workerData;
const module = { exports: {} };
vm.compileFunction(code, ["exports", "require", "module", "__filename", "__dirname"], { filename: entry })(
  module.exports, createRequire(entry), module, entry, path.dirname(entry));
`;

let transpiledWorker: { entry: string; code: string } | undefined;

function sourceWorker(): { entry: string; code: string } {
  if (transpiledWorker) return transpiledWorker;
  const entry = fileURLToPath(new URL("./chat-template-worker.ts", import.meta.url));
  const ts = createRequire(import.meta.url)("typescript") as typeof import("typescript");
  const code = ts.transpileModule(readFileSync(entry, "utf8"), {
    fileName: entry,
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 },
  }).outputText;
  transpiledWorker = { entry, code };
  return transpiledWorker;
}

function startWorker(memoryMiB: number): Worker {
  const options = { resourceLimits: { maxOldGenerationSizeMb: memoryMiB }, execArgv: [] };
  if (import.meta.url.endsWith(".ts")) return new Worker(sourceWorkerBootstrap, { ...options, eval: true, workerData: sourceWorker() });
  return new Worker(new URL("./chat-template-worker.js", import.meta.url), options);
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("The operation was aborted", "AbortError");
}

export class ChatTemplateRenderer {
  private worker: Worker | null = null;
  private ready = false;
  private readonly waiting: Job[] = [];
  private running: Job | null = null;
  /** The running render's time limit, or the fresh worker's start timeout. */
  private timer: ReturnType<typeof setTimeout> | null = null;
  private nextId = 1;
  private closed = false;

  constructor(readonly limits: Readonly<ChatTemplateLimits>) {}

  /** Resolves with the rendered text, or rejects with a ChatTemplateError (or the signal's reason). */
  render(request: RenderRequest): Promise<string> {
    const { signal } = request;
    if (this.closed) return Promise.reject(new ChatTemplateError("the chat template renderer is closed", "renderer"));
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    return new Promise<string>((resolve, reject) => {
      const job: Job = {
        job: {
          id: this.nextId++,
          source: request.source,
          messages: request.messages.map((m) => ({ role: m.role, content: m.content })),
          bosToken: request.bosToken,
          eosToken: request.eosToken,
          addGenerationPrompt: request.addGenerationPrompt,
          ...(request.reasoningEffort !== undefined ? { reasoningEffort: request.reasoningEffort } : {}),
          maxSteps: this.limits.maxSteps,
          maxOutputChars: request.maxOutputChars,
        },
        templateName: request.templateName,
        signal,
        resolve,
        reject,
        onAbort: () => this.abort(job),
      };
      signal?.addEventListener("abort", job.onAbort, { once: true });
      this.waiting.push(job);
      this.pump();
    });
  }

  /** Fails the waiting and running renders and stops the worker. */
  async close(): Promise<void> {
    this.closed = true;
    const jobs = [...(this.running ? [this.running] : []), ...this.waiting.splice(0)];
    this.running = null;
    const worker = this.stopWorker();
    for (const j of jobs) this.settle(j, new ChatTemplateError("the chat template renderer is closed", "renderer"));
    await worker?.terminate();
  }

  /** Starts the next render when the worker is free (starting a worker if there is none). */
  private pump(): void {
    if (this.running !== null || this.waiting.length === 0) return;
    if (this.worker === null) this.spawn();
    if (!this.ready) return;
    const job = this.waiting.shift()!;
    this.running = job;
    this.worker!.postMessage(job.job);
    this.timer = setTimeout(() => this.fail(job, limitError(job.templateName, "time", this.limits, job.job.maxOutputChars)), this.limits.timeMs);
  }

  private spawn(): void {
    let worker: Worker;
    try {
      worker = startWorker(this.limits.memoryMiB);
    } catch (err) {
      this.failAll(new ChatTemplateError(`cannot start the chat template renderer: ${quoteUntrusted(String((err as Error)?.message ?? err))}`, "renderer"));
      return;
    }
    this.worker = worker;
    this.ready = false;
    this.timer = setTimeout(() => {
      this.stopWorker();
      this.failAll(new ChatTemplateError("the chat template renderer did not start", "renderer"));
    }, workerStartTimeoutMs);
    worker.on("message", (message: WorkerMessage) => {
      if (this.worker !== worker) return;
      if ("ready" in message) {
        this.clearTimer();
        this.ready = true;
        this.pump();
        return;
      }
      const job = this.running;
      if (job === null || message.id !== job.job.id) return;
      if (message.ok) this.finish(job, message.text);
      else if ("limit" in message) this.fail(job, limitError(job.templateName, message.limit, this.limits, job.job.maxOutputChars));
      else this.finish(job, new ChatTemplateError(`${job.templateName} failed: ${quoteUntrusted(message.error)}`, "template"));
    });
    worker.on("error", (err: Error & { code?: string }) => {
      if (this.worker !== worker) return;
      this.stopWorker();
      const job = this.running;
      const error = err.code === "ERR_WORKER_OUT_OF_MEMORY" && job
        ? limitError(job.templateName, "memory", this.limits, job.job.maxOutputChars)
        : new ChatTemplateError(`the chat template renderer failed: ${quoteUntrusted(String(err?.message ?? err))}`, "renderer");
      if (job) this.settleRunning(job, error);
      else this.failAll(error); // it failed to start: nothing could run
    });
    worker.on("exit", (code) => {
      if (this.worker !== worker) return;
      this.stopWorker();
      const error = new ChatTemplateError(`the chat template renderer stopped (exit code ${code})`, "renderer");
      if (this.running) this.settleRunning(this.running, error);
      else this.failAll(error);
    });
    // After the listeners: adding a "message" listener refs the worker again.
    worker.unref();
  }

  /** The running render ended normally: the worker stays for the next one. */
  private finish(job: Job, result: string | ChatTemplateError): void {
    this.clearTimer();
    this.running = null;
    this.settle(job, result);
    this.pump();
  }

  /** A limit tripped (or the render was aborted) while running: replace the worker. */
  private fail(job: Job, error: unknown): void {
    this.stopWorker();
    this.settleRunning(job, error);
  }

  private settleRunning(job: Job, error: unknown): void {
    this.clearTimer();
    if (this.running === job) this.running = null;
    this.settle(job, error);
    this.pump();
  }

  private abort(job: Job): void {
    const reason = abortReason(job.signal!);
    if (this.running === job) {
      this.fail(job, reason);
      return;
    }
    const i = this.waiting.indexOf(job);
    if (i >= 0) {
      this.waiting.splice(i, 1);
      this.settle(job, reason);
    }
  }

  private failAll(error: unknown): void {
    for (const j of this.waiting.splice(0)) this.settle(j, error);
  }

  private settle(job: Job, result: unknown): void {
    job.signal?.removeEventListener("abort", job.onAbort);
    if (typeof result === "string") job.resolve(result);
    else job.reject(result);
  }

  /** Detaches and terminates the worker (asynchronously); the next render starts another. */
  private stopWorker(): Worker | null {
    this.clearTimer();
    const worker = this.worker;
    this.worker = null;
    this.ready = false;
    if (worker) {
      worker.removeAllListeners();
      worker.on("error", () => undefined);
      void worker.terminate();
    }
    return worker;
  }

  private clearTimer(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }
}
