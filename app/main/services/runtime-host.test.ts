// RuntimeHost against the real addon and a real model (the embedded demo model).
import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { LOAD_STAGES, type LoadedModel, type RuntimeEvent } from "../../shared/runtime-contract.js";
import { embeddedModelPath } from "../paths.js";
import { RuntimeError, RuntimeHost } from "./runtime-host.js";

const chat = (content: string) => ({ kind: "chat" as const, messages: [{ role: "user" as const, content }] });

describe("RuntimeHost", () => {
  const host = new RuntimeHost();
  const events: RuntimeEvent[] = [];
  let model: LoadedModel;

  beforeAll(async () => {
    host.subscribe((e) => events.push(e));
    model = await host.loadModel(embeddedModelPath(), { threads: 2, contextSize: 1024 }, "load-1");
  });
  afterAll(async () => {
    await host.dispose();
  });

  it("reports every load stage in order, then the loaded model and its profile", () => {
    const stages = events.filter((e) => e.type === "loadProgress" && e.loadId === "load-1").map((e) => (e as { stage: string }).stage);
    expect(stages).toEqual([...LOAD_STAGES, "ready"]);
    expect(events.find((e) => e.type === "modelLoaded")).toMatchObject({ loadId: "load-1", model: { id: model.id } });
    expect(model).toMatchObject({ architecture: "qwen3moe", contextSize: 1024, experts: 16, expertsPerToken: 2, ready: true });
    const profile = host.profile(model.id);
    expect(profile.schema).toBe("guild.startup-profile/1");
    expect(profile.stages.map((s) => s.name)).toEqual([...LOAD_STAGES]);
  });

  it("streams text deltas that add up to the result", async () => {
    const tokens: string[] = [];
    const off = host.subscribe((e) => { if (e.type === "token" && e.requestId === "r-stream") tokens.push(e.text); });
    const r = await host.generate({ modelId: model.id, input: chat("Hello! Who are you?"), sampling: { temperature: 0, maxTokens: 40 } }, "r-stream");
    off();
    expect(tokens.length).toBeGreaterThan(3);
    expect(tokens.join("")).toBe(r.text);
    expect(r.text.length).toBeGreaterThan(10);
    expect(["eos", "length"]).toContain(r.stopReason);
    expect(r.stats.generatedTokens).toBe(r.tokens.length);
  });

  it("serves four concurrent requests one at a time, first come first served, each complete", async () => {
    const order: string[] = [];
    const off = host.subscribe((e) => {
      if (e.type === "started" || e.type === "done") order.push(`${e.type}:${e.type === "done" ? e.result.requestId : e.requestId}`);
    });
    const queued = new Map<string, number[]>();
    const off2 = host.subscribe((e) => { if (e.type === "queued") queued.set(e.requestId, [...(queued.get(e.requestId) ?? []), e.position]); });
    const ids = ["q0", "q1", "q2", "q3"];
    const results = await Promise.all(ids.map((id) =>
      host.generate({ modelId: model.id, input: chat("What does river mean?"), sampling: { temperature: 0, maxTokens: 12 } }, id)));
    off();
    off2();
    expect(order).toEqual(ids.flatMap((id) => [`started:${id}`, `done:${id}`]));
    expect(queued.get("q3")?.[0]).toBe(3);
    for (const r of results) expect(r.tokens).toEqual(results[0]!.tokens);
  });

  it("cancels a waiting request and a running one", async () => {
    const queued = new Promise<void>((resolve) => {
      const off = host.subscribe((e) => { if (e.type === "queued" && e.requestId === "c-wait") { off(); resolve(); } });
    });
    const running = host.generate({ modelId: model.id, input: { kind: "text", text: "the river ".repeat(150) }, sampling: { temperature: 0, maxTokens: 400 } }, "c-run");
    const waiting = host.generate({ modelId: model.id, input: chat("hi"), sampling: { temperature: 0, maxTokens: 4 } }, "c-wait");
    await queued;
    expect(host.queueState(model.id).waiting).toContain("c-wait");
    expect(host.cancel("c-wait")).toBe(true);
    const w = await waiting;
    expect(w.stopReason).toBe("cancel");
    expect(w.tokens).toEqual([]);
    expect(host.cancel("c-run")).toBe(true);
    const r = await running;
    expect(r.stopReason).toBe("cancel");
    expect(host.queueState(model.id)).toMatchObject({ length: 0, running: null, waiting: [] });
  });

  it("stops at a stop string without streaming it", async () => {
    const plain = await host.generate({ modelId: model.id, input: chat("Hello! Who are you?"), sampling: { temperature: 0, maxTokens: 40 } });
    const cut = plain.text.indexOf(" ", 8);
    expect(cut).toBeGreaterThan(0);
    const stop = plain.text.slice(cut, cut + 4);
    const streamed: string[] = [];
    const off = host.subscribe((e) => { if (e.type === "token" && e.requestId === "s1") streamed.push(e.text); });
    const r = await host.generate({ modelId: model.id, input: chat("Hello! Who are you?"), sampling: { temperature: 0, maxTokens: 40 }, stop: [stop] }, "s1");
    off();
    expect(r.stopReason).toBe("stop");
    expect(r.text).toBe(plain.text.slice(0, plain.text.indexOf(stop)));
    expect(streamed.join("")).toBe(r.text);
  });

  it("reuses a session's cached prefix across turns", async () => {
    const sessionId = await host.createSession(model.id);
    const first = await host.generate({ modelId: model.id, sessionId, input: chat("What does river mean?"), sampling: { temperature: 0, maxTokens: 16 } });
    const second = await host.generate({
      modelId: model.id, sessionId,
      input: { kind: "chat", messages: [{ role: "user", content: "What does river mean?" }, { role: "assistant", content: first.text }, { role: "user", content: "Thanks!" }] },
      sampling: { temperature: 0, maxTokens: 8 },
    });
    expect(second.stats.reusedPromptTokens).toBeGreaterThan(first.promptTokens.length - 2);
    expect(host.closeSession(sessionId)).toBe(true);
  });

  it("answers the message contract and refuses bad commands", async () => {
    const list = await host.dispatch({ type: "listModels" });
    expect(list.map((m) => m.id)).toContain(model.id);
    const q = await host.dispatch({ type: "queueState", modelId: model.id });
    expect(q.length).toBe(0);
    await expect(host.dispatch({ type: "generate", request: { modelId: "nope", input: { kind: "text", text: "x" } } }))
      .rejects.toBeInstanceOf(RuntimeError);
    await expect(host.generate({ modelId: model.id, input: { kind: "tokens", tokens: [-1] } })).rejects.toThrow(/tokens must be/);
    await expect(host.dispatch({ type: "bogus" } as never)).rejects.toThrow(/unknown command/);
    await expect(host.loadModel("/nonexistent/model.gguf")).rejects.toThrow(/nonexistent/);
  });

  it("unloading cancels the model's running generation", async () => {
    const other = await host.loadModel(embeddedModelPath(), { threads: 1 });
    // A long prompt keeps the generation in prefill long enough to unload mid-way.
    const started = new Promise<void>((resolve) => {
      const off = host.subscribe((e) => { if (e.type === "started" && e.requestId === "u1") { off(); resolve(); } });
    });
    const running = host.generate({ modelId: other.id, input: { kind: "text", text: "the river ".repeat(200) },
                                    sampling: { temperature: 0, maxTokens: 100 } }, "u1");
    await started;
    expect(await host.unloadModel(other.id)).toBe(true);
    expect((await running).stopReason).toBe("cancel");
    expect(host.listModels().map((m) => m.id)).not.toContain(other.id);
  });
});
