// A served model file rewritten in place (`cp other.gguf served.gguf`): the
// next generation rejects with code "io" and one line naming the file, the
// model turns not ready (fail-closed), and the process lives on. Sessions
// asking for more context than the runtime allows are refused up front.
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import { fixturesSkipReason, haveFixtures, modelPath } from "../../test/fixtures.js";
import { GuildModel } from "./model.js";
import type { NativeError } from "./native-types.js";

const prompt = [2501, 872, 198, 1639, 266, 374, 279, 2062];

describe.skipIf(!haveFixtures)("model file changed on disk", () => {
  let dir = "";
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), "guild-served-"));
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("fails the next request and the model closes", async () => {
    const served = path.join(dir, "served.gguf");
    copyFileSync(modelPath("qwen3moe-a-Q8_0.gguf"), served);
    const model = await GuildModel.load(served, { threads: 2, contextSize: 256 });
    const session = await model.createSession();
    try {
      const first = await session.generate(prompt, { maxNewTokens: 2, temperature: 0 });
      expect(first.tokens).toHaveLength(2);
      // Another model over it, in place: truncated, then rewritten (same inode).
      await new Promise((r) => setTimeout(r, 20)); // the file clock is coarse
      copyFileSync(modelPath("qwen3moe-a-Q4_0.gguf"), served);
      const failed = await session.generate(prompt, { maxNewTokens: 2, temperature: 0 }).then(
        () => undefined,
        (e: unknown) => e as NativeError,
      );
      expect(failed).toBeDefined();
      expect(failed!.code).toBe("io");
      expect(failed!.message).toContain(`model file ${served} changed on disk since it was loaded`);
      expect(failed!.message).toContain("reload it");
      expect(failed!.message).not.toContain("\n");
      expect(model.ready).toBe(false);
      await expect(session.generate(prompt, { maxNewTokens: 2, temperature: 0 })).rejects.toMatchObject({ code: "not_ready" });
      // A fresh load of the new file works.
      const reloaded = await GuildModel.load(served, { threads: 2, contextSize: 256 });
      const s2 = await reloaded.createSession();
      expect((await s2.generate(prompt, { maxNewTokens: 2, temperature: 0 })).tokens).toHaveLength(2);
      s2.dispose();
      reloaded.dispose();
    } finally {
      session.dispose();
      model.dispose();
    }
  });

  it("refuses a session context beyond the limit before allocating", async () => {
    const model = await GuildModel.load(modelPath("qwen3moe-a-Q8_0.gguf"), { threads: 2, contextSize: 256 });
    try {
      await expect(model.createSession({ contextSize: 16_777_217 })).rejects.toThrow(/exceeds the limit of 16777216 tokens/);
    } finally {
      model.dispose();
    }
  });
});

if (!haveFixtures) describe.skip(`model file changes: ${fixturesSkipReason}`, () => {});
