// The runtime's pre-flight check against the runtime's load, fixture by
// fixture: the check says "loadable" exactly when the load succeeds, and
// otherwise gives the load's own error, word for word, and the stage it comes
// from; what runtime-support.ts makes of a verdict (the problem the app shows,
// a memory refusal and its numbers) follows from that. There are no lists to
// keep in step with the native code: a runner or kernel added there is simply
// loadable here.
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { afterAll, describe, expect, it } from "vitest";

import { LOAD_STAGES } from "../../shared/runtime-contract.js";
import { fixturesDir, fixturesSkipReason, haveFixtures } from "../../test/fixtures.js";
import { checkModelLoad, GuildModel } from "../runtime/model.js";
import { isMemoryRefusal, loadProblem, sessionShortfall } from "./runtime-support.js";

describe.skipIf(!haveFixtures)(`the runtime's pre-flight check (${haveFixtures ? "fixtures" : fixturesSkipReason})`, () => {
  const dir = path.join(fixturesDir, "models");
  // One file per split model (its first shard); the importance matrix is not a model.
  const files = readdirSync(dir).filter((n) => n.endsWith(".gguf") && !n.includes("imatrix") && !/-0000[2-9]-of-/.test(n)).sort();
  // A packages folder of the test's own (the bundled packages are searched too): nothing a user
  // installed or disabled changes the answers, and no lease record lands in their folder.
  const packagesDir = mkdtempSync(path.join(os.tmpdir(), "guild-check-packages-"));
  afterAll(() => rmSync(packagesDir, { recursive: true, force: true }));
  const options = { threads: 1, contextSize: 64, packagesDir };

  it("says loadable exactly when the load succeeds, and otherwise the load's own error and stage", async () => {
    const refused: string[] = [];
    for (const name of files) {
      const file = path.join(dir, name);
      const check = await checkModelLoad(file, options);
      let loadError: string | null = null;
      let weightBytes = -1;
      try {
        const model = await GuildModel.load(file, options);
        weightBytes = Number(model.info()["weight_bytes"]);
        model.dispose();
      } catch (err) {
        loadError = (err as Error).message;
      }
      expect(check.ok, `${name}: check ${check.ok ? "ok" : check.error} vs load ${loadError ?? "ok"}`).toBe(loadError === null);
      if (loadError === null) {
        expect(check.status).toBe("ok");
        expect(check.stage).toBeNull();
        expect(check.estimate.weightBytes, name).toBe(weightBytes);
        expect(check.estimate.contextSize).toBe(64);
        expect(check.estimate.session?.totalBytes).toBeGreaterThan(0);
        expect(loadProblem(check, file)).toBeNull();
      } else {
        expect(check.error, name).toBe(loadError);
        expect(LOAD_STAGES as readonly string[], name).toContain(check.stage);
        expect(check.status).not.toBe("ok");
        // The app shows the runtime's line without the path it starts with.
        expect(loadError.startsWith(`${file}: `)).toBe(true);
        expect(loadProblem(check, file)).toBe(loadError.slice(file.length + 2));
        refused.push(name);
      }
    }
    // The fixtures hold architectures the runtime has no runner for, named in its words.
    const deepseek = await checkModelLoad(path.join(dir, "deepseek2-a-Q4_K_M.gguf"), options);
    expect(deepseek).toMatchObject({ ok: false, status: "unsupported", stage: "runner" });
    expect(deepseek.error).toMatch(/unknown architecture 'deepseek2' \(supported: [a-z0-9, -]+\)$/);
    expect(refused).toContain("deepseek2-a-Q4_K_M.gguf");
    expect(refused.length).toBeLessThan(files.length);
  });

  it("refuses a session too big for the memory there is as the load does, with the numbers", async (ctx) => {
    const file = path.join(dir, "qwen3moe-a-Q8_0.gguf");
    // The largest context any session may have, f32 KV and 256 threads' score rows: some 300 GiB.
    const huge = { ...options, contextSize: 16_777_216, kvCacheType: "f32" as const, threads: 256 };
    const check = await checkModelLoad(file, huge);
    if (check.ok) ctx.skip();  // a machine that can give one session that much
    const load = await GuildModel.load(file, huge).then((m) => { m.dispose(); return null; }, (e: unknown) => (e as Error).message);
    // The same line, word for word, but for what the machine could give at each moment (measured twice, moments apart).
    const moment = (line: string | null) => line?.replace(/only [\d.]+ ([GM]iB) can be allocated/, "only N $1 can be allocated");
    expect(check).toMatchObject({ ok: false, status: "out_of_memory", stage: "session_state" });
    expect(moment(check.error)).toBe(moment(load));
    expect(load).toMatch(/only [\d.]+ [GM]iB can be allocated/);
    expect(isMemoryRefusal(check)).toBe(true);
    const short = sessionShortfall(check)!;
    expect(short.needBytes).toBeGreaterThan(short.availableBytes);
    expect(check.estimate.session?.contextSize).toBe(16_777_216);
    expect(check.estimate.threads).toBe(256);
    expect(loadProblem(check, file)).toMatch(/^the default context: a session of 16777216 tokens needs [\d.]+ GiB .* but only [\d.]+ [GM]iB can be allocated/);
  });

  it("rejects only malformed options, as loadModel does", async () => {
    const file = path.join(dir, "qwen3moe-a-Q8_0.gguf");
    await expect(checkModelLoad(file, { ...options, threads: -1 })).rejects.toThrow(/options\.threads/);
  });
});
