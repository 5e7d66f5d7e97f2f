// --gpu: where a command runs the model (docs/CUDA.md, docs/CLI.md).
import { type GpuChoice, isGpuChoice } from "../runtime/options.js";
import { UsageError } from "./errors.js";

/** The --gpu value checked, or undefined when the flag is absent. */
export function gpuFlag(value: string | undefined, usage: string): GpuChoice | undefined {
  if (value === undefined) return undefined;
  if (!isGpuChoice(value)) throw new UsageError(`--gpu: expected auto, cpu or cuda:N, got "${value}"`, usage);
  return value;
}
