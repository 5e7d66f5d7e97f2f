import { useEffect, useMemo, useState } from "react";
import { useShallow } from "zustand/react/shallow";

import { LOAD_STAGES } from "../../shared/runtime-contract.js";
import { formatBytes } from "../common/format.js";
import { useApp } from "../stores/store.js";
import { emptyLoadSettingsForm, peerList, toLoadSettings } from "./load-settings.js";
import { GpuFitNote } from "./GpuFitNote.js";
import { LoadSettings } from "./LoadSettings.js";
import { stageLabel } from "./stage-labels.js";

export function ModelsView() {
  const { files, current, loadingPath, progress, summary, error, notice, cancelling, currentDevice } = useApp(useShallow((s) => ({
    files: s.files, current: s.current, loadingPath: s.loadingPath, progress: s.progress, summary: s.summary, error: s.modelsError,
    notice: s.modelsNotice, cancelling: s.cancellingLoad, currentDevice: s.currentDevice,
  })));
  const refresh = useApp((s) => s.refreshModels);
  const load = useApp((s) => s.loadModel);
  const unload = useApp((s) => s.unloadModel);
  const cancelLoad = useApp((s) => s.cancelLoad);
  const inspect = useApp((s) => s.inspectModel);
  const [path, setPath] = useState("");
  const [form, setForm] = useState(emptyLoadSettingsForm);
  const parsed = useMemo(() => toLoadSettings(form), [form]);
  const canLoad = loadingPath === null && parsed.errors.length === 0;
  useEffect(() => { void refresh(); }, [refresh]);
  const settings = () => parsed.settings;
  const stageIndex = progress && progress.stageIndex > 0 ? progress.stageIndex : progress?.stage === "ready" ? LOAD_STAGES.length : 0;
  const pct = Math.round((stageIndex / LOAD_STAGES.length) * 100);
  return (
    <div className="page">
      <h2>Models</h2>
      <section className="card" data-testid="current-model">
        <h3>Current model</h3>
        {current ? (
          <dl className="facts">
            <dt>Name</dt><dd>{current.name}</dd>
            <dt>Architecture</dt><dd>{current.architecture}</dd>
            <dt>Layers / experts</dt><dd>{current.layers} layers · {current.experts} experts, {current.expertsPerToken} per token</dd>
            <dt>Context</dt><dd>{current.contextSize} tokens</dd>
            <dt>Weights</dt><dd>{formatBytes(current.weightBytes)}</dd>
            <dt>Threads / kernels</dt><dd>{current.threads} · {current.kernels || "default"}</dd>
            <dt>Path</dt><dd className="path">{current.path}</dd>
          </dl>
        ) : <p>{loadingPath ? "Loading…" : "No model is loaded."}</p>}
        {current && <button type="button" onClick={() => void unload()} data-testid="unload">Unload</button>}
      </section>
      {loadingPath && (
        <section className="card" data-testid="load-progress">
          <h3>Loading {loadingPath.split(/[\\/]/).pop()}</h3>
          <div className="progress" role="progressbar" aria-valuemin={0} aria-valuemax={100} aria-valuenow={pct}
            aria-valuetext={progress ? stageLabel(progress.stage) : "Checking the file"} aria-label="Load progress">
            <div style={{ width: `${pct}%` }} />
          </div>
          <div className="progress-row">
            <p data-testid="load-stage">{progress
              ? <>Stage {Math.max(stageIndex, 1)} of {LOAD_STAGES.length}: {stageLabel(progress.stage)} <code>{progress.stage}</code></>
              : "Checking the file…"}</p>
            <button type="button" onClick={() => void cancelLoad()} disabled={cancelling} data-testid="cancel-load">
              {cancelling ? "Cancelling…" : "Cancel load"}</button>
          </div>
        </section>
      )}
      {error && <div className="banner error" role="alert">{error}</div>}
      {notice && <div className="banner note" role="status" data-testid="models-notice">{notice}</div>}
      <section className="card">
        <h3>Load settings</h3>
        <LoadSettings form={form} currentDevice={current ? currentDevice : null} errors={parsed.errors} onChange={setForm} />
      </section>
      <section className="card">
        <h3>Model files</h3>
        <table>
          <thead><tr><th>Name</th><th>Source</th><th>Size</th><th /></tr></thead>
          <tbody>
            {files.map((f) => (
              <tr key={f.path}>
                <td title={f.path}>{f.name}{current?.path === f.path && <span className="badge ok">loaded</span>}</td>
                <td>{f.source}</td>
                <td>{formatBytes(f.sizeBytes)}</td>
                <td className="actions">
                  <button type="button" onClick={() => void inspect(f.path)}>Inspect</button>
                  <button type="button" disabled={!canLoad} onClick={() => void load(f.path, settings())}>Load</button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        <form className="load-form" onSubmit={(e) => { e.preventDefault(); if (path.trim() && canLoad) void load(path.trim(), settings()); }}>
          <input value={path} onChange={(e) => setPath(e.target.value)} placeholder="/path/to/model.gguf" aria-label="GGUF path" />
          <button type="button" disabled={!path.trim()} onClick={() => void inspect(path.trim())}>Inspect</button>
          <button type="submit" className="primary" disabled={!path.trim() || !canLoad}>Load GGUF</button>
        </form>
      </section>
      {summary && (
        <section className="card" data-testid="model-summary">
          <h3>{summary.name}</h3>
          <dl className="facts">
            <dt>Architecture</dt><dd>{summary.architecture}</dd>
            <dt>Parameters</dt><dd>{summary.parameterCount.toLocaleString()}</dd>
            <dt>File</dt><dd>{formatBytes(summary.fileBytes)}</dd>
            <dt>Layers</dt><dd>{summary.layers} (embedding {summary.embeddingLength})</dd>
            <dt>Experts</dt><dd>{summary.experts}, {summary.expertsPerToken} per token</dd>
            <dt>Context</dt><dd>{summary.contextLength} tokens (trained)</dd>
            <dt>Vocabulary</dt><dd>{summary.vocabSize}</dd>
            <dt>Tensor types</dt><dd>{Object.entries(summary.tensorTypes).map(([k, v]) => `${k}×${v}`).join(", ")}</dd>
          </dl>
          <h4>Memory estimate</h4>
          <table className="memory">
            <tbody>
              <tr><td>Dense weights</td><td>{formatBytes(summary.memory.denseBytes)}</td></tr>
              <tr><td>Experts</td><td>{formatBytes(summary.memory.expertBytes)}</td></tr>
              <tr><td>KV cache ({summary.memory.contextSize} tokens, f16)</td><td>{formatBytes(summary.memory.kvCacheBytes)}</td></tr>
              <tr className="total"><td>Total</td><td>{formatBytes(summary.memory.totalBytes)}</td></tr>
            </tbody>
          </table>
          {summary.experts > 0 && form.device !== "cpu" && (
            <GpuFitNote memory={summary.memory} budgetGiB={parsed.settings?.gpuBudgetGiB ?? null}
              peers={parsed.settings?.gpuPeers ? { count: peerList(parsed.settings.gpuPeers).length, budgetGiB: parsed.settings.gpuPeerBudgetGiB ?? null } : null} />
          )}
        </section>
      )}
    </div>
  );
}
