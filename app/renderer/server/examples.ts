// Ready-to-run examples for the OpenAI API of a Guild server: curl (a shell
// command; values are single-quoted so any model id or key is safe to paste),
// the openai package for Python and for Node.
/** A shell word in single quotes ('\'' for a quote inside). */
export function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

export function curlExample(baseUrl: string, apiKey: string, model: string): string {
  const body = JSON.stringify({ model, messages: [{ role: "user", content: "Hello! Who are you?" }], max_tokens: 64 });
  return [
    `curl ${baseUrl}/v1/chat/completions`,
    `  -H 'content-type: application/json'`,
    ...(apiKey ? [`  -H ${shellQuote(`authorization: Bearer ${apiKey}`)}`] : []),
    `  -d ${shellQuote(body)}`,
  ].join(" \\\n");
}

export function pythonExample(baseUrl: string, apiKey: string, model: string): string {
  return [
    "from openai import OpenAI",
    "",
    `client = OpenAI(base_url=${JSON.stringify(`${baseUrl}/v1`)}, api_key=${JSON.stringify(apiKey || "unused")})`,
    `reply = client.chat.completions.create(model=${JSON.stringify(model)}, messages=[{"role": "user", "content": "Hello!"}])`,
    "print(reply.choices[0].message.content)",
  ].join("\n");
}

export function nodeExample(baseUrl: string, apiKey: string, model: string): string {
  return [
    'import OpenAI from "openai";',
    "",
    `const client = new OpenAI({ baseURL: ${JSON.stringify(`${baseUrl}/v1`)}, apiKey: ${JSON.stringify(apiKey || "unused")} });`,
    `const reply = await client.chat.completions.create({ model: ${JSON.stringify(model)}, messages: [{ role: "user", content: "Hello!" }] });`,
    "console.log(reply.choices[0].message.content);",
  ].join("\n");
}
