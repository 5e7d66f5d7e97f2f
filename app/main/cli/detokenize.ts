// guild detokenize: token ids -> text (special tokens rendered).
import { parseFlags, requireFlags, type FlagSpecs } from "./args.js";
import type { Command } from "./command.js";
import { exitOk } from "./errors.js";
import { openModel } from "./model-file.js";
import { Output } from "./output.js";
import { checkTokenIds } from "./tokens.js";

const flags = {
  model: { type: "string" },
  tokens: { type: "ids" },
  json: { type: "boolean" },
} as const satisfies FlagSpecs;

const usage = "guild detokenize --model PATH --tokens ID,ID,... [--json]";

async function run(argv: readonly string[]): Promise<number> {
  const f = parseFlags(argv, flags, usage);
  requireFlags(f, ["model", "tokens"], usage);
  // The tokenizer is all this needs: vocab-only files work, no weights are read.
  const model = await openModel(f.model!, { vocabOnly: true });
  try {
    checkTokenIds(model, f.tokens!, "--tokens");
    const bytes = model.detokenize(f.tokens!, { removeSpecial: false, unparseSpecial: true });
    const out = new Output();
    // Raw bytes without --json (they may be invalid UTF-8 where a character is split).
    if (f.json) out.line(JSON.stringify({ text: new TextDecoder().decode(bytes) }));
    else out.write(bytes);
    await out.flush();
    return exitOk;
  } finally {
    model.dispose();
  }
}

export const detokenizeCommand: Command = {
  name: "detokenize",
  summary: "print the text of token ids (raw bytes, or JSON with --json)",
  usage,
  run,
};
