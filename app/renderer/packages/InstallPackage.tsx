// Install a kernel package: pick a .gkpkg (its bytes are sent, so this works
// in a browser tab too), or give the path of one on this machine.
import { useRef, useState } from "react";

import { useApp } from "../stores/store.js";

export function InstallPackage() {
  const busy = useApp((s) => s.packageBusy);
  const installFile = useApp((s) => s.installPackageFile);
  const installPath = useApp((s) => s.installPackagePath);
  const [path, setPath] = useState("");
  const picker = useRef<HTMLInputElement>(null);
  return (
    <section className="card install-package">
      <h3>Install a package</h3>
      <div className="install-row">
        <input ref={picker} type="file" accept=".gkpkg" hidden data-testid="package-file"
          onChange={(e) => {
            const file = e.target.files?.[0];
            e.target.value = "";
            if (file) void installFile(file);
          }} />
        <button type="button" className="primary" disabled={busy !== null} onClick={() => picker.current?.click()}>
          {busy === "install" ? "Installing…" : "Install from file…"}</button>
        <form className="load-form" onSubmit={(e) => {
          e.preventDefault();
          if (path.trim()) void installPath(path.trim()).then((ok) => { if (ok) setPath(""); });
        }}>
          <input value={path} onChange={(e) => setPath(e.target.value)} placeholder="or a path on this machine: /path/to/package.gkpkg"
            aria-label="Package path" />
          <button type="submit" disabled={!path.trim() || busy !== null}>Install from path</button>
        </form>
      </div>
      <p className="fine-print">A .gkpkg archive (made by <code>guild packages pack</code>). Installing a package that is already
        there replaces it. Packages apply to models loaded after the change.</p>
    </section>
  );
}
