import { describe, expect, it } from "vitest";

import { emptyLoadSettingsForm, peerList, toLoadSettings, type LoadSettingsForm } from "./load-settings.js";

const form = (f: Partial<LoadSettingsForm>): LoadSettingsForm => ({ ...emptyLoadSettingsForm, ...f });

describe("toLoadSettings", () => {
  it("sends nothing for an untouched form (every default is the runtime's)", () => {
    expect(toLoadSettings(emptyLoadSettingsForm)).toEqual({ errors: [], fieldErrors: {} });
  });

  it("sends the fields that were set, the device as auto / cpu / cuda:N", () => {
    expect(toLoadSettings(form({ threads: " 4 ", contextSize: "2048", kvCacheType: "f32", device: "cuda", cudaDevice: "1", gpuBudgetGiB: "7.5", expertsOnCpu: true })))
      .toEqual({ settings: { threads: 4, contextSize: 2048, kvCacheType: "f32", gpu: "cuda:1", gpuBudgetGiB: 7.5, expertsOnCpu: true }, errors: [], fieldErrors: {} });
    expect(toLoadSettings(form({ device: "cpu" }))).toEqual({ settings: { gpu: "cpu" }, errors: [], fieldErrors: {} });
    expect(toLoadSettings(form({ gpuBudgetGiB: "16" }))).toEqual({ settings: { gpuBudgetGiB: 16 }, errors: [], fieldErrors: {} });
    expect(toLoadSettings(form({ gpuBudgetGiB: ".5" })).settings).toEqual({ gpuBudgetGiB: 0.5 });
  });

  it("drops the GPU budget and expert placement when the device is the CPU", () => {
    expect(toLoadSettings(form({ device: "cpu", gpuBudgetGiB: "-1", expertsOnCpu: true }))).toEqual({ settings: { gpu: "cpu" }, errors: [], fieldErrors: {} });
  });

  it("sends peer GPUs (normalized) and their budget", () => {
    expect(toLoadSettings(form({ gpuPeers: " cuda:1 , cuda:2", gpuPeerBudgetGiB: "12.5" })))
      .toEqual({ settings: { gpuPeers: "cuda:1,cuda:2", gpuPeerBudgetGiB: 12.5 }, errors: [], fieldErrors: {} });
    expect(toLoadSettings(form({ device: "cuda", cudaDevice: "1", gpuPeers: "cuda:0" })))
      .toEqual({ settings: { gpu: "cuda:1", gpuPeers: "cuda:0" }, errors: [], fieldErrors: {} });
    expect(toLoadSettings(form({ gpuPeers: "  " }))).toEqual({ errors: [], fieldErrors: {} });
    expect(peerList(" cuda:1, cuda:2 ")).toEqual(["cuda:1", "cuda:2"]);
    expect(peerList(" ")).toEqual([]);
  });

  it("drops the peer GPUs and their budget when the device is the CPU", () => {
    expect(toLoadSettings(form({ device: "cpu", gpuPeers: "cuda:1", gpuPeerBudgetGiB: "x" }))).toEqual({ settings: { gpu: "cpu" }, errors: [], fieldErrors: {} });
  });

  it("explains peer GPUs and a peer budget it cannot send", () => {
    for (const bad of ["cuda", "cuda:1,", "cuda:1;cuda:2", "CUDA:1", "cuda:01", "cuda:100", "1,2"])
      expect(toLoadSettings(form({ gpuPeers: bad })).errors, bad).toEqual(["Peer GPUs must be cuda:N entries separated by commas, e.g. cuda:1,cuda:2 (empty = none)."]);
    expect(toLoadSettings(form({ gpuPeers: "cuda:1,cuda:2,cuda:1" })).errors).toEqual(["Peer GPUs name cuda:1 twice."]);
    expect(toLoadSettings(form({ device: "cuda", cudaDevice: "2", gpuPeers: "cuda:1,cuda:2" })).errors)
      .toEqual(["Peer GPUs cannot include cuda:2: it is the device the model loads on."]);
    for (const bad of ["0", "-2", "abc", "1e3"])
      expect(toLoadSettings(form({ gpuPeers: "cuda:1", gpuPeerBudgetGiB: bad })).errors, bad)
        .toEqual(["Peer budget must be a positive number of GiB (empty = each peer's free memory less 1 GiB)."]);
    const r = toLoadSettings(form({ gpuPeerBudgetGiB: "8" }));
    expect(r).toEqual({ errors: ["Peer budget needs peer GPUs (or leave it empty)."], fieldErrors: { gpuPeerBudgetGiB: "Peer budget needs peer GPUs (or leave it empty)." } });
  });

  it("explains each value it cannot send", () => {
    const r = toLoadSettings(form({ threads: "2.5", contextSize: "lots", device: "cuda", cudaDevice: "100", gpuBudgetGiB: "0" }));
    expect(r.errors).toEqual([
      "Threads must be a whole number from 0 to 1024 (0 = every physical core).",
      "Context must be a whole number of tokens (0 = the model's default).",
      "CUDA device must be a device number from 0 to 99.",
      "GPU memory budget must be a positive number of GiB (empty = free memory less 1 GiB).",
    ]);
    expect(r.settings).toBeUndefined();
    // Each sentence belongs to its field (the form attaches it there: aria-describedby, aria-invalid).
    expect(r.fieldErrors).toEqual({
      threads: r.errors[0], contextSize: r.errors[1], cudaDevice: r.errors[2], gpuBudgetGiB: r.errors[3],
    });
    for (const bad of ["-2", "1e3", "abc", "0.0", "NaN", "Infinity", "1.2.3"])
      expect(toLoadSettings(form({ gpuBudgetGiB: bad })).errors, bad).toHaveLength(1);
    expect(toLoadSettings(form({ threads: "2000" })).errors).toHaveLength(1);
    expect(toLoadSettings(form({ device: "cuda", cudaDevice: "" })).errors).toEqual(["CUDA device must be a device number from 0 to 99."]);
  });
});
