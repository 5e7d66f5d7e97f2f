// A small Markdown reader for chat replies: fenced code, headings, lists,
// quotes, paragraphs; inline code, bold, italic, links. Produces a tree that
// the Markdown component renders as React elements (never raw HTML).
export type Inline =
  | { t: "text"; text: string }
  | { t: "code"; text: string }
  | { t: "strong"; children: Inline[] }
  | { t: "em"; children: Inline[] }
  | { t: "link"; href: string; children: Inline[] };

export type Block =
  | { t: "code"; lang: string; text: string; open: boolean }
  | { t: "heading"; level: number; children: Inline[] }
  | { t: "list"; ordered: boolean; items: Inline[][] }
  | { t: "quote"; children: Inline[] }
  | { t: "paragraph"; children: Inline[] }
  | { t: "rule" };

export function parseMarkdown(src: string): Block[] {
  const lines = src.replace(/\r\n?/g, "\n").split("\n");
  const out: Block[] = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    const fence = /^\s*(```|~~~)\s*([\w+#.-]*)\s*$/.exec(line);
    if (fence) {
      const body: string[] = [];
      i++;
      while (i < lines.length && !lines[i]!.trim().startsWith(fence[1]!)) body.push(lines[i++]!);
      const open = i >= lines.length;  // still streaming
      i++;
      out.push({ t: "code", lang: fence[2] ?? "", text: body.join("\n"), open });
      continue;
    }
    if (line.trim() === "") { i++; continue; }
    const h = /^(#{1,6})\s+(.*)$/.exec(line);
    if (h) { out.push({ t: "heading", level: h[1]!.length, children: parseInline(h[2]!) }); i++; continue; }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) { out.push({ t: "rule" }); i++; continue; }
    const item = /^\s*([-*+]|\d+[.)])\s+(.*)$/;
    const m = item.exec(line);
    if (m) {
      const ordered = /\d/.test(m[1]!);
      const items: Inline[][] = [];
      while (i < lines.length) {
        const mm = item.exec(lines[i]!);
        if (mm && /\d/.test(mm[1]!) === ordered) { items.push(parseInline(mm[2]!)); i++; }
        else if (lines[i]!.startsWith("  ") && items.length > 0 && lines[i]!.trim() !== "") {
          items[items.length - 1]!.push({ t: "text", text: " " }, ...parseInline(lines[i]!.trim())); i++;
        } else break;
      }
      out.push({ t: "list", ordered, items });
      continue;
    }
    if (line.startsWith(">")) {
      const q: string[] = [];
      while (i < lines.length && lines[i]!.startsWith(">")) q.push(lines[i++]!.replace(/^>\s?/, ""));
      out.push({ t: "quote", children: parseInline(q.join("\n")) });
      continue;
    }
    const para: string[] = [];
    while (i < lines.length && lines[i]!.trim() !== "" && !/^\s*(```|~~~)/.test(lines[i]!) && !/^#{1,6}\s/.test(lines[i]!) &&
      !(para.length > 0 && item.test(lines[i]!))) para.push(lines[i++]!);
    out.push({ t: "paragraph", children: parseInline(para.join("\n")) });
  }
  return out;
}

export function parseInline(src: string): Inline[] {
  const out: Inline[] = [];
  let text = "";
  const flush = () => { if (text) { out.push({ t: "text", text }); text = ""; } };
  let i = 0;
  while (i < src.length) {
    const c = src[i]!;
    if (c === "`") {
      const end = src.indexOf("`", i + 1);
      if (end > i) { flush(); out.push({ t: "code", text: src.slice(i + 1, end) }); i = end + 1; continue; }
    }
    if ((c === "*" || c === "_") && src[i + 1] === c) {
      const end = src.indexOf(c + c, i + 2);
      if (end > i + 2) { flush(); out.push({ t: "strong", children: parseInline(src.slice(i + 2, end)) }); i = end + 2; continue; }
    }
    if ((c === "*" || c === "_") && src[i + 1] !== " " && src[i + 1] !== undefined) {
      const end = src.indexOf(c, i + 1);
      if (end > i + 1 && src[end - 1] !== " " && (c === "*" || !/\w/.test(src[i - 1] ?? ""))) {
        flush(); out.push({ t: "em", children: parseInline(src.slice(i + 1, end)) }); i = end + 1; continue;
      }
    }
    if (c === "[") {
      const m = /^\[([^\]]+)\]\((https?:\/\/[^\s)]+)\)/.exec(src.slice(i));
      if (m) { flush(); out.push({ t: "link", href: m[2]!, children: parseInline(m[1]!) }); i += m[0].length; continue; }
    }
    text += c;
    i++;
  }
  flush();
  return out;
}
