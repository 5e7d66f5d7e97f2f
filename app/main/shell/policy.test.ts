// The Electron shell's pure rules (policy.ts): what guild://app/ serves, which
// URLs are the app, the permissions the page gets, the spellchecker's
// languages, DevTools and the help page.
import path from "node:path";

import { describe, expect, it } from "vitest";

import {
  appEntryUrl, devToolsAllowed, dictionaryDownloadUrl, helpUrl, isAppUrl, isExternalLink, permissionAllowed, resolveAppRequest,
  spellcheckLanguages,
} from "./policy.js";

const renderer = "/opt/guild/dist/renderer";

describe("the app's scheme", () => {
  it("serves the renderer's files, index.html for the root, and nothing outside it", () => {
    expect(resolveAppRequest(appEntryUrl, "GET", renderer)).toEqual({ file: path.join(renderer, "index.html"), contentType: "text/html; charset=utf-8" });
    expect(resolveAppRequest("guild://app/", "GET", renderer)).toEqual({ file: path.join(renderer, "index.html"), contentType: "text/html; charset=utf-8" });
    expect(resolveAppRequest("guild://app/index.html#/chat/abc", "GET", renderer)).toMatchObject({ file: path.join(renderer, "index.html") });
    expect(resolveAppRequest("guild://app/assets/index-1a2b.js", "GET", renderer)).toEqual({ file: path.join(renderer, "assets", "index-1a2b.js"), contentType: "text/javascript; charset=utf-8" });
    // Dot segments are resolved by the URL itself, inside the app; encoded slashes are decoded after, and refused.
    expect(resolveAppRequest("guild://app/assets/%2e%2e/%2e%2e/%2e%2e/etc/passwd.js", "GET", renderer)).toMatchObject({ file: path.join(renderer, "etc", "passwd.js") });
    expect(resolveAppRequest("guild://app/..%2f..%2fsecret.json", "GET", renderer)).toEqual({ status: 403 });
    expect(resolveAppRequest("guild://app/%E0%A4%A", "GET", renderer)).toEqual({ status: 400 });
    expect(resolveAppRequest("guild://app/a%00.js", "GET", renderer)).toEqual({ status: 400 });
    expect(resolveAppRequest("guild://other/index.html", "GET", renderer)).toEqual({ status: 403 });
    expect(resolveAppRequest("guild://app/index.html", "POST", renderer)).toEqual({ status: 405 });
    expect(resolveAppRequest("guild://app/data.bin", "GET", renderer)).toEqual({ status: 404 });  // no such kind of file in the renderer
    expect(resolveAppRequest(dictionaryDownloadUrl + "en-US-10-1.bdic", "GET", renderer)).toEqual({ status: 404 });  // no dictionary downloads
  });

  it("knows the app's URLs from others", () => {
    for (const u of [appEntryUrl, helpUrl, "guild://app/assets/x.css"]) expect(isAppUrl(u), u).toBe(true);
    for (const u of ["file:///opt/guild/dist/renderer/index.html", "guild://app.evil/", "guild://user@app/", "https://app/", "guild:app", "not a url"])
      expect(isAppUrl(u), u).toBe(false);
    expect(helpUrl).toBe("guild://app/index.html#/help");
    expect(isExternalLink("https://huggingface.co/Qwen")).toBe(true);
    for (const u of ["javascript:alert(1)", "file:///etc/passwd", "guild://app/", "smb://host/share"]) expect(isExternalLink(u), u).toBe(false);
  });
});

describe("permissions", () => {
  it("grant writing the clipboard to the app's page and nothing else", () => {
    expect(permissionAllowed("clipboard-sanitized-write", "guild://app/index.html#/server")).toBe(true);
    expect(permissionAllowed("clipboard-sanitized-write", "https://example.org/")).toBe(false);
    expect(permissionAllowed("clipboard-sanitized-write", undefined)).toBe(false);
    for (const p of ["clipboard-read", "media", "notifications", "geolocation", "openExternal", "fileSystem", "unknown"])
      expect(permissionAllowed(p, appEntryUrl), p).toBe(false);
  });
});

describe("spellchecker languages", () => {
  const available = ["de-DE", "en-GB", "en-US", "fr", "pt-BR", "pt-PT"];
  it("are the OS's languages that have a dictionary, by exact name, else by language", () => {
    expect(spellcheckLanguages(["en-GB", "de-AT"], available)).toEqual(["en-GB", "de-DE"]);
    expect(spellcheckLanguages(["fr-CA", "pt_BR"], available)).toEqual(["fr", "pt-BR"]);
    expect(spellcheckLanguages(["en", "en-US"], available)).toEqual(["en-GB", "en-US"]);
    expect(spellcheckLanguages(["ja-JP"], available)).toEqual(["en-US"]);
    expect(spellcheckLanguages(["ja-JP"], ["de-DE"])).toEqual([]);
  });
});

describe("DevTools", () => {
  it("are for development only", () => {
    expect(devToolsAllowed(false)).toBe(true);
    expect(devToolsAllowed(true)).toBe(false);
  });
});
