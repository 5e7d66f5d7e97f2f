// Copies text to the clipboard (navigator.clipboard; Electron's shell grants
// the page clipboard-sanitized-write), saying "Copied" where screen readers hear it.
import { useState } from "react";

export function CopyButton({ text, label }: { text: string; label: string }) {
  const [state, setState] = useState<"idle" | "copied" | "failed">("idle");
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(text);
      setState("copied");
    } catch {
      setState("failed");
    }
    setTimeout(() => setState("idle"), 2000);
  };
  return (
    <button type="button" className="small" onClick={() => void copy()} aria-label={label}>
      <span aria-live="polite">{state === "copied" ? "Copied" : state === "failed" ? "Copy failed: select the text instead" : "Copy"}</span>
    </button>
  );
}
