import { useEffect } from "react";

import iconUrl from "../../assets/icon.svg?url";

import { ChatView } from "./chat/ChatView.js";
import { NoticeBar } from "./common/NoticeBar.js";
import { ModelsView } from "./models/ModelsView.js";
import { PackagesView } from "./packages/PackagesView.js";
import { ProfileView } from "./profile/ProfileView.js";
import { connectEvents, useApp, type View } from "./stores/store.js";

const views: { id: View; label: string }[] = [
  { id: "chat", label: "Chat" }, { id: "models", label: "Models" }, { id: "packages", label: "Packages" }, { id: "profile", label: "Startup profile" },
];

export function App() {
  const view = useApp((s) => s.view);
  const setView = useApp((s) => s.setView);
  const loading = useApp((s) => s.loadingPath);
  const current = useApp((s) => s.current);
  useEffect(() => {
    const off = connectEvents();
    const s = useApp.getState();
    void s.refreshModels();
    void s.loadConversations();
    void s.refreshNotices();
    return off;
  }, []);
  return (
    <div className="app">
      <nav className="rail" aria-label="Views">
        <div className="brand"><img src={iconUrl} alt="" width={28} height={28} /> Guild</div>
        {views.map((v) => (
          <button type="button" key={v.id} className={view === v.id ? "active" : ""} aria-current={view === v.id ? "page" : undefined}
            onClick={() => setView(v.id)} data-testid={`nav-${v.id}`}>{v.label}</button>
        ))}
        <div className="rail-status">{loading ? "Loading model…" : current ? current.name : "No model"}</div>
      </nav>
      <main className="content">
        <NoticeBar />
        {view === "chat" && <ChatView />}
        {view === "models" && <ModelsView />}
        {view === "packages" && <PackagesView />}
        {view === "profile" && <ProfileView />}
      </main>
    </div>
  );
}
