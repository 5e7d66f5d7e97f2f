// guild tokenize: text -> token ids by the model's rules (special tokens parsed).
import type { GuildModel } from "../runtime/model.js";
import { parseFlags, requireFlags, type FlagSpecs } from "./args.js";
import type { Command } from "./command.js";
import { CliError, exitOk } from "./errors.js";
import { openModel } from "./model-file.js";
import { Output } from "./output.js";

const flags = {
  model: { type: "string" },
  text: { type: "string" },
  "add-bos": { type: "boolean" },
  "no-parse-special": { type: "boolean" },
  json: { type: "boolean" },
} as const satisfies FlagSpecs;

const usage = "guild tokenize --model PATH --text TEXT [--add-bos] [--no-parse-special] [--json]";

async function run(argv: readonly string[]): Promise<number> {
  const f = parseFlags(argv, flags, usage);
  requireFlags(f, ["model", "text"], usage);
  // The tokenizer is all this needs: vocab-only files work, no weights are read.
  const model: GuildModel = await openModel(f.model!, { vocabOnly: true });
  try {
    const tokens = model.tokenize(f.text!, { addSpecial: false, parseSpecial: f["no-parse-special"] !== true });
    if (f["add-bos"]) {
      const bos = model.bosToken;
      if (bos === null) throw new CliError(`${model.path}: --add-bos: the vocabulary has no BOS token`);
      tokens.unshift(bos);
    }
    const out = new Output();
    out.line(f.json ? JSON.stringify({ tokens }) : tokens.join(","));
    await out.flush();
    return exitOk;
  } finally {
    model.dispose();
  }
}

export const tokenizeCommand: Command = {
  name: "tokenize",
  summary: "print the token ids of a text (special tokens parsed, no BOS unless --add-bos)",
  usage,
  run,
};
