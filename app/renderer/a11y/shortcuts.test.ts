// The keyboard shortcuts (shortcuts.ts) and the URL routes (stores/route.ts).
import { describe, expect, it } from "vitest";

import { formatRoute, parseRoute } from "../stores/route.js";
import { shortcutFor } from "./shortcuts.js";

const key = (k: string, mods: Partial<{ ctrlKey: boolean; metaKey: boolean; altKey: boolean; shiftKey: boolean }> = {}) =>
  ({ key: k, ctrlKey: false, metaKey: false, altKey: false, shiftKey: false, ...mods });

describe("shortcutFor", () => {
  it("maps Ctrl (Cmd on macOS) + N, K and comma", () => {
    expect(shortcutFor(key("n", { ctrlKey: true }), false)).toBe("new-chat");
    expect(shortcutFor(key("N", { ctrlKey: true }), false)).toBe("new-chat");
    expect(shortcutFor(key("k", { ctrlKey: true }), false)).toBe("search");
    expect(shortcutFor(key(",", { ctrlKey: true }), false)).toBe("settings");
    expect(shortcutFor(key("n", { metaKey: true }), true)).toBe("new-chat");
    expect(shortcutFor(key("k", { metaKey: true }), true)).toBe("search");
    expect(shortcutFor(key("n", { altKey: true }), false)).toBe("new-chat");
  });

  it("leaves other combinations alone", () => {
    expect(shortcutFor(key("n"), false)).toBeNull();
    expect(shortcutFor(key("n", { metaKey: true }), false)).toBeNull();  // Cmd is not Ctrl off macOS
    expect(shortcutFor(key("n", { ctrlKey: true }), true)).toBeNull();   // nor Ctrl Cmd on macOS
    expect(shortcutFor(key("n", { ctrlKey: true, shiftKey: true }), false)).toBeNull();
    expect(shortcutFor(key("k", { ctrlKey: true, altKey: true }), false)).toBeNull();
    expect(shortcutFor(key("c", { ctrlKey: true }), false)).toBeNull();
    expect(shortcutFor(key("n", { altKey: true }), true)).toBeNull();  // Option+N is a dead key on macOS
  });
});

describe("routes", () => {
  it("round-trip every view and a conversation", () => {
    expect(parseRoute("")).toEqual({ view: "chat", chatId: null });
    expect(formatRoute({ view: "chat", chatId: null })).toBe("");
    expect(parseRoute("#/models")).toEqual({ view: "models", chatId: null });
    expect(parseRoute("#/chat/ab%2Fc")).toEqual({ view: "chat", chatId: "ab/c" });
    expect(formatRoute({ view: "chat", chatId: "ab/c" })).toBe("#/chat/ab%2Fc");
    for (const view of ["models", "server", "packages", "profile", "settings", "help"] as const)
      expect(parseRoute(formatRoute({ view, chatId: null }))).toEqual({ view, chatId: null });
    expect(parseRoute("#/nonsense/x")).toEqual({ view: "chat", chatId: null });
    expect(parseRoute("#/chat/%E0%A4%A")).toEqual({ view: "chat", chatId: null });
  });
});
