// Getting a model: search the Hugging Face Hub for GGUF repositories, open
// one to see its models (quantization, size, shards of a split model as one),
// and download one into the models folder (the main process downloads; the
// list below shows the progress).
import { useState } from "react";
import { useShallow } from "zustand/react/shallow";

import { formatBytes } from "../common/format.js";
import { useApp } from "../stores/store.js";

export function HubSearch() {
  const { results, searching, error, repoFiles, repoLoading, downloads, settings } = useApp(useShallow((s) => ({
    results: s.hubResults, searching: s.hubSearching, error: s.hubError, repoFiles: s.repoFiles, repoLoading: s.repoLoading,
    downloads: s.downloads, settings: s.appSettings,
  })));
  const search = useApp((s) => s.searchHub);
  const openRepo = useApp((s) => s.openRepo);
  const closeRepo = useApp((s) => s.closeRepo);
  const download = useApp((s) => s.startDownload);
  const [query, setQuery] = useState("");
  const active = (repo: string, name: string) => downloads.some((d) => d.repo === repo && d.name === name && (d.state === "queued" || d.state === "downloading" || d.state === "verifying"));
  return (
    <div className="hub" data-testid="hub">
      <form className="load-form" role="search" onSubmit={(e) => { e.preventDefault(); if (query.trim()) void search(query.trim()); }}>
        <input value={query} onChange={(e) => setQuery(e.target.value)} placeholder="e.g. Qwen3 30B A3B GGUF" aria-label="Search the Hugging Face Hub" />
        <button type="submit" className="primary" disabled={!query.trim() || searching}>{searching ? "Searching…" : "Search"}</button>
      </form>
      <p className="fine-print">Models go into {settings ? <code>{settings.modelsDir}</code> : "the models folder"} (change it in Preferences).
        GGUF files of the architectures this app runs load directly: Qwen3-MoE, Qwen3, Llama and Mixtral-style models.</p>
      {error && <div className="banner error" role="alert" data-testid="hub-error">{error}</div>}
      {results && !repoFiles && (
        results.length === 0 ? <p data-testid="hub-results">No GGUF repositories match.</p> : (
          <ul className="hub-results" data-testid="hub-results">
            {results.map((r) => (
              <li key={r.id}>
                <span className="hub-repo">{r.id}</span>
                <span className="hub-stats">{r.downloads.toLocaleString("en-US")} downloads · {r.likes.toLocaleString("en-US")} likes</span>
                <button type="button" onClick={() => void openRepo(r.id)} disabled={repoLoading !== null} aria-label={`Show the models of ${r.id}`}>
                  {repoLoading === r.id ? "Opening…" : "Show models"}</button>
              </li>
            ))}
          </ul>
        )
      )}
      {repoFiles && (
        <div className="hub-repo-files" data-testid="hub-files">
          <div className="toolbar">
            <h4>{repoFiles.repo}</h4>
            <button type="button" className="small" onClick={closeRepo}>Back to the results</button>
          </div>
          {repoFiles.models.length === 0 ? <p>This repository has no GGUF models.</p> : (
            <table>
              <thead><tr><th>Model</th><th>Quantization</th><th>Size</th><th /></tr></thead>
              <tbody>
                {repoFiles.models.map((m) => (
                  <tr key={m.name}>
                    <td>{m.name}{m.files.length > 1 && <span className="badge">{m.files.length} shards</span>}</td>
                    <td>{m.quant ?? "—"}</td>
                    <td>{formatBytes(m.totalBytes)}</td>
                    <td className="actions">
                      {m.inLibrary ? <span className="badge ok">in the library</span>
                        : !m.complete ? <span className="badge warn" title="Some shards of this split model are missing on the Hub">incomplete</span>
                        : <button type="button" onClick={() => void download(repoFiles.repo, m.name)} disabled={active(repoFiles.repo, m.name)}
                          aria-label={`Download ${m.name}`}>{active(repoFiles.repo, m.name) ? "Downloading…" : "Download"}</button>}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          {repoFiles.skipped.length > 0 && (
            <p className="fine-print">Left out, as their names cannot be files of the models folder: {repoFiles.skipped.join(", ")}</p>
          )}
        </div>
      )}
    </div>
  );
}
