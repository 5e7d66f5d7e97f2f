// The Electron shell's rules as pure functions (no electron import, so they are
// unit-tested where Electron's binary is missing): the app's own origin
// (guild://app, a privileged standard secure scheme served from the built
// renderer), what a request to it maps to, which URLs are the app, which
// permissions the page gets (writing the clipboard, nothing else), the
// spellchecker's languages, and where help lives.
import path from "node:path";

export const appScheme = "guild";
export const appHost = "app";
export const appOrigin = `${appScheme}://${appHost}`;
/** Every page and file of the app starts with this (the IPC sender check, navigation). */
export const appUrlPrefix = `${appOrigin}/`;
export const appEntryUrl = `${appOrigin}/index.html`;
/** The in-app help (Help menu). */
export const helpUrl = `${appEntryUrl}#/help`;
/**
 * Where Chromium's spellchecker would download Hunspell dictionaries: a path of
 * the app's own scheme that serves none, so spellchecking never touches the
 * network (macOS uses the system's checker and ignores it).
 */
export const dictionaryDownloadUrl = `${appOrigin}/no-dictionary-downloads/`;

/** True for URLs of the app itself (guild://app/…). */
export function isAppUrl(url: string): boolean {
  try {
    const u = new URL(url);
    return u.protocol === `${appScheme}:` && u.host === appHost && !u.username && !u.password;
  } catch {
    return false;
  }
}

/** Links the page may open in the system browser. */
export function isExternalLink(url: string): boolean {
  try {
    const u = new URL(url);
    return u.protocol === "https:" || u.protocol === "http:";
  } catch {
    return false;
  }
}

/**
 * The page asks for nothing but writing the clipboard (Copy buttons call
 * navigator.clipboard.writeText, which Chromium checks as
 * "clipboard-sanitized-write"); anything else, and anything from elsewhere, is
 * denied. Reading the clipboard is never granted.
 */
export function permissionAllowed(permission: string, requestingUrl: string | undefined): boolean {
  return permission === "clipboard-sanitized-write" && requestingUrl !== undefined && isAppUrl(requestingUrl);
}

export type AppRequest =
  | { file: string; contentType: string }
  | { status: 400 | 403 | 404 | 405 };

const contentTypes: Record<string, string> = {
  ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml", ".png": "image/png", ".json": "application/json", ".ico": "image/x-icon",
  ".woff2": "font/woff2", ".map": "application/json",
};

/**
 * What a request for guild://app/<path> serves: a file of the built renderer
 * (index.html for the root), never one outside it. The route of a view lives
 * in the URL's fragment (#/models), which never reaches here.
 */
export function resolveAppRequest(url: string, method: string, rendererDir: string): AppRequest {
  if (method !== "GET" && method !== "HEAD") return { status: 405 };
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return { status: 400 };
  }
  if (!isAppUrl(url)) return { status: 403 };
  let rel: string;
  try {
    rel = decodeURIComponent(u.pathname);
  } catch {
    return { status: 400 };
  }
  if (rel.includes("\0")) return { status: 400 };
  const root = path.resolve(rendererDir);
  const file = path.resolve(root, "." + (rel === "/" ? "/index.html" : rel));
  if (!file.startsWith(root + path.sep)) return { status: 403 };
  const ext = path.extname(file).toLowerCase();
  const contentType = contentTypes[ext];
  if (contentType === undefined) return { status: 404 };
  return { file, contentType };
}

/**
 * The spellchecker's languages: the OS's preferred languages that Chromium has
 * a dictionary name for (exactly, else by the language alone: "de-AT" → "de-DE"),
 * in the OS's order; en-US when none matches.
 */
export function spellcheckLanguages(preferred: readonly string[], available: readonly string[]): string[] {
  const out: string[] = [];
  const lower = available.map((a) => a.toLowerCase());
  for (const p of preferred) {
    const want = p.toLowerCase().replace("_", "-");
    let i = lower.indexOf(want);
    if (i < 0) {
      const lang = want.split("-")[0]!;
      i = lower.indexOf(lang);
      if (i < 0) i = lower.findIndex((a) => a.split("-")[0] === lang);
    }
    if (i >= 0 && !out.includes(available[i]!)) out.push(available[i]!);
  }
  if (out.length === 0 && available.includes("en-US")) out.push("en-US");
  return out;
}

/** DevTools only in development: a packaged app has neither the menu item nor the shortcut. */
export function devToolsAllowed(isPackaged: boolean): boolean {
  return !isPackaged;
}
