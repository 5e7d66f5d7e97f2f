// The main process's notices, above every view, each until dismissed.
import { useApp } from "../stores/store.js";

export function NoticeBar() {
  const notices = useApp((s) => s.notices);
  const dismiss = useApp((s) => s.dismissNotice);
  if (notices.length === 0) return null;
  return (
    <div className="notices" data-testid="notices">
      {notices.map((n) => (
        <div key={n.id} className="banner warn notice" role="alert">
          <span className="notice-text">{n.message}</span>
          <button type="button" onClick={() => void dismiss(n.id)} aria-label="Dismiss">Dismiss</button>
        </div>
      ))}
    </div>
  );
}
