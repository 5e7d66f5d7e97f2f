// The Electron entry point: the only place (with window.ts, ipc.ts, menu.ts)
// that imports electron. Builds the services (composition root) with the
// system's file dialogs, serves the renderer from guild://app/, opens one
// window, and binds the IPC contract to that window.
import { app, BrowserWindow, dialog, shell } from "electron";
import path from "node:path";

import { projectRoot } from "../paths.js";
import { createAppServices, type AppServices } from "../services/index.js";
import { bindIpc, type IpcBinding } from "./ipc.js";
import { installMenu } from "./menu.js";
import { appUrlPrefix, isExternalLink } from "./policy.js";
import { createAppWindow, installSessionPolicy, registerAppScheme, serveAppScheme } from "./window.js";

const root = app.isPackaged ? app.getAppPath() : projectRoot();
const rendererDir = path.join(root, "dist", "renderer");
const preloadPath = path.join(root, "dist", "preload", "preload.cjs");
const iconPath = path.join(root, "assets", "icons", "512x512.png");
// A packaged app keeps the native addon, the kernel packages and the default
// model outside the asar archive (electron-builder.yml: extraResources).
const resources = app.isPackaged ? process.resourcesPath : null;
if (resources && !process.env["GUILD_ADDON_PATH"]) process.env["GUILD_ADDON_PATH"] = path.join(resources, "native", "guild_addon.node");
const embeddedModel = resources ? path.join(resources, "models", "guild-demo-qwen3moe-Q8_0.gguf") : undefined;

let window: BrowserWindow | null = null;
let services: AppServices | null = null;
let ipc: IpcBinding | null = null;

/** The system's dialogs, attached to the window (the contract's models.pickFile and settings.pickFolder). */
const dialogs = {
  async pickModelFile(): Promise<string | null> {
    const options = { title: "Open a GGUF model", properties: ["openFile" as const], filters: [{ name: "GGUF models", extensions: ["gguf"] }] };
    const r = window ? await dialog.showOpenDialog(window, options) : await dialog.showOpenDialog(options);
    return r.canceled ? null : r.filePaths[0] ?? null;
  },
  async pickFolder(): Promise<string | null> {
    const options = { title: "Choose the models folder", properties: ["openDirectory" as const, "createDirectory" as const] };
    const r = window ? await dialog.showOpenDialog(window, options) : await dialog.showOpenDialog(options);
    return r.canceled ? null : r.filePaths[0] ?? null;
  },
};

app.enableSandbox();
registerAppScheme();
if (!app.requestSingleInstanceLock()) {
  app.quit();
} else {
  app.on("second-instance", () => {
    if (window) {
      if (window.isMinimized()) window.restore();
      window.focus();
    }
  });
  app.on("web-contents-created", (_e, contents) => {
    contents.on("will-attach-webview", (event) => event.preventDefault());
    contents.setWindowOpenHandler(() => ({ action: "deny" }));
  });
  void app.whenReady().then(() => {
    installSessionPolicy();
    serveAppScheme(rendererDir);
    services = createAppServices({
      dataDir: process.env["GUILD_DATA_DIR"] ?? app.getPath("userData"),
      ...(embeddedModel ? { embeddedModel } : {}),
      dialogs,
    });
    ipc = bindIpc(services, () => window?.webContents ?? null, appUrlPrefix);
    installMenu(() => window);
    const open = () => {
      window = createAppWindow({
        preloadPath, iconPath,
        openExternal: (url) => { if (isExternalLink(url)) void shell.openExternal(url); },
      });
      window.on("closed", () => { window = null; });
    };
    open();
    app.on("activate", () => { if (BrowserWindow.getAllWindows().length === 0) open(); });
  });
  app.on("window-all-closed", () => {
    if (process.platform !== "darwin") app.quit();
  });
  let quitting = false;
  app.on("will-quit", (event) => {
    if (quitting || !services) return;
    event.preventDefault();
    quitting = true;
    ipc?.dispose();
    void services.dispose().finally(() => app.exit(0));
  });
}
