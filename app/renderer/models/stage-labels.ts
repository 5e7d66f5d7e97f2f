// Plain names for the 14 load stages (docs/STARTUP_PROFILE.md), for the load
// progress bar; the runtime's own stage name is shown next to them.
import type { LoadStage } from "../../shared/runtime-contract.js";

const labels: Record<LoadStage, string> = {
  device_policy: "Choosing devices",
  packages: "Loading kernel packages",
  container: "Opening the model file",
  runner: "Choosing the model runner",
  execution_state: "Setting up execution state",
  expert_pool: "Sizing the expert pool",
  stream_and_lease: "Streams and kernel leases",
  gexec: "Finding the GPU executor",
  dense_weights: "Loading dense weights",
  expert_tiers: "Placing experts",
  calibration: "Calibrating",
  ram_complement: "Experts kept in RAM",
  session_state: "Allocating session state",
  tokenizer: "Loading the tokenizer",
};

/** "Loading dense weights" for "dense_weights"; "Ready" for "ready"; the raw name otherwise. */
export function stageLabel(stage: string): string {
  if (stage === "ready") return "Ready";
  return Object.hasOwn(labels, stage) ? labels[stage as LoadStage] : stage;
}
