import { useEffect } from "react";
import { useShallow } from "zustand/react/shallow";

import type { PackageInfo } from "../../shared/app-contract.js";
import { useApp } from "../stores/store.js";
import { InstallPackage } from "./InstallPackage.js";

function pinnedText(p: PackageInfo): string {
  if (p.pinnedBy.length === 0) return "—";
  return p.pinnedBy.length <= 2 ? p.pinnedBy.join(", ") : `${p.pinnedBy.slice(0, 2).join(", ")} and ${p.pinnedBy.length - 2} more`;
}

export function PackagesView() {
  const { packages, loaded, busy, error, notice } = useApp(useShallow((s) => ({
    packages: s.packages, loaded: s.packagesLoaded, busy: s.packageBusy, error: s.packagesError, notice: s.packagesNotice,
  })));
  const refresh = useApp((s) => s.refreshPackages);
  const setEnabled = useApp((s) => s.setPackageEnabled);
  const uninstall = useApp((s) => s.uninstallPackage);
  useEffect(() => { void refresh(); }, [refresh]);
  return (
    <div className="page">
      <h2>Kernel packages</h2>
      {error && <div className="banner error" role="alert" data-testid="package-error">{error}</div>}
      {notice && <div className="banner note" role="status" data-testid="package-notice">{notice}</div>}
      <section className="card">
        {loaded && packages.length === 0 ? <p>No kernel packages are installed (or package management is not available in this build).</p> : (
          <table data-testid="package-table">
            <thead><tr><th>Package</th><th>Version</th><th>Compatible</th><th>Pinned by</th><th>Enabled</th><th /></tr></thead>
            <tbody>
              {packages.map((p) => (
                <tr key={p.name} data-testid={`package-${p.name}`}>
                  <td className="nowrap">{p.name}{p.source === "bundled" && <span className="badge" title="shipped with the app">bundled</span>}</td>
                  <td>{p.version}</td>
                  <td>{p.compatible ? <span className="badge ok">yes</span> : <span className="badge bad" title={p.reason}>no</span>}
                    {p.reason && <div className="reason">{p.reason}</div>}</td>
                  <td title={p.pinnedBy.join("\n")}>{pinnedText(p)}</td>
                  <td>
                    <label className="switch">
                      <input type="checkbox" checked={p.enabled} disabled={busy !== null} aria-label={`Enable ${p.name}`}
                        onChange={(e) => void setEnabled(p.name, e.target.checked)} />
                      <span>{p.enabled ? "on" : "off"}</span>
                    </label>
                  </td>
                  <td className="actions">
                    {p.source === "bundled" ? (
                      <span className="reason" title="Bundled packages are part of the app: turn it off to stop using it">bundled: disable instead</span>
                    ) : (
                      <button type="button" className="small" disabled={busy !== null} aria-label={`Uninstall ${p.name}`}
                        onClick={() => { if (window.confirm(`Uninstall ${p.name} ${p.version}?`)) void uninstall(p.name); }}>Uninstall</button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
      <InstallPackage />
    </div>
  );
}
