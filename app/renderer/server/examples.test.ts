// The Server panel's examples: the curl command quotes what it must.
import { describe, expect, it } from "vitest";

import { curlExample, nodeExample, pythonExample, shellQuote } from "./examples.js";

describe("API examples", () => {
  it("quote values for the shell", () => {
    expect(shellQuote("it's")).toBe(`'it'\\''s'`);
    const curl = curlExample("http://127.0.0.1:8080", "sk-1", "o'neil-Q4_K_M");
    expect(curl).toBe([
      "curl http://127.0.0.1:8080/v1/chat/completions \\",
      "  -H 'content-type: application/json' \\",
      "  -H 'authorization: Bearer sk-1' \\",
      `  -d '{"model":"o'\\''neil-Q4_K_M","messages":[{"role":"user","content":"Hello! Who are you?"}],"max_tokens":64}'`,
    ].join("\n"));
    expect(curlExample("http://127.0.0.1:8080", "", "m")).not.toContain("authorization");
  });

  it("name the base URL and key in the SDK examples", () => {
    expect(pythonExample("http://127.0.0.1:9", "", "m")).toContain('OpenAI(base_url="http://127.0.0.1:9/v1", api_key="unused")');
    expect(nodeExample("http://127.0.0.1:9", "k", "m")).toContain('new OpenAI({ baseURL: "http://127.0.0.1:9/v1", apiKey: "k" })');
  });
});
