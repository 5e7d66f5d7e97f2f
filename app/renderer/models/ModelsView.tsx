// The Models page: the current model, a load's stage progress, the model
// files (the library, with what each holds and whether this runtime runs it;
// a file opened by dialog, folder browser or path), getting models from the
// Hugging Face Hub, the load settings, and the inspected file with the memory
// plan for the settings as typed.
import { useEffect, useMemo, useRef, useState } from "react";
import { useShallow } from "zustand/react/shallow";

import { planMemory } from "../../shared/memory-plan.js";
import { LOAD_STAGES } from "../../shared/runtime-contract.js";
import { formatBytes } from "../common/format.js";
import { useApp } from "../stores/store.js";
import { client } from "../transport/index.js";
import { Downloads } from "./Downloads.js";
import { FolderBrowser } from "./FolderBrowser.js";
import { GpuFitNote } from "./GpuFitNote.js";
import { HubSearch } from "./HubSearch.js";
import { draftingText, emptyLoadSettingsForm, fromLoadSettings, peerList, toLoadSettings, type LoadFormSource } from "./load-settings.js";
import { LoadSettings } from "./LoadSettings.js";
import { MemoryPlanView } from "./MemoryPlanView.js";
import { stageLabel } from "./stage-labels.js";
import { BitsPerWeight, TypeMix } from "./TypeMix.js";

export function ModelsView() {
  const { files, current, loadingPath, progress, summary, error, notice, cancelling, currentDevice, browser, settings } = useApp(useShallow((s) => ({
    files: s.files, current: s.current, loadingPath: s.loadingPath, progress: s.progress, summary: s.summary, error: s.modelsError,
    notice: s.modelsNotice, cancelling: s.cancellingLoad, currentDevice: s.currentDevice, browser: s.browser, settings: s.appSettings,
  })));
  const refresh = useApp((s) => s.refreshModels);
  const load = useApp((s) => s.loadModel);
  const unload = useApp((s) => s.unloadModel);
  const cancelLoad = useApp((s) => s.cancelLoad);
  const inspect = useApp((s) => s.inspectModel);
  const browse = useApp((s) => s.browse);
  const closeBrowser = useApp((s) => s.closeBrowser);
  const pickFile = useApp((s) => s.pickModelFile);
  const remove = useApp((s) => s.removeModel);
  const refreshDownloads = useApp((s) => s.refreshDownloads);
  const refreshSettings = useApp((s) => s.refreshAppSettings);
  const [path, setPath] = useState("");
  const [form, setForm] = useState(emptyLoadSettingsForm);
  const [formSource, setFormSource] = useState<LoadFormSource>({ kind: "default" });
  const [browsing, setBrowsing] = useState(false);
  const parsed = useMemo(() => toLoadSettings(form), [form]);
  const canLoad = loadingPath === null && parsed.errors.length === 0;
  const summaryHeading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    void refresh();
    void refreshDownloads();
    void refreshSettings();
  }, [refresh, refreshDownloads, refreshSettings]);
  useEffect(() => { summaryHeading.current?.focus(); }, [summary?.path]);
  // A model picked for inspection brings the settings it last loaded with, unless the user has typed
  // settings of their own (those are never replaced: the banner below offers the remembered ones instead).
  useEffect(() => {
    if (!summary || formSource.kind === "typed") return;
    if (summary.lastLoad) {
      if (formSource.kind === "remembered" && formSource.path === summary.path && formSource.loadedAt === summary.lastLoad.loadedAt) return;
      setForm(fromLoadSettings(summary.lastLoad.settings));
      setFormSource({ kind: "remembered", path: summary.path, name: summary.name, loadedAt: summary.lastLoad.loadedAt });
    } else if (formSource.kind === "remembered" && formSource.path !== summary.path) {
      setForm(emptyLoadSettingsForm);  // another model's settings: this one has none of its own
      setFormSource({ kind: "default" });
    }
  }, [summary, formSource]);
  const editForm = (next: typeof form) => { setForm(next); setFormSource({ kind: "typed" }); };
  const applyRemembered = (lastLoad: NonNullable<typeof summary>["lastLoad"], target: { path: string; name: string }) => {
    if (!lastLoad) return;
    setForm(fromLoadSettings(lastLoad.settings));
    setFormSource({ kind: "remembered", path: target.path, name: target.name, loadedAt: lastLoad.loadedAt });
  };
  /** A row's Load: what the user typed, else the settings that model last loaded with, else the defaults. */
  const rowSettings = (f: (typeof files)[number]) => (formSource.kind === "typed" ? settingsNow() : f.lastLoad?.settings ?? undefined);
  const settingsNow = () => parsed.settings;
  const inspectNow = (p: string) => void inspect(p, settingsNow());
  const stageIndex = progress && progress.stageIndex > 0 ? progress.stageIndex : progress?.stage === "ready" ? LOAD_STAGES.length : 0;
  const pct = Math.round((stageIndex / LOAD_STAGES.length) * 100);
  const plan = useMemo(() => (summary ? planMemory(summary.shape, parsed.settings ?? {}, summary.machine) : null), [summary, parsed.settings]);
  const openFile = async () => {
    if (client.transportKind === "electron") {
      const picked = await pickFile();
      if (picked) {
        setPath(picked);
        inspectNow(picked);
      }
    } else {
      setBrowsing(true);
      await browse();
    }
  };
  return (
    <div className="page">
      <h2>Models</h2>
      {files.length > 0 && files.every((f) => f.source === "embedded") && (
        <p className="banner note" data-testid="first-steps">Only the small built-in demo model is here. To chat with a real one, search the
          Hugging Face Hub below (e.g. “Qwen3 30B A3B GGUF”), download a quantization that fits your memory, then press Load now.</p>
      )}
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
            <dt>Speculative drafts</dt><dd data-testid="current-drafting">{draftingText(current)}</dd>
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
          {current && <p className="fine-print">{current.name} stays loaded until the new model is ready (unless memory requires it to go first).</p>}
        </section>
      )}
      {error && <div className="banner error" role="alert">{error}</div>}
      {notice && <div className="banner note" role="status" data-testid="models-notice">{notice}</div>}
      <section className="card">
        <h3>Model files</h3>
        <p className="fine-print" data-testid="models-folder">Models folder: {settings ? <code>{settings.modelsDir}</code> : "…"} — downloads go there,
          and every .gguf file in it is listed here (change it in Preferences).</p>
        <table>
          <thead><tr><th>Name</th><th>What it is</th><th>Size</th><th /></tr></thead>
          <tbody>
            {files.map((f) => (
              <tr key={f.path} data-testid="model-file">
                <td title={f.path}>{f.name}{current?.path === f.path && <span className="badge ok">loaded</span>}
                  {f.shards && <span className={`badge ${f.shards.present < f.shards.count ? "warn" : ""}`}>{f.shards.present} of {f.shards.count} shards</span>}
                  <div className="reason">{f.source === "embedded" ? "built in" : f.source === "library" ? "models folder" : "opened by path"}</div></td>
                <td>{f.facts ? <>{f.facts.architecture}{f.facts.quant ? ` · ${f.facts.quant}` : ""}{f.facts.parameterCount > 0 ? ` · ${formatParams(f.facts.parameterCount)} parameters` : ""}
                  {f.facts.problems.length > 0 && <div className="reason error-text">Cannot load: {f.facts.problems.join("; ")}</div>}</>
                  : <span className="reason error-text">{f.factsError ?? "not inspected"}</span>}</td>
                <td>{formatBytes(f.sizeBytes)}</td>
                <td className="actions">
                  <button type="button" onClick={() => inspectNow(f.path)}>Inspect</button>
                  <button type="button" disabled={!canLoad} onClick={() => void load(f.path, rowSettings(f))}
                    title={formSource.kind !== "typed" && f.lastLoad ? "With the settings it was last loaded with" : undefined}>Load</button>
                  {f.source === "library" && (
                    <button type="button" className="icon" aria-label={`Delete ${f.name}`} title="Delete from the models folder"
                      onClick={() => { if (window.confirm(`Delete ${f.name} from the models folder?`)) void remove(f.path); }}>✕</button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        <form className="load-form" onSubmit={(e) => { e.preventDefault(); if (path.trim() && canLoad) void load(path.trim(), settingsNow()); }}>
          <button type="button" onClick={() => void openFile()} data-testid="open-file">
            {client.transportKind === "electron" ? "Open a file…" : "Browse…"}</button>
          <input value={path} onChange={(e) => setPath(e.target.value)} placeholder="/path/to/model.gguf" aria-label="GGUF path" />
          <button type="button" disabled={!path.trim()} onClick={() => inspectNow(path.trim())}>Inspect</button>
          <button type="submit" className="primary" disabled={!path.trim() || !canLoad}>Load GGUF</button>
        </form>
        {browsing && browser && (
          <FolderBrowser mode="file" onClose={() => { setBrowsing(false); closeBrowser(); }}
            onPick={(p) => { setPath(p); setBrowsing(false); closeBrowser(); inspectNow(p); }} />
        )}
      </section>
      <section className="card" data-testid="get-models">
        <h3>Get models from the Hugging Face Hub</h3>
        <HubSearch />
        <Downloads onLoad={(p) => void load(p, settingsNow())} />
      </section>
      <section className="card">
        <h3>Load settings</h3>
        {formSource.kind === "remembered" && (
          <p className="banner note" role="status" data-testid="remembered-settings">
            The settings {formSource.name} was last loaded with ({new Date(formSource.loadedAt).toLocaleString()}).{" "}
            <button type="button" onClick={() => { setForm(emptyLoadSettingsForm); setFormSource({ kind: "typed" }); }}>Use the defaults</button>
          </p>
        )}
        {formSource.kind === "typed" && summary?.lastLoad && !sameSettings(parsed.settings ?? {}, summary.lastLoad.settings) && (
          <p className="banner note" data-testid="remembered-settings-offer">
            {summary.name} was last loaded with other settings; yours are kept.{" "}
            <button type="button" onClick={() => applyRemembered(summary.lastLoad, summary)}>Use those instead</button>
          </p>
        )}
        <LoadSettings form={form} currentDevice={current ? currentDevice : null} errors={parsed.errors} fieldErrors={parsed.fieldErrors} onChange={editForm} />
      </section>
      {summary && plan && (
        <section className="card" data-testid="model-summary">
          <h3 tabIndex={-1} ref={summaryHeading}>{summary.name}</h3>
          {summary.problems.length > 0 && (
            <div className="banner error" role="alert" data-testid="model-problems">
              This runtime cannot load it: {summary.problems.join("; ")}.{current ? ` Loading it would keep ${current.name}.` : ""}
            </div>
          )}
          <dl className="facts">
            <dt>Architecture</dt><dd>{summary.architecture}</dd>
            <dt>Parameters</dt><dd>{summary.parameterCount.toLocaleString()}</dd>
            <dt>File</dt><dd>{formatBytes(summary.fileBytes)}{summary.shards > 1 ? ` in ${summary.shards} shards` : ""}</dd>
            <dt>Layers</dt><dd>{summary.layers} (embedding {summary.embeddingLength})</dd>
            <dt>Experts</dt><dd>{summary.experts}, {summary.expertsPerToken} per token</dd>
            <dt>Context</dt><dd>{summary.contextLength} tokens (trained)</dd>
            <dt>Vocabulary</dt><dd>{summary.vocabSize}</dd>
            <dt>Bits per weight</dt><dd data-testid="bits-per-weight"><BitsPerWeight bits={summary.bitsPerWeight} /></dd>
            <dt>Tensor types</dt><dd><TypeMix mix={summary.typeMix} /></dd>
          </dl>
          <h4>Memory estimate</h4>
          <MemoryPlanView plan={plan} />
          {summary.experts > 0 && form.device !== "cpu" && (
            <GpuFitNote memory={{ ...summary.memory, kvCacheBytes: plan.kvCacheBytes, contextSize: plan.contextSize }} budgetGiB={parsed.settings?.gpuBudgetGiB ?? null}
              peers={parsed.settings?.gpuPeers ? { count: peerList(parsed.settings.gpuPeers).length, budgetGiB: parsed.settings.gpuPeerBudgetGiB ?? null } : null} />
          )}
          {summary.problems.length === 0 && (
            <div className="toolbar summary-actions">
              {plan.fitsRam
                ? <button type="button" className="primary" disabled={!canLoad || current?.path === summary.path} onClick={() => void load(summary.path, settingsNow())}>Load this model</button>
                : <button type="button" className="danger" disabled={!canLoad} onClick={() => void load(summary.path, settingsNow(), true)}
                  title="The estimate exceeds the free RAM: the system may swap or stop the app">Load anyway</button>}
            </div>
          )}
        </section>
      )}
    </div>
  );
}

/** The same load settings, whatever the order of their fields. */
function sameSettings(a: object, b: object): boolean {
  const canon = (o: object) => JSON.stringify(Object.entries(o).sort(([x], [y]) => (x < y ? -1 : 1)));
  return canon(a) === canon(b);
}

function formatParams(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(1)} B`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} M`;
  return n.toLocaleString("en-US");
}
