// The app's keyboard shortcuts, as a pure mapping from a key event to an
// action (App.tsx listens on the window). Ctrl on Linux and Windows, Cmd on
// macOS. A browser tab keeps Ctrl+N for a new window, so web mode also takes
// Alt+N for a new chat.
export type ShortcutAction = "new-chat" | "search" | "settings";

export interface KeyLike {
  key: string;
  ctrlKey: boolean;
  metaKey: boolean;
  altKey: boolean;
  shiftKey: boolean;
}

export function shortcutFor(e: KeyLike, isMac: boolean): ShortcutAction | null {
  const mod = isMac ? e.metaKey && !e.ctrlKey : e.ctrlKey && !e.metaKey;
  const key = e.key.toLowerCase();
  if (mod && !e.altKey && !e.shiftKey) {
    if (key === "n") return "new-chat";
    if (key === "k") return "search";
    if (key === ",") return "settings";
  }
  // (Option+N types a dead key on macOS: there only Cmd+N.)
  if (!isMac && e.altKey && !e.ctrlKey && !e.metaKey && !e.shiftKey && key === "n") return "new-chat";
  return null;
}

/** The shortcuts as the Help page lists them. */
export function shortcutList(isMac: boolean): { keys: string; what: string }[] {
  const mod = isMac ? "⌘" : "Ctrl+";
  return [
    { keys: `${mod}N (in a browser tab: Alt+N)`, what: "New chat" },
    { keys: `${mod}K`, what: "Search conversations" },
    { keys: `${mod},`, what: "Preferences" },
    { keys: "Enter / Shift+Enter", what: "Send / new line in the message box" },
    { keys: "Esc", what: "Stop the reply" },
  ];
}
