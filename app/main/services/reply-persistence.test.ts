// A streamed reply survives a crash: a child process running the services is
// killed with SIGKILL right after its Nth streamed token, and the database it
// leaves behind holds at least the first N−16 tokens of the reply (chat-service.ts
// saves every 16 tokens or 250 ms). The child paces the demo model (testPacing)
// and freezes after announcing token N, so the kill lands there however loaded
// the machine is; nothing here depends on timing.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { afterAll, describe, expect, it } from "vitest";

import { spawnServicesChild } from "../../test/spawn-services-child.js";
import { ConversationStore } from "./conversation-store.js";

describe("a reply streamed when the process is killed", () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), "guild-kill-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("keeps at least N−16 of the N tokens streamed before a SIGKILL", async () => {
    // "What does river mean?" gets a reply of about 33 tokens from the demo model at temperature 0.
    const killAfter = 30;
    const child = spawnServicesChild({
      dataDir: path.join(dir, "data"), packagesDir: path.join(dir, "packages"),
      send: "What does river mean?", holdAtToken: killAfter, pacingDelayMs: 20,
    });
    try {
      const sent = await child.waitFor((r) => r.event === "sent" || r.event === "done", 120_000);
      const nth = await child.waitFor((r) => (r.event === "token" && r.count === killAfter) || r.event === "done", 120_000);
      expect(nth.event, `the reply ended before ${killAfter} tokens`).toBe("token");
      child.proc.kill("SIGKILL");
      expect(await child.exited).toMatchObject({ signal: "SIGKILL" });

      const keep = killAfter - 16;  // the promise: at most 16 streamed tokens are lost
      const textAt = (count: number) => child.reports.find((r) => r.event === "token" && r.count === count)!.text as string;
      const store = new ConversationStore(path.join(dir, "data", "conversations.sqlite"));
      try {
        const saved = store.getMessage(sent.messageId as string);
        expect(saved).not.toBeNull();
        // The text of at least `keep` tokens, and nothing the reply had not streamed.
        expect(saved!.content.startsWith(textAt(keep)), `saved ${JSON.stringify(saved!.content)}`).toBe(true);
        expect(textAt(killAfter).startsWith(saved!.content)).toBe(true);
        expect(saved!.status).toBe("stopped");  // a reply cut off by the crash is kept as stopped
      } finally {
        store.close();
      }
    } finally {
      if (child.proc.exitCode === null && child.proc.signalCode === null) child.proc.kill("SIGKILL");
    }
  });
});
