// Preferences: the models folder (where downloads go and *.gguf files are
// listed from; Electron picks it with the system dialog, a browser tab with
// the folder browser), the Hugging Face Hub endpoint (a mirror; GUILD_HF_ENDPOINT
// wins), the theme, and where the app keeps its data.
import { useEffect, useState } from "react";

import type { ThemeChoice } from "../../shared/app-contract.js";
import { FolderBrowser } from "../models/FolderBrowser.js";
import { useApp } from "../stores/store.js";
import { client } from "../transport/index.js";

export function PreferencesView() {
  const settings = useApp((s) => s.appSettings);
  const refresh = useApp((s) => s.refreshAppSettings);
  const save = useApp((s) => s.saveAppSettings);
  const theme = useApp((s) => s.theme);
  const setTheme = useApp((s) => s.setTheme);
  const browse = useApp((s) => s.browse);
  const browser = useApp((s) => s.browser);
  const closeBrowser = useApp((s) => s.closeBrowser);
  const [folder, setFolder] = useState("");
  const [hub, setHub] = useState("");
  const [folderError, setFolderError] = useState<string | null>(null);
  const [hubError, setHubError] = useState<string | null>(null);
  const [saved, setSaved] = useState<string | null>(null);
  const [browsing, setBrowsing] = useState(false);
  useEffect(() => { void refresh(); }, [refresh]);
  useEffect(() => {
    if (!settings) return;
    setFolder(settings.modelsDir);
    setHub(settings.hubEndpoint);
  }, [settings]);
  const saveFolder = async (dir: string) => {
    setSaved(null);
    const err = await save({ modelsDir: dir });
    setFolderError(err);
    if (!err) setSaved("The models folder is saved.");
  };
  const saveHub = async (url: string) => {
    setSaved(null);
    const err = await save({ hubEndpoint: url });
    setHubError(err);
    if (!err) setSaved("The hub endpoint is saved.");
  };
  const chooseFolder = async () => {
    if (client.transportKind === "electron") {
      try {
        const picked = (await client.settings.pickFolder()).path;
        if (picked) {
          setFolder(picked);
          await saveFolder(picked);
        }
      } catch (err) {
        setFolderError(err instanceof Error ? err.message : String(err));
      }
    } else {
      setBrowsing(true);
      await browse(settings?.modelsDir);
    }
  };
  return (
    <div className="page">
      <h2>Preferences</h2>
      {saved && <div className="banner note" role="status" data-testid="preferences-saved">{saved}</div>}
      <section className="card">
        <h3>Models folder</h3>
        <form className="load-form" onSubmit={(e) => { e.preventDefault(); void saveFolder(folder); }}>
          <input value={folder} onChange={(e) => setFolder(e.target.value)} aria-label="Models folder" spellCheck={false}
            aria-invalid={folderError !== null} {...(folderError ? { "aria-describedby": "models-folder-error" } : {})} />
          <button type="button" onClick={() => void chooseFolder()}>{client.transportKind === "electron" ? "Choose…" : "Browse…"}</button>
          <button type="submit" className="primary" disabled={!settings || folder.trim() === settings.modelsDir}>Save</button>
          <button type="button" disabled={!settings || settings.modelsDir === settings.modelsDirDefault}
            onClick={() => { if (settings) { setFolder(settings.modelsDirDefault); void saveFolder(""); } }}>Use the default</button>
        </form>
        {folderError && <p className="error-text" id="models-folder-error">{folderError}</p>}
        <p className="fine-print">Downloads go here, and every .gguf file in it is listed on the Models page. The default is
          {" "}<code>{settings?.modelsDirDefault ?? "<data>/models"}</code>; a folder that does not exist yet is created.</p>
        {browsing && browser && (
          <FolderBrowser mode="folder" onClose={() => { setBrowsing(false); closeBrowser(); }}
            onPick={(p) => { setBrowsing(false); closeBrowser(); setFolder(p); void saveFolder(p); }} />
        )}
      </section>
      <section className="card">
        <h3>Hugging Face Hub</h3>
        <form className="load-form" onSubmit={(e) => { e.preventDefault(); void saveHub(hub); }}>
          <input value={hub} onChange={(e) => setHub(e.target.value)} aria-label="Hub endpoint" spellCheck={false} disabled={settings?.hubEndpointFromEnv}
            aria-invalid={hubError !== null} {...(hubError ? { "aria-describedby": "hub-endpoint-error" } : {})} />
          <button type="submit" className="primary" disabled={!settings || settings.hubEndpointFromEnv || hub.trim() === settings.hubEndpoint}>Save</button>
        </form>
        {hubError && <p className="error-text" id="hub-endpoint-error">{hubError}</p>}
        <p className="fine-print">{settings?.hubEndpointFromEnv
          ? <>Set by GUILD_HF_ENDPOINT when the app started; it wins over this setting.</>
          : <>Where models are searched and downloaded: <code>{settings?.hubEndpointDefault ?? "https://huggingface.co"}</code>, or a mirror (empty: the default).</>}</p>
      </section>
      <section className="card">
        <h3>Theme</h3>
        <fieldset className="theme-choice">
          <legend className="sr-only">Theme</legend>
          {(["system", "light", "dark"] as ThemeChoice[]).map((t) => (
            <label key={t} className="check">
              <input type="radio" name="theme" value={t} checked={theme === t} onChange={() => void setTheme(t)} />
              {t === "system" ? "Follow the system" : t === "light" ? "Light" : "Dark"}
            </label>
          ))}
        </fieldset>
      </section>
      <section className="card">
        <h3>Data</h3>
        <p>Conversations, startup profiles and these settings are kept in <code>{settings?.dataDir ?? "…"}</code>.</p>
      </section>
    </div>
  );
}
