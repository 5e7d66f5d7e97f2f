// The in-app help (the Help menu of the desktop app opens it): how to get a
// model and start chatting, the Server panel, and the keyboard shortcuts. It
// works offline, as the app does.
import { shortcutList } from "../a11y/shortcuts.js";
import { useApp } from "../stores/store.js";

const isMac = typeof navigator !== "undefined" && /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent);

export function HelpView() {
  const setView = useApp((s) => s.setView);
  return (
    <div className="page help">
      <h2>Help</h2>
      <section className="card">
        <h3>Getting started</h3>
        <ol>
          <li>A small demo model is loaded when the app starts, so <button type="button" className="link" onClick={() => setView("chat")}>Chat</button> works at once.</li>
          <li>For a real model, open <button type="button" className="link" onClick={() => setView("models")}>Models</button>, search the Hugging Face Hub
            (for example “Qwen3 30B A3B GGUF”), open a repository and press <b>Download</b> next to a quantization that fits your memory
            (Q4_K_M is a good start). The download can be cancelled and resumed; it is checked against the Hub's checksum.</li>
          <li>When it is done, press <b>Load now</b> (or <b>Load</b> in the model list). <b>Inspect</b> first shows where the model would go
            (GPU or RAM) with the load settings you type, and warns when it does not fit or cannot run here. The current model stays loaded
            until the new one is ready.</li>
          <li>Go back to Chat and ask.</li>
        </ol>
      </section>
      <section className="card">
        <h3>Using the model from other programs</h3>
        <p>The <button type="button" className="link" onClick={() => setView("server")}>Server</button> page starts the OpenAI-compatible API on a port of
          this computer, with an API key if you like, and shows a curl command and Python and Node examples to copy.</p>
      </section>
      <section className="card">
        <h3>Keyboard shortcuts</h3>
        <table className="shortcuts" data-testid="shortcut-list">
          <tbody>{shortcutList(isMac).map((s) => <tr key={s.what}><td><kbd>{s.keys}</kbd></td><td>{s.what}</td></tr>)}</tbody>
        </table>
      </section>
    </div>
  );
}
