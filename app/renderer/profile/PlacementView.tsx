import { Fragment } from "react";
// Expert placement per layer (a GPU | CPU bar each), and with a GPU the budget
// arithmetic, the cache fill and the calibration figures.
import type { StartupProfileJson } from "../../shared/runtime-contract.js";
import { formatBytes, formatMs } from "../common/format.js";
import { formatGiB, formatRate, formatUs, summarizePlacement, type LayerPlacement, type PlacementSummary } from "./placement.js";

function deviceLine(s: PlacementSummary): string {
  const total = s.gpuExperts + s.cpuExperts;
  const experts = total === 0 ? "no routed experts"
    : s.gpuExperts === 0 ? `all ${total} experts on the CPU`
    : s.cpuExperts === 0 ? `all ${total} experts on the GPU`
    : `${s.gpuExperts} of ${total} experts on the GPU (${formatRate(s.gpuExperts / total)}), ${s.cpuExperts} on the CPU`;
  if (s.device === "cpu") return `Device: CPU${s.gpuNote ? ` (${s.gpuNote})` : ""} · ${experts}`;
  const g = s.gpu;
  const name = g ? ` (${g.name}${g.computeCapability ? `, compute ${g.computeCapability}` : ""}${g.totalBytes ? `, ${formatBytes(g.totalBytes)}` : ""})` : "";
  return `Device: ${s.device}${name} · ${experts}`;
}

function Budget({ s }: { s: PlacementSummary }) {
  const b = s.budget;
  if (!b) return null;
  const budget = b.budgetGiB ?? 0;
  const dense = Math.min(b.denseKvScratchGiB ?? 0, budget);
  const cache = Math.min(b.expertCacheGiB ?? 0, Math.max(0, budget - dense));
  return (
    <div data-testid="gpu-budget">
      <h4>GPU memory budget{b.mode ? ` · ${b.mode}` : ""}</h4>
      {budget > 0 && (
        <>
          <div className="budget-bar" title="dense weights, KV cache and workspace | expert cache">
            <span className="dense" style={{ width: `${(dense / budget) * 100}%` }} />
            <span className="cache" style={{ width: `${(cache / budget) * 100}%` }} />
          </div>
          <div className="legend"><span className="swatch dense" /> dense + KV + workspace <span className="swatch cache" /> expert cache</div>
        </>
      )}
      <dl className="facts">
        <dt>Budget</dt><dd>{formatGiB(b.budgetGiB)} (of {formatGiB(b.deviceFreeGiB)} free; the default is free less 1 GiB)</dd>
        <dt>All on the GPU</dt><dd>{formatGiB(b.allOnGpuGiB)}</dd>
        <dt>Dense + KV + workspace</dt><dd>{formatGiB(b.denseKvScratchGiB)}{b.prefillStagingGiB ? ` (prefill staging ${formatGiB(b.prefillStagingGiB)})` : ""}</dd>
        {b.expertCacheGiB !== null && <><dt>Expert cache</dt><dd>{formatGiB(b.expertCacheGiB)}</dd></>}
        {s.cacheFill?.gpuExperts != null && (
          <><dt>First fill</dt><dd>{s.cacheFill.gpuExperts} experts{s.cacheFill.cacheBytes ? `, ${formatBytes(s.cacheFill.cacheBytes)}` : ""}
            {s.cacheFill.copyMs !== null ? ` in ${formatMs(s.cacheFill.copyMs)}` : ""}{s.cacheFill.copyGbps !== null ? ` (${s.cacheFill.copyGbps.toFixed(1)} GB/s)` : ""}</dd></>
        )}
        {b.error && <><dt>GPU given up</dt><dd>{b.error}</dd></>}
      </dl>
    </div>
  );
}

function CalibrationFigures({ s }: { s: PlacementSummary }) {
  const c = s.calibration;
  if (!c) return null;
  return (
    <div data-testid="calibration">
      <h4>Calibration</h4>
      <dl className="facts">
        {c.plan && <><dt>Plan</dt><dd>{c.plan}</dd></>}
        {c.reason && <><dt>Why</dt><dd>{c.reason}</dd></>}
        {c.expectedHitRate !== null && (
          <><dt>Expected hit rate</dt><dd>{formatRate(c.expectedHitRate)}{c.heldOutHitRate !== null ? ` (held out: ${formatRate(c.heldOutHitRate)})` : ""}</dd></>
        )}
        {c.cpuUsPerExpert !== null && <><dt>CPU per expert</dt><dd>{formatUs(c.cpuUsPerExpert)} (one token, mean of the MoE layers)</dd></>}
        {c.cpuUsPerExpertBatch !== null && (
          <><dt>CPU per expert, batch</dt><dd>{formatUs(c.cpuUsPerExpertBatch)}{c.cpuBatchTokens !== null ? ` (${c.cpuBatchTokens} tokens at once)` : ""}</dd></>
        )}
        {c.copyUsPerExpert !== null && <><dt>Copy per expert</dt><dd>{formatUs(c.copyUsPerExpert)} (to the GPU)</dd></>}
        {c.gpuUsPerExpert !== null && <><dt>GPU per expert</dt><dd>{formatUs(c.gpuUsPerExpert)} (one token, from its cache)</dd></>}
        {c.gpuHostUsPerExpert !== null && (
          <><dt>GPU from RAM</dt><dd>{formatUs(c.gpuHostUsPerExpert)} per expert read over PCIe{c.gpuHostChoices !== null ? ` · takes ${c.gpuHostChoices} of the CPU's choices per token and layer` : ""}</dd></>
        )}
        {c.peers.map((p, i) => (
          <Fragment key={i}>
            <dt>Peer {p.device ?? i + 1}</dt>
            <dd data-testid="peer-calibration">
              {p.experts ?? "?"} experts
              {p.expectedHitRate !== null ? ` · ${formatRate(p.expectedHitRate)} of the choices` : ""}
              {p.roundTripUs !== null ? ` · round trip ${formatUs(p.roundTripUs)} per token and layer` : ""}
              {p.activationCopiesUs !== null ? ` (copies ${formatUs(p.activationCopiesUs)})` : ""}
              {p.cpuUsSavedPerLayer !== null ? ` · saves the CPU ${formatUs(p.cpuUsSavedPerLayer)}` : ""}
              {p.paysOff === false ? " · slower than the CPU it relieves" : ""}
            </dd>
          </Fragment>
        ))}
        {c.prefillStreamMinTokens !== null && (
          <><dt>Prefill streaming</dt><dd>{c.prefillStreamMinTokens > 0 ? `steps of ≥ ${c.prefillStreamMinTokens} tokens copy the experts to the GPU` : "never: the CPU computes its experts in every step"}{c.prefillPlannedMissRate !== null ? ` · planned for a ${formatRate(c.prefillPlannedMissRate)} miss rate` : ""}</dd></>
        )}
        {c.tokens !== null && (
          <><dt>Calibration text</dt><dd>{c.tokens} tokens{c.prefillMs !== null ? ` in ${formatMs(c.prefillMs)}` : ""}{c.cacheReshaped ? " · caches reshaped" : ""}</dd></>
        )}
      </dl>
    </div>
  );
}

function layerTitle(l: LayerPlacement): string {
  if (l.dense) return `layer ${l.index}: dense (no routed experts)`;
  const parts = [`layer ${l.index}: ${l.gpu} experts on the GPU, ${l.cpu} on the CPU`];
  if (l.cached) parts.push(`cached: ${l.cached.length ? l.cached.join(", ") : "none"}`);
  if (l.cpuUsPerExpert !== null) parts.push(`CPU ${formatUs(l.cpuUsPerExpert)} per expert`);
  if (l.copyUsPerExpert !== null) parts.push(`copy ${formatUs(l.copyUsPerExpert)} per expert`);
  if (l.coldExpert) parts.push(`an uncached expert: ${l.coldExpert}`);
  return parts.join("\n");
}

export function PlacementView({ p }: { p: StartupProfileJson }) {
  const s = summarizePlacement(p);
  const gpuFigures = s.budget !== null || s.device !== "cpu";
  const timed = s.layers.some((l) => l.cpuUsPerExpert !== null);
  return (
    <div className="placement-view">
      <p className="placement-summary" data-testid="placement-device">{deviceLine(s)}</p>
      <div className="gpu-figures">
        {gpuFigures && <Budget s={s} />}
        <CalibrationFigures s={s} />
      </div>
      {s.layers.length === 0 ? <p>No per-layer placement recorded.</p> : (
        <div className={`placement${s.layers.length > 24 ? " many" : ""}`} data-testid="placement">
          <div className="legend"><span className="swatch gpu" /> GPU experts <span className="swatch cpu" /> CPU experts
            <span className="legend-note">numbers: GPU / CPU experts{timed ? ", CPU µs per expert" : ""}; hover a layer for its cached ids</span></div>
          {s.layers.map((l) => (
            <div className={`layer-row${l.dense ? " dense-layer" : ""}${timed ? " timed" : ""}`} key={l.index} title={layerTitle(l)} data-testid="layer-row">
              <span className="layer-name">layer {l.index}{l.dense ? " (dense)" : ""}</span>
              <span className="layer-track">
                <span className="gpu" style={{ width: `${(l.gpu / s.maxLayerExperts) * 100}%` }} />
                <span className="cpu" style={{ width: `${(l.cpu / s.maxLayerExperts) * 100}%` }} />
              </span>
              <span className="stage-num">{l.dense ? "—" : `${l.gpu} / ${l.cpu}`}</span>
              {timed && <span className="stage-num">{formatUs(l.cpuUsPerExpert)}</span>}
            </div>
          ))}
        </div>
      )}
    </div>
  );
}
