// --draft, --spec-max, --spec-min-p, --spec-rule: speculative decoding with the model's MTP block
// (docs/SPECULATIVE.md, docs/CLI.md), shared by `guild run` and `guild serve`.
import { defaultAppDraft, draftModes, specMaxRange, specMinPRange, specRules, type SpeculativeSettings } from "../../shared/runtime-contract.js";
import type { FlagSpecs } from "./args.js";
import { UsageError } from "./errors.js";

export const speculativeFlagSpecs = {
  draft: { type: "string", choices: draftModes },
  "spec-max": { type: "int", min: specMaxRange.min, max: specMaxRange.max },
  "spec-min-p": { type: "number", min: specMinPRange.min, max: specMinPRange.max },
  "spec-rule": { type: "string", choices: specRules },
} as const satisfies FlagSpecs;

type SpeculativeFlags = {
  draft?: (typeof draftModes)[number];
  "spec-max"?: number;
  "spec-min-p"?: number;
  "spec-rule"?: (typeof specRules)[number];
};

/** The flags as SpeculativeSettings (generation options and load settings alike): draft defaults to auto. */
export function speculativeOptions(f: SpeculativeFlags): SpeculativeSettings & { draft: NonNullable<SpeculativeSettings["draft"]> } {
  return {
    draft: f.draft ?? defaultAppDraft,
    ...(f["spec-max"] !== undefined && { specMax: f["spec-max"] }),
    ...(f["spec-min-p"] !== undefined && { specMinP: f["spec-min-p"] }),
    ...(f["spec-rule"] !== undefined && { specRule: f["spec-rule"] }),
  };
}

/** The window flags shape drafts: with --draft none there are none, so giving one is a mistake worth a usage error. */
export function checkSpeculativeFlags(f: SpeculativeFlags, usage: string): void {
  if (f.draft !== "none") return;
  for (const name of ["spec-max", "spec-min-p", "spec-rule"] as const)
    if (f[name] !== undefined) throw new UsageError(`--${name} shapes the drafts: it cannot go with --draft none`, usage);
}
