// Where the inspected model would go with the load settings as typed (the
// shared memory plan, recomputed here on every keystroke): each part, its size
// and its place (the GPU or RAM), the totals against what is free, and what
// does not fit.
import type { MemoryPlan } from "../../shared/memory-plan.js";
import { formatBytes } from "../common/format.js";

export function MemoryPlanView({ plan }: { plan: MemoryPlan }) {
  const where = (w: "gpu" | "ram") => (w === "gpu" && plan.gpu ? `GPU (${plan.gpu.device})` : "RAM");
  return (
    <div className="memory-plan" data-testid="memory-plan">
      <table className="memory">
        <thead><tr><th>Part</th><th>Size</th><th>Goes to</th></tr></thead>
        <tbody>
          {plan.parts.map((p) => (
            <tr key={p.label}><td>{p.label}</td><td>{formatBytes(p.bytes)}</td><td>{where(p.where)}</td></tr>
          ))}
          <tr className="total"><td>RAM needed</td><td>{formatBytes(plan.ramBytes)}</td><td>{formatBytes(plan.ramAvailableBytes)} available now</td></tr>
          {plan.gpu && <tr className="total"><td>GPU memory needed</td><td>{formatBytes(plan.gpuBytes)}</td><td>{formatBytes(plan.gpu.freeBytes)} free at the last load</td></tr>}
        </tbody>
      </table>
      <p className="plan-summary" data-testid="plan-summary">{plan.summary}</p>
      {plan.warnings.length > 0 && (
        <ul className="plan-warnings" data-testid="plan-warnings">{plan.warnings.map((w) => <li key={w}>{w}</li>)}</ul>
      )}
    </div>
  );
}
