import type { GuildModel } from "../runtime/model.js";
import { CliError } from "./errors.js";

/** Fails with one line when an id is not in the model's vocabulary. */
export function checkTokenIds(model: GuildModel, ids: readonly number[], flag: string): void {
  const n = model.vocabSize;
  const bad = ids.findIndex((id) => id < 0 || id >= n);
  if (bad >= 0) {
    throw new CliError(`${flag}: token id ${ids[bad]} (position ${bad}) is not in ${model.path} (n_vocab ${n})`);
  }
}
