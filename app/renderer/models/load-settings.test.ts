import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import { describe, expect, it } from "vitest";

import { LoadSettings } from "./LoadSettings.js";

import { draftingText, emptyLoadSettingsForm, fromLoadSettings, peerList, toLoadSettings, type LoadSettingsForm } from "./load-settings.js";

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

describe("the speculative decoding settings", () => {
  it("sends the drafts, window size, min p and rule that were set, nothing for the defaults", () => {
    expect(toLoadSettings(form({ draft: "mtp", specMax: " 8 ", specMinP: "0.25", specRule: "confidence" })))
      .toEqual({ settings: { draft: "mtp", specMax: 8, specMinP: 0.25, specRule: "confidence" }, errors: [], fieldErrors: {} });
    expect(toLoadSettings(form({ draft: "auto" }))).toEqual({ settings: { draft: "auto" }, errors: [], fieldErrors: {} });
    expect(toLoadSettings(form({ specMax: "1", specMinP: "1" })).settings).toEqual({ specMax: 1, specMinP: 1 });
    expect(toLoadSettings(form({ specMax: "16", specMinP: ".5" })).settings).toEqual({ specMax: 16, specMinP: 0.5 });
    expect(toLoadSettings(form({ specMinP: "0" })).settings).toEqual({ specMinP: 0 });
  });

  it("drops the window fields when drafting is off", () => {
    expect(toLoadSettings(form({ draft: "none", specMax: "99", specMinP: "x", specRule: "cost" })))
      .toEqual({ settings: { draft: "none" }, errors: [], fieldErrors: {} });
  });

  it("explains a window size or min p it cannot send, on its field", () => {
    for (const bad of ["0", "17", "2.5", "-1", "four", "1e1"]) {
      const r = toLoadSettings(form({ specMax: bad }));
      expect(r.errors, bad).toEqual(["Window size must be a whole number from 1 to 16 (empty = 4)."]);
      expect(r.fieldErrors).toEqual({ specMax: r.errors[0] });
      expect(r.settings).toBeUndefined();
    }
    for (const bad of ["1.5", "-0.1", "2", "p", "1e-3", "NaN"]) {
      const r = toLoadSettings(form({ draft: "mtp", specMinP: bad }));
      expect(r.errors, bad).toEqual(["Draft min p must be a number from 0 to 1 (empty = 0)."]);
      expect(r.fieldErrors).toEqual({ specMinP: r.errors[0] });
    }
  });

  it("fills the form back from remembered settings (a round trip)", () => {
    const settings = { threads: 2, draft: "mtp", specMax: 6, specMinP: 0.125, specRule: "confidence" } as const;
    const filled = fromLoadSettings(settings);
    expect(filled).toMatchObject({ draft: "mtp", specMax: "6", specMinP: "0.125", specRule: "confidence" });
    expect(toLoadSettings(filled).settings).toEqual(settings);
    expect(fromLoadSettings({})).toEqual(emptyLoadSettingsForm);
  });

  it("says how the loaded model drafts", () => {
    expect(draftingText({ drafter: "mtp", speculative: {} })).toBe("MTP block, windows of up to 4 tokens, min p 0, cost rule");
    expect(draftingText({ drafter: "mtp", speculative: { draft: "mtp", specMax: 8, specMinP: 0.2, specRule: "confidence" } }))
      .toBe("MTP block, windows of up to 8 tokens, min p 0.2, confidence rule");
    expect(draftingText({ drafter: "mtp", speculative: { draft: "none" } })).toBe("off (the model's MTP block could draft: load it with Auto)");
    expect(draftingText({ drafter: "none", speculative: {} })).toBe("none: the model has no MTP block that drafts here");
  });
});

describe("the load settings form's speculative group", () => {
  const render = (f: Partial<LoadSettingsForm>) => {
    const parsed = toLoadSettings(form(f));
    return renderToStaticMarkup(createElement(LoadSettings, {
      form: form(f), currentDevice: null, errors: parsed.errors, fieldErrors: parsed.fieldErrors, onChange: () => undefined,
    }));
  };
  const input = (html: string, label: string) => new RegExp(`<(input|select)[^>]*aria-label="${label}"[^>]*>`).exec(html)?.[0] ?? "";

  it("offers drafts, window size, min p and rule, the window fields off with drafts None", () => {
    const on = render({ draft: "mtp", specMax: "8" });
    expect(on).toContain('data-testid="draft-settings"');
    for (const label of ["Speculative drafts", "Speculative window size", "Draft min p", "Speculative window rule"]) expect(input(on, label), label).not.toBe("");
    expect(input(on, "Speculative window size")).toContain('value="8"');
    expect(input(on, "Speculative window size")).not.toContain("disabled");
    const off = render({ draft: "none", specMax: "8" });
    for (const label of ["Speculative window size", "Draft min p", "Speculative window rule"]) expect(input(off, label), label).toContain('disabled=""');
    expect(input(off, "Speculative window size")).toContain('value=""');
  });

  it("attaches a bad window size to its field", () => {
    const html = render({ specMax: "32" });
    expect(input(html, "Speculative window size")).toMatch(/aria-invalid="true"/);
    expect(input(html, "Speculative window size")).toContain('aria-describedby="load-settings-error-specMax"');
    expect(html).toContain('<li id="load-settings-error-specMax">Window size must be a whole number from 1 to 16 (empty = 4).</li>');
  });
});
