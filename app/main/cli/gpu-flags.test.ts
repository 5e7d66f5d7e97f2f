// `guild run --gpu/--gpu-budget/--experts-cpu` (docs/CLI.md): bad values are usage errors (exit 2,
// one line), `--gpu cpu` runs and is recorded in the profile, and on a build or machine without a
// usable CUDA device `--gpu cuda:0` fails in one line while `auto` falls back to the CPU.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, describe, expect, it } from "vitest";

import { errorLines, runCli } from "../../test/cli.js";

const dir = mkdtempSync(path.join(tmpdir(), "guild-gpu-flags-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const run = (...extra: string[]) =>
  runCli(["run", "--prompt", "hi", "--n-predict", "2", "--temperature", "0", ...extra], { env: { GUILD_MODEL: "", GUILD_GPU: "" } });

interface Stage {
  name: string;
  detail: Record<string, unknown>;
}

describe("guild run GPU flags", () => {
  it.each([
    [["--gpu", "gpu0"], /--gpu: expected auto, cpu or cuda:N/],
    [["--gpu", "cuda:x"], /--gpu: expected auto, cpu or cuda:N/],
    [["--gpu-budget", "0"], /--gpu-budget/],
    [["--gpu-budget", "-4"], /--gpu-budget/],
    [["--gpu-budget", "lots"], /--gpu-budget/],
  ])("%j is a usage error", (flags, message) => {
    const r = run(...flags);
    expect(r.status).toBe(2);
    expect(r.stderr).toMatch(message);
  });

  it("--gpu cpu runs and the profile records the choice", () => {
    const file = path.join(dir, "cpu.json");
    const r = run("--gpu", "cpu", "--profile-out", file);
    expect(r.status).toBe(0);
    const profile = JSON.parse(readFileSync(file, "utf8")) as { stages: Stage[] };
    const policy = profile.stages.find((s) => s.name === "device_policy");
    expect(policy?.detail["gpu_choice"]).toBe("cpu");
    expect(profile.stages.find((s) => s.name === "dense_weights")?.detail["placement"]).toBe("cpu (mapped)");
  });

  it("without a usable CUDA device: auto falls back to the CPU, cuda:0 fails in one line", () => {
    const file = path.join(dir, "auto.json");
    const auto = run("--gpu", "auto", "--profile-out", file);
    expect(auto.status).toBe(0);
    const profile = JSON.parse(readFileSync(file, "utf8")) as { stages: Stage[] };
    const gpu = profile.stages.find((s) => s.name === "device_policy")?.detail["gpu"];
    if (typeof gpu !== "string") return;  // a CUDA build on a machine with a GPU: nothing to check here
    const explicit = run("--gpu", "cuda:0");
    expect(explicit.status).toBe(1);
    const lines = errorLines(explicit.stderr);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/cuda:0 (requested but this build has no CUDA support|is not usable)/);
  });
});
