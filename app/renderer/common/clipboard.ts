// Copies text to the clipboard: the async Clipboard API where the page may use
// it (web mode on 127.0.0.1 is a secure context), else a hidden textarea and
// the copy command (Electron, whose shell grants no permission requests).
export async function copyText(text: string): Promise<void> {
  try {
    if (!navigator.clipboard) throw new Error("no Clipboard API");
    await navigator.clipboard.writeText(text);
    return;
  } catch {
    // below
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "offscreen";
  document.body.append(area);
  try {
    area.select();
    if (!document.execCommand("copy")) throw new Error("the clipboard refused the text");
  } finally {
    area.remove();
  }
}
