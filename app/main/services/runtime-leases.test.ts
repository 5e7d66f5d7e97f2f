// Kernel-package leases of RuntimeHost's sessions: a reply's session gives its
// lease back as soon as the reply ends (completed, stopped while running, or
// stopped while waiting), not when the garbage collector happens to run; and
// unloading gives the model's back. Needs the native build's packages.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { builtPackagesSkipReason, installBuiltPackages } from "../../test/built-packages.js";
import type { LoadedModel } from "../../shared/runtime-contract.js";
import { embeddedModelPath } from "../paths.js";
import { kernelLeases } from "../runtime/model.js";
import { RuntimeHost } from "./runtime-host.js";

if (builtPackagesSkipReason) console.warn(`guild tests: skipping lease tests: ${builtPackagesSkipReason}`);

describe.skipIf(builtPackagesSkipReason !== "")("RuntimeHost kernel leases", () => {
  const host = new RuntimeHost();
  let dir: string;
  let model: LoadedModel;
  const sessionHolders = () => kernelLeases().filter((l) => l.holder.startsWith("session ")).map((l) => l.holder);
  const modelHolders = () => kernelLeases().filter((l) => l.holder.startsWith("model ")).map((l) => l.holder);
  const started = (requestId: string) => new Promise<void>((resolve) => {
    const off = host.subscribe((e) => { if (e.type === "started" && e.requestId === requestId) { off(); resolve(); } });
  });

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), "guild-leases-"));
    await installBuiltPackages(path.join(dir, "packages"), dir);
    process.env["GUILD_PACKAGES_DIR"] = path.join(dir, "packages");  // read by the native load (stage 2)
    model = await host.loadModel(embeddedModelPath(), { threads: 2 });
  });
  afterAll(async () => {
    await host.dispose();
    delete process.env["GUILD_PACKAGES_DIR"];
    rmSync(dir, { recursive: true, force: true });
  });

  it("the loaded model holds a lease", () => {
    expect(modelHolders()).toEqual(["model guild-demo-qwen3moe-Q8_0.gguf"]);
    expect(sessionHolders()).toEqual([]);
  });

  it("a completed reply's session gives its lease back when the reply ends", async () => {
    const leasedWhileRunning: string[][] = [];
    const off = host.subscribe((e) => { if (e.type === "token" && e.requestId === "done-1") leasedWhileRunning.push(sessionHolders()); });
    const r = await host.generate({ modelId: model.id, input: { kind: "chat", messages: [{ role: "user", content: "hi" }] },
                                     sampling: { temperature: 0, maxTokens: 8 } }, "done-1");
    off();
    expect(r.tokens.length).toBeGreaterThan(0);
    expect(leasedWhileRunning[0]).toHaveLength(1);  // the running reply holds one
    expect(sessionHolders()).toEqual([]);
  });

  it("a reply stopped while running, and one stopped while waiting, hold nothing afterwards", async () => {
    const long = { kind: "text" as const, text: "the river ".repeat(150) };
    const runStarted = started("run-1");  // emitted as soon as generate() admits it
    const running = host.generate({ modelId: model.id, input: long, sampling: { temperature: 0, maxTokens: 400 } }, "run-1");
    const waiting = host.generate({ modelId: model.id, input: long, sampling: { temperature: 0, maxTokens: 400 } }, "wait-1");
    await runStarted;
    expect(host.cancel("wait-1")).toBe(true);
    expect(host.cancel("run-1")).toBe(true);
    expect((await running).stopReason).toBe("cancel");
    expect((await waiting).stopReason).toBe("cancel");
    expect(sessionHolders()).toEqual([]);
  });

  it("unloading the model gives its lease back", async () => {
    expect(await host.unloadModel(model.id)).toBe(true);
    expect(kernelLeases()).toEqual([]);
  });
});
