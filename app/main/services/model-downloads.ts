// ModelDownloads: the app's HubService. Finds GGUF models on the Hugging Face
// Hub (hub-client.ts) and downloads them into the models folder, in the main
// process (never the renderer). One download runs at a time, its files (the
// shards of a split model) one after the other:
//   - each file is fetched into `<name>.partial` with HTTP Range, so a dropped
//     connection resumes where it stopped (retried a few times by itself), and
//     a cancelled or failed download resumes from its .partial file later;
//   - the bytes are hashed as they arrive (a resumed file's first part is read
//     back first) and must match the Hub's LFS sha256: a file that does not is
//     deleted, never renamed into the library;
//   - only then is `<name>.partial` renamed to `<name>`.
// Progress (bytes, speed over the last seconds, ETA) goes out as
// `downloads.changed` a few times a second. File names come from the Hub and
// are untrusted: hub-client.ts keeps only plain *.gguf base names, and the
// target is checked once more to lie directly in the models folder.
import { createHash, randomUUID, type Hash } from "node:crypto";
import { createReadStream } from "node:fs";
import { open, rename, stat, statfs, truncate, unlink } from "node:fs/promises";
import path from "node:path";

import type {
  DownloadInfo, EventSink, HubFile, HubModel, HubModelChoice, HubRepoFiles, HubService,
} from "../../shared/app-contract.js";
import { badRepoId, groupModels, listGgufFiles, resolveUrl, searchModels, type FetchLike } from "./hub-client.js";
import { unsafeModelFileName } from "./gguf-names.js";
import { ensureWritableFolder } from "./app-settings.js";
import { RuntimeError } from "./runtime-host.js";

export interface ModelDownloadsOptions {
  hubEndpoint: () => string;
  modelsDir: () => string;
  emit: EventSink;
  /** Called when a model has been downloaded and verified (the library then lists it). */
  onDownloaded?: (file: string) => void | Promise<void>;
  fetch?: FetchLike;
  /** Times a dropped connection is resumed by itself before the download fails. Defaults to 3. */
  retries?: number;
  /** The pause before the first retry (doubled each time). Defaults to 1000 ms. */
  retryDelayMs?: number;
  /** The least time between two progress events. Defaults to 250 ms. */
  progressIntervalMs?: number;
}

interface Job {
  info: DownloadInfo;
  files: HubFile[];
  controller: AbortController | null;
  /** Dropped connections resumed by themselves in this run. */
  interruptions: number;
  /** Files the Hub gave no sha256 for. */
  unverified: string[];
  /** Files already in the folder (same name and size), not fetched again. */
  present: number;
}

export const partialSuffix = ".partial";
/** Kept free on the disk beyond the download itself. */
const diskSlackBytes = 64 * 2 ** 20;
const speedWindowMs = 3000;

const sizeText = (n: number) => (n >= 2 ** 30 ? `${(n / 2 ** 30).toFixed(1)} GiB` : `${(n / 2 ** 20).toFixed(1)} MiB`);

/** A transfer that failed for a reason worth retrying (the connection, not the server's answer). */
class Interrupted extends Error {}

export class ModelDownloads implements HubService {
  private readonly jobs: Job[] = [];
  private running: Job | null = null;
  private readonly fetchImpl: FetchLike;
  private lastEmit = 0;
  private emitTimer: NodeJS.Timeout | null = null;
  private disposed = false;

  constructor(private readonly options: ModelDownloadsOptions) {
    this.fetchImpl = options.fetch ?? ((url, init) => fetch(url, init));
  }

  async search(req: { query: string }): Promise<HubModel[]> {
    return searchModels(this.fetchImpl, this.options.hubEndpoint(), req.query);
  }

  async files(req: { repo: string }): Promise<HubRepoFiles> {
    const repo = req.repo.trim();
    const { files, skipped } = await listGgufFiles(this.fetchImpl, this.options.hubEndpoint(), repo);
    const models = groupModels(files);
    for (const m of models) m.inLibrary = await this.inLibrary(m);
    return { repo, models, skipped };
  }

  private async inLibrary(m: HubModelChoice): Promise<boolean> {
    if (!m.complete) return false;
    for (const f of m.files) {
      const s = await stat(path.join(this.options.modelsDir(), f.name)).catch(() => null);
      if (!s?.isFile() || s.size !== f.sizeBytes) return false;
    }
    return true;
  }

  async download(req: { repo: string; name: string }): Promise<DownloadInfo> {
    const repo = req.repo.trim();
    const bad = badRepoId(repo);
    if (bad) throw new RuntimeError(bad, "invalid");
    const active = this.jobs.find((j) => j.info.repo === repo && j.info.name === req.name && (j.info.state === "queued" || j.info.state === "downloading" || j.info.state === "verifying"));
    if (active) return { ...active.info };
    // The Hub's own list decides what is fetched (sizes, hashes): never the caller's.
    const { models } = await this.files({ repo });
    const choice = models.find((m) => m.name === req.name);
    if (!choice) throw new RuntimeError(`${repo} has no GGUF model named ${req.name}`, "not_found");
    if (!choice.complete) throw new RuntimeError(`${repo}: ${req.name} is a split model whose shards are not all listed on the Hub`, "invalid");
    const dir = this.options.modelsDir();
    ensureWritableFolder(dir);
    const job: Job = {
      files: choice.files,
      controller: null,
      interruptions: 0,
      unverified: [],
      present: 0,
      info: {
        id: randomUUID(), repo, name: choice.name, state: "queued", files: choice.files.length, fileIndex: 1,
        totalBytes: choice.totalBytes, receivedBytes: 0, bytesPerSecond: 0, etaSeconds: null, resumedBytes: 0, message: null, path: null,
      },
    };
    this.jobs.push(job);
    this.changed(true);
    this.pump();
    return { ...job.info };
  }

  async downloads(): Promise<DownloadInfo[]> {
    return this.jobs.map((j) => ({ ...j.info }));
  }

  async cancel(req: { id: string }): Promise<{ cancelled: boolean }> {
    const job = this.jobs.find((j) => j.info.id === req.id);
    if (!job || (job.info.state !== "queued" && job.info.state !== "downloading" && job.info.state !== "verifying")) return { cancelled: false };
    if (job.controller) job.controller.abort();
    else {
      job.info.state = "cancelled";
      job.info.message = "cancelled before it started";
      this.changed(true);
    }
    return { cancelled: true };
  }

  async resume(req: { id: string }): Promise<DownloadInfo> {
    const job = this.jobs.find((j) => j.info.id === req.id);
    if (!job) throw new RuntimeError("no such download", "not_found");
    if (job.info.state !== "failed" && job.info.state !== "cancelled") throw new RuntimeError(`the download of ${job.info.name} is ${job.info.state}`, "busy");
    Object.assign(job.info, { state: "queued", message: null, bytesPerSecond: 0, etaSeconds: null });
    this.changed(true);
    this.pump();
    return { ...job.info };
  }

  async clear(req: { id: string }): Promise<{ cleared: boolean }> {
    const i = this.jobs.findIndex((j) => j.info.id === req.id);
    if (i < 0) return { cleared: false };
    const s = this.jobs[i]!.info.state;
    if (s === "queued" || s === "downloading" || s === "verifying") throw new RuntimeError("cancel the download first", "busy");
    this.jobs.splice(i, 1);
    this.changed(true);
    return { cleared: true };
  }

  /** Stops every download (their .partial files stay) and waits for the one running. */
  async dispose(): Promise<void> {
    this.disposed = true;
    for (const j of this.jobs) j.controller?.abort();
    while (this.running) await new Promise((r) => setTimeout(r, 10));
    if (this.emitTimer) clearTimeout(this.emitTimer);
  }

  /** Starts the next queued download when none runs. */
  private pump(): void {
    if (this.running || this.disposed) return;
    const next = this.jobs.find((j) => j.info.state === "queued");
    if (!next) return;
    this.running = next;
    void this.run(next).finally(() => {
      this.running = null;
      this.pump();
    });
  }

  private async run(job: Job): Promise<void> {
    const controller = new AbortController();
    job.controller = controller;
    const info = job.info;
    info.state = "downloading";
    info.resumedBytes = 0;
    job.interruptions = 0;
    job.unverified = [];
    job.present = 0;
    this.changed(true);
    try {
      const dir = this.options.modelsDir();
      await this.checkDiskSpace(dir, job);
      const done = (i: number) => job.files.slice(0, i).reduce((a, f) => a + f.sizeBytes, 0);
      for (let i = 0; i < job.files.length; i++) {
        info.fileIndex = i + 1;
        info.receivedBytes = done(i);
        await this.fetchFile(job, job.files[i]!, dir, done(i), controller.signal);
      }
      info.state = "done";
      info.receivedBytes = info.totalBytes;
      info.bytesPerSecond = 0;
      info.etaSeconds = 0;
      info.path = path.join(dir, job.files[0]!.name);
      const checked = job.present === job.files.length ? "Already in the models folder (same name and size)"
        : job.unverified.length > 0 ? `Not verified: the Hub lists no sha256 for ${job.unverified.join(", ")}` : "Verified against the Hub's sha256";
      info.message = checked + (job.interruptions > 0
        ? `; the connection dropped ${job.interruptions === 1 ? "once" : `${job.interruptions} times`} and the download resumed where it stopped.`
        : info.resumedBytes > 0 ? `; continued from ${sizeText(info.resumedBytes)} downloaded before.` : ".");
      this.changed(true);
      await this.options.onDownloaded?.(info.path);
    } catch (err) {
      if (controller.signal.aborted) {
        info.state = "cancelled";
        info.message = "cancelled; the part downloaded so far is kept, so Resume continues from there";
      } else {
        info.state = "failed";
        info.message = err instanceof Error ? err.message : String(err);
      }
      info.bytesPerSecond = 0;
      info.etaSeconds = null;
      this.changed(true);
    } finally {
      job.controller = null;
    }
  }

  private async checkDiskSpace(dir: string, job: Job): Promise<void> {
    let left = 0;
    for (const f of job.files) {
      const have = await stat(path.join(dir, f.name + partialSuffix)).then((s) => s.size, () => 0);
      left += Math.max(0, f.sizeBytes - have);
    }
    const fs = await statfs(dir).catch(() => null);
    if (!fs) return;
    const free = fs.bavail * fs.bsize;
    if (free < left + diskSlackBytes)
      throw new RuntimeError(`not enough disk space in ${dir}: ${job.info.name} needs ${sizeText(left)} more and ${sizeText(free)} is free`, "failed");
  }

  /** One file into `<name>.partial`, resumed and retried as needed, verified, then renamed. */
  private async fetchFile(job: Job, file: HubFile, dir: string, before: number, signal: AbortSignal): Promise<void> {
    const info = job.info;
    if (unsafeModelFileName(file.name) !== null) throw new RuntimeError(`refusing the file name ${JSON.stringify(file.name)}`, "invalid");
    const target = path.join(dir, file.name);
    if (path.dirname(target) !== path.resolve(dir)) throw new RuntimeError(`refusing the file name ${JSON.stringify(file.name)}`, "invalid");
    const existing = await stat(target).catch(() => null);
    if (existing) {
      if (existing.isFile() && existing.size === file.sizeBytes) {
        job.present++;  // already here (a download finished before)
        return;
      }
      throw new RuntimeError(`${file.name} already exists in ${dir} and is a different file: delete or move it, then try again`, "failed");
    }
    const partial = target + partialSuffix;
    const retries = this.options.retries ?? 3;
    const baseDelay = this.options.retryDelayMs ?? 1000;
    let hash: Hash | null = null;
    let have = 0;
    for (let attempt = 0; ; attempt++) {
      if (hash === null) {
        // Start (or restart) from what the .partial file holds, hashed again from its first byte.
        have = await stat(partial).then((s) => (s.isFile() ? s.size : -1), () => 0);
        if (have < 0) throw new RuntimeError(`${partial} is not a file`, "failed");
        if (have > file.sizeBytes) {
          await truncate(partial, 0);
          have = 0;
        }
        hash = createHash("sha256");
        if (have > 0) {
          info.state = "verifying";
          this.changed(true);
          await hashFile(partial, hash, signal);
          info.resumedBytes += have;
          info.state = "downloading";
          info.message = `resumed at ${sizeText(have)} of ${file.name}`;
        }
        info.receivedBytes = before + have;
        this.changed(true);
      }
      try {
        const restart = await this.transfer(job, file, partial, have, hash, before, signal);
        if (restart) {
          // The server sent the whole file instead of the range asked for: begin again from byte 0.
          await truncate(partial, 0).catch(() => undefined);
          hash = null;
          continue;
        }
        break;
      } catch (err) {
        if (signal.aborted || !(err instanceof Interrupted) || attempt >= retries) {
          if (err instanceof Interrupted) throw new RuntimeError(`${err.message}; Resume continues from ${sizeText((await stat(partial).catch(() => ({ size: 0 }))).size)}`, "failed");
          throw err;
        }
        have = (await stat(partial)).size;
        job.interruptions++;
        info.message = `the connection dropped at ${sizeText(have)} of ${file.name}; resuming`;
        this.changed(true);
        await sleep(baseDelay * 2 ** attempt, signal);
      }
    }
    const size = (await stat(partial)).size;
    if (size !== file.sizeBytes) throw new RuntimeError(`${file.name}: got ${size} bytes, the Hub lists ${file.sizeBytes}`, "failed");
    const digest = hash.digest("hex");
    if (file.sha256 !== null && digest !== file.sha256) {
      await unlink(partial).catch(() => undefined);
      throw new RuntimeError(`${file.name} is damaged: its sha256 is ${digest}, the Hub lists ${file.sha256}; the download was deleted (try again)`, "failed");
    }
    if (file.sha256 === null) job.unverified.push(file.name);
    await rename(partial, target);
  }

  /**
   * Fetches bytes [have, size) of one file and appends them to `partial`,
   * feeding `hash`. True when the server ignored the range (start again).
   * Throws Interrupted when the connection fails midway.
   */
  private async transfer(job: Job, file: HubFile, partial: string, have: number, hash: Hash, before: number, signal: AbortSignal): Promise<boolean> {
    if (have === file.sizeBytes) return false;
    const url = resolveUrl(this.options.hubEndpoint(), job.info.repo, file.path);
    let res: Response;
    try {
      res = await this.fetchImpl(url, { headers: have > 0 ? { range: `bytes=${have}-` } : {}, signal, redirect: "follow" });
    } catch (err) {
      if (signal.aborted) throw err;
      throw new Interrupted(`cannot reach ${new URL(url).host} for ${file.name} (${(err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message})`);
    }
    if (res.status === 416) {
      await res.body?.cancel();
      return have !== file.sizeBytes;
    }
    if (have > 0 && res.status === 200) {
      await res.body?.cancel();
      return true;
    }
    if (res.status !== 200 && res.status !== 206) {
      await res.body?.cancel();
      throw new RuntimeError(`${file.name}: the Hub answered HTTP ${res.status}`, res.status === 404 ? "not_found" : "failed");
    }
    if (res.status === 206) {
      const m = /^bytes (\d+)-/.exec(res.headers.get("content-range") ?? "");
      if (!m || Number(m[1]) !== have) {
        await res.body?.cancel();
        throw new RuntimeError(`${file.name}: the Hub sent another range than the one asked for`, "failed");
      }
    }
    if (!res.body) throw new Interrupted(`${file.name}: the answer has no body`);
    const out = await open(partial, have > 0 ? "a" : "w");
    const reader = res.body.getReader();
    const info = job.info;
    let got = have;
    const samples: { t: number; bytes: number }[] = [{ t: performance.now(), bytes: before + got }];
    try {
      for (;;) {
        let chunk: ReadableStreamReadResult<Uint8Array>;
        try {
          chunk = await reader.read();
        } catch (err) {
          if (signal.aborted) throw err;
          throw new Interrupted(`the connection dropped at ${sizeText(got)} of ${file.name}`);
        }
        if (chunk.done) break;
        const bytes = chunk.value;
        if (got + bytes.length > file.sizeBytes) throw new RuntimeError(`${file.name}: the Hub sent more than the ${file.sizeBytes} bytes it lists`, "failed");
        await out.write(bytes);
        hash.update(bytes);
        got += bytes.length;
        info.receivedBytes = before + got;
        const now = performance.now();
        samples.push({ t: now, bytes: info.receivedBytes });
        while (samples.length > 2 && now - samples[0]!.t > speedWindowMs) samples.shift();
        const first = samples[0]!;
        const seconds = (now - first.t) / 1000;
        if (seconds > 0.2) {
          info.bytesPerSecond = (info.receivedBytes - first.bytes) / seconds;
          info.etaSeconds = info.bytesPerSecond > 0 ? (info.totalBytes - info.receivedBytes) / info.bytesPerSecond : null;
        }
        this.changed(false);
      }
    } finally {
      await reader.cancel().catch(() => undefined);
      await out.close();
    }
    if (got < file.sizeBytes) throw new Interrupted(`the connection closed at ${sizeText(got)} of ${file.name}`);
    return false;
  }

  /** Publishes the downloads: at once for a state change, else at most every progressIntervalMs. */
  private changed(now: boolean): void {
    const interval = this.options.progressIntervalMs ?? 250;
    const send = () => {
      this.emitTimer = null;
      this.lastEmit = Date.now();
      this.options.emit("downloads.changed", { downloads: this.jobs.map((j) => ({ ...j.info })) });
    };
    if (now || Date.now() - this.lastEmit >= interval) {
      if (this.emitTimer) clearTimeout(this.emitTimer);
      send();
    } else if (!this.emitTimer) {
      this.emitTimer = setTimeout(send, interval - (Date.now() - this.lastEmit));
    }
  }
}

async function hashFile(file: string, hash: Hash, signal: AbortSignal): Promise<void> {
  for await (const chunk of createReadStream(file, { signal })) hash.update(chunk as Buffer);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(new Error("aborted"));
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      reject(new Error("aborted"));
    }, { once: true });
  });
}
