// The OpenAI-compatible API as a RouteModule for ApiServer: /v1/models,
// /v1/chat/completions, /v1/completions, /health, and Guild's extras
// /guild/v1/profile and /guild/v1/queue. Generations go through RuntimeHost,
// so API requests share the one FIFO queue with the GUI; a streaming client
// waiting in it is told its position with SSE comments, and a client that goes
// away cancels its generation (or leaves the queue) at once. A chat reply's
// reasoning (`<think>` or gpt-oss's harmony channels) is answered apart from
// its content, as reasoning_content. docs/API.md.
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import path from "node:path";

import { splitReply } from "../../shared/reply-channels.js";
import { ReplyStream, type ReplyDelta } from "../../shared/reply-stream.js";
import {
  draftModes,
  reasoningEfforts,
  specMaxRange,
  specMinPRange,
  specRules,
  speculativeUsage,
  type ChatMessage,
  type GenerationInput,
  type GenerationRequest,
  type GenerationResult,
  type LoadedModel,
  type ReasoningEffort,
  type RuntimeEvent,
  type SamplingSettings,
  type SpeculativeSettings,
  type StopReason,
} from "../../shared/runtime-contract.js";
import type { RouteModule } from "./http-routes.js";
import { RuntimeError, type RuntimeHost } from "./runtime-host.js";

export const defaultMaxBodyBytes = 1024 * 1024;
/** How often a waiting streaming client is reminded of its queue position. */
export const queueHeartbeatMs = 10_000;

// ---------------------------------------------------------------------------
// Errors in OpenAI's shape

export type ApiErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "permission_error"
  | "not_found_error"
  | "rate_limit_error"
  | "server_error";

/** An error answered as `{"error":{"message","type","param","code"}}` with `status`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type: ApiErrorType = "invalid_request_error",
    readonly param: string | null = null,
    readonly code: string | null = null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = "ApiError";
  }
}

export function errorBody(err: ApiError): string {
  return JSON.stringify({ error: { message: err.message, type: err.type, param: err.param, code: err.code } });
}

/** Answers an ApiError (or, for anything else, a 500) unless the response already started. */
export function sendError(res: ServerResponse, err: unknown): void {
  const e = err instanceof ApiError ? err : new ApiError(500, "internal server error", "server_error", null, "internal_error");
  if (res.headersSent) {
    if (!res.writableEnded) res.end();
    return;
  }
  const body = errorBody(e);
  res.writeHead(e.status, {
    ...e.headers,
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(body),
  });
  res.end(body);
}

export function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const body = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

// ---------------------------------------------------------------------------
// Request bodies

/** Reads the whole body (at most maxBytes, else 413) and parses it as a JSON object (else 400). */
export async function readJsonObject(req: IncomingMessage, maxBytes: number): Promise<Record<string, unknown>> {
  const type = req.headers["content-type"];
  if (type !== undefined && !/^\s*application\/json\s*(;|$)/i.test(type))
    throw new ApiError(400, `unsupported content-type ${JSON.stringify(type)}: send application/json`, "invalid_request_error", null, "invalid_content_type");
  const tooLarge = () => new ApiError(413, `the request body is larger than ${maxBytes} bytes`, "invalid_request_error", null, "request_too_large", { connection: "close" });
  const declared = Number(req.headers["content-length"] ?? NaN);
  if (Number.isFinite(declared) && declared > maxBytes) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        req.off("data", onData);
        req.resume();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    };
    req.on("data", onData);
    req.once("end", () => resolve());
    req.once("error", (err) => reject(new ApiError(400, `cannot read the request body: ${err.message}`)));
    req.once("aborted", () => reject(new ApiError(400, "the request was aborted")));
  });
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.trim() === "") throw new ApiError(400, "the request body is empty: send a JSON object", "invalid_request_error", null, "invalid_json");
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new ApiError(400, `the request body is not valid JSON: ${(err as Error).message}`, "invalid_request_error", null, "invalid_json");
  }
  if (value === null || typeof value !== "object" || Array.isArray(value))
    throw new ApiError(400, "the request body must be a JSON object", "invalid_request_error", null, "invalid_json");
  return value as Record<string, unknown>;
}

// ---------------------------------------------------------------------------
// Field validation

const invalid = (param: string, message: string) => new ApiError(400, `${param}: ${message}`, "invalid_request_error", param, "invalid_value");
const typeName = (v: unknown) => (v === null ? "null" : Array.isArray(v) ? "array" : typeof v);

/**
 * The ranges of the numeric fields (docs/API.md, "Parameters"). The sampler
 * works in 32-bit floats, so each range keeps its values meaningful there:
 * top_p and repeat_penalty have floors (1e-300 would round to 0 and a huge
 * penalty to Infinity), and every bound is finite, which also refuses the
 * Infinity that JSON.parse makes of 1e400.
 */
export const numberRanges = {
  temperature: { min: 0, max: 2 },
  top_p: { min: 1e-6, max: 1 },
  min_p: { min: 0, max: 1 },
  repeat_penalty: { min: 0.01, max: 10 },
  frequency_penalty: { min: -2, max: 2 },
  presence_penalty: { min: -2, max: 2 },
  spec_min_p: specMinPRange,
} as const;

export const integerRanges = {
  top_k: { min: 0, max: 2 ** 31 - 1 },
  seed: { min: 0, max: Number.MAX_SAFE_INTEGER },
  max_tokens: { min: 1, max: 2 ** 31 - 1 },
  max_completion_tokens: { min: 1, max: 2 ** 31 - 1 },
  n: { min: 1, max: 128 },
  best_of: { min: 1, max: 20 },
  top_logprobs: { min: 0, max: 20 },
  spec_max: specMaxRange,
} as const;

function optNumber(body: Record<string, unknown>, name: keyof typeof numberRanges): number | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number") throw invalid(name, `expected a number, got ${typeName(v)}`);
  const { min, max } = numberRanges[name];
  if (!(v >= min && v <= max)) throw invalid(name, `must be between ${min} and ${max} (got ${v})`);
  return v;
}

function optInt(body: Record<string, unknown>, name: keyof typeof integerRanges): number | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number") throw invalid(name, `expected an integer, got ${typeName(v)}`);
  const { min, max } = integerRanges[name];
  if (!Number.isInteger(v) || v < min || v > max) throw invalid(name, `must be an integer between ${min} and ${max} (got ${v})`);
  return v;
}

function optBool(body: Record<string, unknown>, name: string): boolean | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "boolean") throw invalid(name, `expected a boolean, got ${typeName(v)}`);
  return v;
}

/** reasoning_effort: the chat template's `reasoning_effort` variable (gpt-oss's harmony templates read it); absent or null = the template's default. */
function optReasoningEffort(body: Record<string, unknown>): ReasoningEffort | undefined {
  const v = body["reasoning_effort"];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string" || !(reasoningEfforts as readonly string[]).includes(v))
    throw invalid("reasoning_effort", `must be ${reasoningEfforts.map((e) => JSON.stringify(e)).join(", ").replace(/, ([^,]+)$/, " or $1")} (got ${typeof v === "string" ? JSON.stringify(v.slice(0, 40)) : typeName(v)})`);
  return v as ReasoningEffort;
}

/** A string field with a fixed set of values; absent or null = undefined. */
function optChoice<T extends string>(body: Record<string, unknown>, name: string, choices: readonly T[]): T | undefined {
  const v = body[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string" || !(choices as readonly string[]).includes(v))
    throw invalid(name, `must be ${choices.map((c) => JSON.stringify(c)).join(", ").replace(/, ([^,]+)$/, " or $1")} (got ${typeof v === "string" ? JSON.stringify(v.slice(0, 40)) : typeName(v)})`);
  return v as T;
}

/**
 * Guild's speculative-decoding extras (docs/SPECULATIVE.md): `draft` ("auto": the model's MTP block
 * drafts when it has one; "mtp": 400 without one; "none"), `spec_max` (S, 1..16), `spec_min_p` (0..1),
 * `spec_rule` ("cost" | "confidence"). Absent: the model's load settings, by default draft "auto".
 */
function parseSpeculative(body: Record<string, unknown>): SpeculativeSettings {
  const out: SpeculativeSettings = {};
  const draft = optChoice(body, "draft", draftModes);
  if (draft !== undefined) out.draft = draft;
  const specMax = optInt(body, "spec_max");
  if (specMax !== undefined) out.specMax = specMax;
  const specMinP = optNumber(body, "spec_min_p");
  if (specMinP !== undefined) out.specMinP = specMinP;
  const specRule = optChoice(body, "spec_rule", specRules);
  if (specRule !== undefined) out.specRule = specRule;
  return out;
}

/** Fields OpenAI defines whose only supported value is "off"; anything else is refused, not silently ignored. */
function refuseUnsupported(body: Record<string, unknown>, name: string, isOff: (v: unknown) => boolean, why: string): void {
  const v = body[name];
  if (v === undefined || v === null) return;
  if (!isOff(v)) throw new ApiError(400, `${name}: ${why}`, "invalid_request_error", name, "unsupported_value");
}

interface Common {
  model: string | undefined;
  stream: boolean;
  includeUsage: boolean;
  sampling: SamplingSettings;
  stop: string[];
  speculative: SpeculativeSettings;
}

const commonFields = [
  "model", "stream", "stream_options", "temperature", "top_p", "max_tokens", "stop", "seed", "n", "top_k", "min_p",
  "repeat_penalty", "frequency_penalty", "presence_penalty", "logit_bias", "logprobs", "user", "metadata", "store",
  "service_tier", "draft", "spec_max", "spec_min_p", "spec_rule",
];

function checkFields(body: Record<string, unknown>, allowed: readonly string[]): void {
  for (const key of Object.keys(body))
    if (!allowed.includes(key))
      throw new ApiError(400, `unrecognized request argument supplied: ${key}`, "invalid_request_error", key, "unknown_parameter");
}

function parseCommon(body: Record<string, unknown>, maxTokensFields: readonly ("max_tokens" | "max_completion_tokens")[]): Common {
  const model = body["model"];
  if (model !== undefined && model !== null && typeof model !== "string") throw invalid("model", `expected a string, got ${typeName(model)}`);
  const stream = optBool(body, "stream") ?? false;
  let includeUsage = false;
  const so = body["stream_options"];
  if (so !== undefined && so !== null) {
    if (typeof so !== "object" || Array.isArray(so)) throw invalid("stream_options", `expected an object, got ${typeName(so)}`);
    for (const key of Object.keys(so))
      if (key !== "include_usage" && key !== "include_obfuscation")
        throw new ApiError(400, `unrecognized stream option: ${key}`, "invalid_request_error", `stream_options.${key}`, "unknown_parameter");
    const iu = (so as Record<string, unknown>)["include_usage"];
    if (iu !== undefined && iu !== null && typeof iu !== "boolean") throw invalid("stream_options.include_usage", `expected a boolean, got ${typeName(iu)}`);
    includeUsage = iu === true;
  }
  const sampling: SamplingSettings = {};
  const temperature = optNumber(body, "temperature");
  if (temperature !== undefined) sampling.temperature = temperature;
  const topP = optNumber(body, "top_p");
  if (topP !== undefined) sampling.topP = topP;
  const topK = optInt(body, "top_k");
  if (topK !== undefined) sampling.topK = topK;
  const minP = optNumber(body, "min_p");
  if (minP !== undefined) sampling.minP = minP;
  const repeatPenalty = optNumber(body, "repeat_penalty");
  if (repeatPenalty !== undefined) sampling.repeatPenalty = repeatPenalty;
  const seed = optInt(body, "seed");
  if (seed !== undefined) sampling.seed = seed;
  let maxTokens: number | undefined;
  for (const name of maxTokensFields) {
    const v = optInt(body, name);
    if (v === undefined) continue;
    if (maxTokens !== undefined && v !== maxTokens) throw invalid(name, `disagrees with ${maxTokensFields[0]}`);
    maxTokens = v;
  }
  if (maxTokens !== undefined) sampling.maxTokens = maxTokens;

  let stop: string[] = [];
  const s = body["stop"];
  if (typeof s === "string") stop = [s];
  else if (Array.isArray(s)) {
    if (s.length > 16) throw invalid("stop", "at most 16 stop strings");
    s.forEach((x, i) => { if (typeof x !== "string") throw invalid(`stop[${i}]`, `expected a string, got ${typeName(x)}`); });
    stop = s as string[];
  } else if (s !== undefined && s !== null) throw invalid("stop", `expected a string or an array of strings, got ${typeName(s)}`);
  stop = stop.filter((x) => x.length > 0);

  const n = optInt(body, "n");
  if (n !== undefined && n !== 1) throw new ApiError(400, "n: only n = 1 is supported", "invalid_request_error", "n", "unsupported_value");
  optNumber(body, "frequency_penalty");
  optNumber(body, "presence_penalty");
  refuseUnsupported(body, "frequency_penalty", (v) => v === 0, "not supported (use repeat_penalty)");
  refuseUnsupported(body, "presence_penalty", (v) => v === 0, "not supported (use repeat_penalty)");
  refuseUnsupported(body, "logit_bias", (v) => typeof v === "object" && !Array.isArray(v) && Object.keys(v as object).length === 0, "not supported");
  // A boolean in chat, an integer in the legacy completions API: either way only "none".
  const logprobs = body["logprobs"];
  if (logprobs !== undefined && logprobs !== null && typeof logprobs !== "boolean" && typeof logprobs !== "number")
    throw invalid("logprobs", `expected a boolean, got ${typeName(logprobs)}`);
  refuseUnsupported(body, "logprobs", (v) => v === false, "not supported (only false or null)");
  const user = body["user"];
  if (user !== undefined && user !== null && typeof user !== "string") throw invalid("user", `expected a string, got ${typeName(user)}`);
  const speculative = parseSpeculative(body);
  return { model: typeof model === "string" ? model : undefined, stream, includeUsage, sampling, stop, speculative };
}

/** Fields of the assistant message this API answers with, which a client may send back in its history. */
const assistantEchoFields = ["reasoning_content", "refusal"];

function parseMessages(body: Record<string, unknown>): ChatMessage[] {
  const raw = body["messages"];
  if (raw === undefined) throw new ApiError(400, "messages: required", "invalid_request_error", "messages", "missing_required_parameter");
  if (!Array.isArray(raw)) throw invalid("messages", `expected an array, got ${typeName(raw)}`);
  if (raw.length === 0) throw invalid("messages", "must contain at least one message");
  return raw.map((m: unknown, i): ChatMessage => {
    const at = `messages[${i}]`;
    if (m === null || typeof m !== "object" || Array.isArray(m)) throw invalid(at, `expected an object, got ${typeName(m)}`);
    const msg = m as Record<string, unknown>;
    for (const key of Object.keys(msg))
      if (key !== "role" && key !== "content" && key !== "name" && !assistantEchoFields.includes(key))
        throw new ApiError(400, `${at}.${key}: not supported`, "invalid_request_error", `${at}.${key}`, "unsupported_value");
    const role = msg["role"];
    if (typeof role !== "string") throw invalid(`${at}.role`, `expected a string, got ${typeName(role)}`);
    const mapped = role === "developer" ? "system" : role;
    if (mapped !== "system" && mapped !== "user" && mapped !== "assistant")
      throw invalid(`${at}.role`, `must be system, developer, user or assistant (got ${JSON.stringify(role)})`);
    const name = msg["name"];
    if (name !== undefined && typeof name !== "string") throw invalid(`${at}.name`, `expected a string, got ${typeName(name)}`);
    // A client sends back the assistant message it was given, reasoning and
    // all. Accepted and left out: templates read an earlier turn's answer only.
    for (const key of assistantEchoFields) {
      const v = msg[key];
      if (v === undefined || v === null) continue;
      if (mapped !== "assistant")
        throw new ApiError(400, `${at}.${key}: only assistant messages have it`, "invalid_request_error", `${at}.${key}`, "unsupported_value");
      if (typeof v !== "string") throw invalid(`${at}.${key}`, `expected a string, got ${typeName(v)}`);
    }
    const content = msg["content"];
    let text: string;
    if (typeof content === "string") text = content;
    else if (content === null && mapped === "assistant") text = "";
    else if (Array.isArray(content)) {
      text = content.map((part: unknown, j) => {
        const p = part as Record<string, unknown> | null;
        if (p === null || typeof p !== "object" || Array.isArray(p)) throw invalid(`${at}.content[${j}]`, `expected an object, got ${typeName(part)}`);
        if (p["type"] !== "text") throw new ApiError(400, `${at}.content[${j}].type: only "text" parts are supported`, "invalid_request_error", `${at}.content[${j}].type`, "unsupported_value");
        if (typeof p["text"] !== "string") throw invalid(`${at}.content[${j}].text`, `expected a string, got ${typeName(p["text"])}`);
        return p["text"];
      }).join("");
    } else throw invalid(`${at}.content`, `expected a string or an array of text parts, got ${typeName(content)}`);
    return { role: mapped, content: text };
  });
}

function parsePrompt(body: Record<string, unknown>): GenerationInput {
  let p = body["prompt"];
  if (p === undefined) throw new ApiError(400, "prompt: required", "invalid_request_error", "prompt", "missing_required_parameter");
  if (Array.isArray(p) && p.length === 1 && (typeof p[0] === "string" || Array.isArray(p[0]))) p = p[0];
  if (typeof p === "string") {
    if (p.length === 0) throw invalid("prompt", "must not be empty");
    return { kind: "text", text: p };
  }
  if (Array.isArray(p) && p.length > 0 && p.every((t) => typeof t === "number")) {
    const bad = p.findIndex((t) => !Number.isInteger(t) || t < 0 || t > 2 ** 31 - 1);
    if (bad >= 0) throw invalid(`prompt[${bad}]`, `expected a token id (an integer from 0 to ${2 ** 31 - 1}), got ${p[bad]}`);
    return { kind: "tokens", tokens: p as number[] };
  }
  if (Array.isArray(p) && p.length > 1) throw new ApiError(400, "prompt: only one prompt per request is supported", "invalid_request_error", "prompt", "unsupported_value");
  throw invalid("prompt", `expected a string or an array of token ids, got ${typeName(p)}`);
}

// ---------------------------------------------------------------------------
// Models

/** The name the API shows for a model: its file name without the extension. */
export function apiModelName(model: LoadedModel): string {
  return path.basename(model.path, path.extname(model.path));
}

/** The loaded model a request names (by file name or RuntimeHost id); absent = the only/first loaded one. */
function resolveModel(runtime: RuntimeHost, name: string | undefined): LoadedModel {
  const models = runtime.listModels();
  if (models.length === 0) throw new ApiError(503, "no model is loaded", "server_error", null, "model_not_loaded");
  let model: LoadedModel | undefined;
  if (name === undefined || name === "") model = models[0];
  else model = models.find((m) => m.id === name) ?? models.find((m) => apiModelName(m) === name) ?? models.find((m) => m.name === name);
  if (model === undefined)
    throw new ApiError(404, `the model ${JSON.stringify(name)} does not exist; loaded: ${models.map(apiModelName).join(", ")}`, "invalid_request_error", "model", "model_not_found");
  if (!isReady(runtime, model)) throw new ApiError(503, `the model ${apiModelName(model)} is not ready (a device failed); reload it`, "server_error", null, "model_not_ready");
  return model;
}

/**
 * The native ready flag is also cleared while a generation runs on the device
 * (fail-closed readiness), so it means "failed" only while nothing runs.
 */
function isReady(runtime: RuntimeHost, model: LoadedModel): boolean {
  return model.ready || runtime.queueState(model.id).running !== null;
}

function finishReason(reason: StopReason): "stop" | "length" | null {
  switch (reason) {
    case "eos":
    case "stop":
      return "stop";
    case "length":
    case "context":
      return "length";
    case "cancel":
      return null;
  }
}

/** A streamed chat delta: the first one names the role; reasoning goes in reasoning_content, the answer in content. */
function chatDelta(delta: ReplyDelta | null, role: boolean): Record<string, unknown> {
  if (delta === null) return {};
  if (role) return { role: "assistant", content: delta.text };
  return delta.channel === "reasoning" ? { reasoning_content: delta.text } : { content: delta.text };
}

/** A whole chat reply: a reply without reasoning is its text as it is; one with reasoning has it apart, as reasoning_content. */
function chatMessageOf(text: string): Record<string, unknown> {
  const parts = splitReply(text, { complete: true });
  if (parts.format === "plain") return { role: "assistant", content: text, refusal: null };
  return { role: "assistant", content: parts.answer, ...(parts.reasoning ? { reasoning_content: parts.reasoning } : {}), refusal: null };
}

function usageOf(r: GenerationResult) {
  return {
    prompt_tokens: r.stats.promptTokens,
    completion_tokens: r.stats.generatedTokens,
    total_tokens: r.stats.promptTokens + r.stats.generatedTokens,
    // Guild's extra: how the reply was drafted (drafter, drafted and accepted tokens, windows, rates).
    speculative: speculativeUsage(r.stats),
  };
}

/** A GenerationRequest field as the API names it (specMax -> spec_max). */
function apiFieldName(field: string): string {
  return field.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

function runtimeToApi(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof RuntimeError) {
    switch (err.code) {
      case "queue_full":
        return new ApiError(429, err.message, "rate_limit_error", null, "queue_full", { "retry-after": "1" });
      case "invalid":
        return new ApiError(400, err.message, "invalid_request_error", err.field === undefined ? null : apiFieldName(err.field), "invalid_value");
      case "not_found":
        return new ApiError(404, err.message, "invalid_request_error", "model", "model_not_found");
      case "busy":
        return new ApiError(409, err.message, "invalid_request_error", null, "busy");
      case "cancelled":
        return new ApiError(503, err.message, "server_error", null, "cancelled");
      default:
        if (/context full|exceed the context/i.test(err.message))
          return new ApiError(400, err.message, "invalid_request_error", null, "context_length_exceeded");
        return new ApiError(500, err.message, "server_error", null, "generation_failed");
    }
  }
  // The chat template or tokenizer refused the input.
  return new ApiError(400, err instanceof Error ? err.message : String(err), "invalid_request_error", null, "invalid_value");
}

// ---------------------------------------------------------------------------
// Generation over HTTP

interface Shape {
  /** What one streamed chunk looks like for a text delta (null = the closing chunk). */
  chunk(delta: ReplyDelta | null, finish: "stop" | "length" | null, role: boolean): Record<string, unknown>;
  complete(result: GenerationResult): Record<string, unknown>;
  /** Turns the generated text, piece by piece, into the deltas the stream sends. */
  deltas(): { push(piece: string): ReplyDelta[]; end(): ReplyDelta[] };
}

/** The legacy completions API streams the text as it comes: it has no reasoning field. */
const passThrough = () => ({ push: (piece: string): ReplyDelta[] => [{ channel: "answer", text: piece }], end: (): ReplyDelta[] => [] });

export interface OpenAiRoutesOptions {
  /** Largest request body accepted; defaults to {@link defaultMaxBodyBytes}. */
  maxBodyBytes?: number;
  /** Called with each request id the API starts, and again (done = true) when it ends. */
  onGeneration?: (requestId: string, done: boolean) => void;
}

export function openAiRoutes(runtime: RuntimeHost, options: OpenAiRoutesOptions = {}): RouteModule {
  const maxBody = options.maxBodyBytes ?? defaultMaxBodyBytes;

  async function generate(res: ServerResponse, request: GenerationRequest, stream: boolean,
                          includeUsage: boolean, shapeFor: (id: string, created: number, model: string) => Shape, modelName: string): Promise<void> {
    const requestId = randomUUID();
    const created = Math.floor(Date.now() / 1000);
    const shape = shapeFor(requestId, created, modelName);
    const deltas = shape.deltas();
    let sse = false;
    let cancelledByClient = false;
    const write = (s: string) => { if (!res.writableEnded && !res.destroyed) res.write(s); };
    const openStream = () => {
      if (sse || res.headersSent) return;
      sse = true;
      res.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        "x-accel-buffering": "no",
        "x-guild-request-id": requestId,
      });
      res.flushHeaders();
    };
    // The stream opens at the first queue comment or the first text, so that a
    // request refused before either (a prompt too long for the context) still
    // gets its own status code.
    let roleSent = false;
    let position = 0;
    let heartbeat: ReturnType<typeof setInterval> | undefined;
    const opening = () => {
      openStream();
      if (roleSent) return;
      roleSent = true;
      write(`data: ${JSON.stringify(shape.chunk({ channel: "answer", text: "" }, null, true))}\n\n`);
    };
    const send = (ds: readonly ReplyDelta[]) => {
      for (const d of ds) {
        opening();
        write(`data: ${JSON.stringify(shape.chunk(d, null, false))}\n\n`);
      }
    };
    const listener = (e: RuntimeEvent) => {
      if (!stream) return;
      switch (e.type) {
        case "queued":
          if (e.requestId !== requestId) return;
          openStream();
          write(`: queue position ${e.position}\n\n`);
          // Repeat it while waiting, so a long wait is never a silent connection.
          position = e.position;
          heartbeat ??= setInterval(() => write(`: queue position ${position}\n\n`), queueHeartbeatMs);
          return;
        case "started":
          if (e.requestId !== requestId) return;
          if (heartbeat !== undefined) clearInterval(heartbeat);
          return;
        case "token":
          if (e.requestId !== requestId || e.text === "") return;
          send(deltas.push(e.text));
          return;
        default:
          return;
      }
    };
    const off = runtime.subscribe(listener);
    // A client that goes away before its answer is complete cancels the
    // generation, or takes it out of the queue.
    const onClose = () => {
      if (!res.writableFinished) {
        cancelledByClient = true;
        runtime.cancel(requestId);
      }
    };
    res.on("close", onClose);
    options.onGeneration?.(requestId, false);
    try {
      const result = await runtime.generate(request, requestId);
      if (cancelledByClient) return;
      if (result.stopReason === "cancel") throw new ApiError(503, "the generation was cancelled (the server is stopping)", "server_error", null, "cancelled");
      if (stream) {
        send(deltas.end());
        opening();
        write(`data: ${JSON.stringify(shape.chunk(null, finishReason(result.stopReason), false))}\n\n`);
        if (includeUsage) write(`data: ${JSON.stringify({ ...shape.chunk(null, null, false), choices: [], usage: usageOf(result) })}\n\n`);
        write("data: [DONE]\n\n");
        res.end();
      } else {
        sendJson(res, 200, shape.complete(result));
      }
    } catch (err) {
      if (cancelledByClient) return;
      const e = runtimeToApi(err);
      if (sse) {
        write(`data: ${errorBody(e)}\n\n`);
        res.end();
      } else sendError(res, e);
    } finally {
      off();
      if (heartbeat !== undefined) clearInterval(heartbeat);
      res.off("close", onClose);
      options.onGeneration?.(requestId, true);
    }
  }

  async function chatCompletions(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readJsonObject(req, maxBody);
    checkFields(body, [...commonFields, "messages", "max_completion_tokens", "response_format", "tools", "tool_choice",
                       "functions", "function_call", "parallel_tool_calls", "top_logprobs", "modalities", "reasoning_effort"]);
    const common = parseCommon(body, ["max_tokens", "max_completion_tokens"]);
    const messages = parseMessages(body);
    refuseUnsupported(body, "tools", (v) => Array.isArray(v) && v.length === 0, "tool calls are not supported");
    refuseUnsupported(body, "functions", (v) => Array.isArray(v) && v.length === 0, "function calls are not supported");
    refuseUnsupported(body, "tool_choice", (v) => v === "none", "tool calls are not supported");
    refuseUnsupported(body, "function_call", (v) => v === "none", "function calls are not supported");
    refuseUnsupported(body, "parallel_tool_calls", (v) => typeof v === "boolean", "expected a boolean");
    optInt(body, "top_logprobs");
    refuseUnsupported(body, "top_logprobs", (v) => v === 0, "logprobs are not supported");
    refuseUnsupported(body, "modalities", (v) => Array.isArray(v) && v.every((m) => m === "text"), "only text is supported");
    refuseUnsupported(body, "response_format", (v) => typeof v === "object" && (v as Record<string, unknown>)["type"] === "text",
                      "only {\"type\":\"text\"} is supported");
    const reasoningEffort = optReasoningEffort(body);
    const model = resolveModel(runtime, common.model);
    const input: GenerationInput = { kind: "chat", messages, ...(reasoningEffort !== undefined ? { reasoningEffort } : {}) };
    const request: GenerationRequest = { modelId: model.id, input, sampling: common.sampling, stop: common.stop, speculative: common.speculative };
    const modelName = common.model ?? apiModelName(model);
    await generate(res, request, common.stream, common.includeUsage, (id, created, name) => ({
      chunk: (delta, finish, role) => ({
        id: `chatcmpl-${id}`, object: "chat.completion.chunk", created, model: name, system_fingerprint: "guild",
        choices: [{ index: 0, delta: chatDelta(delta, role), logprobs: null, finish_reason: finish }],
      }),
      complete: (r) => ({
        id: `chatcmpl-${id}`, object: "chat.completion", created, model: name, system_fingerprint: "guild",
        choices: [{ index: 0, message: chatMessageOf(r.text), logprobs: null, finish_reason: finishReason(r.stopReason) }],
        usage: usageOf(r),
      }),
      deltas: () => new ReplyStream(),
    }), modelName);
  }

  async function completions(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readJsonObject(req, maxBody);
    checkFields(body, [...commonFields, "prompt", "echo", "suffix", "best_of"]);
    const common = parseCommon(body, ["max_tokens"]);
    const input = parsePrompt(body);
    refuseUnsupported(body, "echo", (v) => v === false, "not supported");
    refuseUnsupported(body, "suffix", (v) => v === "", "not supported");
    optInt(body, "best_of");
    refuseUnsupported(body, "best_of", (v) => v === 1, "only best_of = 1 is supported");
    const model = resolveModel(runtime, common.model);
    if (input.kind === "tokens") {
      const bad = input.tokens.findIndex((t) => t >= model.vocabSize);
      if (bad >= 0) throw invalid(`prompt[${bad}]`, `token id ${input.tokens[bad]} is not in the model's vocabulary [0, ${model.vocabSize})`);
    }
    const request: GenerationRequest = { modelId: model.id, input, sampling: common.sampling, stop: common.stop, speculative: common.speculative };
    const modelName = common.model ?? apiModelName(model);
    await generate(res, request, common.stream, common.includeUsage, (id, created, name) => ({
      chunk: (delta, finish) => ({
        id: `cmpl-${id}`, object: "text_completion", created, model: name, system_fingerprint: "guild",
        choices: [{ index: 0, text: delta?.text ?? "", logprobs: null, finish_reason: finish }],
      }),
      complete: (r) => ({
        id: `cmpl-${id}`, object: "text_completion", created, model: name, system_fingerprint: "guild",
        choices: [{ index: 0, text: r.text, logprobs: null, finish_reason: finishReason(r.stopReason) }],
        usage: usageOf(r),
      }),
      deltas: passThrough,
    }), modelName);
  }

  function listModels(res: ServerResponse): void {
    sendJson(res, 200, {
      object: "list",
      data: runtime.listModels().map((m) => ({
        id: apiModelName(m), object: "model", created: Math.floor(Date.parse(m.loadedAt) / 1000), owned_by: "guild",
        guild: { runtime_id: m.id, path_name: m.name, architecture: m.architecture, context_size: m.contextSize, ready: isReady(runtime, m) },
      })),
    });
  }

  function health(res: ServerResponse): void {
    const models = runtime.listModels();
    const m = models[0];
    const ready = m !== undefined && isReady(runtime, m);
    sendJson(res, ready ? 200 : 503, {
      status: ready ? "ok" : m === undefined ? "no_model" : "not_ready",
      model: m === undefined ? null : apiModelName(m),
      loaded: m !== undefined,
      ready,
    });
  }

  function modelFromQuery(url: URL): LoadedModel {
    const name = url.searchParams.get("model") ?? undefined;
    const models = runtime.listModels();
    if (models.length === 0) throw new ApiError(503, "no model is loaded", "server_error", null, "model_not_loaded");
    const m = name === undefined ? models[0] : models.find((x) => x.id === name) ?? models.find((x) => apiModelName(x) === name);
    if (m === undefined) throw new ApiError(404, `the model ${JSON.stringify(name)} does not exist`, "invalid_request_error", "model", "model_not_found");
    return m;
  }

  function queue(res: ServerResponse): void {
    sendJson(res, 200, {
      object: "guild.queue",
      models: runtime.listModels().map((m) => {
        const q = runtime.queueState(m.id);
        return { model: apiModelName(m), runtime_id: m.id, length: q.length, running: q.running, waiting: q.waiting };
      }),
    });
  }

  type Handler = (req: IncomingMessage, res: ServerResponse, url: URL) => Promise<void> | void;
  const table: Record<string, Partial<Record<string, Handler>>> = {
    "/v1/models": { GET: (_q, s) => listModels(s) },
    "/v1/chat/completions": { POST: chatCompletions },
    "/v1/completions": { POST: completions },
    "/health": { GET: (_q, s) => health(s) },
    "/guild/v1/profile": { GET: (_q, s, u) => sendJson(s, 200, runtime.profile(modelFromQuery(u).id)) },
    "/guild/v1/queue": { GET: (_q, s) => queue(s) },
  };

  return {
    async routes(req, res, url) {
      let pathname = url.pathname;
      if (pathname.length > 1 && pathname.endsWith("/")) pathname = pathname.slice(0, -1);
      const modelMatch = /^\/v1\/models\/(.+)$/.exec(pathname);
      if (modelMatch) {
        if (req.method !== "GET" && req.method !== "HEAD")
          throw new ApiError(405, `method ${req.method} is not allowed on ${pathname}`, "invalid_request_error", null, "method_not_allowed", { allow: "GET" });
        let name: string;
        try {
          name = decodeURIComponent(modelMatch[1]!);
        } catch {
          throw new ApiError(400, "malformed model name in the path");
        }
        const m = runtime.listModels().find((x) => x.id === name || apiModelName(x) === name);
        if (!m) throw new ApiError(404, `the model ${JSON.stringify(name)} does not exist`, "invalid_request_error", "model", "model_not_found");
        sendJson(res, 200, { id: apiModelName(m), object: "model", created: Math.floor(Date.parse(m.loadedAt) / 1000), owned_by: "guild" });
        return true;
      }
      const methods = table[pathname];
      if (methods === undefined) return false;
      const handler = methods[req.method ?? ""] ?? (req.method === "HEAD" ? methods["GET"] : undefined);
      if (handler === undefined) {
        const allow = Object.keys(methods).join(", ");
        throw new ApiError(405, `method ${req.method} is not allowed on ${pathname} (allowed: ${allow})`, "invalid_request_error", null, "method_not_allowed", { allow });
      }
      await handler(req, res, url);
      return true;
    },
  };
}
