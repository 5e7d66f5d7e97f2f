// Web mode: a tab whose session the server no longer knows (it restarted, so
// its per-launch secret changed) cannot do anything, whatever view is open.
// One bar across the top says so and what to do; it is plain DOM so that it
// shows even if the app's own state is stuck, and styled through CSSOM
// (allowed by the CSP, unlike a style attribute).
export const sessionLostMessage =
  "This tab's session has ended: the server was restarted, or this is an old link. " +
  "Open the new link that npm start or guild serve printed in its terminal.";

export function showSessionLost(): void {
  if (document.getElementById("session-lost")) return;
  const bar = document.createElement("div");
  bar.id = "session-lost";
  bar.setAttribute("role", "alert");
  bar.dataset["testid"] = "session-lost";
  bar.textContent = sessionLostMessage;
  Object.assign(bar.style, {
    position: "fixed", top: "0", left: "0", right: "0", zIndex: "1000", padding: "10px 16px",
    background: "var(--panel)", color: "var(--text)", borderBottom: "2px solid var(--danger)",
    boxShadow: "0 2px 8px rgb(0 0 0 / 20%)", fontWeight: "600",
  });
  document.body.append(bar);
}
