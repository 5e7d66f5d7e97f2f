// The server-side file browser: what a browser tab offers instead of a file
// dialog (a page never sees this machine's paths). It lists folders and .gguf
// files inside the models folder and the user's home (the main process refuses
// anything else). Mode "file" picks a model; mode "folder" picks the folder shown.
import { useEffect, useRef } from "react";

import { formatBytes } from "../common/format.js";
import { useApp } from "../stores/store.js";

interface Props {
  mode: "file" | "folder";
  onPick(path: string): void;
  onClose(): void;
}

export function FolderBrowser({ mode, onPick, onClose }: Props) {
  const listing = useApp((s) => s.browser);
  const error = useApp((s) => s.browserError);
  const browse = useApp((s) => s.browse);
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => { heading.current?.focus(); }, [listing?.dir]);
  return (
    <div className="folder-browser" role="group" aria-labelledby="folder-browser-title" data-testid="folder-browser">
      <div className="toolbar">
        <h4 id="folder-browser-title" tabIndex={-1} ref={heading}>{mode === "file" ? "Open a model file" : "Choose a folder"}</h4>
        {listing?.roots.map((r) => <button type="button" className="small" key={r.path} onClick={() => void browse(r.path)}>{r.label}</button>)}
        <button type="button" className="small" onClick={onClose}>Close</button>
      </div>
      {error && <p className="error-text" role="alert">{error}</p>}
      {listing && (
        <>
          <p className="path" data-testid="browser-dir">{listing.dir}</p>
          <ul className="browser-entries">
            {listing.parent && <li><button type="button" className="link" onClick={() => void browse(listing.parent!)}>↑ Up (..)</button></li>}
            {listing.entries.map((e) => (
              <li key={e.path}>
                {e.kind === "folder"
                  ? <button type="button" className="link" onClick={() => void browse(e.path)} aria-label={`Open folder ${e.name}`}>📁 {e.name}</button>
                  : mode === "file"
                    ? <button type="button" className="link" onClick={() => onPick(e.path)} aria-label={`Pick ${e.name}`}>{e.name} <small>{formatBytes(e.sizeBytes)}</small></button>
                    : <span className="muted-entry">{e.name}</span>}
              </li>
            ))}
            {listing.entries.length === 0 && <li className="empty">{mode === "file" ? "No folders or .gguf files here." : "No folders here."}</li>}
          </ul>
          {listing.truncated && <p className="fine-print">Only the first entries are shown.</p>}
          {mode === "folder" && <button type="button" className="primary" onClick={() => onPick(listing.dir)}>Use this folder</button>}
        </>
      )}
    </div>
  );
}
