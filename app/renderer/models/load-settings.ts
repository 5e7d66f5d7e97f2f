// The Models page's load settings: the form as typed, and the ModelLoadSettings
// it sends. The renderer checks the obvious (whole numbers, a positive budget) so
// the Load buttons can say why they are off; ModelManager's sanitizeSettings is
// the real check.
import {
  checkGpuPeers, defaultAppDraft, specMaxRange, specMinPRange, type DraftMode, type LoadedModel, type ModelLoadSettings, type SpecRule,
} from "../../shared/runtime-contract.js";

/** "auto" sends no device: the runtime then uses $GUILD_GPU, else auto (a CUDA GPU when there is one). */
export type DeviceChoice = "auto" | "cpu" | "cuda";

export interface LoadSettingsForm {
  threads: string;
  contextSize: string;
  /** "" = the runtime's default (f16). */
  kvCacheType: "" | "f16" | "f32";
  device: DeviceChoice;
  /** The N of cuda:N (used when device is "cuda"). */
  cudaDevice: string;
  /** GiB; "" = the default (the device's free memory less 1 GiB). */
  gpuBudgetGiB: string;
  expertsOnCpu: boolean;
  /** Peer GPUs of a hybrid model, "cuda:N" entries separated by commas; "" = none. */
  gpuPeers: string;
  /** GiB of each peer's expert cache; "" = the default (each peer's free memory less 1 GiB). */
  gpuPeerBudgetGiB: string;
  /** Speculative decoding of the model's replies (docs/SPECULATIVE.md); "" = the default (auto). */
  draft: "" | DraftMode;
  /** Window size S, 1..16; "" = the runtime's default (4). */
  specMax: string;
  /** The drafts' probability floor, 0..1; "" = the runtime's default (0). */
  specMinP: string;
  /** "" = the runtime's default (cost). */
  specRule: "" | SpecRule;
}

export const emptyLoadSettingsForm: LoadSettingsForm = {
  threads: "", contextSize: "", kvCacheType: "", device: "auto", cudaDevice: "0", gpuBudgetGiB: "", expertsOnCpu: false,
  gpuPeers: "", gpuPeerBudgetGiB: "", draft: "", specMax: "", specMinP: "", specRule: "",
};

/** The fields of the form that can be wrong. */
export type LoadSettingsField = "threads" | "contextSize" | "cudaDevice" | "gpuBudgetGiB" | "gpuPeers" | "gpuPeerBudgetGiB" | "specMax" | "specMinP";

export interface ParsedLoadSettings {
  /** Absent when nothing differs from the defaults. */
  settings?: ModelLoadSettings;
  /** One plain sentence per field that cannot be sent. */
  errors: string[];
  /** The same sentences by field, so each can be attached to its input (aria-describedby). */
  fieldErrors: Partial<Record<LoadSettingsField, string>>;
}

/** The window fields shape drafts: they apply unless drafting is off. */
export function draftFieldsApply(form: LoadSettingsForm): boolean {
  return form.draft !== "none";
}

/** The GPU-only fields apply unless the device is the CPU. */
export function gpuFieldsApply(form: LoadSettingsForm): boolean {
  return form.device !== "cpu";
}

const wholeNumber = (text: string, max: number): number | null => {
  if (!/^\d+$/.test(text)) return null;
  const n = Number(text);
  return n <= max ? n : null;
};

/** A positive number of GiB as typed ("8", "7.5", ".5"), else null. */
const positiveGiB = (text: string): number | null => {
  const n = /^\d*\.?\d+$|^\d+\.$/.test(text) ? Number(text) : NaN;
  return n > 0 && Number.isFinite(n) ? n : null;
};

/** The peer GPUs of a comma-separated list as sent ("cuda:1,cuda:2"); [] for none. */
export function peerList(text: string): string[] {
  return text.trim() === "" ? [] : text.split(",").map((p) => p.trim());
}

export function toLoadSettings(form: LoadSettingsForm): ParsedLoadSettings {
  const s: ModelLoadSettings = {};
  const errors: string[] = [];
  const fieldErrors: ParsedLoadSettings["fieldErrors"] = {};
  const fail = (field: LoadSettingsField, text: string) => {
    errors.push(text);
    fieldErrors[field] ??= text;
  };
  const threads = form.threads.trim();
  if (threads) {
    const n = wholeNumber(threads, 1024);
    if (n === null) fail("threads", "Threads must be a whole number from 0 to 1024 (0 = every physical core).");
    else s.threads = n;
  }
  const context = form.contextSize.trim();
  if (context) {
    const n = wholeNumber(context, 1 << 20);
    if (n === null) fail("contextSize", "Context must be a whole number of tokens (0 = the model's default).");
    else s.contextSize = n;
  }
  if (form.kvCacheType) s.kvCacheType = form.kvCacheType;
  if (form.device === "cpu") s.gpu = "cpu";
  else if (form.device === "cuda") {
    const n = wholeNumber(form.cudaDevice.trim(), 99);
    if (n === null) fail("cudaDevice", "CUDA device must be a device number from 0 to 99.");
    else s.gpu = `cuda:${n}`;
  }
  if (gpuFieldsApply(form)) {
    const budget = form.gpuBudgetGiB.trim();
    if (budget) {
      const n = positiveGiB(budget);
      if (n === null) fail("gpuBudgetGiB", "GPU memory budget must be a positive number of GiB (empty = free memory less 1 GiB).");
      else s.gpuBudgetGiB = n;
    }
    if (form.expertsOnCpu) s.expertsOnCpu = true;
    const peers = peerList(form.gpuPeers);
    const check = checkGpuPeers(form.gpuPeers, s.gpu);
    if (!check.ok && check.problem === "malformed") fail("gpuPeers", "Peer GPUs must be cuda:N entries separated by commas, e.g. cuda:1,cuda:2 (empty = none).");
    else if (!check.ok && check.problem === "twice") fail("gpuPeers", `Peer GPUs name ${check.entry} twice.`);
    else if (!check.ok && check.problem === "primary") fail("gpuPeers", `Peer GPUs cannot include ${check.entry}: it is the device the model loads on.`);
    else if (!check.ok) fail("gpuPeers", "Peer GPUs need a GPU device.");
    else if (check.peers.length > 0) s.gpuPeers = check.peers.join(",");
    const peerBudget = form.gpuPeerBudgetGiB.trim();
    if (peerBudget) {
      const n = positiveGiB(peerBudget);
      if (n === null) fail("gpuPeerBudgetGiB", "Peer budget must be a positive number of GiB (empty = each peer's free memory less 1 GiB).");
      else if (peers.length === 0) fail("gpuPeerBudgetGiB", "Peer budget needs peer GPUs (or leave it empty).");
      else if (s.gpuPeers !== undefined) s.gpuPeerBudgetGiB = n;
    }
  }
  if (form.draft) s.draft = form.draft;
  if (draftFieldsApply(form)) {
    const specMax = form.specMax.trim();
    if (specMax) {
      const n = wholeNumber(specMax, specMaxRange.max);
      if (n === null || n < specMaxRange.min) fail("specMax", `Window size must be a whole number from ${specMaxRange.min} to ${specMaxRange.max} (empty = 4).`);
      else s.specMax = n;
    }
    const specMinP = form.specMinP.trim();
    if (specMinP) {
      const n = /^\d*\.?\d+$|^\d+\.$/.test(specMinP) ? Number(specMinP) : NaN;
      if (!(n >= specMinPRange.min && n <= specMinPRange.max)) fail("specMinP", `Draft min p must be a number from ${specMinPRange.min} to ${specMinPRange.max} (empty = 0).`);
      else s.specMinP = n;
    }
    if (form.specRule) s.specRule = form.specRule;
  }
  return Object.keys(s).length > 0 ? { settings: s, errors, fieldErrors } : { errors, fieldErrors };
}

/** The form that sends `settings` (the settings a model was last loaded with, shown for editing). */
export function fromLoadSettings(settings: ModelLoadSettings): LoadSettingsForm {
  const gpu = settings.gpu ?? "auto";
  const cuda = /^cuda:(\d+)$/.exec(gpu);
  return {
    threads: settings.threads !== undefined ? String(settings.threads) : "",
    contextSize: settings.contextSize !== undefined ? String(settings.contextSize) : "",
    kvCacheType: settings.kvCacheType ?? "",
    device: gpu === "cpu" ? "cpu" : cuda ? "cuda" : "auto",
    cudaDevice: cuda ? cuda[1]! : "0",
    gpuBudgetGiB: settings.gpuBudgetGiB !== undefined ? String(settings.gpuBudgetGiB) : "",
    expertsOnCpu: settings.expertsOnCpu === true,
    gpuPeers: settings.gpuPeers ?? "",
    gpuPeerBudgetGiB: settings.gpuPeerBudgetGiB !== undefined ? String(settings.gpuPeerBudgetGiB) : "",
    draft: settings.draft ?? "",
    specMax: settings.specMax !== undefined ? String(settings.specMax) : "",
    specMinP: settings.specMinP !== undefined ? String(settings.specMinP) : "",
    specRule: settings.specRule ?? "",
  };
}

/** Where the form's values came from: the defaults, a model's remembered settings, or the user's typing (never replaced silently). */
export type LoadFormSource = { kind: "default" } | { kind: "remembered"; path: string; name: string; loadedAt: number } | { kind: "typed" };

/** How the loaded model drafts its replies, in a few words (the Current model card). */
export function draftingText(model: Pick<LoadedModel, "drafter" | "speculative">): string {
  const s = model.speculative;
  const draft = s.draft ?? defaultAppDraft;
  if (model.drafter !== "mtp") return "none: the model has no MTP block that drafts here";
  if (draft === "none") return "off (the model's MTP block could draft: load it with Auto)";
  return `MTP block, windows of up to ${s.specMax ?? 4} tokens, min p ${s.specMinP ?? 0}, ${s.specRule ?? "cost"} rule`;
}
