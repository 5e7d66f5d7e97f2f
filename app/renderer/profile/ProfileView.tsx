import { useEffect, useRef } from "react";
import { useShallow } from "zustand/react/shallow";

import type { StartupProfileJson } from "../../shared/runtime-contract.js";
import { download, formatBytes, formatMs } from "../common/format.js";
import { useApp } from "../stores/store.js";
import { PlacementView } from "./PlacementView.js";
import { toChromeTrace } from "./trace.js";

function Timeline({ p }: { p: StartupProfileJson }) {
  const total = Math.max(p.total_ms, ...p.stages.map((s) => s.end_ms), 1e-6);
  const fallbackStages = new Set(p.fallbacks.map((f) => f.stage));
  return (
    <div className="timeline" data-testid="timeline">
      {p.stages.map((s, i) => (
        <div className="stage-row" key={s.name} data-testid="stage-row" title={JSON.stringify(s.detail, null, 1)}>
          <span className="stage-name">{i + 1}. {s.name}{fallbackStages.has(s.name) && <span className="badge warn">fallback</span>}</span>
          <span className="stage-track">
            <span className="stage-bar" style={{ left: `${(s.start_ms / total) * 100}%`, width: `max(2px, ${(s.duration_ms / total) * 100}%)` }} />
          </span>
          <span className="stage-num">{formatMs(s.duration_ms)}</span>
          <span className="stage-num">{s.bytes ? formatBytes(s.bytes) : "—"}</span>
        </div>
      ))}
      <div className="stage-row total"><span className="stage-name">total</span><span /><span className="stage-num">{formatMs(p.total_ms)}</span><span /></div>
    </div>
  );
}

export function ProfileView() {
  const { profile, source, error, recent, current } = useApp(useShallow((s) => ({
    profile: s.profile, source: s.profileSource, error: s.profileError, recent: s.recentProfiles, current: s.current,
  })));
  const refresh = useApp((s) => s.refreshProfiles);
  const showCurrent = useApp((s) => s.showCurrentProfile);
  const show = useApp((s) => s.showProfile);
  const openText = useApp((s) => s.openProfileText);
  const file = useRef<HTMLInputElement>(null);
  useEffect(() => { void refresh(); if (!useApp.getState().profile) void showCurrent(); }, [refresh, showCurrent, current?.id]);
  const exportTrace = () => {
    if (!profile) return;
    const name = typeof profile.model["name"] === "string" ? profile.model["name"] : "profile";
    download(`${name}.trace.json`, "application/json", JSON.stringify(toChromeTrace(profile)));
  };
  return (
    <div className="page">
      <h2>Startup profile</h2>
      <div className="toolbar">
        <button type="button" onClick={() => void showCurrent()} disabled={!current}>Current model</button>
        <select aria-label="Recent loads" value="" onChange={(e) => { if (e.target.value) void show(e.target.value); }}>
          <option value="">Recent loads…</option>
          {recent.map((r) => <option key={r.id} value={r.id}>{new Date(r.recordedAt).toLocaleString()} · {r.modelName} · {formatMs(r.totalMs)}</option>)}
        </select>
        <button type="button" onClick={() => file.current?.click()}>Open profile JSON…</button>
        <input ref={file} type="file" accept=".json,application/json" hidden data-testid="profile-file"
          onChange={(e) => { const f = e.target.files?.[0]; if (f) void f.text().then((t) => openText(f.name, t)); e.target.value = ""; }} />
        <button type="button" onClick={exportTrace} disabled={!profile}>Export Chrome trace</button>
      </div>
      {error && <div className="banner error" role="alert">{error}</div>}
      {!profile ? <p>No profile yet: load a model, or open a profile JSON saved by <code>guild run --profile-out</code>.</p> : (
        <>
          <p className="source">Showing: {source} · {String(profile.model["name"] ?? "")} · {String(profile.machine["cpu"] ?? "")}</p>
          <section className="card"><h3>Stages ({profile.stages.length})</h3><Timeline p={profile} /></section>
          <section className="card">
            <h3>Fallbacks</h3>
            {profile.fallbacks.length === 0 ? <p>None.</p> : (
              <ul className="fallbacks" data-testid="fallbacks">{profile.fallbacks.map((f, i) => <li key={i}><strong>{f.stage}</strong>: {f.reason}</li>)}</ul>
            )}
          </section>
          <section className="card"><h3>Expert placement per layer</h3><PlacementView p={profile} /></section>
        </>
      )}
    </div>
  );
}
