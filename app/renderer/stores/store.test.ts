// The renderer's store against a stand-in transport (the contract's calls answered
// here, events sent by the test): a streaming reply's deltas are taken in a batch at
// a time (one update for many tokens, none lost, none after the reply's end), and the
// Hub's "in the library" marks follow the models folder.
import { beforeAll, beforeEach, describe, expect, it, vi } from "vitest";

import type { AppSettings, HubRepoFiles, Message } from "../../shared/app-contract.js";

const fake = vi.hoisted(() => ({
  handlers: {} as Record<string, (req: unknown) => unknown>,
  calls: [] as string[],
}));

vi.mock("../transport/index.js", async () => {
  const { createClient } = await import("../transport/transport.js");
  return {
    client: createClient({
      kind: "web",
      call: async (service, method, req) => {
        const name = `${service}.${method}`;
        fake.calls.push(name);
        const handler = fake.handlers[name];
        if (!handler) throw new Error(`the test does not answer ${name}`);
        return handler(req);
      },
      subscribe: () => () => undefined,
    }),
  };
});

type Store = typeof import("./store.js").useApp;
let useApp: Store;
let deltaIntervalMs: number;

beforeAll(async () => {
  // The theme goes to <html data-theme>: a stand-in element (no DOM here).
  vi.stubGlobal("document", { documentElement: { dataset: {} } });
  ({ useApp } = await import("./store.js"));
  ({ deltaIntervalMs } = await import("./chat-slice.js"));
});

beforeEach(() => {
  fake.handlers = {};
  fake.calls = [];
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function message(id: string, content: string, status: Message["status"] = "streaming"): Message {
  return {
    id, conversationId: "c1", role: "assistant", content, status, createdAt: "2025-01-01T00:00:00Z", stats: null, error: null,
    parentId: null, siblingIds: [id], model: "m", edited: false, contextFrom: null,
  };
}

describe("store: a streaming reply", () => {
  it("takes thousands of deltas in a few updates, in order, and the first one at once", async () => {
    useApp.setState({ selectedId: "c1", messages: [message("r1", "")], reply: { messageId: "r1", position: null } });
    let updates = 0;
    const off = useApp.subscribe(() => { updates++; });
    const words = Array.from({ length: 4000 }, (_, i) => `w${i} `);
    useApp.getState().onReply({ kind: "delta", conversationId: "c1", messageId: "r1", text: words[0]! });
    // The first delta after a pause shows at once.
    expect(useApp.getState().messages[0]!.content).toBe(words[0]);
    for (const w of words.slice(1)) useApp.getState().onReply({ kind: "delta", conversationId: "c1", messageId: "r1", text: w });
    expect(updates).toBe(1);
    await sleep(deltaIntervalMs * 3);
    expect(useApp.getState().messages[0]!.content).toBe(words.join(""));
    expect(updates).toBe(2);
    off();
  });

  it("takes in what is pending before the reply's end, which then replaces the text; nothing arrives after it", async () => {
    useApp.setState({ selectedId: "c1", messages: [message("r2", "")], reply: { messageId: "r2", position: null } });
    fake.handlers["chat.listConversations"] = () => [];
    const onReply = (text: string) => useApp.getState().onReply({ kind: "delta", conversationId: "c1", messageId: "r2", text });
    await sleep(deltaIntervalMs * 2);
    onReply("a");
    onReply("b");  // pending
    expect(useApp.getState().messages[0]!.content).toBe("a");
    const seen: string[] = [];
    const off = useApp.subscribe((s) => seen.push(s.messages[0]!.content));
    const done = message("r2", "ab, as stored", "complete");
    useApp.getState().onReply({ kind: "done", conversationId: "c1", messageId: "r2", message: done });
    expect(seen).toEqual(["ab", "ab, as stored"]);
    expect(useApp.getState().messages[0]).toEqual(done);
    expect(useApp.getState().reply).toBeNull();
    await sleep(deltaIntervalMs * 3);
    expect(useApp.getState().messages[0]).toEqual(done);
    off();
  });

  it("drops the pending deltas of a chat that is no longer shown", async () => {
    useApp.setState({ selectedId: "c1", messages: [message("r3", "")], reply: { messageId: "r3", position: null } });
    await sleep(deltaIntervalMs * 2);
    useApp.getState().onReply({ kind: "delta", conversationId: "c1", messageId: "r3", text: "x" });
    useApp.getState().onReply({ kind: "delta", conversationId: "c1", messageId: "r3", text: "y" });
    useApp.setState({ selectedId: "c2", messages: [], reply: null });
    await sleep(deltaIntervalMs * 3);
    expect(useApp.getState().messages).toEqual([]);
    expect(useApp.getState().reply).toBeNull();
  });
});

describe("store: the Hub's files and the models folder", () => {
  const settings = (modelsDir: string): AppSettings => ({
    modelsDir, modelsDirDefault: "/data/models", hubEndpoint: "https://hub.example", hubEndpointDefault: "https://huggingface.co",
    hubEndpointFromEnv: false, theme: "system", dataDir: "/data",
  });
  const files = (inLibrary: boolean): HubRepoFiles => ({
    repo: "org/model-GGUF", skipped: [],
    models: [{ name: "m-Q8_0.gguf", quant: "Q8_0", files: [{ path: "m-Q8_0.gguf", name: "m-Q8_0.gguf", sizeBytes: 10, sha256: null }], totalBytes: 10, complete: true, inLibrary }],
  });

  it("lists the open repository again when the models folder changes, so that 'in the library' is of the folder now used", async () => {
    let folder = "/data/my-models";
    // The main process answers for the folder it uses: the file is in the user's folder only.
    fake.handlers["hub.files"] = () => files(folder === "/data/my-models");
    fake.handlers["settings.update"] = (req) => {
      folder = (req as { modelsDir: string }).modelsDir || "/data/models";
      return settings(folder);
    };
    useApp.getState().onSettingsChanged(settings(folder));
    await useApp.getState().openRepo("org/model-GGUF");
    expect(useApp.getState().repoFiles?.models[0]!.inLibrary).toBe(true);

    // Back to the default folder (Preferences' "Use the default").
    expect(await useApp.getState().saveAppSettings({ modelsDir: "" })).toBeNull();
    await expect.poll(() => useApp.getState().repoFiles?.models[0]!.inLibrary).toBe(false);
    expect(fake.calls.filter((c) => c === "hub.files")).toHaveLength(2);

    // Another setting (the theme) changes nothing in the list: no new listing.
    useApp.getState().onSettingsChanged({ ...settings(folder), theme: "dark" });
    await sleep(20);
    expect(fake.calls.filter((c) => c === "hub.files")).toHaveLength(2);
  });
});
