import { describe, expect, it } from "vitest";

import { emptyLoadSettingsForm, toLoadSettings, type LoadSettingsForm } from "./load-settings.js";

const form = (f: Partial<LoadSettingsForm>): LoadSettingsForm => ({ ...emptyLoadSettingsForm, ...f });

describe("toLoadSettings", () => {
  it("sends nothing for an untouched form (every default is the runtime's)", () => {
    expect(toLoadSettings(emptyLoadSettingsForm)).toEqual({ errors: [] });
  });

  it("sends the fields that were set, the device as auto / cpu / cuda:N", () => {
    expect(toLoadSettings(form({ threads: " 4 ", contextSize: "2048", kvCacheType: "f32", device: "cuda", cudaDevice: "1", gpuBudgetGiB: "7.5", expertsOnCpu: true })))
      .toEqual({ settings: { threads: 4, contextSize: 2048, kvCacheType: "f32", gpu: "cuda:1", gpuBudgetGiB: 7.5, expertsOnCpu: true }, errors: [] });
    expect(toLoadSettings(form({ device: "cpu" }))).toEqual({ settings: { gpu: "cpu" }, errors: [] });
    expect(toLoadSettings(form({ gpuBudgetGiB: "16" }))).toEqual({ settings: { gpuBudgetGiB: 16 }, errors: [] });
    expect(toLoadSettings(form({ gpuBudgetGiB: ".5" })).settings).toEqual({ gpuBudgetGiB: 0.5 });
  });

  it("drops the GPU budget and expert placement when the device is the CPU", () => {
    expect(toLoadSettings(form({ device: "cpu", gpuBudgetGiB: "-1", expertsOnCpu: true }))).toEqual({ settings: { gpu: "cpu" }, errors: [] });
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
    for (const bad of ["-2", "1e3", "abc", "0.0", "NaN", "Infinity", "1.2.3"])
      expect(toLoadSettings(form({ gpuBudgetGiB: bad })).errors, bad).toHaveLength(1);
    expect(toLoadSettings(form({ threads: "2000" })).errors).toHaveLength(1);
    expect(toLoadSettings(form({ device: "cuda", cudaDevice: "" })).errors).toEqual(["CUDA device must be a device number from 0 to 99."]);
  });
});
