// ModelDownloads against the Hub stand-in (app/test/hub-stand-in.ts): search,
// the files of a repository (shards grouped, unsafe names left out), a download
// verified against the Hub's sha256, resumed after a dropped connection (by
// itself, and by Resume after it gave up or was cancelled), a corrupted file
// refused and deleted, split models, and a name already taken in the folder.
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";

import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";

import type { AppEvents, DownloadInfo } from "../../shared/app-contract.js";
import { HubStandIn } from "../../test/hub-stand-in.js";
import { fixturesDir } from "../../test/fixtures.js";
import { ModelLibrary } from "./model-library.js";
import { ModelDownloads, partialSuffix, type ModelDownloadsOptions } from "./model-downloads.js";

const models = path.join(fixturesDir, "models");
const single = "qwen3moe-a-Q8_0.gguf";
const shards = [1, 2, 3].map((i) => `qwen3moe-a-Q8_0-split-0000${i}-of-00003.gguf`);
const repo = "guild-test/qwen3moe-a-GGUF";

describe("ModelDownloads against the Hub stand-in", () => {
  let hub: HubStandIn;
  let dir: string;
  let events: AppEvents["downloads.changed"][] = [];
  let downloaded: string[] = [];
  const made: ModelDownloads[] = [];

  beforeAll(async () => {
    hub = new HubStandIn({
      pageSize: 3,  // the tree comes in pages: every page is read
      repos: [
        {
          id: repo, downloads: 1234, likes: 5,
          files: [
            { path: single, source: path.join(models, single) },
            { path: "Q4_0/qwen3moe-a-Q4_0.gguf", source: path.join(models, "qwen3moe-a-Q4_0.gguf") },
            ...shards.map((s) => ({ path: `split/${s}`, source: path.join(models, s) })),
            { path: "README.md", bytes: Buffer.from("# a model card\n") },
            // Names that must never become files of the models folder:
            { path: ".hidden.gguf", bytes: Buffer.from("x") },
            { path: "evil\\..\\..\\evil.gguf", bytes: Buffer.from("x") },
          ],
        },
        { id: "someone/other-model", files: [{ path: "notes.txt", bytes: Buffer.from("no gguf here") }] },
      ],
    });
    await hub.start();
  });
  afterAll(async () => {
    await hub.stop();
  });
  afterEach(async () => {
    for (const d of made.splice(0)) await d.dispose();
    hub.bytesPerSecond = 0;
    rmSync(dir, { recursive: true, force: true });
  });

  function downloads(extra: Partial<ModelDownloadsOptions> = {}): ModelDownloads {
    dir = mkdtempSync(path.join(os.tmpdir(), "guild-downloads-"));
    events = [];
    downloaded = [];
    const d = new ModelDownloads({
      hubEndpoint: () => hub.url, modelsDir: () => dir, retryDelayMs: 20, progressIntervalMs: 20,
      emit: (name, payload) => { if (name === "downloads.changed") events.push(payload as AppEvents["downloads.changed"]); },
      onDownloaded: (file) => { downloaded.push(file); },
      ...extra,
    });
    made.push(d);
    return d;
  }

  async function settle(d: ModelDownloads, id: string): Promise<DownloadInfo> {
    for (let i = 0; i < 3000; i++) {
      const info = (await d.downloads()).find((j) => j.id === id)!;
      if (info.state !== "queued" && info.state !== "downloading" && info.state !== "verifying") return info;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error("the download did not end");
  }

  it("searches GGUF repositories and lists a repository's models, shards grouped and unsafe names left out", async () => {
    const d = downloads();
    expect(await d.search({ query: "qwen3moe" })).toEqual([{ id: repo, downloads: 1234, likes: 5, updatedAt: "2025-01-02T03:04:05.000Z" }]);
    expect(await d.search({ query: "other" })).toEqual([]);  // no .gguf file: not a GGUF repository
    const files = await d.files({ repo });
    expect(files.models.map((m) => [m.name, m.quant, m.files.length, m.complete, m.inLibrary])).toEqual([
      ["qwen3moe-a-Q4_0.gguf", "Q4_0", 1, true, false],
      ["qwen3moe-a-Q8_0-split-00001-of-00003.gguf", "Q8_0", 3, true, false],
      [single, "Q8_0", 1, true, false],
    ]);
    const split = files.models[1]!;
    expect(split.totalBytes).toBe(shards.reduce((a, s) => a + statSync(path.join(models, s)).size, 0));
    expect(split.files[0]!.sha256).toBe(hub.sha256(repo, `split/${shards[0]}`));
    expect(files.skipped.sort()).toEqual([".hidden.gguf", "evil\\..\\..\\evil.gguf"]);
    await expect(d.files({ repo: "../../etc" })).rejects.toThrow(/not a Hub repository id/);
    await expect(d.files({ repo: "nobody/nothing" })).rejects.toThrow(/not found on the Hub/);
  });

  it("downloads a model, verified against the Hub's sha256, with progress", async () => {
    hub.bytesPerSecond = 4 * 2 ** 20;
    const d = downloads();
    const started = await d.download({ repo, name: single });
    const done = await settle(d, started.id);
    expect(done).toMatchObject({ state: "done", receivedBytes: done.totalBytes, path: path.join(dir, single), message: "Verified against the Hub's sha256." });
    expect(readFileSync(path.join(dir, single)).equals(readFileSync(path.join(models, single)))).toBe(true);
    expect(existsSync(path.join(dir, single + partialSuffix))).toBe(false);
    expect(downloaded).toEqual([path.join(dir, single)]);
    // Progress on the way: growing byte counts, a speed and an ETA.
    const seen = events.map((e) => e.downloads.find((j) => j.id === started.id)!).filter((j) => j.state === "downloading");
    const counts = seen.map((j) => j.receivedBytes);
    expect(new Set(counts).size).toBeGreaterThan(2);
    expect(counts).toEqual([...counts].sort((a, b) => a - b));
    expect(seen.some((j) => j.bytesPerSecond > 0 && j.etaSeconds !== null)).toBe(true);
    expect((await d.files({ repo })).models.find((m) => m.name === single)!.inLibrary).toBe(true);
    // Asked again, nothing is fetched: it is there already.
    const fetched = hub.rangesOf(repo, single).length;
    const again = await settle(d, (await d.download({ repo, name: single })).id);
    expect(again).toMatchObject({ state: "done", message: "Already in the models folder (same name and size)." });
    expect(hub.rangesOf(repo, single)).toHaveLength(fetched);
  });

  it("resumes by itself after the connection drops, with an HTTP Range from where it stopped", async () => {
    const d = downloads();
    hub.cutNext(repo, single, 1_000_000);
    const done = await settle(d, (await d.download({ repo, name: single })).id);
    expect(done.state).toBe("done");
    expect(done.message).toMatch(/the connection dropped once and the download resumed where it stopped/);
    const ranges = hub.rangesOf(repo, single).slice(-2);
    expect(ranges[0]).toBeNull();
    const from = Number(/^bytes=(\d+)-$/.exec(ranges[1] ?? "")?.[1]);
    expect(from).toBeGreaterThan(0);
    expect(from).toBeLessThanOrEqual(1_000_000);
    expect(readFileSync(path.join(dir, single)).equals(readFileSync(path.join(models, single)))).toBe(true);
  });

  it("gives up after its retries, keeps the .partial file, and Resume continues it", async () => {
    const d = downloads({ retries: 0 });
    hub.cutNext(repo, single, 700_000);
    const failed = await settle(d, (await d.download({ repo, name: single })).id);
    expect(failed.state).toBe("failed");
    expect(failed.message).toMatch(/connection (dropped|closed) at .* Resume continues from/);
    const kept = statSync(path.join(dir, single + partialSuffix)).size;
    expect(kept).toBeGreaterThan(0);
    await d.resume({ id: failed.id });
    const done = await settle(d, failed.id);
    expect(done).toMatchObject({ state: "done", resumedBytes: kept });
    expect(hub.rangesOf(repo, single).at(-1)).toBe(`bytes=${kept}-`);
    expect(readFileSync(path.join(dir, single)).equals(readFileSync(path.join(models, single)))).toBe(true);
  });

  it("refuses a corrupted file: the sha256 differs, the download is deleted and nothing enters the folder", async () => {
    const d = downloads();
    hub.corrupt(repo, single);
    try {
      const failed = await settle(d, (await d.download({ repo, name: single })).id);
      expect(failed.state).toBe("failed");
      expect(failed.message).toMatch(new RegExp(`^${single.replace(/\./g, "\\.")} is damaged: its sha256 is [0-9a-f]{64}, the Hub lists ${hub.sha256(repo, single)}; the download was deleted`));
      expect(existsSync(path.join(dir, single))).toBe(false);
      expect(existsSync(path.join(dir, single + partialSuffix))).toBe(false);
      expect(downloaded).toEqual([]);
    } finally {
      hub.corrupt(repo, single, false);
    }
  });

  it("cancels midway, keeping the part so far; Resume asks for the rest only", async () => {
    hub.bytesPerSecond = 1 * 2 ** 20;
    const d = downloads();
    const { id } = await d.download({ repo, name: single });
    for (let i = 0; i < 500 && !((await d.downloads())[0]!.receivedBytes > 300_000); i++) await new Promise((r) => setTimeout(r, 10));
    expect(await d.cancel({ id })).toEqual({ cancelled: true });
    const cancelled = await settle(d, id);
    expect(cancelled.state).toBe("cancelled");
    const kept = statSync(path.join(dir, single + partialSuffix)).size;
    expect(kept).toBeGreaterThan(0);
    hub.bytesPerSecond = 0;
    await d.resume({ id });
    const done = await settle(d, id);
    expect(done.state).toBe("done");
    expect(hub.rangesOf(repo, single).at(-1)).toBe(`bytes=${kept}-`);
    expect(readFileSync(path.join(dir, single)).equals(readFileSync(path.join(models, single)))).toBe(true);
    expect(await d.clear({ id })).toEqual({ cleared: true });
    expect(await d.downloads()).toEqual([]);
  });

  it("downloads a split model's shards as one model, which the library lists once with its facts", async () => {
    const d = downloads();
    const done = await settle(d, (await d.download({ repo, name: shards[0]! })).id);
    expect(done).toMatchObject({ state: "done", files: 3, fileIndex: 3, path: path.join(dir, shards[0]!) });
    for (const s of shards) expect(readFileSync(path.join(dir, s)).equals(readFileSync(path.join(models, s)))).toBe(true);
    const library = new ModelLibrary(path.join(models, single), dir);
    const listed = (await library.list()).filter((f) => f.source === "library");
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ name: shards[0], shards: { present: 3, count: 3 }, facts: { architecture: "qwen3moe", quant: "Q8_0", problems: [] } });
  });

  it("does not overwrite a different file of the same name in the models folder", async () => {
    const d = downloads();
    writeFileSync(path.join(dir, single), "someone else's file");
    const failed = await settle(d, (await d.download({ repo, name: single })).id);
    expect(failed.state).toBe("failed");
    expect(failed.message).toMatch(/already exists in .* and is a different file/);
    expect(readFileSync(path.join(dir, single), "utf8")).toBe("someone else's file");
    await expect(d.download({ repo, name: ".hidden.gguf" })).rejects.toThrow(/has no GGUF model named/);
  });
});
