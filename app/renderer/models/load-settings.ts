// The Models page's load settings: the form as typed, and the ModelLoadSettings
// it sends. The renderer checks the obvious (whole numbers, a positive budget) so
// the Load buttons can say why they are off; ModelManager's sanitizeSettings is
// the real check.
import type { ModelLoadSettings } from "../../shared/runtime-contract.js";

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
}

export const emptyLoadSettingsForm: LoadSettingsForm = {
  threads: "", contextSize: "", kvCacheType: "", device: "auto", cudaDevice: "0", gpuBudgetGiB: "", expertsOnCpu: false,
};

export interface ParsedLoadSettings {
  /** Absent when nothing differs from the defaults. */
  settings?: ModelLoadSettings;
  /** One plain sentence per field that cannot be sent. */
  errors: string[];
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

export function toLoadSettings(form: LoadSettingsForm): ParsedLoadSettings {
  const s: ModelLoadSettings = {};
  const errors: string[] = [];
  const threads = form.threads.trim();
  if (threads) {
    const n = wholeNumber(threads, 1024);
    if (n === null) errors.push("Threads must be a whole number from 0 to 1024 (0 = every physical core).");
    else s.threads = n;
  }
  const context = form.contextSize.trim();
  if (context) {
    const n = wholeNumber(context, 1 << 20);
    if (n === null) errors.push("Context must be a whole number of tokens (0 = the model's default).");
    else s.contextSize = n;
  }
  if (form.kvCacheType) s.kvCacheType = form.kvCacheType;
  if (form.device === "cpu") s.gpu = "cpu";
  else if (form.device === "cuda") {
    const n = wholeNumber(form.cudaDevice.trim(), 99);
    if (n === null) errors.push("CUDA device must be a device number from 0 to 99.");
    else s.gpu = `cuda:${n}`;
  }
  if (gpuFieldsApply(form)) {
    const budget = form.gpuBudgetGiB.trim();
    if (budget) {
      const n = /^\d*\.?\d+$|^\d+\.$/.test(budget) ? Number(budget) : NaN;
      if (!(n > 0) || !Number.isFinite(n)) errors.push("GPU memory budget must be a positive number of GiB (empty = free memory less 1 GiB).");
      else s.gpuBudgetGiB = n;
    }
    if (form.expertsOnCpu) s.expertsOnCpu = true;
  }
  return Object.keys(s).length > 0 ? { settings: s, errors } : { errors };
}
