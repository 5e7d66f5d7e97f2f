// The Server panel: the OpenAI-compatible API without the command line. In
// web mode the page's own server already serves it (shown first); either way
// an API-only server can be started on a port of its own, with an API key,
// and the examples (curl, Python, Node) use the address and key shown. The
// request log lists the newest API requests to both.
import { useEffect, useState } from "react";
import { useShallow } from "zustand/react/shallow";

import type { RequestLogEntry } from "../../shared/app-contract.js";
import { useApp } from "../stores/store.js";
import { client } from "../transport/index.js";
import { CopyButton } from "./CopyButton.js";
import { curlExample, nodeExample, pythonExample } from "./examples.js";

function newKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  return "sk-guild-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export function ServerView() {
  const { server, error, busy } = useApp(useShallow((s) => ({ server: s.server, error: s.serverError, busy: s.serverBusy })));
  const refresh = useApp((s) => s.refreshServer);
  const start = useApp((s) => s.startServer);
  const stop = useApp((s) => s.stopServer);
  const [port, setPort] = useState("");
  const [apiKey, setApiKey] = useState("");
  const [edited, setEdited] = useState(false);
  useEffect(() => { void refresh(); }, [refresh]);
  useEffect(() => {
    if (server && !edited) {
      setPort(String(server.api.port));
      setApiKey(server.api.apiKey);
    }
  }, [server, edited]);
  const portNumber = /^\d{1,5}$/.test(port.trim()) ? Number(port.trim()) : NaN;
  const portError = Number.isInteger(portNumber) && portNumber <= 65535 ? null : "The port must be a whole number from 0 to 65535 (0: any free port).";
  const keyError = /\s/.test(apiKey.trim()) ? "The API key cannot contain spaces." : null;
  const api = server?.api;
  const model = server?.modelId ?? "MODEL";
  return (
    <div className="page server-page">
      <h2>Server</h2>
      <p className="fine-print">Guild offers the loaded model through the OpenAI API, so scripts, the official openai clients and other apps
        on this computer can use it. Requests share one queue with this window's chats.</p>
      {!server?.page && client.transportKind === "web" && (
        <section className="card" data-testid="page-server">
          <h3>This page's server</h3>
          <p>The server this page comes from (guild serve) also serves the OpenAI API at <code>{window.location.origin}/v1</code>,
            with the API key it was started with, if any.</p>
        </section>
      )}
      {server?.page && (
        <section className="card" data-testid="page-server">
          <h3>This page's server</h3>
          <p>The server this page comes from also serves the OpenAI API at <code>{server.page.url}/v1</code>{server.page.apiKeyRequired ? " (with the API key it was started with)" : " (no API key; only this computer can reach it)"}.</p>
          <Example title="curl" text={curlExample(server.page.url, "", model)} />
        </section>
      )}
      <section className="card" data-testid="api-server">
        <h3>{server?.page ? "An API-only server on another port" : "API server"}</h3>
        <form className="server-form" onSubmit={(e) => { e.preventDefault(); if (!portError && !keyError) void start(portNumber, apiKey.trim()); }}>
          <div className="settings-row">
            <label>Port
              <input value={port} onChange={(e) => { setPort(e.target.value); setEdited(true); }} inputMode="numeric" aria-label="Port"
                aria-invalid={portError !== null} {...(portError ? { "aria-describedby": "server-port-error" } : {})} />
            </label>
            <label>API key (empty: none)
              <input value={apiKey} onChange={(e) => { setApiKey(e.target.value); setEdited(true); }} aria-label="API key" spellCheck={false} autoComplete="off"
                aria-invalid={keyError !== null} {...(keyError ? { "aria-describedby": "server-key-error" } : {})} />
            </label>
            <button type="button" onClick={() => { setApiKey(newKey()); setEdited(true); }}>New key</button>
          </div>
          {(portError || keyError) && (
            <ul className="form-errors">
              {portError && <li id="server-port-error">{portError}</li>}
              {keyError && <li id="server-key-error">{keyError}</li>}
            </ul>
          )}
          <div className="toolbar">
            {api?.running
              ? <>
                  <button type="submit" disabled={busy || portError !== null || keyError !== null}>Restart with these settings</button>
                  <button type="button" className="danger" disabled={busy} onClick={() => void stop()} data-testid="server-stop">Stop the server</button>
                </>
              : <button type="submit" className="primary" disabled={busy || portError !== null || keyError !== null} data-testid="server-start">Start the server</button>}
          </div>
        </form>
        <p data-testid="server-status" className={api?.running ? "ok-text" : ""}>
          {api?.running ? <>Running at <code>{api.url}/v1</code>{api.apiKey ? ", with an API key" : ", without an API key"}. Only this computer can reach it.</>
            : "Stopped."}
        </p>
        {(error ?? api?.error) && <div className="banner error" role="alert" data-testid="server-error">{error ?? api?.error}</div>}
        {api?.running && api.url && (
          <div className="examples">
            <Example title="curl" text={curlExample(api.url, api.apiKey, model)} testId="curl-example" />
            <Example title="Python (openai)" text={pythonExample(api.url, api.apiKey, model)} />
            <Example title="Node (openai)" text={nodeExample(api.url, api.apiKey, model)} />
          </div>
        )}
      </section>
      <section className="card">
        <h3>Requests</h3>
        <RequestLog entries={server?.log ?? []} />
      </section>
    </div>
  );
}

function Example({ title, text, testId }: { title: string; text: string; testId?: string }) {
  return (
    <div className="example">
      <div className="code-head"><span>{title}</span><CopyButton text={text} label={`Copy the ${title} example`} /></div>
      <pre {...(testId ? { "data-testid": testId } : {})}><code>{text}</code></pre>
    </div>
  );
}

function RequestLog({ entries }: { entries: RequestLogEntry[] }) {
  if (entries.length === 0) return <p className="fine-print" data-testid="request-log">No API requests yet.</p>;
  return (
    <table className="request-log" data-testid="request-log">
      <thead><tr><th>Time</th><th>Server</th><th>Request</th><th>Status</th><th>Time taken</th></tr></thead>
      <tbody>
        {[...entries].reverse().map((e) => (
          <tr key={e.id}>
            <td>{new Date(e.time).toLocaleTimeString()}</td>
            <td>{e.server === "page" ? "this page's" : "API-only"}</td>
            <td><code>{e.method} {e.path}</code></td>
            <td className={e.status >= 400 ? "error-text" : ""}>{e.status}</td>
            <td>{e.ms} ms</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
