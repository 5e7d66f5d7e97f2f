// The tensor types of a model file and their bits per weight (mixed files, e.g.
// Unsloth's dynamic quants, hold five or more types): one bar split by each
// type's share of the bytes, and a table with the numbers.
import type { ModelSummary } from "../../shared/app-contract.js";
import { formatBytes } from "../common/format.js";

const bpw = (v: number | null) => (v === null ? "–" : v.toFixed(2));
const percent = (f: number) => `${(100 * f).toFixed(f < 0.001 ? 2 : 1)}%`;

export function BitsPerWeight({ bits }: { bits: ModelSummary["bitsPerWeight"] }) {
  if (bits.all === null) return <>–</>;
  const parts = [bits.experts !== null ? `experts ${bpw(bits.experts)}` : null, bits.dense !== null && bits.experts !== null ? `the rest ${bpw(bits.dense)}` : null]
    .filter((p): p is string => p !== null);
  return <>{bpw(bits.all)}{parts.length > 0 ? ` (${parts.join(", ")})` : ""}</>;
}

export function TypeMix({ mix }: { mix: ModelSummary["typeMix"] }) {
  if (mix.length === 0) return <>–</>;
  return (
    <div className="type-mix" data-testid="type-mix">
      <div className="type-mix-bar" role="img" aria-label={`tensor bytes by type: ${mix.map((t) => `${t.type.toUpperCase()} ${percent(t.byteShare)}`).join(", ")}`}>
        {mix.map((t, i) => (
          <span key={t.type} className={`type-mix-part part-${i % 6}`} style={{ width: `${Math.max(0.5, 100 * t.byteShare)}%` }} title={`${t.type.toUpperCase()} ${percent(t.byteShare)}`} />
        ))}
      </div>
      <table className="type-mix-table">
        <thead><tr><th scope="col">Type</th><th scope="col">Tensors</th><th scope="col">Bytes</th><th scope="col">Share</th><th scope="col">Bits per weight</th></tr></thead>
        <tbody>
          {mix.map((t, i) => (
            <tr key={t.type}>
              <td><span className={`type-mix-swatch part-${i % 6}`} aria-hidden="true" />{t.type.toUpperCase()}</td>
              <td>{t.tensors}</td>
              <td>{formatBytes(t.bytes)}</td>
              <td>{percent(t.byteShare)}</td>
              <td>{bpw(t.bitsPerWeight)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
