// The window: a navigation rail (narrowed to icons for small windows), the
// current view (mirrored in the URL's fragment: #/models, #/chat/<id>), the
// keyboard shortcuts (Ctrl/Cmd+N, K and comma), focus moved to where the work
// is after an action (the message box in the chat, else the view's heading),
// the theme, and one live region for screen readers.
import { useEffect } from "react";

import iconUrl from "../../assets/icon.svg?url";

import type { ThemeChoice } from "../shared/app-contract.js";
import { LiveAnnouncer } from "./a11y/LiveAnnouncer.js";
import { shortcutFor, type ShortcutAction } from "./a11y/shortcuts.js";
import { ChatView } from "./chat/ChatView.js";
import { NoticeBar } from "./common/NoticeBar.js";
import { HelpView } from "./help/HelpView.js";
import { ModelsView } from "./models/ModelsView.js";
import { PackagesView } from "./packages/PackagesView.js";
import { ProfileView } from "./profile/ProfileView.js";
import { ServerView } from "./server/ServerView.js";
import { PreferencesView } from "./settings/PreferencesView.js";
import { formatRoute, parseRoute } from "./stores/route.js";
import { applyTheme } from "./stores/settings-slice.js";
import { connectEvents, useApp, type View } from "./stores/store.js";
import { client } from "./transport/index.js";

const views: { id: View; label: string; icon: string }[] = [
  { id: "chat", label: "Chat", icon: "❝" }, { id: "models", label: "Models", icon: "▦" }, { id: "server", label: "Server", icon: "⇄" },
  { id: "packages", label: "Packages", icon: "▣" }, { id: "profile", label: "Startup profile", icon: "◷" },
  { id: "settings", label: "Preferences", icon: "⚙" }, { id: "help", label: "Help", icon: "?" },
];
const themes: { id: ThemeChoice; label: string }[] = [{ id: "system", label: "System" }, { id: "light", label: "Light" }, { id: "dark", label: "Dark" }];
const isMac = typeof navigator !== "undefined" && /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent);

// The stored theme applies before the first paint (the main process's setting follows).
applyTheme(useApp.getState().theme);

/** The chat's message box and search field (ChatView's labelled controls). */
const composer = () => document.querySelector<HTMLTextAreaElement>('textarea[aria-label="Message"]');
const conversationSearch = () => document.querySelector<HTMLInputElement>('input[aria-label="Search conversations"]');

/** After the next render: the message box in the chat view, else the view's heading. */
function focusView(view: View): void {
  requestAnimationFrame(() => {
    if (view === "chat") {
      composer()?.focus();
      return;
    }
    const h = document.querySelector<HTMLElement>("main h2");
    if (!h) return;
    if (!h.hasAttribute("tabindex")) h.setAttribute("tabindex", "-1");
    h.focus();
  });
}

/** The latest shortcut: a slower one's focus change (after its await) never overrides a newer one's. */
let shortcutTurn = 0;

async function runShortcut(action: ShortcutAction): Promise<void> {
  const s = useApp.getState();
  const turn = ++shortcutTurn;
  if (action === "new-chat") {
    s.setView("chat");
    await s.newConversation();
    if (turn === shortcutTurn) focusView("chat");
  } else if (action === "search") {
    s.setView("chat");
    s.setConversationsHidden(false);
    requestAnimationFrame(() => {
      const box = conversationSearch();
      box?.focus();
      box?.select();
    });
  } else {
    s.setView("settings");
  }
}

export function App() {
  const view = useApp((s) => s.view);
  const setView = useApp((s) => s.setView);
  const loading = useApp((s) => s.loadingPath);
  const current = useApp((s) => s.current);
  const railCollapsed = useApp((s) => s.railCollapsed);
  const toggleRail = useApp((s) => s.toggleRail);
  const conversationsHidden = useApp((s) => s.conversationsHidden);
  const setConversationsHidden = useApp((s) => s.setConversationsHidden);
  const theme = useApp((s) => s.theme);
  const setTheme = useApp((s) => s.setTheme);

  useEffect(() => {
    // The URL first: a reload or a bookmark of #/chat/<id> opens that conversation.
    const fromUrl = () => {
      const r = parseRoute(window.location.hash);
      const s = useApp.getState();
      if (s.view !== r.view) s.setView(r.view);
      if (r.view === "chat" && r.chatId !== null && r.chatId !== s.selectedId) void s.selectConversation(r.chatId);
    };
    fromUrl();
    window.addEventListener("popstate", fromUrl);
    const offUrl = useApp.subscribe((s, prev) => {
      if (s.view === prev.view && s.selectedId === prev.selectedId) return;
      const target = formatRoute({ view: s.view, chatId: s.view === "chat" ? s.selectedId : null });
      if (target !== window.location.hash) {
        const url = target === "" ? window.location.pathname + window.location.search : target;
        // A new view is a step Back can undo; another conversation in the chat replaces the address.
        if (s.view !== prev.view) window.history.pushState(null, "", url);
        else window.history.replaceState(null, "", url);
      }
      if (s.view !== prev.view || (s.view === "chat" && s.selectedId !== prev.selectedId && s.selectedId !== null)) focusView(s.view);
      // Leaving the chat saves its settings form (a value that cannot be saved stays in the form, guarded below).
      if (prev.view === "chat" && s.view !== "chat" && s.settingsForm !== null) void s.saveSettings();
    });
    const off = connectEvents();
    const s = useApp.getState();
    void s.refreshModels();
    void s.loadConversations();
    void s.refreshNotices();
    void s.refreshAppSettings();
    const onKey = (e: KeyboardEvent) => {
      const action = shortcutFor(e, isMac);
      if (!action) return;
      e.preventDefault();
      void runShortcut(action);
    };
    window.addEventListener("keydown", onKey);
    return () => {
      window.removeEventListener("popstate", fromUrl);
      window.removeEventListener("keydown", onKey);
      offUrl();
      off();
    };
  }, []);

  // A browser tab asks before closing over chat settings not saved yet, whichever view is shown
  // (they stay in the form when the chat view is left; Electron's window closes with the app).
  const unsavedSettings = useApp((s) => s.settingsForm !== null);
  useEffect(() => {
    if (!unsavedSettings || client.transportKind !== "web") return;
    const onUnload = (e: BeforeUnloadEvent) => { e.preventDefault(); };
    window.addEventListener("beforeunload", onUnload);
    return () => window.removeEventListener("beforeunload", onUnload);
  }, [unsavedSettings]);

  const classes = ["app", railCollapsed ? "rail-collapsed" : "", conversationsHidden ? "conversations-hidden" : ""].filter(Boolean).join(" ");
  const nextTheme = themes[(themes.findIndex((t) => t.id === theme) + 1) % themes.length]!;
  return (
    <div className={classes}>
      <nav className="rail" aria-label="Views">
        <div className="brand"><img src={iconUrl} alt="" width={28} height={28} /> <span className="rail-label">Guild</span></div>
        <button type="button" className="rail-toggle" onClick={toggleRail} aria-expanded={!railCollapsed} aria-controls="rail-views"
          aria-label={railCollapsed ? "Expand the sidebar" : "Collapse the sidebar"} title={railCollapsed ? "Expand the sidebar" : "Collapse the sidebar"}
          data-testid="rail-toggle">{railCollapsed ? "»" : "«"}</button>
        <div id="rail-views" className="rail-views">
          {views.map((v) => (
            <button type="button" key={v.id} className={view === v.id ? "active" : ""} aria-current={view === v.id ? "page" : undefined}
              onClick={() => setView(v.id)} data-testid={`nav-${v.id}`} title={railCollapsed ? v.label : undefined}>
              <span className="rail-icon" aria-hidden="true">{v.icon}</span><span className="rail-label">{v.label}</span>
            </button>
          ))}
        </div>
        {view === "chat" && (
          <button type="button" className="rail-extra" onClick={() => setConversationsHidden(!conversationsHidden)} aria-pressed={!conversationsHidden}
            data-testid="toggle-conversations" title="Show or hide the conversation list">
            <span className="rail-icon" aria-hidden="true">☰</span><span className="rail-label">Conversations</span>
          </button>
        )}
        <div className="rail-theme">
          {railCollapsed ? (
            <button type="button" onClick={() => void setTheme(nextTheme.id)} aria-label={`Theme: ${theme}; switch to ${nextTheme.label}`} title={`Theme: ${theme}`}
              data-testid="theme-cycle"><span aria-hidden="true">◐</span></button>
          ) : (
            <label><span className="rail-label">Theme</span>
              <select value={theme} onChange={(e) => void setTheme(e.target.value as ThemeChoice)} aria-label="Theme" data-testid="theme">
                {themes.map((t) => <option key={t.id} value={t.id}>{t.label}</option>)}
              </select>
            </label>
          )}
        </div>
        <div className="rail-status" title={current?.path}>{loading ? "Loading model…" : current ? current.name : "No model"}</div>
      </nav>
      <main className="content">
        <NoticeBar />
        {view === "chat" && <ChatView />}
        {view === "models" && <ModelsView />}
        {view === "server" && <ServerView />}
        {view === "packages" && <PackagesView />}
        {view === "profile" && <ProfileView />}
        {view === "settings" && <PreferencesView />}
        {view === "help" && <HelpView />}
      </main>
      <LiveAnnouncer />
    </div>
  );
}
