// `guild run --gpu/--gpu-budget/--experts-cpu/--gpu-peers/--gpu-peer-budget` (docs/CLI.md): bad
// values are usage errors (exit 2, one line), `--gpu cpu` runs and is recorded in the profile, and on
// a build or machine without a usable CUDA device `--gpu cuda:0` fails in one line while `auto` falls
// back to the CPU. The peers given reach the load (the profile's device_policy lists them).
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

import { afterAll, describe, expect, it } from "vitest";

import { errorLines, runCli } from "../../test/cli.js";
import { UsageError } from "./errors.js";
import { gpuPeerBudgetFlag, gpuPeersFlag } from "./gpu-flag.js";

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
    [["--gpu-peers", ""], /--gpu-peers: expected cuda:N/],
    [["--gpu-peers", "gpu1"], /--gpu-peers: expected cuda:N/],
    [["--gpu-peers", "cuda:1,"], /--gpu-peers: expected cuda:N/],
    [["--gpu-peers", "cuda:1,,cuda:2"], /--gpu-peers: expected cuda:N/],
    [["--gpu-peers", "cuda:-1"], /--gpu-peers: expected cuda:N/],
    [["--gpu-peers", "cuda:1,cuda:1"], /--gpu-peers: cuda:1 is named twice/],
    [["--gpu", "cpu", "--gpu-peers", "cuda:1"], /--gpu-peers needs a GPU/],
    [["--gpu", "cuda:1", "--gpu-peers", "cuda:2,cuda:1"], /--gpu-peers: cuda:1 is the primary device/],
    [["--gpu-peers", "cuda:1", "--gpu-peer-budget", "0"], /--gpu-peer-budget/],
    [["--gpu-peers", "cuda:1", "--gpu-peer-budget", "-4"], /--gpu-peer-budget/],
    [["--gpu-peers", "cuda:1", "--gpu-peer-budget", "lots"], /--gpu-peer-budget/],
    [["--gpu-peer-budget", "4"], /--gpu-peer-budget needs --gpu-peers/],
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

  it("--gpu-peers and --gpu-peer-budget reach the load", () => {
    const file = path.join(dir, "peers.json");
    const r = run("--gpu", "auto", "--gpu-peers", "cuda:1, cuda:2", "--gpu-peer-budget", "1.5", "--profile-out", file);
    if (r.status !== 0) {
      // A machine with a usable GPU but no usable cuda:1/cuda:2: the load fails in one line naming the peer.
      const lines = errorLines(r.stderr);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/peer GPU cuda:[12]/);
      return;
    }
    const profile = JSON.parse(readFileSync(file, "utf8")) as { stages: Stage[] };
    expect(profile.stages.find((s) => s.name === "device_policy")?.detail["gpu_peers"]).toEqual(["cuda:1", "cuda:2"]);
  });
});

describe("--gpu-peers / --gpu-peer-budget values", () => {
  const usage = "usage: test";
  it.each([
    ["cuda:1", undefined, "cuda:1"],
    ["cuda:1,cuda:2", "auto", "cuda:1,cuda:2"],
    [" cuda:2 , cuda:3 ", "cuda:0", "cuda:2,cuda:3"],
    ["cuda:0", "cuda:1", "cuda:0"],
  ] as const)("%j with --gpu %j is %j", (value, gpu, expected) => {
    expect(gpuPeersFlag(value, gpu, usage)).toBe(expected);
  });

  it("absent flags stay absent", () => {
    expect(gpuPeersFlag(undefined, "cpu", usage)).toBeUndefined();
    expect(gpuPeerBudgetFlag(undefined, undefined, usage)).toBeUndefined();
  });

  it.each([
    ["", undefined],
    ["cuda", undefined],
    ["cuda:1;cuda:2", undefined],
    ["cuda:01", undefined],
    ["cuda:100", undefined],
    ["cuda:1,cuda:1", undefined],
    ["cuda:1", "cpu"],
    ["cuda:1", "cuda:1"],
  ] as const)("%j with --gpu %j is a usage error", (value, gpu) => {
    expect(() => gpuPeersFlag(value, gpu, usage)).toThrow(UsageError);
  });

  it("--gpu-peer-budget goes with --gpu-peers", () => {
    expect(gpuPeerBudgetFlag(2.5, "cuda:1", usage)).toBe(2.5);
    expect(() => gpuPeerBudgetFlag(2.5, undefined, usage)).toThrow(UsageError);
  });
});
