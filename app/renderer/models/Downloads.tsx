// The downloads the main process runs: progress with speed and ETA, Cancel
// (the part so far is kept), Resume (continues from it), Load when done.
import { useApp } from "../stores/store.js";
import { progressText, stateLabel } from "./download-format.js";

export function Downloads({ onLoad }: { onLoad(path: string): void }) {
  const downloads = useApp((s) => s.downloads);
  const cancel = useApp((s) => s.cancelDownload);
  const resume = useApp((s) => s.resumeDownload);
  const clear = useApp((s) => s.clearDownload);
  const current = useApp((s) => s.current);
  if (downloads.length === 0) return null;
  return (
    <ul className="downloads" data-testid="downloads" aria-label="Downloads">
      {downloads.map((d) => {
        const pct = d.totalBytes > 0 ? Math.round((d.receivedBytes / d.totalBytes) * 100) : 0;
        const running = d.state === "queued" || d.state === "downloading" || d.state === "verifying";
        return (
          <li key={d.id} className={`download ${d.state}`} data-testid="download" data-state={d.state}>
            <div className="download-head">
              <span className="download-name">{d.name}</span>
              <span className="download-repo">{d.repo}</span>
              <span className={`badge ${d.state === "done" ? "ok" : d.state === "failed" ? "bad" : d.state === "cancelled" ? "warn" : ""}`}>{stateLabel[d.state]}</span>
            </div>
            <div className="progress" role="progressbar" aria-valuemin={0} aria-valuemax={100} aria-valuenow={pct} aria-label={`Download of ${d.name}`}>
              <div style={{ width: `${pct}%` }} />
            </div>
            <div className="download-row">
              <span className="download-progress" data-testid="download-progress">{progressText(d)}</span>
              <span className="download-actions">
                {running && <button type="button" className="small" onClick={() => void cancel(d.id)} aria-label={`Cancel the download of ${d.name}`}>Cancel</button>}
                {(d.state === "failed" || d.state === "cancelled") && (
                  <button type="button" className="small" onClick={() => void resume(d.id)} aria-label={`Resume the download of ${d.name}`}>Resume</button>)}
                {d.state === "done" && d.path && current?.path !== d.path && (
                  <button type="button" className="small primary" onClick={() => onLoad(d.path!)} aria-label={`Load ${d.name} now`}>Load now</button>)}
                {!running && <button type="button" className="small" onClick={() => void clear(d.id)} aria-label={`Remove ${d.name} from this list`}>Dismiss</button>}
              </span>
            </div>
            {d.message && <p className={d.state === "failed" ? "download-message error-text" : "download-message"} data-testid="download-message">{d.message}</p>}
          </li>
        );
      })}
    </ul>
  );
}
