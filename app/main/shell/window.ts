// The one BrowserWindow: isolated, sandboxed, no Node in the renderer, a CSP
// on every response, and no navigation or new windows (links open in the
// system browser).
import { BrowserWindow, nativeTheme, session, shell } from "electron";
import path from "node:path";
import { pathToFileURL } from "node:url";

import { CONTENT_SECURITY_POLICY } from "../web/web-routes.js";

export interface AppWindowOptions {
  rendererDir: string;
  preloadPath: string;
  iconPath?: string;
}

export function appUrlPrefix(rendererDir: string): string {
  return pathToFileURL(rendererDir + path.sep).href;
}

export function installSessionPolicy(): void {
  session.defaultSession.webRequest.onHeadersReceived((details, callback) => {
    callback({ responseHeaders: { ...details.responseHeaders, "Content-Security-Policy": [CONTENT_SECURITY_POLICY] } });
  });
  // The renderer asks for nothing: no camera, notifications, etc.
  session.defaultSession.setPermissionRequestHandler((_wc, _permission, callback) => callback(false));
  session.defaultSession.setPermissionCheckHandler(() => false);
}

export function createAppWindow(options: AppWindowOptions): BrowserWindow {
  const win = new BrowserWindow({
    width: 1280,
    height: 820,
    minWidth: 760,
    minHeight: 480,
    title: "Guild",
    show: false,
    backgroundColor: nativeTheme.shouldUseDarkColors ? "#16171b" : "#f7f7f8",
    ...(options.iconPath ? { icon: options.iconPath } : {}),
    webPreferences: {
      preload: options.preloadPath,
      contextIsolation: true,
      sandbox: true,
      nodeIntegration: false,
      nodeIntegrationInWorker: false,
      webSecurity: true,
      allowRunningInsecureContent: false,
      webviewTag: false,
      spellcheck: true,
    },
  });
  const prefix = appUrlPrefix(options.rendererDir);
  win.webContents.on("will-navigate", (event, url) => {
    if (!url.startsWith(prefix)) event.preventDefault();
  });
  win.webContents.on("will-redirect", (event) => event.preventDefault());
  win.webContents.on("will-attach-webview", (event) => event.preventDefault());
  win.webContents.setWindowOpenHandler(({ url }) => {
    if (/^https?:\/\//.test(url)) void shell.openExternal(url);
    return { action: "deny" };
  });
  win.once("ready-to-show", () => win.show());
  void win.loadFile(path.join(options.rendererDir, "index.html"));
  return win;
}
