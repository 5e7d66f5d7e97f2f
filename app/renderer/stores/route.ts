// The current view in the URL's fragment (web mode's address bar, Electron's
// guild://app/index.html#…): #/models, #/chat/<conversation id>, … so a
// reload, a bookmark or Back lands on the same place. The chat without a
// conversation is the bare address (no fragment).
export const VIEWS = ["chat", "models", "server", "packages", "profile", "settings", "help"] as const;
export type View = (typeof VIEWS)[number];

export interface Route {
  view: View;
  /** The conversation (chat view only). */
  chatId: string | null;
}

export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, "").split("/").filter((p) => p !== "");
  const view = (VIEWS as readonly string[]).includes(parts[0] ?? "") ? (parts[0] as View) : "chat";
  let chatId: string | null = null;
  if (parts[0] === "chat" && parts[1]) {
    try {
      chatId = decodeURIComponent(parts[1]);
    } catch {
      chatId = null;
    }
  }
  return { view, chatId };
}

export function formatRoute(route: Route): string {
  if (route.view !== "chat") return `#/${route.view}`;
  return route.chatId ? `#/chat/${encodeURIComponent(route.chatId)}` : "";
}
