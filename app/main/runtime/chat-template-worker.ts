// The chat-template render worker: renders a model's untrusted Jinja with
// @huggingface/jinja's own Template (so the text is exactly what it renders
// today) while metering the interpreter, so that a runaway template stops
// after a fixed number of steps, or as soon as it builds a string larger than
// the output limit. Time and memory are limited from outside by the main
// thread (chat-template-renderer.ts: a timer, Worker resourceLimits).
//
// Only type imports from this project: when the app runs from its TypeScript
// sources (vitest) this one file is transpiled on its own.
import { parentPort } from "node:worker_threads";

import { Interpreter, Template, type Environment } from "@huggingface/jinja";

import type { RenderJob, RenderReply, WorkerMessage } from "./chat-template-limits.js";

/** An AST node, as far as the meter looks at it (the package does not export its AST types). */
interface Statement {
  type: string;
}
/** A runtime value (IntegerValue, StringValue, ArrayValue, ...). */
interface Value {
  type: string;
  value: unknown;
}
type Evaluate = (this: Interpreter, statement: Statement | undefined, environment: Environment) => Value;

class LimitExceeded extends Error {
  constructor(readonly limit: "steps" | "output") {
    super(`render ${limit} limit exceeded`);
  }
}

/** The running render's allowance. */
interface Meter {
  stepsLeft: number;
  maxOutputChars: number;
  /** Once a limit trips every later step throws again, whatever catches the first throw. */
  tripped: LimitExceeded | null;
  /** The nodes whose value a for loop iterates over: their length is charged as steps. */
  loopIterables: WeakSet<Statement>;
  /** The lists and mappings already charged for their size. */
  charged: WeakSet<object>;
}

let meter: Meter | null = null;

/**
 * What one loop iteration costs, in steps: the interpreter builds a scope and
 * the nine-entry `loop` object for each, about five node evaluations' work.
 */
const stepsPerLoopIteration = 5;

function trip(m: Meter, limit: "steps" | "output"): never {
  m.tripped ??= new LimitExceeded(limit);
  throw m.tripped;
}

function spend(m: Meter, steps: number): void {
  m.stepsLeft -= steps;
  if (m.stepsLeft < 0) trip(m, "steps");
}

/** The node a for loop takes its items from (`for x in xs if c` iterates xs). */
function loopSource(node: Statement): Statement {
  const iterable = (node as Statement & { iterable: Statement & { lhs?: Statement } }).iterable;
  return iterable.type === "SelectExpression" && iterable.lhs ? iterable.lhs : iterable;
}

function itemCount(value: Value): number {
  const v = value.value;
  if (Array.isArray(v)) return v.length;
  if (v instanceof Map) return v.size;
  return 0;
}

/**
 * What a value costs, besides its node's step. Memory is bounded here rather
 * than by the worker's heap limit alone: a V8 heap limit reached inside one
 * large allocation (a list doubling, a huge join) aborts the whole process,
 * not just the worker (nodejs/node#47224). So every list or mapping costs one
 * step per item the first time the template holds it, and every string one
 * step per KiB each time it is produced, and no string may be longer than the
 * output limit: a template cannot build up more data than its step budget.
 */
function chargeValue(m: Meter, value: Value): void {
  const v = value.value;
  if (typeof v === "string") {
    if (v.length > m.maxOutputChars) trip(m, "output");
    if (v.length >= 1024) spend(m, v.length >>> 10);
  } else if (typeof v === "object" && v !== null && !m.charged.has(v)) {
    m.charged.add(v);
    spend(m, itemCount(value));
  }
}

/**
 * range() as @huggingface/jinja defines it (same arguments, same coercions,
 * same items), but every item costs a step: a huge range trips the step
 * limit instead of allocating a billion-element array first (`range(1000000000)`).
 */
function meteredRange(m: Meter) {
  return (start: unknown, stop?: unknown, step: unknown = 1): unknown[] => {
    let from = start as number;
    let to = stop as number;
    if (stop === undefined) {
      to = from;
      from = 0;
    }
    if (step === 0) throw new Error("range() step must not be zero");
    const by = step as number;
    const items: unknown[] = [];
    const more = by > 0 ? (i: number) => i < to : (i: number) => i > to;
    for (let i = from; more(i); i += by) {
      spend(m, 1);
      items.push(i);
    }
    return items;
  };
}

// The hook: Interpreter.evaluate is public and every node, the loop bodies'
// included, is evaluated through `this.evaluate`, so wrapping it sees every
// step. This worker exists only to render templates, so the wrap is global to
// it and inert (one null check) outside a render.
const prototype = Interpreter.prototype as unknown as { evaluate: Evaluate };
const evaluate = prototype.evaluate;
prototype.evaluate = function meteredEvaluate(statement, environment) {
  const m = meter;
  if (m === null || statement === undefined) return evaluate.call(this, statement, environment);
  if (m.tripped) throw m.tripped;
  spend(m, 1);
  if (statement.type === "Program" && environment === this.global) {
    environment.variables.delete("range");
    environment.set("range", meteredRange(m));
  } else if (statement.type === "For") {
    m.loopIterables.add(loopSource(statement));
  }
  const value = evaluate.call(this, statement, environment);
  if (m.loopIterables.has(statement)) spend(m, itemCount(value) * stepsPerLoopIteration);
  chargeValue(m, value);
  return value;
};

function messageOf(err: unknown): string {
  try {
    return err instanceof Error ? String(err.message) : String(err);
  } catch {
    return "unknown error";
  }
}

function render(job: RenderJob): RenderReply {
  const m: Meter = { stepsLeft: job.maxSteps, maxOutputChars: job.maxOutputChars, tripped: null, loopIterables: new WeakSet(), charged: new WeakSet() };
  meter = m;
  try {
    const text = new Template(job.source).render({
      messages: job.messages,
      add_generation_prompt: job.addGenerationPrompt,
      bos_token: job.bosToken,
      eos_token: job.eosToken,
      ...(job.reasoningEffort !== undefined ? { reasoning_effort: job.reasoningEffort } : {}),
    });
    if (typeof text !== "string") return { id: job.id, ok: false, error: "the template did not render to text" };
    if (text.length > job.maxOutputChars) return { id: job.id, ok: false, limit: "output" };
    return { id: job.id, ok: true, text };
  } catch (err) {
    if (m.tripped) return { id: job.id, ok: false, limit: m.tripped.limit };
    // Only the start of the message goes back: it may quote the template.
    return { id: job.id, ok: false, error: messageOf(err).slice(0, 1000) };
  } finally {
    meter = null;
  }
}

parentPort?.on("message", (job: RenderJob) => parentPort?.postMessage(render(job)));
parentPort?.postMessage({ ready: true } satisfies WorkerMessage);
