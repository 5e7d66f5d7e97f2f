import { useMemo, useState, type ReactNode } from "react";

import { highlight } from "./highlight.js";
import { parseInline, parseMarkdown, type Block, type Inline } from "./markdown.js";

function renderInline(nodes: Inline[]): ReactNode[] {
  return nodes.map((n, i) => {
    switch (n.t) {
      case "text": return n.text;
      case "code": return <code key={i} className="inline-code">{n.text}</code>;
      case "strong": return <strong key={i}>{renderInline(n.children)}</strong>;
      case "em": return <em key={i}>{renderInline(n.children)}</em>;
      case "link": return <a key={i} href={n.href} target="_blank" rel="noreferrer noopener">{renderInline(n.children)}</a>;
    }
  });
}

export function CodeBlock({ lang, text }: { lang: string; text: string }) {
  const [copied, setCopied] = useState(false);
  const tokens = useMemo(() => highlight(text, lang), [text, lang]);
  const copy = () => {
    void navigator.clipboard?.writeText(text).then(() => {
      setCopied(true);
      setTimeout(() => setCopied(false), 1200);
    }, () => undefined);
  };
  return (
    <div className="code-block">
      <div className="code-head">
        <span>{lang || "code"}</span>
        <button type="button" className="small" onClick={copy} aria-label="Copy code">{copied ? "Copied" : "Copy"}</button>
      </div>
      <pre><code>{tokens.map((t, i) => (t.kind === "plain" ? t.text : <span key={i} className={`tok-${t.kind}`}>{t.text}</span>))}</code></pre>
    </div>
  );
}

function renderBlock(b: Block, i: number): ReactNode {
  switch (b.t) {
    case "code": return <CodeBlock key={i} lang={b.lang} text={b.text} />;
    case "heading": {
      const H = `h${Math.min(6, b.level + 2)}` as "h3";
      return <H key={i}>{renderInline(b.children)}</H>;
    }
    case "list": {
      const L = b.ordered ? "ol" : "ul";
      return <L key={i}>{b.items.map((it, j) => <li key={j}>{renderInline(it)}</li>)}</L>;
    }
    case "quote": return <blockquote key={i}>{renderInline(b.children)}</blockquote>;
    case "rule": return <hr key={i} />;
    case "paragraph": return <p key={i}>{renderInline(b.children)}</p>;
  }
}

export function Markdown({ text }: { text: string }) {
  const blocks = useMemo(() => parseMarkdown(text), [text]);
  return <div className="markdown">{blocks.map(renderBlock)}</div>;
}

export { parseInline };
