// A child process running the app's services on a data folder, for tests that
// must kill or constrain a whole process (spawn-services-child.ts starts it).
// Reads its configuration from $GUILD_SERVICES_CHILD (JSON, ServicesChildConfig)
// and reports on stdout, one JSON object a line, written synchronously so that
// a line printed before a SIGKILL is never lost:
//   {"event":"started","notices":[…]}      the services exist (notices raised while opening)
//   {"event":"ready","model":ID|null}      the start-up load finished
//   {"event":"sent","conversationId","messageId"}
//   {"event":"token","count":N,"text":…}   after the reply's Nth streamed token (text so far)
//   {"event":"done","message":{…}}         the reply ended
//   {"event":"conversations","list":[…]}   then the services are disposed and the process exits
// With holdAtToken N the process freezes right after announcing token N (its
// event loop blocked: no timer, no write), so a kill lands exactly there.
import { writeSync } from "node:fs";

import type { ChatReplyEvent } from "../shared/app-contract.js";
import { createAppServices } from "../main/services/index.js";

export interface ServicesChildConfig {
  dataDir: string;
  packagesDir: string;
  /** A message to send in a new conversation (temperature 0) once the model is loaded. */
  send?: string;
  holdAtToken?: number;
  /** RuntimeHostOptions.testPacing's pause between tokens. */
  pacingDelayMs?: number;
}

const config = JSON.parse(process.env["GUILD_SERVICES_CHILD"] ?? "null") as ServicesChildConfig | null;
if (!config) throw new Error("GUILD_SERVICES_CHILD is not set");
const report = (event: string, fields: Record<string, unknown> = {}) => writeSync(1, JSON.stringify({ event, ...fields }) + "\n");

const services = createAppServices({
  dataDir: config.dataDir,
  packagesDir: config.packagesDir,
  loadDefaults: { threads: 1 },
  ...(config.pacingDelayMs !== undefined && { runtime: { testPacing: { tokensPerStep: 1, delayMs: config.pacingDelayMs } } }),
});
report("started", { notices: await services.contract.notices.list() });
await services.ready;
report("ready", { model: (await services.contract.models.current())?.id ?? null });

if (config.send !== undefined) {
  const chat = services.contract.chat;
  const conversation = await chat.createConversation({ settings: { temperature: 0 } });
  let messageId = "";
  let count = 0;
  let text = "";
  const done = new Promise<ChatReplyEvent & { kind: "done" }>((resolve) => {
    services.subscribe((name, payload) => {
      const e = payload as ChatReplyEvent;
      if (name !== "chat.reply" || e.conversationId !== conversation.id) return;
      if (e.kind === "delta") {
        count++;
        text += e.text;
        report("token", { count, text });
        if (count === config.holdAtToken) {
          // Frozen until killed: Atomics.wait blocks the whole event loop.
          const cell = new Int32Array(new SharedArrayBuffer(4));
          for (;;) Atomics.wait(cell, 0, 0, 60_000);
        }
      } else if (e.kind === "done") resolve(e);
    });
  });
  const sent = await chat.send({ conversationId: conversation.id, content: config.send });
  messageId = sent.assistantMessage.id;
  report("sent", { conversationId: conversation.id, messageId });
  report("done", { message: (await done).message });
}

report("conversations", { list: await services.contract.chat.listConversations() });
await services.dispose();
