// How full the model's context is, from the latest reply's stored token counts.
import type { ContextView } from "./context-view.js";

export function ContextMeter({ view }: { view: ContextView }) {
  if (view.limit <= 0) return null;
  const fraction = Math.min(1, view.used / view.limit);
  const level = fraction >= 1 ? "full" : fraction >= 0.8 ? "high" : "ok";
  return (
    <span className={`context-meter ${level}`} data-testid="context-meter"
      title="Tokens of the model's context the latest reply used (its prompt and its own tokens)">
      {/* React sets style through CSSOM, which the CSP allows (a style attribute in markup it would not) */}
      <span className="context-bar"><span style={{ width: `${(fraction * 100).toFixed(1)}%` }} /></span>
      Context {view.used} / {view.limit}
    </span>
  );
}
