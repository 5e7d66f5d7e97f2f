// The one BrowserWindow: isolated, sandboxed, no Node in the renderer, the app
// served from its own privileged scheme (guild://app/, policy.ts) with a CSP on
// every response, no navigation away from it and no new windows (links open in
// the system browser), permissions limited to writing the clipboard, DevTools
// only in development, and a spellchecker that never downloads dictionaries.
import { app, BrowserWindow, nativeTheme, protocol, session } from "electron";
import { readFile } from "node:fs/promises";

import { CONTENT_SECURITY_POLICY } from "../web/web-routes.js";
import {
  appEntryUrl, appScheme, devToolsAllowed, dictionaryDownloadUrl, isAppUrl, isExternalLink, permissionAllowed,
  resolveAppRequest, spellcheckLanguages,
} from "./policy.js";

export interface AppWindowOptions {
  preloadPath: string;
  iconPath?: string;
  /** Opens http(s) links in the system browser. */
  openExternal(url: string): void;
}

/** Must run before the app is ready: guild:// behaves like https (standard, secure, fetch). */
export function registerAppScheme(): void {
  protocol.registerSchemesAsPrivileged([
    { scheme: appScheme, privileges: { standard: true, secure: true, supportFetchAPI: true, codeCache: true } },
  ]);
}

/** Serves guild://app/… from the built renderer (after ready). */
export function serveAppScheme(rendererDir: string): void {
  protocol.handle(appScheme, async (request) => {
    const r = resolveAppRequest(request.url, request.method, rendererDir);
    if ("status" in r) return new Response(null, { status: r.status });
    try {
      const body = await readFile(r.file);
      return new Response(request.method === "HEAD" ? null : body, {
        status: 200,
        headers: { "content-type": r.contentType, "content-security-policy": CONTENT_SECURITY_POLICY, "x-content-type-options": "nosniff" },
      });
    } catch {
      return new Response(null, { status: 404 });
    }
  });
}

export function installSessionPolicy(): void {
  const ses = session.defaultSession;
  ses.webRequest.onHeadersReceived((details, callback) => {
    callback({ responseHeaders: { ...details.responseHeaders, "Content-Security-Policy": [CONTENT_SECURITY_POLICY] } });
  });
  // Writing the clipboard (the Copy buttons) and nothing else: no camera, notifications, etc.
  ses.setPermissionRequestHandler((_wc, permission, callback, details) => callback(permissionAllowed(permission, details.requestingUrl)));
  ses.setPermissionCheckHandler((_wc, permission, requestingOrigin, details) =>
    permissionAllowed(permission, details.requestingUrl ?? (requestingOrigin ? `${requestingOrigin}/` : undefined)));
  // Spellchecking without the network: dictionaries are never downloaded (the URL serves none),
  // and the languages are the OS's, where a dictionary is present (macOS uses its own checker).
  ses.setSpellCheckerDictionaryDownloadURL(dictionaryDownloadUrl);
  if (process.platform !== "darwin") {
    const languages = spellcheckLanguages(app.getPreferredSystemLanguages(), ses.availableSpellCheckerLanguages);
    if (languages.length > 0) ses.setSpellCheckerLanguages(languages);
  }
}

export function createAppWindow(options: AppWindowOptions): BrowserWindow {
  const win = new BrowserWindow({
    width: 1280,
    height: 820,
    minWidth: 800,
    minHeight: 600,
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
      devTools: devToolsAllowed(app.isPackaged),
    },
  });
  win.webContents.on("will-navigate", (event, url) => {
    if (!isAppUrl(url)) event.preventDefault();
  });
  win.webContents.on("will-redirect", (event) => event.preventDefault());
  win.webContents.on("will-attach-webview", (event) => event.preventDefault());
  win.webContents.setWindowOpenHandler(({ url }) => {
    if (isExternalLink(url)) options.openExternal(url);
    return { action: "deny" };
  });
  win.once("ready-to-show", () => win.show());
  void win.loadURL(appEntryUrl);
  return win;
}
