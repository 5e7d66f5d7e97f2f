import { describe, expect, it } from "vitest";

import { HelpRequest, parseFlags, requireFlags } from "./args.js";
import { UsageError } from "./errors.js";

const specs = {
  model: { type: "string" },
  n: { type: "int", min: -1, max: 100 },
  p: { type: "number", above: 0, max: 1 },
  ids: { type: "ids" },
  kv: { type: "string", choices: ["f16", "f32"] },
  json: { type: "boolean" },
} as const;

const parse = (argv: string[]) => parseFlags(argv, specs, "usage");

describe("parseFlags", () => {
  it("parses each type, in both --flag value and --flag=value forms", () => {
    expect(parse(["--model", "a.gguf", "--n=-1", "--p", "0.5", "--ids", "1, 2,3", "--kv=f32", "--json"])).toEqual({
      model: "a.gguf",
      n: -1,
      p: 0.5,
      ids: [1, 2, 3],
      kv: "f32",
      json: true,
    });
  });

  it("takes the next argument as the value even when it looks like a flag", () => {
    expect(parse(["--model", "--json"])).toEqual({ model: "--json" });
  });

  it.each([
    [["--nope"], /unknown flag --nope/],
    [["--model"], /needs a value/],
    [["--n", "1.5"], /expected an integer/],
    [["--n", "101"], /<= 100/],
    [["--n", "-2"], />= -1/],
    [["--n", "12abc"], /expected an integer/],
    [["--p", "0"], /> 0/],
    [["--p", "nan"], /expected a number/],
    [["--p", ""], /expected a number/],
    [["--ids", "1,,2"], /token ids/],
    [["--ids", "1,-2"], /token ids/],
    [["--ids", "99999999999"], /out of range/],
    [["--kv", "q8"], /one of f16, f32/],
    [["--json=1"], /takes no value/],
    [["--json", "--json"], /given twice/],
    [["positional"], /unexpected argument/],
  ])("rejects %j", (argv, message) => {
    expect(() => parse(argv)).toThrow(UsageError);
    expect(() => parse(argv)).toThrow(message);
  });

  it("turns --help and -h into a HelpRequest", () => {
    expect(() => parse(["--json", "--help"])).toThrow(HelpRequest);
    expect(() => parse(["-h"])).toThrow(HelpRequest);
  });

  it("requireFlags names the first missing flag", () => {
    expect(() => requireFlags(parse(["--json"]), ["model", "ids"], "usage")).toThrow(/--model is required/);
  });
});
