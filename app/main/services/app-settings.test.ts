// The settings in <data>/settings.json (SettingsStore), the models folder the
// library follows when the setting changes (through the composition root), and
// the library's file browser and delete, which stay inside their folders.
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { afterEach, describe, expect, it } from "vitest";

import type { AppEvents } from "../../shared/app-contract.js";
import { fixturesDir } from "../../test/fixtures.js";
import { embeddedModelPath } from "../paths.js";
import { defaultHubEndpoint, SettingsStore } from "./app-settings.js";
import { createAppServices } from "./index.js";
import { ModelLibrary } from "./model-library.js";

const made: string[] = [];
const tmp = (prefix: string) => {
  const d = mkdtempSync(path.join(os.tmpdir(), prefix));
  made.push(d);
  return d;
};
afterEach(() => {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("SettingsStore", () => {
  it("defaults to <data>/models and the Hub, keeps changes in settings.json, and reads them back", async () => {
    const data = tmp("guild-settings-");
    const s = new SettingsStore(data, { envHubEndpoint: undefined });
    expect(await s.get()).toEqual({
      dataDir: data, modelsDir: path.join(data, "models"), modelsDirDefault: path.join(data, "models"),
      hubEndpoint: defaultHubEndpoint, hubEndpointDefault: defaultHubEndpoint, hubEndpointFromEnv: false, theme: "system",
    });
    const elsewhere = path.join(tmp("guild-models-"), "nested", "models");
    const changed = await s.update({ modelsDir: elsewhere, hubEndpoint: "http://127.0.0.1:9/", theme: "dark" });
    expect(changed).toMatchObject({ modelsDir: elsewhere, hubEndpoint: "http://127.0.0.1:9", theme: "dark" });
    expect(statSync(elsewhere).isDirectory()).toBe(true);  // made when missing
    expect(statSync(path.join(data, "settings.json")).mode & 0o777).toBe(0o600);
    expect(await new SettingsStore(data, { envHubEndpoint: undefined }).get()).toMatchObject({ modelsDir: elsewhere, hubEndpoint: "http://127.0.0.1:9", theme: "dark" });
    // "" goes back to the default.
    expect(await s.update({ modelsDir: "", hubEndpoint: "" })).toMatchObject({ modelsDir: path.join(data, "models"), hubEndpoint: defaultHubEndpoint });
  });

  it("refuses bad values with one sentence and keeps the old ones", async () => {
    const data = tmp("guild-settings-");
    const s = new SettingsStore(data, { envHubEndpoint: undefined });
    await expect(s.update({ modelsDir: "relative/models" })).rejects.toThrow("the models folder must be an absolute path (e.g. /home/me/models)");
    const file = path.join(data, "a-file");
    writeFileSync(file, "x");
    await expect(s.update({ modelsDir: path.join(file, "models") })).rejects.toThrow(/^cannot create the folder .*a-file\/models: ENOTDIR$/);
    await expect(s.update({ hubEndpoint: "ftp://example.org" })).rejects.toThrow("the hub endpoint must be an http:// or https:// URL");
    await expect(s.update({ hubEndpoint: "https://user:pw@example.org" })).rejects.toThrow(/must not carry credentials/);
    await expect(s.update({ theme: "blue" })).rejects.toThrow("theme must be one of system, light, dark");
    expect(await s.get()).toMatchObject({ modelsDir: path.join(data, "models"), hubEndpoint: defaultHubEndpoint, theme: "system" });
  });

  it("lets GUILD_HF_ENDPOINT win over the saved endpoint", async () => {
    const data = tmp("guild-settings-");
    await new SettingsStore(data, { envHubEndpoint: undefined }).update({ hubEndpoint: "https://mirror.example" });
    const s = new SettingsStore(data, { envHubEndpoint: "http://127.0.0.1:4567/" });
    expect(await s.get()).toMatchObject({ hubEndpoint: "http://127.0.0.1:4567", hubEndpointFromEnv: true });
    const notes: string[] = [];
    const bad = new SettingsStore(data, { envHubEndpoint: "not a url", notify: (m) => notes.push(m) });
    expect(bad.hubEndpoint).toBe("https://mirror.example");
    expect(notes).toEqual([expect.stringMatching(/^GUILD_HF_ENDPOINT=not a url is ignored: /)]);
  });

  it("moves a damaged settings file aside with one notice and starts from the defaults", async () => {
    const data = tmp("guild-settings-");
    writeFileSync(path.join(data, "settings.json"), "{ not json");
    const notes: string[] = [];
    const s = new SettingsStore(data, { envHubEndpoint: undefined, notify: (m) => notes.push(m) });
    expect((await s.get()).theme).toBe("system");
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatch(/^the settings file .*settings\.json could not be used \(.*\); it was moved to .*settings\.json\.corrupt-\d{8}T\d{6}\.\d{3}Z and the defaults apply$/);
    expect(existsSync(path.join(data, "settings.json"))).toBe(false);
    await s.update({ theme: "light" });
    expect(JSON.parse(readFileSync(path.join(data, "settings.json"), "utf8"))).toEqual({ theme: "light" });
  });
});

describe("the models folder setting", () => {
  it("moves the library: the list follows, with a models.changed event", async () => {
    const data = tmp("guild-app-");
    const app = createAppServices({ dataDir: data, loadEmbedded: false, packages: null, warn: () => undefined });
    const events: AppEvents["models.changed"][] = [];
    const off = app.subscribe((name, payload) => { if (name === "models.changed") events.push(payload as AppEvents["models.changed"]); });
    try {
      expect((await app.contract.models.list()).map((f) => f.source)).toEqual(["embedded"]);
      const folder = tmp("guild-folder-");
      copyFileSync(path.join(fixturesDir, "models", "qwen3moe-a-Q8_0.gguf"), path.join(folder, "mine.gguf"));
      await app.contract.settings.update({ modelsDir: folder });
      const listed = (await app.contract.models.list()).filter((f) => f.source === "library");
      expect(listed).toMatchObject([{ name: "mine.gguf", path: path.join(folder, "mine.gguf"), facts: { architecture: "qwen3moe", quant: "Q8_0" } }]);
      await expect.poll(() => events.length).toBeGreaterThan(0);
      expect(events.at(-1)!.files.map((f) => f.name)).toContain("mine.gguf");
      expect((await app.contract.models.browse({})).dir).toBe(folder);
      // Restarted, the app uses the saved folder.
      await app.dispose();
      const again = createAppServices({ dataDir: data, loadEmbedded: false, packages: null, warn: () => undefined });
      expect((await again.contract.models.list()).map((f) => f.name)).toContain("mine.gguf");
      await again.dispose();
    } finally {
      off();
      await app.dispose().catch(() => undefined);
    }
  });
});

describe("ModelLibrary browse and remove", () => {
  it("lists folders and .gguf files inside the models folder and home, and nothing outside", async () => {
    const home = tmp("guild-home-");
    const modelsDir = path.join(home, "models");
    mkdirSync(path.join(modelsDir, "sub"), { recursive: true });
    writeFileSync(path.join(modelsDir, "a.gguf"), "x");
    writeFileSync(path.join(modelsDir, "notes.txt"), "x");
    writeFileSync(path.join(modelsDir, ".hidden.gguf"), "x");
    symlinkSync("/etc", path.join(home, "etc-link"));
    const library = new ModelLibrary(embeddedModelPath(), modelsDir, home);
    const listing = await library.browse();
    expect(listing).toMatchObject({ dir: modelsDir, parent: path.dirname(modelsDir) });
    expect(listing.entries.map((e) => [e.name, e.kind])).toEqual([["sub", "folder"], ["a.gguf", "model"]]);
    expect((await library.browse(home)).parent).toBeNull();  // a root
    await expect(library.browse("/etc")).rejects.toThrow("/etc: outside the models folder and your home folder, which is all the file browser shows");
    await expect(library.browse(path.join(home, "etc-link"))).rejects.toThrow(/outside the models folder/);
    await expect(library.browse(path.join(modelsDir, "..", "..", ".."))).rejects.toThrow(/outside the models folder/);
  });

  it("deletes a model of the models folder with all its shards, and nothing elsewhere", async () => {
    const modelsDir = tmp("guild-models-");
    const shards = [1, 2].map((i) => path.join(modelsDir, `m-0000${i}-of-00002.gguf`));
    for (const f of shards) writeFileSync(f, "x");
    const library = new ModelLibrary(embeddedModelPath(), modelsDir);
    expect((await library.list()).filter((f) => f.source === "library")).toMatchObject([{ name: "m-00001-of-00002.gguf", shards: { present: 2, count: 2 }, sizeBytes: 2 }]);
    expect(await library.remove(shards[0]!)).toEqual(shards);
    expect(shards.some((f) => existsSync(f))).toBe(false);
    await expect(library.remove(embeddedModelPath())).rejects.toThrow(/only models in the models folder .* can be deleted here/);
    await expect(library.remove(path.join(modelsDir, "..", path.basename(modelsDir), "gone.gguf"))).rejects.toThrow(/no such model/);
  });
});
