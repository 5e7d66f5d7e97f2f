// The Hugging Face Hub's HTTP API, as much of it as finding and fetching GGUF
// models needs (the endpoint is a setting, so a mirror or a local stand-in
// serves too):
//   GET /api/models?search=Q&filter=gguf&sort=downloads   → [{id, downloads, likes, lastModified}]
//   GET /api/models/{repo}/tree/main?recursive=true       → [{type, path, size, oid, lfs: {oid: sha256, size}}]
//                                                            (paged by a Link: <…>; rel="next" header)
//   GET /{repo}/resolve/main/{path}                        → the file (redirects to a CDN; honours Range)
// Everything the Hub says is untrusted: repository ids are checked, and a
// file becomes a choice only when its base name can be a file of the models
// folder (gguf-names.ts); split shards become one choice.
import path from "node:path";

import type { HubFile, HubModel, HubModelChoice } from "../../shared/app-contract.js";
import { parseShardName, quantOfName, shardFileName, unsafeModelFileName } from "./gguf-names.js";
import { RuntimeError } from "./runtime-host.js";

export type FetchLike = (url: string, init?: RequestInit) => Promise<Response>;

const apiTimeoutMs = 30_000;
const maxTreePages = 20;
const maxSearchResults = 30;

/** Why `repo` is not an "owner/name" repository id, or null. */
export function badRepoId(repo: string): string | null {
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}\/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$/.test(repo) || repo.includes(".."))
    return `${JSON.stringify(repo)} is not a Hub repository id (owner/name)`;
  return null;
}

/** The download URL of a file of a repository's main revision. */
export function resolveUrl(endpoint: string, repo: string, filePath: string): string {
  return `${endpoint}/${repo}/resolve/main/${filePath.split("/").map(encodeURIComponent).join("/")}`;
}

function reachError(endpoint: string, err: unknown): RuntimeError {
  const cause = (err as { cause?: { code?: string } }).cause?.code ?? (err instanceof Error ? err.message : String(err));
  return new RuntimeError(`cannot reach the Hugging Face Hub at ${endpoint} (${cause}): check the network, or the hub endpoint in Preferences`, "failed");
}

async function getJson(fetchImpl: FetchLike, endpoint: string, url: string, what: string): Promise<{ body: unknown; next: string | null }> {
  let res: Response;
  try {
    res = await fetchImpl(url, { headers: { accept: "application/json" }, signal: AbortSignal.timeout(apiTimeoutMs) });
  } catch (err) {
    throw reachError(endpoint, err);
  }
  if (res.status === 401 || res.status === 403 || res.status === 404) {
    await res.body?.cancel();
    throw new RuntimeError(`${what}: not found on the Hub (or it needs a login)`, "not_found");
  }
  if (!res.ok) {
    await res.body?.cancel();
    throw new RuntimeError(`${what}: the Hub answered HTTP ${res.status}`, "failed");
  }
  let body: unknown;
  try {
    body = await res.json();
  } catch {
    throw new RuntimeError(`${what}: the Hub's answer is not JSON`, "failed");
  }
  const link = res.headers.get("link") ?? "";
  const m = /<([^>]+)>\s*;\s*rel="?next"?/.exec(link);
  let next: string | null = null;
  if (m) {
    // Only pages of the same endpoint are followed.
    const u = new URL(m[1]!, url);
    if (u.origin === new URL(endpoint).origin) next = u.href;
  }
  return { body, next };
}

const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : 0);

export async function searchModels(fetchImpl: FetchLike, endpoint: string, query: string): Promise<HubModel[]> {
  const q = query.trim();
  if (q.length === 0) return [];
  if (q.length > 200) throw new RuntimeError("the search is longer than 200 characters", "invalid");
  const url = `${endpoint}/api/models?${new URLSearchParams({ search: q, filter: "gguf", sort: "downloads", direction: "-1", limit: String(maxSearchResults) })}`;
  const { body } = await getJson(fetchImpl, endpoint, url, `search ${JSON.stringify(q)}`);
  if (!Array.isArray(body)) throw new RuntimeError("the Hub's search answer is not a list", "failed");
  const out: HubModel[] = [];
  for (const item of body) {
    if (typeof item !== "object" || item === null) continue;
    const o = item as Record<string, unknown>;
    const id = typeof o["id"] === "string" ? o["id"] : typeof o["modelId"] === "string" ? o["modelId"] : null;
    if (id === null || badRepoId(id) !== null) continue;
    const updated = typeof o["lastModified"] === "string" ? o["lastModified"] : typeof o["createdAt"] === "string" ? o["createdAt"] : null;
    out.push({ id, downloads: num(o["downloads"]), likes: num(o["likes"]), updatedAt: updated });
    if (out.length >= maxSearchResults) break;
  }
  return out;
}

/** Every .gguf file of a repository's main revision (all pages of the tree, recursively). */
export async function listGgufFiles(fetchImpl: FetchLike, endpoint: string, repo: string): Promise<{ files: HubFile[]; skipped: string[] }> {
  const bad = badRepoId(repo);
  if (bad) throw new RuntimeError(bad, "invalid");
  let url: string | null = `${endpoint}/api/models/${repo}/tree/main?recursive=true`;
  const files: HubFile[] = [];
  const skipped: string[] = [];
  for (let page = 0; url !== null && page < maxTreePages; page++) {
    const got: { body: unknown; next: string | null } = await getJson(fetchImpl, endpoint, url, repo);
    if (!Array.isArray(got.body)) throw new RuntimeError(`${repo}: the Hub's file list is not a list`, "failed");
    for (const item of got.body) {
      if (typeof item !== "object" || item === null) continue;
      const o = item as Record<string, unknown>;
      if (o["type"] !== "file" || typeof o["path"] !== "string" || !o["path"].toLowerCase().endsWith(".gguf")) continue;
      const filePath = o["path"];
      const name = path.posix.basename(filePath);
      if (unsafeModelFileName(name) !== null || filePath.split("/").some((seg) => seg === ".." || seg === ".")) {
        skipped.push(filePath);
        continue;
      }
      const lfs = typeof o["lfs"] === "object" && o["lfs"] !== null ? (o["lfs"] as Record<string, unknown>) : null;
      const sha = typeof lfs?.["oid"] === "string" && /^[0-9a-f]{64}$/i.test(lfs["oid"]) ? lfs["oid"].toLowerCase() : null;
      files.push({ path: filePath, name, sizeBytes: num(lfs?.["size"] ?? o["size"]), sha256: sha });
    }
    url = got.next;
  }
  return { files, skipped };
}

/** The files as models: single files, and split shards grouped under their first shard's name. */
export function groupModels(files: readonly HubFile[]): HubModelChoice[] {
  const choices: HubModelChoice[] = [];
  const groups = new Map<string, { count: number; stem: string; dir: string; parts: Map<number, HubFile> }>();
  for (const f of files) {
    const shard = parseShardName(f.name);
    if (!shard) {
      choices.push({ name: f.name, quant: quantOfName(f.name), files: [f], totalBytes: f.sizeBytes, complete: true, inLibrary: false });
      continue;
    }
    const dir = path.posix.dirname(f.path);
    const key = `${dir}/${shard.stem}/${shard.count}`;
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { count: shard.count, stem: shard.stem, dir, parts: new Map() }));
    g.parts.set(shard.index, f);
  }
  for (const g of groups.values()) {
    const parts = [...g.parts.entries()].sort((a, b) => a[0] - b[0]).map(([, f]) => f);
    const first = shardFileName({ stem: g.stem, index: 1, count: g.count }, 1);
    choices.push({
      name: first, quant: quantOfName(first), files: parts, totalBytes: parts.reduce((a, f) => a + f.sizeBytes, 0),
      complete: parts.length === g.count, inLibrary: false,
    });
  }
  // Two files of one name in different folders would land on one file here: only the first of them is offered.
  const seen = new Set<string>();
  return choices.filter((c) => (seen.has(c.name) ? false : (seen.add(c.name), true))).sort((a, b) => a.name.localeCompare(b.name));
}
