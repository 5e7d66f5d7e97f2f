// guild run --chat with a model whose chat template is hostile (issue #20): the
// render is limited and off the event loop, so the command fails in one line
// at the step limit, and Ctrl-C / SIGTERM end it at once mid-render.
import { spawn, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";

import { describe, expect, it } from "vitest";

import { modelWithChatTemplate, nestedRangeTemplate } from "../../test/chat-template-model.js";
import { cliPath, errorLines } from "../../test/cli.js";
import { embeddedModelPath, projectRoot } from "../paths.js";

/** Runs the CLI, killed after a minute: a hang (the renderer without limits) fails instead of blocking the suite. */
function runCli(args: readonly string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [cliPath, ...args], { cwd: projectRoot(), input: "", timeout: 60_000, killSignal: "SIGKILL" });
  if (r.error) throw r.error;
  return { status: r.status, stdout: r.stdout.toString("utf8"), stderr: r.stderr.toString("utf8") };
}

describe.skipIf(!existsSync(embeddedModelPath()))("guild run --chat: untrusted chat templates", () => {
  it("a normal --chat run ends: the idle render worker does not keep the process alive", () => {
    const r = runCli(["run", "--chat", "--prompt", "hi", "--n-predict", "2", "--temperature", "0", "--json"]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.trim().split("\n").map((l) => (JSON.parse(l) as { event: string }).event).at(-1)).toBe("done");
  });

  it("fails fast, in one line naming the model, when the template exceeds the step limit", () => {
    const file = modelWithChatTemplate(nestedRangeTemplate, "hostile");
    const start = performance.now();
    const r = runCli(["run", "--model", file, "--chat", "--prompt", "hi", "--n-predict", "2"]);
    expect(performance.now() - start).toBeLessThan(30_000);
    expect(r.status).toBe(1);
    expect(errorLines(r.stderr)).toEqual([`guild: error: the chat template of ${file} exceeded the render step limit (500,000 steps)`]);
    expect(r.stdout).toBe("");
  });

  it("reports a template that raises in one line, quoting only the start of its message", () => {
    const file = modelWithChatTemplate("{{ raise_exception('this model does not chat: ' ~ messages[0].content) }}", "raises");
    const r = runCli(["run", "--model", file, "--chat", "--prompt", "x".repeat(10_000), "--n-predict", "2"]);
    expect(r.status).toBe(1);
    const lines = errorLines(r.stderr);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^guild: error: the chat template of ${file.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} failed: this model does not chat: x+…$`));
    expect(lines[0]!.length).toBeLessThan(file.length + 200);
  });

  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    it(`exits at once on ${signal} while a hostile template renders (limits raised so that only the signal can end it)`, async () => {
      const file = modelWithChatTemplate(nestedRangeTemplate, "hostile");
      const child = spawn(process.execPath, [cliPath, "run", "--model", file, "--chat", "--prompt", "hi", "--json"], {
        cwd: projectRoot(),
        env: { ...process.env, GUILD_TEMPLATE_TIME_MS: "600000", GUILD_TEMPLATE_MAX_STEPS: "1000000000000" },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      const exited = new Promise<{ code: number | null; at: number }>((resolve) => child.on("exit", (code) => resolve({ code, at: performance.now() })));
      try {
        // --json prints the load's profile before the prompt is rendered
        await new Promise<void>((resolve, reject) => {
          child.stdout.on("data", (d: Buffer) => {
            stdout += d.toString();
            if (stdout.includes("\n")) resolve();
          });
          child.on("exit", () => reject(new Error(`exited before rendering: ${stderr}`)));
        });
        await new Promise((resolve) => setTimeout(resolve, 500)); // well into the render
        const sent = performance.now();
        child.kill(signal);
        const timeout = new Promise<null>((resolve) => setTimeout(() => resolve(null), 5_000));
        const result = await Promise.race([exited, timeout]);
        expect(result, `${signal} did not stop guild run within 5 s`).not.toBeNull();
        expect(result!.at - sent).toBeLessThan(2_000);
        expect(result!.code).toBe(130);
        expect(stderr).toBe("");
        expect(stdout.trim().split("\n").map((l) => (JSON.parse(l) as { event: string }).event)).toEqual(["profile"]);
      } finally {
        child.kill("SIGKILL");
      }
    });
  }
});
