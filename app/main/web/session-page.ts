// The page /app/ answers without a session: what to do, in words, and never
// the secret itself. No script and no inline style (the app's CSP holds).
export type NoSessionReason = "missing" | "invalid" | "other-user";

const explanations: Record<NoSessionReason, string> = {
  missing: "This address needs the app's session, which comes with the link the server printed when it started.",
  invalid: "This link is not valid any more: the server was restarted, or the link belongs to another server.",
  "other-user": "This server belongs to another user of this machine, and answers only its own user.",
};

export function noSessionPage(reason: NoSessionReason): string {
  const nextStep = reason === "other-user"
    ? "<p>Start your own with <code>npm start</code> or <code>guild serve</code>.</p>"
    : "<p>Open the link printed by <code>npm start</code> or <code>guild serve</code> in the terminal where it runs: " +
      "<code>http://127.0.0.1:PORT/app/?token=…</code>. It works once per server start; " +
      "a restarted server prints a new one.</p>";
  return [
    "<!doctype html>",
    '<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">',
    "<title>Guild: open the printed link</title></head>",
    `<body><h1>Guild</h1><p>${explanations[reason]}</p>${nextStep}</body></html>`,
    "",
  ].join("\n");
}
